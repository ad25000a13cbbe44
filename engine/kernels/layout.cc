// Reorder: copies a tensor from one memory layout into another (ir::Layout),
// for any dtype. The compiler inserts it where a value in one layout meets an
// op that needs the other (engine/runtime/layout.h); dims stay logical, only
// the order of the bytes changes. NCHW <-> NHWC is a transpose of each image's
// [C, H*W] matrix, done in tiles so both sides stay in cache.
#include <algorithm>
#include <cstring>
#include <memory>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

struct ReorderPlan {
  ir::Layout from = ir::Layout::kPlain, to = ir::Layout::kPlain;
  int64_t n = 1, c = 1, hw = 1;
  size_t elem = 1;
};

absl::StatusOr<ir::Layout> ParseLayout(const ir::Node& node) {
  const std::string to = node.attrs.GetString("to", "plain");
  if (to == ir::LayoutName(ir::Layout::kPlain)) return ir::Layout::kPlain;
  if (to == ir::LayoutName(ir::Layout::kNHWC)) return ir::Layout::kNHWC;
  return InvalidArg(node, "unknown layout '", to, "'");
}

absl::Status PrepareReorder(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const TensorInfo& in = ctx.inputs[0];
  auto p = std::make_shared<ReorderPlan>();
  ASSIGN_OR_RETURN(p->to, ParseLayout(ctx.node));
  p->from = in.layout;
  p->elem = DTypeSize(in.dtype);
  if (p->from != p->to) {
    if (in.dims.size() != 4) {
      return InvalidArg(ctx.node, "a ", ir::LayoutName(ir::Layout::kNHWC),
                        " tensor is 4-D, got ", DimsToString(in.dims));
    }
    p->n = in.dims[0];
    p->c = in.dims[1];
    p->hw = in.dims[2] * in.dims[3];
  }
  // Outside the static plan every value is plain: only the plan reorders to nhwc.
  if (p->to != ir::Layout::kPlain && !ctx.allow_layouts) {
    return absl::FailedPreconditionError("a layout outside the static plan");
  }
  ctx.outputs = {TensorInfo{in.dtype, in.dims}};
  ctx.outputs[0].layout = p->to;
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// dst[j * rows + i] = src[i * cols + j] for a [rows, cols] matrix of `elem`-byte elements.
template <typename T>
void Transpose(const T* src, T* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) dst[j * rows + i] = src[i * cols + j];
      }
    }
  }
}

template <typename T>
void TransposeImages(const ReorderPlan& p, const void* src, void* dst, int num_threads) {
  // Plain -> NHWC: each image [C, HW] becomes [HW, C]; NHWC -> plain the reverse.
  const bool to_nhwc = p.to == ir::Layout::kNHWC;
  const int64_t rows = to_nhwc ? p.c : p.hw, cols = to_nhwc ? p.hw : p.c;
  ParallelFor(p.n, num_threads, p.n * rows * cols, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      Transpose(static_cast<const T*>(src) + b * rows * cols, static_cast<T*>(dst) + b * rows * cols,
                rows, cols);
    }
  });
}

absl::Status EvalReorder(EvalContext& ctx) {
  const auto& p = *static_cast<const ReorderPlan*>(ctx.state);
  const Tensor& in = *ctx.inputs[0];
  Tensor& out = *ctx.outputs[0];
  if (p.from == p.to || p.c == 1 || p.hw == 1) {
    std::memcpy(out.raw_data(), in.raw_data(), in.byte_size());
    return absl::OkStatus();
  }
  switch (p.elem) {
    case 1: TransposeImages<uint8_t>(p, in.raw_data(), out.raw_data(), ctx.num_threads); break;
    case 2: TransposeImages<uint16_t>(p, in.raw_data(), out.raw_data(), ctx.num_threads); break;
    case 4: TransposeImages<uint32_t>(p, in.raw_data(), out.raw_data(), ctx.num_threads); break;
    case 8: TransposeImages<uint64_t>(p, in.raw_data(), out.raw_data(), ctx.num_threads); break;
    default: return InvalidArg(ctx.node, "element size ", p.elem);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> LayoutKernels() {
  static const KernelDef kernels[] = {[] {
    KernelDef k{ir::OpKind::kReorder, DType::kUnknown, PrepareReorder, EvalReorder};
    k.takes_layouts = true;
    return k;
  }()};
  return kernels;
}

}  // namespace kiln::kernels
