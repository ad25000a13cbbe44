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
// vectorised read of the input; ClassifyRow before an in-place softmax and
// ApplyRowVerdict after it, as the fused attention's row tiles do).
//
// ScaledDotProductAttention has the attribute too: torch >= 2.5 computes
// aten::scaled_dot_product_attention with _safe_softmax, so a query whose
// every key is masked out gets zeros.
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

// What PyTorch gives for a contiguous row of `len` softmax inputs when the
// row is not ordinary (see the top): 0 ordinary, 1 NaN everywhere, 2 zeros
// (all -inf with `safe`). One vectorised read.
inline uint8_t ClassifyRow(const float* row, int64_t len, bool safe) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  int special = 0, masked = 0;
#pragma omp simd reduction(+ : special, masked)
  for (int64_t a = 0; a < len; ++a) {
    special += !(row[a] < kInf);  // NaN or +inf
    masked += row[a] == -kInf;
  }
  if (special > 0) return 1;
  if (masked == len && len > 0) return safe ? 2 : 1;
  return 0;
}

// Writes verdict `v` of ClassifyRow over the softmax's output row `y`.
inline void ApplyRowVerdict(float* y, int64_t len, uint8_t v) {
  if (v == 0) return;
  const float value = v == 2 ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  std::fill(y, y + len, value);
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
        ApplyRowVerdict(y + base, axis, ClassifyRow(x + base, axis, safe));
        continue;
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
