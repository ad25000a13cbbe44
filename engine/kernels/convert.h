// Element conversion between all ten dtypes (private to engine/kernels/):
// what Cast runs, and what the elementwise family uses to bring operands to
// the dtype type promotion chose. FP16 and BF16 are storage types: they are
// widened to float32 to compute and rounded back (to nearest even), as
// PyTorch's CPU kernels do.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "engine/common/dtype.h"
#include "engine/common/half.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {

// Element `i` of any dtype as a double (FP16/BF16 widened exactly).
inline double LoadAnyAsDouble(const void* data, DType dtype, int64_t i) {
  if (dtype == DType::kF16) return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
  if (dtype == DType::kBF16) return BF16ToFloat(static_cast<const uint16_t*>(data)[i]);
  return LoadAsDouble(data, dtype, i);
}

// A double as `To`: float to integer truncates toward zero into int64, then
// narrows with wrap-around, as PyTorch's cast does (c10::convert goes through
// int64 for uint8); what int64 cannot hold (NaN, +-inf) becomes its minimum,
// as x86 conversions give, rather than undefined behaviour.
template <typename To>
To FromDouble(double v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else {
    const double t = std::trunc(v);
    if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0)) {
      return static_cast<To>(std::numeric_limits<int64_t>::min());
    }
    return static_cast<To>(static_cast<int64_t>(t));
  }
}

template <typename To>
void ConvertElementsTo(const void* src, DType from, To* dst, int64_t n) {
  if (IsFloatingPoint(from)) {
    for (int64_t i = 0; i < n; ++i) dst[i] = FromDouble<To>(LoadAnyAsDouble(src, from, i));
  } else {
    // Integers and bools: exact through int64 (no rounding through double).
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = LoadAsInt64(src, from, i);
      if constexpr (std::is_same_v<To, bool>) {
        dst[i] = v != 0;
      } else {
        dst[i] = static_cast<To>(v);
      }
    }
  }
}

// Converts n elements of `from` at `src` to `to` at `dst` (which must not
// overlap). To FP16/BF16 goes through float, as c10::Half(float(x)) does.
inline void ConvertElements(const void* src, DType from, void* dst, DType to, int64_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * DTypeSize(to));
    return;
  }
  switch (to) {
    case DType::kBool: ConvertElementsTo(src, from, static_cast<bool*>(dst), n); break;
    case DType::kUInt8: ConvertElementsTo(src, from, static_cast<uint8_t*>(dst), n); break;
    case DType::kInt8: ConvertElementsTo(src, from, static_cast<int8_t*>(dst), n); break;
    case DType::kInt16: ConvertElementsTo(src, from, static_cast<int16_t*>(dst), n); break;
    case DType::kInt32: ConvertElementsTo(src, from, static_cast<int32_t*>(dst), n); break;
    case DType::kInt64: ConvertElementsTo(src, from, static_cast<int64_t*>(dst), n); break;
    case DType::kF32: ConvertElementsTo(src, from, static_cast<float*>(dst), n); break;
    case DType::kF64: ConvertElementsTo(src, from, static_cast<double*>(dst), n); break;
    case DType::kF16:
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        // Integers reach float exactly up to 2^24, then round once, like float(x).
        const float f = IsFloatingPoint(from)
                            ? static_cast<float>(LoadAnyAsDouble(src, from, i))
                            : static_cast<float>(LoadAsInt64(src, from, i));
        out[i] = to == DType::kF16 ? FloatToHalf(f) : FloatToBF16(f);
      }
      break;
    }
    case DType::kUnknown: break;
  }
}

}  // namespace kiln::kernels
