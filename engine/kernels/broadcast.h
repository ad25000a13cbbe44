// Numpy/PyTorch broadcasting for elementwise kernels with up to three operands
// (private to engine/kernels/).
//
// MakeBroadcastPlan turns operand shapes into a compact loop plan: each operand
// gets one stride per output dim (0 where it is broadcast); output dims of size
// 1 are dropped, and adjacent dims are merged whenever every operand steps
// through them contiguously. Same-shape operands collapse to a single
// contiguous dim, a scalar operand to stride 0, and a per-channel operand
// ([1, C, 1, 1] against [N, C, H, W]) to dims [N, C, H*W] with strides
// (C*HW, HW, 1) and (0, 1, 0). ForEachRow then walks the outer dims with an
// odometer and hands each contiguous innermost row to a callback, so no
// element index is ever divided.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {

// Collapsed rank limit; only reached by pathological alternating broadcasts of
// very high-rank tensors.
inline constexpr int kMaxBroadcastRank = 16;
inline constexpr int kMaxOperands = 3;

struct BroadcastPlan {
  int rank = 0;  // collapsed rank; 0 means a single element
  int operands = 0;
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t strides[kMaxOperands][kMaxBroadcastRank] = {};
};

// The broadcast shape of `shapes`; InvalidArgument naming them when they do not broadcast.
inline absl::StatusOr<Dims> BroadcastDims(const ir::Node& node, std::vector<const Dims*> shapes) {
  size_t r = 0;
  for (const Dims* d : shapes) r = std::max(r, d->size());
  Dims out(r, 1);
  for (size_t k = 0; k < r; ++k) {
    int64_t size = 1;
    for (const Dims* d : shapes) {
      const int64_t dk = k < d->size() ? (*d)[d->size() - 1 - k] : 1;
      if (dk == 1) continue;
      if (size != 1 && size != dk) {
        std::string all;
        for (const Dims* s : shapes) absl::StrAppend(&all, all.empty() ? "" : " with ", DimsToString(*s));
        return InvalidArg(node, "cannot broadcast ", all);
      }
      size = dk;
    }
    out[r - 1 - k] = size;
  }
  return out;
}

// Loop plan for operands `shapes` broadcast to `out`.
inline absl::StatusOr<BroadcastPlan> MakeBroadcastPlan(const ir::Node& node, const Dims& out,
                                                       std::vector<const Dims*> shapes) {
  const size_t r = out.size();
  const int n = static_cast<int>(shapes.size());
  // Strides and merged dims are products of dims. A shape whose size
  // overflows is refused after Prepare (the compiler's CheckedByteSize), and
  // its plan never runs; until then the products wrap as unsigned numbers
  // instead of overflowing int64 (undefined behaviour: UBSan found it with a
  // [2^40, 2^40] input).
  auto mul = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  };
  std::vector<std::vector<int64_t>> s(n, std::vector<int64_t>(r, 0));
  for (int o = 0; o < n; ++o) {
    const Dims& d = *shapes[o];
    int64_t stride = 1;
    for (size_t k = 0; k < d.size(); ++k) {
      const size_t j = d.size() - 1 - k;
      s[o][r - 1 - k] = d[j] == 1 ? 0 : stride;
      stride = mul(stride, d[j]);
    }
  }
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> cs(n);
  for (size_t i = 0; i < r; ++i) {
    if (out[i] == 1) continue;
    bool merge = !dims.empty();
    for (int o = 0; merge && o < n; ++o) merge = cs[o].back() == mul(s[o][i], out[i]);
    if (merge) {
      dims.back() = mul(dims.back(), out[i]);
      for (int o = 0; o < n; ++o) cs[o].back() = s[o][i];
    } else {
      dims.push_back(out[i]);
      for (int o = 0; o < n; ++o) cs[o].push_back(s[o][i]);
    }
  }
  if (dims.size() > static_cast<size_t>(kMaxBroadcastRank)) {
    return Unimplemented(node, "broadcasting to ", DimsToString(out), " needs more than ",
                         kMaxBroadcastRank, " loop dims");
  }
  BroadcastPlan plan;
  plan.rank = static_cast<int>(dims.size());
  plan.operands = n;
  for (int i = 0; i < plan.rank; ++i) {
    plan.dims[i] = dims[i];
    for (int o = 0; o < n; ++o) plan.strides[o][i] = cs[o][i];
  }
  return plan;
}

// Calls row(out_offset, offsets, inner_strides, n) for every contiguous
// innermost row of the output (`total` elements): `offsets[o]` is operand o's
// element offset at the row start and `inner_strides[o]` its stride along the
// row (0 when broadcast). Rows are split across threads; a single row (same
// shapes, scalar operands) is split into chunks.
template <typename RowFn>
void ForEachRow(const BroadcastPlan& p, int64_t total, int num_threads, int64_t cost, RowFn&& row) {
  if (total == 0) return;
  int64_t inner_strides[kMaxOperands] = {};
  if (p.rank == 0) {
    int64_t offsets[kMaxOperands] = {};
    row(int64_t{0}, offsets, inner_strides, int64_t{1});
    return;
  }
  const int last = p.rank - 1;
  const int64_t inner = p.dims[last];
  for (int o = 0; o < p.operands; ++o) inner_strides[o] = p.strides[o][last];
  const int64_t rows = total / inner;
  if (rows == 1) {
    ParallelFor(inner, num_threads, total * cost, [&](int64_t begin, int64_t end) {
      int64_t offsets[kMaxOperands] = {};
      for (int o = 0; o < p.operands; ++o) offsets[o] = begin * inner_strides[o];
      row(begin, offsets, inner_strides, end - begin);
    });
    return;
  }
  ParallelFor(rows, num_threads, total * cost, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxBroadcastRank];
    int64_t offsets[kMaxOperands] = {};
    int64_t rest = begin;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = rest % p.dims[d];
      rest /= p.dims[d];
      for (int o = 0; o < p.operands; ++o) offsets[o] += idx[d] * p.strides[o][d];
    }
    for (int64_t r = begin; r < end; ++r) {
      row(r * inner, offsets, inner_strides, inner);
      for (int d = last - 1; d >= 0; --d) {
        for (int o = 0; o < p.operands; ++o) offsets[o] += p.strides[o][d];
        if (++idx[d] < p.dims[d]) break;
        for (int o = 0; o < p.operands; ++o) offsets[o] -= p.strides[o][d] * p.dims[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace kiln::kernels
