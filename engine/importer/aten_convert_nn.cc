// Converters for neural-network aten ops: convolution, linear algebra, pooling,
// normalization, softmax and mean. Attribute names and meanings follow the
// conventions documented next to each op in engine/ir/op_kinds.def.
#include <string>
#include <vector>

#include <ATen/ops/full_like.h>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten_op_table.h"

namespace kiln::importer {
namespace {

using ir::OpKind;

// PyTorch lets int[2] arguments be written as one int; expands to `n` values.
absl::StatusOr<std::vector<int64_t>> IntsPerDim(const ImportContext& ctx, const TorchNode& node,
                                                size_t i, size_t n) {
  ASSIGN_OR_RETURN(std::vector<int64_t> v, ctx.ConstInts(node, i));
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  if (v.size() != n) {
    return ctx.InvalidArgument(
        node, absl::StrCat("argument ", i, " has ", v.size(), " values, expected ", n));
  }
  return v;
}

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

ConvertResult EmitConv(const TorchNode& node, ImportContext& ctx, std::vector<int64_t> stride,
                       std::vector<int64_t> padding, std::vector<int64_t> dilation,
                       int64_t groups, bool transposed = false,
                       std::vector<int64_t> output_padding = {}, ir::ValueId x = ir::kNoValue) {
  if (x == ir::kNoValue) {
    ASSIGN_OR_RETURN(x, ctx.Input(node, 0));
  }
  ASSIGN_OR_RETURN(ir::ValueId w, ctx.Input(node, 1));
  ASSIGN_OR_RETURN(ir::ValueId b, ctx.OptionalInput(node, 2));
  std::vector<ir::ValueId> inputs = {x, w};
  if (b != ir::kNoValue) inputs.push_back(b);
  ir::Attributes attrs;
  attrs.SetInts("stride", std::move(stride));
  attrs.SetInts("padding", std::move(padding));
  attrs.SetInts("dilation", std::move(dilation));
  attrs.SetInt("groups", groups);
  if (transposed) attrs.SetInts("output_padding", std::move(output_padding));
  return One(ctx.Emit(node, transposed ? OpKind::kConvTranspose : OpKind::kConv, std::move(inputs),
                      std::move(attrs)));
}

// The number of spatial dims of a conv or pool: from the op's name
// (max_pool3d), else from a constant weight's rank, else from `fallback`.
size_t SpatialDims(const TorchNode& node, const ImportContext& ctx, size_t fallback) {
  const std::string kind = node.kind().toUnqualString();
  for (char d : {'1', '2', '3'}) {
    if (kind.find(std::string(1, d) + "d") != std::string::npos) return d - '0';
  }
  if (std::optional<at::Tensor> w = ctx.ConstTensor(node, 1); w && w->dim() >= 3) {
    return static_cast<size_t>(w->dim() - 2);
  }
  return fallback;
}
// Optional per-channel affine parameter of batch_norm: the input, or a constant
// filled with `fill` shaped like `like` (a running statistic).
absl::StatusOr<ir::ValueId> AffineOrFill(ImportContext& ctx, const TorchNode& node, size_t i,
                                         const at::Tensor& like, double fill) {
  if (!ctx.IsNone(node, i)) return ctx.Input(node, i);
  return ctx.AddTensorConstant(at::full_like(like, fill),
                               absl::StrCat(node.outputs()[0]->debugName(), ".",
                                            fill == 0.0 ? "bias" : "weight"));
}

ConvertResult ConvertSoftmaxLike(OpKind op, const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
  if (!ctx.IsNone(node, 2)) return ctx.Unimplemented(node, "a dtype argument is not supported");
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(ctx.Emit(node, op, {x}, std::move(attrs)));
}

}  // namespace

// _convolution(input, weight, bias, stride, padding, dilation, transposed,
//              output_padding, groups, benchmark, deterministic, cudnn_enabled[, allow_tf32])
// is what tracing records for every nn.ConvNd and nn.ConvTransposeNd, 1-D to 3-D.
ConvertResult ConvertConvolution(const TorchNode& node, ImportContext& ctx) {
  if (node.inputs().size() < 9) {
    return ctx.InvalidArgument(node, absl::StrCat("expected at least 9 inputs, got ",
                                                  node.inputs().size()));
  }
  ASSIGN_OR_RETURN(bool transposed, ctx.ConstBool(node, 6));
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, ctx.ConstInts(node, 3));
  const size_t spatial = SpatialDims(node, ctx, stride.size());
  if (spatial < 1 || spatial > 3) {
    return ctx.Unimplemented(node, absl::StrCat(spatial, "-D convolution is not supported"));
  }
  ASSIGN_OR_RETURN(stride, IntsPerDim(ctx, node, 3, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, IntsPerDim(ctx, node, 4, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, IntsPerDim(ctx, node, 5, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, IntsPerDim(ctx, node, 7, spatial));
  ASSIGN_OR_RETURN(int64_t groups, ctx.ConstInt(node, 8));
  return EmitConv(node, ctx, std::move(stride), std::move(padding), std::move(dilation), groups,
                  transposed, std::move(output_padding));
}

// conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups); padding
// may also be the string "valid" or "same" (the .padding overloads).
ConvertResult ConvertConv2d(const TorchNode& node, ImportContext& ctx) {
  if (node.inputs().size() != 7) {
    return ctx.InvalidArgument(node, absl::StrCat("expected 7 inputs, got ", node.inputs().size()));
  }
  const size_t spatial = SpatialDims(node, ctx, 2);
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, IntsPerDim(ctx, node, 3, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, IntsPerDim(ctx, node, 5, spatial));
  ASSIGN_OR_RETURN(int64_t groups, ctx.ConstInt(node, 6));
  std::vector<int64_t> padding;
  std::optional<c10::IValue> pad = ctx.ConstantOf(node.inputs()[4]);
  if (pad && pad->isString()) {
    padding.assign(spatial, 0);
    if (pad->toStringRef() == "same") {
      std::optional<at::Tensor> w = ctx.ConstTensor(node, 1);
      if (!w || w->dim() != static_cast<int64_t>(spatial) + 2) {
        return ctx.Unimplemented(node, "padding='same' needs a constant weight");
      }
      // PyTorch pads total//2 before and the rest after; Kiln's Conv pads
      // symmetrically, so an odd total (an even kernel) gets a Pad first.
      std::vector<int64_t> pads(2 * spatial, 0);  // F.pad order: last dim first
      bool asymmetric = false;
      for (size_t d = 0; d < spatial; ++d) {
        const int64_t total = dilation[d] * (w->size(2 + d) - 1);
        padding[d] = total / 2;
        asymmetric = asymmetric || total % 2 != 0;
        pads[2 * (spatial - 1 - d)] = total / 2;
        pads[2 * (spatial - 1 - d) + 1] = total - total / 2;
      }
      if (asymmetric) {
        ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
        ir::Attributes attrs;
        attrs.SetString("mode", "constant");
        attrs.SetFloat("value", 0.0);
        attrs.SetInts("pads", std::move(pads));
        ir::ValueId padded = ctx.Emit(node, OpKind::kPad, {x}, std::move(attrs), ".same_pad");
        return EmitConv(node, ctx, std::move(stride), std::vector<int64_t>(spatial, 0),
                        std::move(dilation), groups, /*transposed=*/false, {}, padded);
      }
    } else if (pad->toStringRef() != "valid") {
      return ctx.InvalidArgument(node, absl::StrCat("unknown padding '", pad->toStringRef(), "'"));
    }
  } else {
    ASSIGN_OR_RETURN(padding, IntsPerDim(ctx, node, 4, spatial));
  }
  return EmitConv(node, ctx, std::move(stride), std::move(padding), std::move(dilation), groups);
}

// conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding,
// groups, dilation), as scripted modules call them.
ConvertResult ConvertConvTransposeNd(const TorchNode& node, ImportContext& ctx) {
  const size_t spatial = SpatialDims(node, ctx, 2);
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, IntsPerDim(ctx, node, 3, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, IntsPerDim(ctx, node, 4, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, IntsPerDim(ctx, node, 5, spatial));
  ASSIGN_OR_RETURN(int64_t groups, ctx.ConstInt(node, 6));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, IntsPerDim(ctx, node, 7, spatial));
  return EmitConv(node, ctx, std::move(stride), std::move(padding), std::move(dilation), groups,
                  /*transposed=*/true, std::move(output_padding));
}

// linear(input, weight, bias=None).
ConvertResult ConvertLinear(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId w, ctx.Input(node, 1));
  ASSIGN_OR_RETURN(ir::ValueId b, ctx.OptionalInput(node, 2));
  std::vector<ir::ValueId> inputs = {x, w};
  if (b != ir::kNoValue) inputs.push_back(b);
  return One(ctx.Emit(node, OpKind::kLinear, std::move(inputs)));
}

// addmm(self, mat1, mat2, beta=1, alpha=1) = beta * self + alpha * (mat1 @ mat2),
// decomposed into MatMul, optional scaling Muls and an Add.
ConvertResult ConvertAddmm(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId self, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId mat1, ctx.Input(node, 1));
  ASSIGN_OR_RETURN(ir::ValueId mat2, ctx.Input(node, 2));
  double beta = 1.0, alpha = 1.0;
  if (node.inputs().size() > 3) {
    ASSIGN_OR_RETURN(beta, ctx.ConstDouble(node, 3));
  }
  if (node.inputs().size() > 4) {
    ASSIGN_OR_RETURN(alpha, ctx.ConstDouble(node, 4));
  }
  const std::string name = node.outputs()[0]->debugName();
  auto dtype_of = [&](ir::ValueId v) {
    return ctx.DTypeOf(v) == DType::kUnknown ? DType::kF32 : ctx.DTypeOf(v);
  };
  ir::ValueId product = ctx.Emit(node, OpKind::kMatMul, {mat1, mat2}, {}, ".mm");
  if (alpha != 1.0) {
    ASSIGN_OR_RETURN(ir::ValueId a, ctx.AddScalarConstant(alpha, dtype_of(mat1), name + ".alpha"));
    product = ctx.Emit(node, OpKind::kMul, {product, a}, {}, ".mm_scaled");
  }
  // PyTorch ignores `self` entirely (even NaNs) when beta == 0.
  if (beta == 0.0) return One(ctx.Emit(node, OpKind::kIdentity, {product}));
  if (beta != 1.0) {
    ASSIGN_OR_RETURN(ir::ValueId b, ctx.AddScalarConstant(beta, dtype_of(self), name + ".beta"));
    self = ctx.Emit(node, OpKind::kMul, {self, b}, {}, ".self_scaled");
  }
  return One(ctx.Emit(node, OpKind::kAdd, {product, self}));
}

// matmul / mm / bmm(self, other).
ConvertResult ConvertMatMul(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId a, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId b, ctx.Input(node, 1));
  return One(ctx.Emit(node, OpKind::kMatMul, {a, b}));
}

// max_pool{1,2,3}d[_with_indices](self, kernel_size, stride=[], padding=0,
// dilation=1, ceil_mode=False).
ConvertResult ConvertMaxPool2d(const TorchNode& node, ImportContext& ctx) {
  const size_t spatial = SpatialDims(node, ctx, 2);
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, IntsPerDim(ctx, node, 1, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, ctx.ConstInts(node, 2));
  if (stride.empty()) {
    stride = kernel;  // PyTorch's default stride is the kernel size
  } else {
    ASSIGN_OR_RETURN(stride, IntsPerDim(ctx, node, 2, spatial));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, IntsPerDim(ctx, node, 3, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, IntsPerDim(ctx, node, 4, spatial));
  ASSIGN_OR_RETURN(bool ceil_mode, ctx.ConstBool(node, 5));
  ir::Attributes attrs;
  attrs.SetInts("kernel", std::move(kernel));
  attrs.SetInts("stride", std::move(stride));
  attrs.SetInts("padding", std::move(padding));
  attrs.SetInts("dilation", std::move(dilation));
  attrs.SetBool("ceil_mode", ceil_mode);
  if (node.outputs().size() == 2) {  // max_poolNd_with_indices
    ir::NodeId n = ctx.graph().AddNode(
        OpKind::kMaxPoolWithIndices, {x}, std::move(attrs), node.kind().toQualString(),
        {node.outputs()[0]->debugName(), node.outputs()[1]->debugName()});
    return ctx.graph().node(n).outputs;
  }
  return One(ctx.Emit(node, OpKind::kMaxPool, {x}, std::move(attrs)));
}

// avg_pool{1,2,3}d(self, kernel_size, stride=[], padding=0, ceil_mode=False,
//                  count_include_pad=True[, divisor_override=None]).
ConvertResult ConvertAvgPool2d(const TorchNode& node, ImportContext& ctx) {
  const size_t spatial = SpatialDims(node, ctx, 2);
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, IntsPerDim(ctx, node, 1, spatial));
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, ctx.ConstInts(node, 2));
  if (stride.empty()) {
    stride = kernel;
  } else {
    ASSIGN_OR_RETURN(stride, IntsPerDim(ctx, node, 2, spatial));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, IntsPerDim(ctx, node, 3, spatial));
  ASSIGN_OR_RETURN(bool ceil_mode, ctx.ConstBool(node, 4));
  ASSIGN_OR_RETURN(bool count_include_pad, ctx.ConstBool(node, 5));
  int64_t divisor_override = 0;
  if (!ctx.IsNone(node, 6)) {  // avg_pool1d has no divisor_override
    ASSIGN_OR_RETURN(divisor_override, ctx.ConstInt(node, 6));
    if (divisor_override <= 0) return ctx.InvalidArgument(node, "divisor_override must be > 0");
  }
  ir::Attributes attrs;
  attrs.SetInts("kernel", std::move(kernel));
  attrs.SetInts("stride", std::move(stride));
  attrs.SetInts("padding", std::move(padding));
  attrs.SetBool("ceil_mode", ceil_mode);
  attrs.SetBool("count_include_pad", count_include_pad);
  attrs.SetInt("divisor_override", divisor_override);
  return One(ctx.Emit(node, OpKind::kAvgPool, {x}, std::move(attrs)));
}

// adaptive_{avg,max}_pool{1,2,3}d(self, output_size).
ConvertResult ConvertAdaptiveAvgPool2d(const TorchNode& node, ImportContext& ctx) {
  const size_t spatial = SpatialDims(node, ctx, 2);
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  // None entries (keep that input size) arrive as -1 from a scripted Optional list.
  std::vector<int64_t> output_size;
  std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[1]);
  if (c && c->isList()) {
    for (const c10::IValue& v : c->toListRef()) output_size.push_back(v.isNone() ? -1 : v.toInt());
    if (output_size.size() == 1 && spatial > 1) output_size.assign(spatial, output_size[0]);
  } else {
    ASSIGN_OR_RETURN(output_size, IntsPerDim(ctx, node, 1, spatial));
  }
  ir::Attributes attrs;
  attrs.SetInts("output_size", std::move(output_size));
  if (node.outputs().size() == 2) {  // adaptive_max_poolNd -> (values, indices)
    ir::NodeId n = ctx.graph().AddNode(
        OpKind::kAdaptiveMaxPool, {x}, std::move(attrs), node.kind().toQualString(),
        {node.outputs()[0]->debugName(), node.outputs()[1]->debugName()});
    return ctx.graph().node(n).outputs;
  }
  return One(ctx.Emit(node, OpKind::kAdaptiveAvgPool, {x}, std::move(attrs)));
}

// batch_norm(input, weight?, bias?, running_mean?, running_var?, training,
//            momentum, eps, cudnn_enabled). Freezing folds it into a preceding
// conv; what is left (after linear, or on an input) lands here. Inference only.
ConvertResult ConvertBatchNorm(const TorchNode& node, ImportContext& ctx) {
  if (node.inputs().size() != 9) {
    return ctx.InvalidArgument(node, absl::StrCat("expected 9 inputs, got ", node.inputs().size()));
  }
  ASSIGN_OR_RETURN(bool training, ctx.ConstBool(node, 5));
  if (training) return ctx.Unimplemented(node, "batch_norm with batch statistics (training=True)");
  std::optional<at::Tensor> mean = ctx.ConstTensor(node, 3);
  if (ctx.IsNone(node, 3) || ctx.IsNone(node, 4)) {
    return ctx.Unimplemented(node, "batch_norm without running statistics");
  }
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ir::ValueId weight, bias;
  if (!mean && (ctx.IsNone(node, 1) || ctx.IsNone(node, 2))) {
    return ctx.Unimplemented(node, "batch_norm without weight or bias needs constant running_mean");
  }
  ASSIGN_OR_RETURN(weight, AffineOrFill(ctx, node, 1, mean.value_or(at::Tensor()), 1.0));
  ASSIGN_OR_RETURN(bias, AffineOrFill(ctx, node, 2, mean.value_or(at::Tensor()), 0.0));
  ASSIGN_OR_RETURN(ir::ValueId running_mean, ctx.Input(node, 3));
  ASSIGN_OR_RETURN(ir::ValueId running_var, ctx.Input(node, 4));
  ASSIGN_OR_RETURN(double eps, ctx.ConstDouble(node, 7));
  ir::Attributes attrs;
  attrs.SetFloat("eps", eps);
  return One(ctx.Emit(node, OpKind::kBatchNorm, {x, weight, bias, running_mean, running_var},
                      std::move(attrs)));
}

// layer_norm(input, normalized_shape, weight?, bias?, eps, cudnn_enable).
ConvertResult ConvertLayerNorm(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> normalized_shape, ctx.ConstInts(node, 1));
  ASSIGN_OR_RETURN(ir::ValueId weight, ctx.OptionalInput(node, 2));
  ASSIGN_OR_RETURN(ir::ValueId bias, ctx.OptionalInput(node, 3));
  ASSIGN_OR_RETURN(double eps, ctx.ConstDouble(node, 4));
  std::vector<ir::ValueId> inputs = {x, weight, bias};
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  ir::Attributes attrs;
  attrs.SetInts("normalized_shape", std::move(normalized_shape));
  attrs.SetFloat("eps", eps);
  return One(ctx.Emit(node, OpKind::kLayerNorm, std::move(inputs), std::move(attrs)));
}

// softmax / log_softmax(self, dim, dtype=None).
ConvertResult ConvertSoftmax(const TorchNode& node, ImportContext& ctx) {
  return ConvertSoftmaxLike(OpKind::kSoftmax, node, ctx);
}

ConvertResult ConvertLogSoftmax(const TorchNode& node, ImportContext& ctx) {
  return ConvertSoftmaxLike(OpKind::kLogSoftmax, node, ctx);
}

// mean(self, dtype=None) over everything, or mean.dim(self, dim?, keepdim=False, dtype=None).
ConvertResult ConvertMean(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  std::vector<int64_t> axes;
  bool keepdim = false;
  size_t dtype_index = 1;
  if (node.inputs().size() == 4) {
    if (!ctx.IsNone(node, 1)) {
      ASSIGN_OR_RETURN(axes, ctx.ConstInts(node, 1));
    }
    ASSIGN_OR_RETURN(keepdim, ctx.ConstBool(node, 2));
    dtype_index = 3;
  } else if (node.inputs().size() != 2) {
    return ctx.InvalidArgument(node, absl::StrCat("unexpected number of inputs ", node.inputs().size()));
  }
  if (!ctx.IsNone(node, dtype_index)) {
    return ctx.Unimplemented(node, "a dtype argument is not supported");
  }
  ir::Attributes attrs;
  attrs.SetInts("axes", std::move(axes));
  attrs.SetBool("keepdim", keepdim);
  return One(ctx.Emit(node, OpKind::kMean, {x}, std::move(attrs)));
}

}  // namespace kiln::importer
