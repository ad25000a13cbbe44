// One element of a typed buffer as a double, for every Kiln dtype: the
// kernels' typed reads, the run-time scalar ops, the CLI's tables and the
// parity runner's comparisons all read through it.
#pragma once

#include <cstdint>

#include "engine/common/dtype.h"
#include "engine/common/half.h"

namespace kiln {

// Element `i` of a buffer of `dtype`, as a double (bool: 0 or 1).
inline double LoadAsDouble(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBool: return static_cast<const bool*>(data)[i] ? 1.0 : 0.0;
    case DType::kUInt8: return static_cast<const uint8_t*>(data)[i];
    case DType::kInt8: return static_cast<const int8_t*>(data)[i];
    case DType::kInt16: return static_cast<const int16_t*>(data)[i];
    case DType::kInt32: return static_cast<const int32_t*>(data)[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DType::kF32: return static_cast<const float*>(data)[i];
    case DType::kF64: return static_cast<const double*>(data)[i];
    case DType::kF16: return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case DType::kBF16: return BF16ToFloat(static_cast<const uint16_t*>(data)[i]);
    default: return 0.0;
  }
}

}  // namespace kiln
