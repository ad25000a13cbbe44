// Sorting along one axis, for FP32, FP64, the integer types and BOOL: TopK (attrs k, axis,
// largest, sorted) and Sort (attrs axis, descending), each returning values
// and INT64 indices along the axis.
//
// Each row along the axis (strided when the axis is not last) is copied into
// (value, index) pairs in the workspace, one slice per row so rows sort in
// parallel, then std::partial_sort (TopK) or std::stable_sort (Sort) orders
// them. NaN counts as larger than every number, as in PyTorch; equal values
// keep their original order. TopK always returns its k elements in sorted
// order, which is also what PyTorch's CPU kernel returns for sorted=False
// in practice.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

struct SortPlan {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t k = 0;  // elements kept per row
  bool descending = false;
  DType dtype = DType::kF32;
};

absl::Status PrepareSortLike(PrepareContext& ctx, bool topk) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF32 && t != DType::kF64 && t != DType::kBool && !IsIntegral(t)) {
    return Unimplemented(ctx.node, "input dtype ", DTypeName(t), " is not supported");
  }
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(int64_t axis,
                   NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", -1), rank));
  auto p = std::make_shared<SortPlan>();
  p->dtype = t;
  if (rank > 0) {
    p->outer = NumElements(Dims(x.begin(), x.begin() + axis));
    p->n = x[axis];
    p->inner = NumElements(Dims(x.begin() + axis + 1, x.end()));
  }
  Dims out = x;
  if (topk) {
    p->k = ctx.node.attrs.GetInt("k", 1);
    if (p->k < 0 || p->k > p->n) {
      return InvalidArg(ctx.node, "k = ", p->k, " is out of range for a dim of size ", p->n);
    }
    p->descending = ctx.node.attrs.GetBool("largest", true);
    if (rank > 0) out[axis] = p->k;
  } else {
    p->k = p->n;
    p->descending = ctx.node.attrs.GetBool("descending", false);
  }
  ctx.workspace_bytes = static_cast<size_t>(p->outer * p->inner * p->n) *
                        sizeof(std::pair<double, int64_t>);
  ctx.outputs = {TensorInfo{t, out}, TensorInfo{DType::kInt64, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

absl::Status PrepareTopK(PrepareContext& ctx) { return PrepareSortLike(ctx, true); }
absl::Status PrepareSort(PrepareContext& ctx) { return PrepareSortLike(ctx, false); }

template <typename T>
void SortRows(const SortPlan& p, EvalContext& ctx, bool topk) {
  using Pair = std::pair<T, int64_t>;
  const T* x = ctx.inputs[0]->data<T>();
  T* values = ctx.outputs[0]->data<T>();
  int64_t* indices = ctx.outputs[1]->data<int64_t>();
  Pair* scratch = static_cast<Pair*>(ctx.workspace);
  const bool desc = p.descending;
  // Strict weak order with NaN above everything and ties by index.
  auto less = [desc](const Pair& a, const Pair& b) {
    if constexpr (std::is_floating_point_v<T>) {
      const bool an = std::isnan(a.first), bn = std::isnan(b.first);
      if (an || bn) {
        if (an && bn) return a.second < b.second;
        return desc ? an : bn;
      }
    }
    if (a.first != b.first) return desc ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  };
  const int64_t rows = p.outer * p.inner;
  ParallelFor(rows, ctx.num_threads, rows * p.n * 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / p.inner, j = r % p.inner;
      const T* src = x + o * p.n * p.inner + j;
      Pair* row = scratch + r * p.n;
      for (int64_t i = 0; i < p.n; ++i) row[i] = {src[i * p.inner], i};
      if (topk) {
        std::partial_sort(row, row + p.k, row + p.n, less);
      } else {
        std::stable_sort(row, row + p.n, less);
      }
      T* vdst = values + o * p.k * p.inner + j;
      int64_t* idst = indices + o * p.k * p.inner + j;
      for (int64_t i = 0; i < p.k; ++i) {
        vdst[i * p.inner] = row[i].first;
        idst[i * p.inner] = row[i].second;
      }
    }
  });
}

template <bool kTopK>
absl::Status EvalSortLike(EvalContext& ctx) {
  const SortPlan& p = StateAs<SortPlan>(ctx);
  switch (p.dtype) {
    case DType::kF32: SortRows<float>(p, ctx, kTopK); break;
    case DType::kF64: SortRows<double>(p, ctx, kTopK); break;
    case DType::kInt64: SortRows<int64_t>(p, ctx, kTopK); break;
    case DType::kInt32: SortRows<int32_t>(p, ctx, kTopK); break;
    case DType::kInt16: SortRows<int16_t>(p, ctx, kTopK); break;
    case DType::kInt8: SortRows<int8_t>(p, ctx, kTopK); break;
    case DType::kUInt8: SortRows<uint8_t>(p, ctx, kTopK); break;
    default: SortRows<bool>(p, ctx, kTopK); break;  // BOOL (Prepare admits nothing else)
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> SortKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kTopK, DType::kUnknown, PrepareTopK, EvalSortLike</*kTopK=*/true>},
      {ir::OpKind::kSort, DType::kUnknown, PrepareSort, EvalSortLike</*kTopK=*/false>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
