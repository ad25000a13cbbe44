// Softmax slices that are not ordinary: what PyTorch gives for them, and
// Softmax's `safe` attribute.
//
// A slice along the axis whose every element is -inf gives NaN in softmax,
// and zeros with `safe` (the semantics of aten::_safe_softmax and of the
// masking that core ATen's attention decompositions write after a softmax:
// eq -inf, any, where). A slice holding a NaN or +inf gives NaN everywhere
// (its max is NaN or +inf, so every x - max is NaN or -inf and the sum NaN),
// in softmax and log-softmax, safe or not.
//
// Kiln's own kernels compute the NaNs themselves, so they only zero the
// masked slices (ZeroFullyMaskedSlices). oneDNN's primitives skip NaN in
// their max and give finite numbers for such slices, so its kernels also
// correct them afterwards from the input (MatchNonFiniteSlices: one
// vectorised read of the input, about 2% of the softmax's time).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engine/ir/graph.h"

namespace kiln::kernels {

inline bool IsSafeSoftmax(const ir::Node& node) {
  return node.kind == ir::OpKind::kSoftmax && node.attrs.GetBool("safe", false);
}

// x, y viewed as [outer, axis, inner]: zeroes y's slices whose x is all -inf.
// Reads one element per slice unless that one is -inf.
template <typename T>
void ZeroFullyMaskedSlices(const T* x, T* y, int64_t outer, int64_t axis, int64_t inner) {
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * axis * inner + i;
      if (axis == 0 || x[base] != kMinusInf) continue;
      bool masked = true;
      for (int64_t a = 1; a < axis && masked; ++a) masked = x[base + a * inner] == kMinusInf;
      if (!masked) continue;
      for (int64_t a = 0; a < axis; ++a) y[base + a * inner] = T(0);
    }
  }
}

// x, y viewed as [outer, axis, inner]: a slice of x holding a NaN or +inf,
// or all -inf, makes y's slice what PyTorch gives (see the top): NaN, or
// zeros for a masked slice with `safe`.
inline void MatchNonFiniteSlices(const float* x, float* y, int64_t outer, int64_t axis,
                                 int64_t inner, bool safe) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr int64_t kChunk = 256;
  int special[kChunk], masked[kChunk];  // per column: NaN or +inf seen; -inf count
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c0 = 0; c0 < inner; c0 += kChunk) {
      const int64_t n = std::min(kChunk, inner - c0);
      const int64_t base = o * axis * inner + c0;
      if (inner == 1) {
        int s = 0, m = 0;
        const float* row = x + base;
#pragma omp simd reduction(+ : s, m)
        for (int64_t a = 0; a < axis; ++a) {
          s += !(row[a] < kInf);  // NaN or +inf
          m += row[a] == -kInf;
        }
        special[0] = s;
        masked[0] = m;
      } else {
        std::fill(special, special + n, 0);
        std::fill(masked, masked + n, 0);
        for (int64_t a = 0; a < axis; ++a) {
          const float* row = x + base + a * inner;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) {
            special[j] += !(row[j] < kInf);
            masked[j] += row[j] == -kInf;
          }
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        const bool all_masked = masked[j] == axis && axis > 0;
        if (special[j] == 0 && !all_masked) continue;
        const float v =
            special[j] == 0 && safe ? 0.0f : std::numeric_limits<float>::quiet_NaN();
        for (int64_t a = 0; a < axis; ++a) y[base + a * inner + j] = v;
      }
    }
  }
}

}  // namespace kiln::kernels
