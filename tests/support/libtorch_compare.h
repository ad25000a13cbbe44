// How the parity suite and the differential sweep judge one of Kiln's outputs
// against libtorch's (tests/parity/parity_runner.cc, tests/sweep/sweep_runner.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/common/element.h"
#include "engine/common/tensor.h"
#include "engine/common/tolerance.h"

namespace kiln::testing {

// Empty when `got` matches `want`, else what differs: dims, then dtype, then
// values. Floats: relative error of the whole tensor, max |got - want| /
// max |want|, at most 1e-4 for FP32, 1e-6 for FP64 (the issues' rules), four
// units in the last place of the storage type for FP16/BF16; NaN and infinity
// must sit where libtorch's do. Integers and bools: equal. `worst` and
// `worst_abs`, when given, keep the largest relative and absolute float error.
inline std::string CompareWithLibtorch(const Tensor& got, const Tensor& want,
                                       double* worst = nullptr, double* worst_abs = nullptr) {
  if (got.dims() != want.dims()) {
    return absl::StrCat("dims ", DimsToString(got.dims()), ", libtorch ", DimsToString(want.dims()));
  }
  if (got.dtype() != want.dtype()) {
    return absl::StrCat("dtype ", DTypeName(got.dtype()), ", libtorch ", DTypeName(want.dtype()));
  }
  const DType t = got.dtype();
  if (IsFloatingPoint(t)) {
    double diff = 0, max_want = 0;
    bool special_mismatch = false;
    for (int64_t i = 0; i < got.num_elements(); ++i) {
      const double a = LoadAsDouble(got.raw_data(), t, i), b = LoadAsDouble(want.raw_data(), t, i);
      if (std::isnan(a) || std::isnan(b)) {
        special_mismatch |= std::isnan(a) != std::isnan(b);
        continue;
      }
      if (std::isinf(a) || std::isinf(b)) {
        special_mismatch |= a != b;
        continue;
      }
      diff = std::max(diff, std::abs(a - b));
      max_want = std::max(max_want, std::abs(b));
    }
    if (special_mismatch) return "NaN or infinity where libtorch has none (or the reverse)";
    const double rel = diff / std::max(max_want, 1e-12);
    if (worst != nullptr) *worst = std::max(*worst, rel);
    if (worst_abs != nullptr) *worst_abs = std::max(*worst_abs, diff);
    const double tolerance = t == DType::kF32   ? 1e-4
                             : t == DType::kF64 ? 1e-6
                                                : StorageRoundingTolerance(t);
    if (rel > tolerance) return absl::StrCat(DTypeName(t), " relative error ", rel);
    return "";
  }
  if (got.byte_size() > 0 && std::memcmp(got.raw_data(), want.raw_data(), got.byte_size()) != 0) {
    return absl::StrCat(DTypeName(t), " values differ");
  }
  return "";
}

}  // namespace kiln::testing
