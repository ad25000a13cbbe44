// Converters for neural-network aten ops: convolution, linear algebra,
// pooling, normalization, softmax, reductions and embedding. Attribute names
// and meanings follow the conventions next to each op in engine/ir/op_kinds.def.
#include <array>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer::aten {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

// PyTorch lets int[N] arguments be written as one int; expands to `n` values.
absl::StatusOr<std::vector<int64_t>> IntsPerDim(const AtenCall& call, std::string_view name,
                                                size_t n, std::optional<int64_t> def) {
  std::optional<std::vector<int64_t>> d;
  if (def.has_value()) d = std::vector<int64_t>(n, *def);
  ASSIGN_OR_RETURN(std::vector<int64_t> v, call.Ints(name, d));
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  if (v.size() != n) {
    return call.InvalidArgument(
        absl::StrCat("argument '", std::string(name), "' has ", v.size(), " values, expected ", n));
  }
  return v;
}

// The number of spatial dims of a conv or pool: from the op's name
// (max_pool3d), else from a known weight's rank, else from `fallback`.
size_t SpatialDims(const AtenCall& call, size_t fallback) {
  const std::string_view op = call.op();
  for (char d : {'1', '2', '3'}) {
    if (op.find(std::string(1, d) + "d") != std::string_view::npos) return d - '0';
  }
  if (std::optional<Dims> w = call.StaticShape("weight"); w && w->size() >= 3) {
    return w->size() - 2;
  }
  return fallback;
}

ConvertResult EmitConv(AtenCall& call, ConvertContext& cx, std::vector<int64_t> stride,
                       std::vector<int64_t> padding, std::vector<int64_t> dilation,
                       int64_t groups, bool transposed = false,
                       std::vector<int64_t> output_padding = {}, ir::ValueId x = ir::kNoValue) {
  if (x == ir::kNoValue) {
    ASSIGN_OR_RETURN(x, call.Tensor("input"));
  }
  ASSIGN_OR_RETURN(ir::ValueId w, call.Tensor("weight"));
  ASSIGN_OR_RETURN(ir::ValueId b, call.OptionalTensor("bias"));
  std::vector<ir::ValueId> inputs = {x, w};
  if (b != ir::kNoValue) inputs.push_back(b);
  ir::Attributes attrs;
  attrs.SetInts("stride", std::move(stride));
  attrs.SetInts("padding", std::move(padding));
  attrs.SetInts("dilation", std::move(dilation));
  attrs.SetInt("groups", groups);
  if (transposed) attrs.SetInts("output_padding", std::move(output_padding));
  return One(cx.Emit(call, transposed ? OpKind::kConvTranspose : OpKind::kConv, std::move(inputs),
                     std::move(attrs)));
}

// `op` with dtype=: libtorch casts self to dtype first and answers in dtype
// (sum(int32, dtype=int32) is INT32, where Kiln's integer sums are INT64).
ConvertResult EmitWithDType(OpKind op, AtenCall& call, ConvertContext& cx, ir::ValueId x,
                            ir::Attributes attrs) {
  std::optional<DType> dtype;
  if (call.Has("dtype")) {
    ASSIGN_OR_RETURN(dtype, call.ScalarType("dtype"));
  }
  if (!dtype) return One(cx.Emit(call, op, {x}, std::move(attrs)));
  auto cast = [&](ir::ValueId v, const char* suffix) {
    ir::Attributes c;
    c.SetString("dtype", DTypeName(*dtype));
    return cx.Emit(call, OpKind::kCast, {v}, std::move(c), suffix);
  };
  x = cast(x, ".dtype");
  if (!IsIntegral(*dtype) && *dtype != DType::kBool) {
    return One(cx.Emit(call, op, {x}, std::move(attrs)));
  }
  return One(cast(cx.Emit(call, op, {x}, std::move(attrs), ".wide"), ""));
}

// A reduction's dim (absent or None: every dim) and keepdim=False, as attrs
// axes and keepdim.
absl::StatusOr<ir::Attributes> AxesAttrs(const AtenCall& call) {
  std::vector<int64_t> axes;
  if (call.Has("dim")) {
    ASSIGN_OR_RETURN(axes, call.Ints("dim"));
  }
  ASSIGN_OR_RETURN(bool keepdim, call.Bool("keepdim", false));
  ir::Attributes attrs;
  attrs.SetInts("axes", std::move(axes));
  attrs.SetBool("keepdim", keepdim);
  return attrs;
}

// mean and 1 / sqrt(biased variance + eps) of `x` over `axes` (kept unless
// `keepdim` is false): the statistics native_layer_norm and native_group_norm
// return beside their result.
std::array<ir::ValueId, 2> EmitMeanRstd(const AtenCall& call, ConvertContext& cx, ir::ValueId x,
                                        const std::vector<int64_t>& axes, double eps,
                                        bool keepdim = true) {
  ir::Attributes mean_attrs;
  mean_attrs.SetInts("axes", axes);
  mean_attrs.SetBool("keepdim", keepdim);
  ir::Attributes var_attrs = mean_attrs;
  var_attrs.SetFloat("correction", 0.0);
  const ir::ValueId mean = cx.Emit(call, OpKind::kMean, {x}, std::move(mean_attrs), ".mean");
  const ir::ValueId var = cx.Emit(call, OpKind::kVar, {x}, std::move(var_attrs), ".var");
  const ir::ValueId shifted = cx.Emit(call, OpKind::kAdd, {var, cx.AddFloat(eps)}, {}, ".var_eps");
  return {mean, cx.Emit(call, OpKind::kRsqrt, {shifted}, {}, ".rstd")};
}

ConvertResult ConvertSoftmaxLike(OpKind op, AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  if (call.Has("half_to_float")) {  // _softmax(self, dim, half_to_float)
    ASSIGN_OR_RETURN(bool half_to_float, call.Bool("half_to_float"));
    if (half_to_float) return call.Unimplemented("half_to_float is not supported");
  }
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return EmitWithDType(op, call, cx, x, std::move(attrs));
}

}  // namespace

// conv{1,2,3}d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1),
// padding also "valid"/"same" (the .padding overloads);
// conv_transpose{1,2,3}d(input, weight, bias=None, stride=1, padding=0,
// output_padding=0, groups=1, dilation=1); and
// _convolution(input, weight, bias, stride, padding, dilation, transposed,
//              output_padding, groups, ...) as tracing records every nn.ConvNd.
ConvertResult ConvertConv(AtenCall& call, ConvertContext& cx) {
  const bool underscore = call.op() == "aten::_convolution" || call.op() == "aten::convolution";
  bool transposed = false;
  if (underscore) {
    ASSIGN_OR_RETURN(transposed, call.Bool("transposed", false));
  }
  size_t spatial = SpatialDims(call, 2);
  // These carry one stride per spatial dim (tracing writes the list out); the
  // others may carry a single value for all.
  if (underscore || call.op() == "aten::_convolution_mode") {
    ASSIGN_OR_RETURN(std::vector<int64_t> stride, call.Ints("stride"));
    spatial = SpatialDims(call, stride.size());
  }
  if (spatial < 1 || spatial > 3) {
    return call.Unimplemented(absl::StrCat(spatial, "-D convolution is not supported"));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, IntsPerDim(call, "stride", spatial, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, IntsPerDim(call, "dilation", spatial, 1));
  ASSIGN_OR_RETURN(int64_t groups, call.Int("groups", 1));
  if (call.op().rfind("aten::conv_transpose", 0) == 0) {
    ASSIGN_OR_RETURN(std::vector<int64_t> padding, IntsPerDim(call, "padding", spatial, 0));
    ASSIGN_OR_RETURN(std::vector<int64_t> output_padding,
                     IntsPerDim(call, "output_padding", spatial, 0));
    return EmitConv(call, cx, std::move(stride), std::move(padding), std::move(dilation), groups,
                    /*transposed=*/true, std::move(output_padding));
  }
  if (underscore) {
    ASSIGN_OR_RETURN(std::vector<int64_t> padding, IntsPerDim(call, "padding", spatial, 0));
    ASSIGN_OR_RETURN(std::vector<int64_t> output_padding,
                     IntsPerDim(call, "output_padding", spatial, 0));
    return EmitConv(call, cx, std::move(stride), std::move(padding), std::move(dilation), groups,
                    transposed, std::move(output_padding));
  }
  std::vector<int64_t> padding;
  absl::StatusOr<std::string> pad_mode = call.String("padding", std::string());
  if (pad_mode.ok() && !pad_mode->empty()) {
    padding.assign(spatial, 0);
    if (*pad_mode == "same") {
      std::optional<Dims> w = call.StaticShape("weight");
      if (!w || w->size() != spatial + 2) {
        return call.Unimplemented("padding='same' needs a weight of known shape");
      }
      // PyTorch pads total//2 before and the rest after; Kiln's Conv pads
      // symmetrically, so an odd total (an even kernel) gets a Pad first.
      std::vector<int64_t> pads(2 * spatial, 0);  // F.pad order: last dim first
      bool asymmetric = false;
      for (size_t d = 0; d < spatial; ++d) {
        const int64_t total = dilation[d] * ((*w)[2 + d] - 1);
        padding[d] = total / 2;
        asymmetric = asymmetric || total % 2 != 0;
        pads[2 * (spatial - 1 - d)] = total / 2;
        pads[2 * (spatial - 1 - d) + 1] = total - total / 2;
      }
      if (asymmetric) {
        ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
        ir::Attributes attrs;
        attrs.SetString("mode", "constant");
        attrs.SetFloat("value", 0.0);
        attrs.SetInts("pads", std::move(pads));
        ir::ValueId padded = cx.Emit(call, OpKind::kPad, {x}, std::move(attrs), ".same_pad");
        return EmitConv(call, cx, std::move(stride), std::vector<int64_t>(spatial, 0),
                        std::move(dilation), groups, /*transposed=*/false, {}, padded);
      }
    } else if (*pad_mode != "valid") {
      return call.InvalidArgument(absl::StrCat("unknown padding '", *pad_mode, "'"));
    }
  } else {
    ASSIGN_OR_RETURN(padding, IntsPerDim(call, "padding", spatial, 0));
  }
  return EmitConv(call, cx, std::move(stride), std::move(padding), std::move(dilation), groups);
}

// linear(input, weight, bias=None).
ConvertResult ConvertLinear(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  ASSIGN_OR_RETURN(ir::ValueId w, call.Tensor("weight"));
  ASSIGN_OR_RETURN(ir::ValueId b, call.OptionalTensor("bias"));
  std::vector<ir::ValueId> inputs = {x, w};
  if (b != ir::kNoValue) inputs.push_back(b);
  return One(cx.Emit(call, OpKind::kLinear, std::move(inputs)));
}

// The constant 2-D float weight W when `v` is W transposed by a Permute
// (permute(W, [1, 0]) or transpose(W, 0, 1): how torch.export's core ATen
// decomposition writes linear, as addmm(b, x, permute(W, [1, 0]))), else
// ir::kNoValue. x @ W^T is then a Linear of W as it is: no transposed copy
// of the weight, per run or at compile time.
ir::ValueId TransposedWeight(ConvertContext& cx, ir::ValueId v) {
  const ir::NodeId producer = cx.graph().value(v).producer;
  if (producer == ir::kNoNode) return ir::kNoValue;
  const ir::Node& n = cx.graph().node(producer);
  if (n.kind != OpKind::kPermute || n.inputs.size() != 1) return ir::kNoValue;
  const Tensor* w = cx.ConstValue(n.inputs[0]);
  if (w == nullptr || w->rank() != 2 || !IsFloatingPoint(w->dtype())) return ir::kNoValue;
  const std::vector<int64_t> perm = n.attrs.GetInts("perm");
  const bool swaps = (perm.size() == 2 && (perm[0] == 1 || perm[0] == -1) && (perm[1] == 0 || perm[1] == -2)) ||
                     (n.attrs.Has("dim0") && n.attrs.GetInt("dim0") != n.attrs.GetInt("dim1"));
  return swaps ? n.inputs[0] : ir::kNoValue;
}

// addmm(self, mat1, mat2, beta=1, alpha=1) = beta * self + alpha * (mat1 @ mat2),
// decomposed into MatMul, optional scaling Muls and an Add; baddbmm(self,
// batch1, batch2, *, beta=1, alpha=1) the same with a batched product. addmm's
// factors are 0-dim tensors of the operands' dtype, baddbmm's Python numbers,
// which is how each promotes an integer operand in libtorch.
ConvertResult ConvertAddmm(AtenCall& call, ConvertContext& cx) {
  const bool batched = call.op() == "aten::baddbmm";
  ASSIGN_OR_RETURN(ir::ValueId self, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId a, call.Tensor(batched ? "batch1" : "mat1"));
  ASSIGN_OR_RETURN(ir::ValueId b, call.Tensor(batched ? "batch2" : "mat2"));
  ASSIGN_OR_RETURN(double beta, call.Double("beta", 1.0));
  ASSIGN_OR_RETURN(double alpha, call.Double("alpha", 1.0));
  const std::string name = call.OutputName(0);
  auto factor = [&](double v, ir::ValueId like, const char* suffix) -> absl::StatusOr<ir::ValueId> {
    if (batched) return cx.AddFloat(v, name + suffix);
    const DType d = cx.DTypeOf(like) == DType::kUnknown ? DType::kF32 : cx.DTypeOf(like);
    return cx.AddScalarConstant(v, d, name + suffix);
  };
  if (!batched && alpha == 1.0 && beta == 1.0) {
    if (const ir::ValueId w = TransposedWeight(cx, b); w != ir::kNoValue) {
      // addmm(bias, x, W^T) = Linear(x, W, bias) for a 1-D bias of W's rows;
      // another self is added after.
      const Tensor* bias = cx.ConstValue(self);
      const Tensor* weight = cx.ConstValue(w);
      if (bias != nullptr && bias->rank() == 1 && bias->dim(0) == weight->dim(0) &&
          bias->dtype() == weight->dtype()) {
        return One(cx.Emit(call, OpKind::kLinear, {a, w, self}));
      }
      return One(cx.Emit(call, OpKind::kAdd,
                         {cx.Emit(call, OpKind::kLinear, {a, w}, {}, ".mm"), self}));
    }
  }
  ir::ValueId product = cx.Emit(call, OpKind::kMatMul, {a, b}, {}, batched ? ".bmm" : ".mm");
  if (alpha != 1.0) {
    ASSIGN_OR_RETURN(ir::ValueId f, factor(alpha, a, ".alpha"));
    product = cx.Emit(call, OpKind::kMul, {product, f}, {}, batched ? ".bmm_scaled" : ".mm_scaled");
  }
  // PyTorch ignores `self` entirely (even NaNs) when beta == 0.
  if (beta == 0.0) return One(cx.Emit(call, OpKind::kIdentity, {product}));
  if (beta != 1.0) {
    ASSIGN_OR_RETURN(ir::ValueId f, factor(beta, self, ".beta"));
    self = cx.Emit(call, OpKind::kMul, {self, f}, {}, ".self_scaled");
  }
  return One(cx.Emit(call, OpKind::kAdd, {product, self}));
}

// matmul / mm / bmm(self, other | mat2); mm(x, W^T) of a constant W is a
// Linear of W (a bias-free linear, decomposed).
ConvertResult ConvertMatMul(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId a, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId b, call.Tensor(call.Has("mat2") ? "mat2" : "other"));
  if (call.op() == "aten::mm") {
    if (const ir::ValueId w = TransposedWeight(cx, b); w != ir::kNoValue) {
      return One(cx.Emit(call, OpKind::kLinear, {a, w}));
    }
  }
  return One(cx.Emit(call, OpKind::kMatMul, {a, b}));
}

// max_pool{1,2,3}d[_with_indices](self, kernel_size, stride=[], padding=0,
// dilation=1, ceil_mode=False).
ConvertResult ConvertMaxPool(AtenCall& call, ConvertContext& cx) {
  const size_t spatial = SpatialDims(call, 2);
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, IntsPerDim(call, "kernel_size", spatial, {}));
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, call.Ints("stride", std::vector<int64_t>{}));
  if (stride.empty()) {
    stride = kernel;  // PyTorch's default stride is the kernel size
  } else {
    ASSIGN_OR_RETURN(stride, IntsPerDim(call, "stride", spatial, {}));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, IntsPerDim(call, "padding", spatial, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, IntsPerDim(call, "dilation", spatial, 1));
  ASSIGN_OR_RETURN(bool ceil_mode, call.Bool("ceil_mode", false));
  ir::Attributes attrs;
  attrs.SetInts("kernel", std::move(kernel));
  attrs.SetInts("stride", std::move(stride));
  attrs.SetInts("padding", std::move(padding));
  attrs.SetInts("dilation", std::move(dilation));
  attrs.SetBool("ceil_mode", ceil_mode);
  if (call.num_outputs() == 2) {
    // max_poolNd_with_indices (what core ATen writes for every max pool): the
    // values from a MaxPool, which keeps the fast kernel and its layouts, and
    // the indices from a MaxPoolWithIndices that dead-code elimination drops
    // when nothing reads them, as in inference nothing but max_unpool does.
    ir::NodeId n = cx.graph().AddNode(OpKind::kMaxPoolWithIndices, {x}, attrs,
                                      std::string(call.op()),
                                      {call.OutputName(0) + ".with_indices", call.OutputName(1)});
    const ir::ValueId indices = cx.graph().node(n).outputs[1];
    return std::vector<ir::ValueId>{cx.Emit(call, OpKind::kMaxPool, {x}, std::move(attrs)), indices};
  }
  return One(cx.Emit(call, OpKind::kMaxPool, {x}, std::move(attrs)));
}

// avg_pool{1,2,3}d(self, kernel_size, stride=[], padding=0, ceil_mode=False,
//                  count_include_pad=True[, divisor_override=None]).
ConvertResult ConvertAvgPool(AtenCall& call, ConvertContext& cx) {
  const size_t spatial = SpatialDims(call, 2);
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, IntsPerDim(call, "kernel_size", spatial, {}));
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, call.Ints("stride", std::vector<int64_t>{}));
  if (stride.empty()) {
    stride = kernel;
  } else {
    ASSIGN_OR_RETURN(stride, IntsPerDim(call, "stride", spatial, {}));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, IntsPerDim(call, "padding", spatial, 0));
  ASSIGN_OR_RETURN(bool ceil_mode, call.Bool("ceil_mode", false));
  ASSIGN_OR_RETURN(bool count_include_pad, call.Bool("count_include_pad", true));
  int64_t divisor_override = 0;
  if (call.Has("divisor_override")) {  // avg_pool1d has no divisor_override
    ASSIGN_OR_RETURN(divisor_override, call.Int("divisor_override"));
    if (divisor_override <= 0) return call.InvalidArgument("divisor_override must be > 0");
  }
  ir::Attributes attrs;
  attrs.SetInts("kernel", std::move(kernel));
  attrs.SetInts("stride", std::move(stride));
  attrs.SetInts("padding", std::move(padding));
  attrs.SetBool("ceil_mode", ceil_mode);
  attrs.SetBool("count_include_pad", count_include_pad);
  attrs.SetInt("divisor_override", divisor_override);
  return One(cx.Emit(call, OpKind::kAvgPool, {x}, std::move(attrs)));
}

// adaptive_{avg,max}_pool{1,2,3}d(self, output_size).
ConvertResult ConvertAdaptivePool(AtenCall& call, ConvertContext& cx) {
  const size_t spatial = SpatialDims(call, 2);
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  // None entries of a scripted List[Optional[int]] keep that input size (-1).
  ASSIGN_OR_RETURN(std::vector<int64_t> output_size, call.IntsOrNone("output_size", -1));
  if (output_size.size() == 1 && spatial > 1) output_size.assign(spatial, output_size[0]);
  if (output_size.size() != spatial) {
    return call.InvalidArgument(absl::StrCat("output_size has ", output_size.size(),
                                             " values, expected ", spatial));
  }
  ir::Attributes attrs;
  attrs.SetInts("output_size", std::move(output_size));
  if (call.num_outputs() == 2) {  // adaptive_max_poolNd -> (values, indices)
    ir::NodeId n = cx.graph().AddNode(OpKind::kAdaptiveMaxPool, {x}, std::move(attrs),
                                      std::string(call.op()),
                                      {call.OutputName(0), call.OutputName(1)});
    return cx.graph().node(n).outputs;
  }
  return One(cx.Emit(call, OpKind::kAdaptiveAvgPool, {x}, std::move(attrs)));
}

// upsample_{nearest,linear,bilinear,bicubic,trilinear}{1,2,3}d and
// _upsample_nearest_exact{1,2,3}d: .vec(input, output_size?, [align_corners,]
// scale_factors?) or (self, output_size, [align_corners,] scales_d?, scales_h?,
// scales_w?), one scale per spatial dim.
ConvertResult ConvertUpsample(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = call.op();
  std::string mode = "linear";
  if (op.find("nearest_exact") != std::string_view::npos) {
    mode = "nearest_exact";
  } else if (op.find("nearest") != std::string_view::npos) {
    mode = "nearest";
  } else if (op.find("bicubic") != std::string_view::npos) {
    mode = "cubic";
  }
  const bool vec = call.overload() == "vec";
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor(vec ? "input" : "self"));
  ir::Attributes attrs;
  attrs.SetString("mode", mode);
  if (mode.rfind("nearest", 0) != 0) {
    ASSIGN_OR_RETURN(bool align, call.Bool("align_corners"));
    attrs.SetBool("align_corners", align);
  }
  std::vector<double> scales;
  if (vec) {
    ASSIGN_OR_RETURN(std::optional<std::vector<double>> factors,
                     call.OptionalDoubles("scale_factors"));
    if (factors.has_value()) scales = *std::move(factors);
  } else {
    const size_t spatial = SpatialDims(call, 2);
    static const char* const kNames[3][3] = {
        {"scales", "", ""}, {"scales_h", "scales_w", ""}, {"scales_d", "scales_h", "scales_w"}};
    for (size_t k = 0; k < spatial && spatial <= 3; ++k) {
      if (!call.Has(kNames[spatial - 1][k])) {  // all given or none used
        scales.clear();
        break;
      }
      ASSIGN_OR_RETURN(double s, call.Double(kNames[spatial - 1][k]));
      scales.push_back(s);
    }
  }
  ir::ValueId sizes = ir::kNoValue;
  if (call.Has("output_size")) {
    // The size may be computed from the input's shape (segmentation heads
    // upsample to the input's height and width).
    ASSIGN_OR_RETURN(IntsArg size, call.IntsOrValue("output_size"));
    if (size.values.has_value()) {
      attrs.SetInts("sizes", *std::move(size.values));
    } else {
      sizes = size.value;
    }
  } else if (scales.empty()) {
    return call.InvalidArgument("has neither an output size nor scale factors");
  }
  // Scales also set the coordinate mapping (PyTorch uses 1/scale, not in/out).
  if (!scales.empty()) attrs.SetFloats("scales", scales);
  if (sizes != ir::kNoValue) return One(cx.Emit(call, OpKind::kResize, {x, sizes}, std::move(attrs)));
  return One(cx.Emit(call, OpKind::kResize, {x}, std::move(attrs)));
}

// grid_sampler_2d / grid_sampler(input, grid, interpolation_mode,
// padding_mode, align_corners): the modes as ATen numbers them (0 bilinear,
// 1 nearest, 2 bicubic; 0 zeros, 1 border, 2 reflection). A 5-D input
// (volumetric, grid_sampler's other form) is left to the kernel's refusal,
// which sends it to the fallback.
ConvertResult ConvertGridSampler(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  ASSIGN_OR_RETURN(ir::ValueId grid, call.Tensor("grid"));
  ASSIGN_OR_RETURN(int64_t mode, call.Int("interpolation_mode"));
  ASSIGN_OR_RETURN(int64_t padding, call.Int("padding_mode"));
  ASSIGN_OR_RETURN(bool align_corners, call.Bool("align_corners"));
  static constexpr const char* kModes[] = {"bilinear", "nearest", "bicubic"};
  static constexpr const char* kPaddings[] = {"zeros", "border", "reflection"};
  if (mode < 0 || mode > 2) {
    return call.InvalidArgument(absl::StrCat("interpolation_mode ", mode));
  }
  if (padding < 0 || padding > 2) {
    return call.InvalidArgument(absl::StrCat("padding_mode ", padding));
  }
  ir::Attributes attrs;
  attrs.SetString("mode", kModes[mode]);
  attrs.SetString("padding_mode", kPaddings[padding]);
  attrs.SetBool("align_corners", align_corners);
  return One(cx.Emit(call, OpKind::kGridSample, {x, grid}, std::move(attrs)));
}

// affine_grid_generator(theta, size, align_corners): the sampling grid of an
// affine transform, for GridSample. `size` is usually the image's x.size(),
// known only at run time.
ConvertResult ConvertAffineGrid(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId theta, call.Tensor("theta"));
  ASSIGN_OR_RETURN(bool align_corners, call.Bool("align_corners"));
  ASSIGN_OR_RETURN(IntsArg size, call.IntsOrValue("size"));
  ir::Attributes attrs;
  attrs.SetBool("align_corners", align_corners);
  if (!size.values.has_value()) {
    return One(cx.Emit(call, OpKind::kAffineGrid, {theta, size.value}, std::move(attrs)));
  }
  attrs.SetInts("size", *std::move(size.values));
  return One(cx.Emit(call, OpKind::kAffineGrid, {theta}, std::move(attrs)));
}

// batch_norm(input, weight?, bias?, running_mean?, running_var?, training,
//            momentum, eps, cudnn_enabled), and what torch.export records for
// eval mode: _native_batch_norm_legit_no_training(input, weight?, bias?,
// running_mean, running_var, momentum, eps) -> (out, save_mean, save_invstd),
// whose last two results no inference graph reads. Inference only.
ConvertResult ConvertBatchNorm(AtenCall& call, ConvertContext& cx) {
  const bool legit = call.op() == "aten::_native_batch_norm_legit_no_training";
  if (!legit) {
    ASSIGN_OR_RETURN(bool training, call.Bool("training"));
    if (training) return call.Unimplemented("batch_norm with batch statistics (training=True)");
  }
  if (!call.Has("running_mean") || !call.Has("running_var")) {
    return call.Unimplemented("batch_norm without running statistics");
  }
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  ASSIGN_OR_RETURN(ir::ValueId running_mean, call.Tensor("running_mean"));
  ASSIGN_OR_RETURN(ir::ValueId running_var, call.Tensor("running_var"));
  const Tensor* mean = cx.ConstValue(running_mean);
  auto affine_or_fill = [&](std::string_view name, double fill) -> absl::StatusOr<ir::ValueId> {
    if (call.Has(name)) return call.Tensor(name);
    if (mean == nullptr) {
      return call.Unimplemented("batch_norm without weight or bias needs constant running_mean");
    }
    return cx.AddFilledConstant(mean->dims(), fill, mean->dtype(),
                                absl::StrCat(call.OutputName(0), ".", std::string(name)));
  };
  ASSIGN_OR_RETURN(ir::ValueId weight, affine_or_fill("weight", 1.0));
  ASSIGN_OR_RETURN(ir::ValueId bias, affine_or_fill("bias", 0.0));
  ASSIGN_OR_RETURN(double eps, call.Double("eps", 1e-5));
  ir::Attributes attrs;
  attrs.SetFloat("eps", eps);
  ir::ValueId y = cx.Emit(call, OpKind::kBatchNorm, {x, weight, bias, running_mean, running_var},
                          std::move(attrs));
  std::vector<ir::ValueId> results = {y};
  // The saved statistics: None placeholders (an inference graph never reads them).
  for (size_t i = 1; i < call.num_outputs(); ++i) results.push_back(cx.AddNone(call.OutputName(i)));
  return results;
}

// layer_norm(input, normalized_shape, weight?, bias?, eps=1e-5, cudnn_enable).
ConvertResult ConvertLayerNorm(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  ASSIGN_OR_RETURN(std::vector<int64_t> normalized_shape, call.Ints("normalized_shape"));
  ASSIGN_OR_RETURN(ir::ValueId weight, call.OptionalTensor("weight"));
  ASSIGN_OR_RETURN(ir::ValueId bias, call.OptionalTensor("bias"));
  ASSIGN_OR_RETURN(double eps, call.Double("eps", 1e-5));
  std::vector<ir::ValueId> inputs = {x, weight, bias};
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  ir::Attributes attrs;
  attrs.SetInts("normalized_shape", std::move(normalized_shape));
  attrs.SetFloat("eps", eps);
  ir::ValueId y = cx.Emit(call, OpKind::kLayerNorm, std::move(inputs), std::move(attrs));
  if (call.num_outputs() == 1) return One(y);
  // native_layer_norm -> (y, mean, rstd), the statistics over the normalized
  // dims, kept; an inference graph seldom reads them (then they are dropped).
  std::vector<int64_t> axes;
  for (int64_t a = -k; a < 0; ++a) axes.push_back(a);
  const std::array<ir::ValueId, 2> stats = EmitMeanRstd(call, cx, x, axes, eps);
  return std::vector<ir::ValueId>{y, stats[0], stats[1]};
}

// rms_norm(input, normalized_shape, weight=None, eps=None) (torch >= 2.4,
// nn.RMSNorm): x * rsqrt(mean(x * x over the last len(normalized_shape) dims)
// + eps) * weight; eps None is the input dtype's machine epsilon, as PyTorch
// takes it. Built of elementwise ops and a mean (libtorch 1.13 has no
// rms_norm to fall back on).
ConvertResult ConvertRmsNorm(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  ASSIGN_OR_RETURN(std::vector<int64_t> normalized_shape, call.Ints("normalized_shape"));
  ASSIGN_OR_RETURN(ir::ValueId weight, call.OptionalTensor("weight"));
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  if (k == 0) return call.InvalidArgument("an empty normalized_shape");
  double eps = 0;
  if (call.Has("eps")) {
    ASSIGN_OR_RETURN(eps, call.Double("eps"));
  } else {
    switch (cx.DTypeOf(x)) {
      case DType::kF64: eps = 2.220446049250313e-16; break;
      case DType::kF16: eps = 0.0009765625; break;
      case DType::kBF16: eps = 0.0078125; break;
      default: eps = 1.1920928955078125e-07; break;  // float32's
    }
  }
  std::vector<int64_t> axes;
  for (int64_t i = -k; i < 0; ++i) axes.push_back(i);
  ir::Attributes mean_attrs;
  mean_attrs.SetInts("axes", std::move(axes));
  mean_attrs.SetBool("keepdim", true);
  const ir::ValueId square = cx.Emit(call, OpKind::kMul, {x, x}, {}, ".square");
  const ir::ValueId mean = cx.Emit(call, OpKind::kMean, {square}, std::move(mean_attrs), ".mean");
  ASSIGN_OR_RETURN(ir::ValueId eps_value,
                   cx.AddScalarConstant(eps, DType::kF32, call.OutputName(0) + ".eps"));
  const ir::ValueId shifted = cx.Emit(call, OpKind::kAdd, {mean, eps_value}, {}, ".shifted");
  const ir::ValueId scale = cx.Emit(call, OpKind::kRsqrt, {shifted}, {}, ".rsqrt");
  if (weight == ir::kNoValue) return One(cx.Emit(call, OpKind::kMul, {x, scale}));
  const ir::ValueId normed = cx.Emit(call, OpKind::kMul, {x, scale}, {}, ".normed");
  return One(cx.Emit(call, OpKind::kMul, {normed, weight}));
}

ConvertResult ConvertSoftmax(AtenCall& call, ConvertContext& cx) {
  return ConvertSoftmaxLike(OpKind::kSoftmax, call, cx);
}

// _safe_softmax(self, dim, dtype=None) (torch >= 2.5; what its own attention
// decompositions use): softmax, except that a slice along dim whose every
// value is -inf (a fully masked row) gives zeros instead of NaN. With a dtype,
// a slice is all -inf exactly when its max is -inf (a NaN makes the max NaN,
// and the softmax NaN, as PyTorch's).
ConvertResult ConvertSafeSoftmax(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  std::optional<DType> cast_to;
  if (call.Has("dtype")) {
    ASSIGN_OR_RETURN(cast_to, call.ScalarType("dtype"));
  }
  if (!cast_to.has_value()) {
    // Softmax's own `safe` (kernels/safe_softmax.h): one pass.
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    attrs.SetBool("safe", true);
    return One(cx.Emit(call, OpKind::kSoftmax, {x}, std::move(attrs)));
  }
  // With a dtype the mask is taken on `self` before the cast (a float64 -1e300
  // becomes a float32 -inf), so it stays a comparison of its own.
  // The constants are 0-dim, so they take the float type of the tensor they
  // meet (PyTorch's promotion); float32 where the import does not know it.
  DType out_dtype = cx.DTypeOf(x);
  if (call.Has("dtype")) {
    ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
    if (dtype.has_value()) out_dtype = *dtype;
  }
  const DType x_dtype = IsFloatingPoint(cx.DTypeOf(x)) ? cx.DTypeOf(x) : DType::kF32;
  if (!IsFloatingPoint(out_dtype)) out_dtype = DType::kF32;
  ir::Attributes softmax_attrs;
  softmax_attrs.SetInt("axis", dim);
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> softmax,
                   EmitWithDType(OpKind::kSoftmax, call, cx, x, std::move(softmax_attrs)));
  ir::Attributes max_attrs;
  max_attrs.SetInts("axes", {dim});
  max_attrs.SetBool("keepdim", true);
  const ir::ValueId max = cx.Emit(call, OpKind::kReduceMax, {x}, std::move(max_attrs), ".max");
  ASSIGN_OR_RETURN(ir::ValueId minus_inf,
                   cx.AddScalarConstant(-std::numeric_limits<double>::infinity(), x_dtype,
                                        call.OutputName(0) + ".neg_inf"));
  const ir::ValueId masked = cx.Emit(call, OpKind::kEqual, {max, minus_inf}, {}, ".masked");
  ASSIGN_OR_RETURN(ir::ValueId zero,
                   cx.AddScalarConstant(0.0, out_dtype, call.OutputName(0) + ".zero"));
  return One(cx.Emit(call, OpKind::kWhere, {masked, zero, softmax[0]}));
}

ConvertResult ConvertLogSoftmax(AtenCall& call, ConvertContext& cx) {
  return ConvertSoftmaxLike(OpKind::kLogSoftmax, call, cx);
}

// mean(self, dtype=None) over everything, or mean.dim(self, dim?, keepdim=False, dtype=None).
ConvertResult ConvertMean(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::Attributes attrs, AxesAttrs(call));
  return EmitWithDType(OpKind::kMean, call, cx, x, std::move(attrs));
}

// sum / amax / amin / logsumexp in their overloads: (self[, dtype]) over
// everything, or (self, dim, keepdim[, dtype]).
ConvertResult ConvertReduce(OpKind op, AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::Attributes attrs, AxesAttrs(call));
  return EmitWithDType(op, call, cx, x, std::move(attrs));
}

// einsum(equation, tensors, path=None).
ConvertResult ConvertEinsum(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(std::string equation, call.String("equation"));
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> inputs, call.Tensors("tensors"));
  ir::Attributes attrs;
  attrs.SetString("equation", equation);
  return One(cx.Emit(call, OpKind::kEinsum, std::move(inputs), std::move(attrs)));
}

// mv(self, vec), dot(self, tensor): MatMul of 1-D operands; outer / ger(self,
// vec2) = self[:, None] * vec2.
ConvertResult ConvertVectorProduct(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = call.op();
  const bool outer = op == "aten::outer" || op == "aten::ger";
  ASSIGN_OR_RETURN(ir::ValueId a, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId b,
                   call.Tensor(outer ? "vec2" : op == "aten::dot" ? "tensor" : "vec"));
  if (outer) {
    ir::Attributes attrs;
    attrs.SetInt("axis", 1);
    const ir::ValueId column = cx.Emit(call, OpKind::kUnsqueeze, {a}, std::move(attrs), ".column");
    return One(cx.Emit(call, OpKind::kMul, {column, b}));
  }
  return One(cx.Emit(call, OpKind::kMatMul, {a, b}));
}

// group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True).
ConvertResult ConvertGroupNorm(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  ASSIGN_OR_RETURN(int64_t groups,
                   call.Int(call.op() == "aten::native_group_norm" ? "group" : "num_groups"));
  ASSIGN_OR_RETURN(ir::ValueId weight, call.OptionalTensor("weight"));
  ASSIGN_OR_RETURN(ir::ValueId bias, call.OptionalTensor("bias"));
  ASSIGN_OR_RETURN(double eps, call.Double("eps", 1e-5));
  ir::Attributes attrs;
  attrs.SetInt("groups", groups);
  attrs.SetFloat("eps", eps);
  std::vector<ir::ValueId> inputs = {x, weight, bias};
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  ir::ValueId y = cx.Emit(call, OpKind::kGroupNorm, std::move(inputs), std::move(attrs));
  if (call.num_outputs() == 1) return One(y);
  // native_group_norm -> (y, mean, rstd), [N, group]: x as [N, group, C / group * HxW].
  ir::Attributes flat;
  flat.SetInt("start_dim", 1);
  flat.SetInt("end_dim", -1);
  ir::Attributes split;
  split.SetInt("axis", 1);
  split.SetInts("sizes", {groups, -1});
  ir::ValueId grouped = cx.Emit(call, OpKind::kUnflatten,
                                {cx.Emit(call, OpKind::kFlatten, {x}, std::move(flat), ".flat")},
                                std::move(split), ".grouped");
  const std::array<ir::ValueId, 2> stats = EmitMeanRstd(call, cx, grouped, {2}, eps, false);
  return std::vector<ir::ValueId>{y, stats[0], stats[1]};
}

// instance_norm(input, weight, bias, running_mean, running_var,
// use_input_stats, momentum, eps, cudnn_enabled): with input statistics it is a
// GroupNorm with one group per channel (the group count comes from the
// weight, or from the input's channels, which only the kernel knows).
ConvertResult ConvertInstanceNorm(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(bool use_input_stats, call.Bool("use_input_stats"));
  if (!use_input_stats) return call.Unimplemented("instance_norm with running statistics");
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  ASSIGN_OR_RETURN(ir::ValueId weight, call.OptionalTensor("weight"));
  ASSIGN_OR_RETURN(ir::ValueId bias, call.OptionalTensor("bias"));
  ASSIGN_OR_RETURN(double eps, call.Double("eps"));
  ir::Attributes attrs;
  attrs.SetInt("groups", -1);  // one per channel
  attrs.SetFloat("eps", eps);
  std::vector<ir::ValueId> inputs = {x, weight, bias};
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  return One(cx.Emit(call, OpKind::kGroupNorm, std::move(inputs), std::move(attrs)));
}

// max / min: (self) the extreme of everything; max.other(self, other)
// elementwise; max.dim(self, dim, keepdim=False) -> (values, indices), a
// ReduceMax/Min and an ArgMax/Min over the same axis: both pick the first
// extreme (or the first NaN), so values and indices agree.
ConvertResult ConvertMaxMin(AtenCall& call, ConvertContext& cx) {
  const bool max = OutOfPlaceOp(call.op()) == "aten::max";
  if (call.Has("other")) {
    return ConvertBinaryOp(max ? OpKind::kMaximum : OpKind::kMinimum, call, cx);
  }
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  if (!call.Has("dim")) {
    return One(cx.Emit(call, max ? OpKind::kReduceMax : OpKind::kReduceMin, {x}));
  }
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ASSIGN_OR_RETURN(bool keepdim, call.Bool("keepdim", false));
  ir::Attributes values;
  values.SetInts("axes", {dim});
  values.SetBool("keepdim", keepdim);
  ir::Attributes indices;
  indices.SetInt("axis", dim);
  indices.SetBool("keepdim", keepdim);
  const ir::ValueId v =
      cx.Emit(call, max ? OpKind::kReduceMax : OpKind::kReduceMin, {x}, std::move(values));
  const ir::ValueId i = cx.Emit(call, max ? OpKind::kArgMax : OpKind::kArgMin, {x},
                                std::move(indices), ".indices");
  return std::vector<ir::ValueId>{v, i};
}

// argmax / argmin(self, dim=None, keepdim=False).
ConvertResult ConvertArgMaxMin(OpKind op, AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ir::Attributes attrs;
  if (call.Has("dim")) {
    ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
    attrs.SetInt("axis", dim);
  }
  ASSIGN_OR_RETURN(bool keepdim, call.Bool("keepdim", false));
  attrs.SetBool("keepdim", keepdim);
  return One(cx.Emit(call, op, {x}, std::move(attrs)));
}

// std / var: (self, unbiased=True), .dim(self, dim, unbiased=True,
// keepdim=False) or .correction(self, dim=None, *, correction=None, keepdim=False).
ConvertResult ConvertVarStd(OpKind op, AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::Attributes attrs, AxesAttrs(call));
  double correction = 1.0;
  if (call.Has("unbiased")) {
    ASSIGN_OR_RETURN(bool unbiased, call.Bool("unbiased"));
    correction = unbiased ? 1.0 : 0.0;
  } else if (call.Has("correction")) {
    ASSIGN_OR_RETURN(correction, call.Double("correction"));
  }
  attrs.SetFloat("correction", correction);
  return One(cx.Emit(call, op, {x}, std::move(attrs)));
}

// var_mean / std_mean(self, [dim,] unbiased | correction, keepdim) -> (var or std, mean).
ConvertResult ConvertVarStdMean(AtenCall& call, ConvertContext& cx) {
  const OpKind op = call.op() == "aten::std_mean" ? OpKind::kStd : OpKind::kVar;
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> spread, ConvertVarStd(op, call, cx));
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::Attributes attrs, AxesAttrs(call));
  return std::vector<ir::ValueId>{spread[0],
                                  cx.Emit(call, OpKind::kMean, {x}, std::move(attrs), ".mean")};
}

// norm(self, p=2[, dim, keepdim][, dtype]), frobenius_norm(self[, dim, keepdim]),
// linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None).
ConvertResult ConvertNorm(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = call.op();
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::Attributes attrs, AxesAttrs(call));
  double p = 2.0;
  if (op != "aten::frobenius_norm") {
    ASSIGN_OR_RETURN(p, call.Double(op == "aten::linalg_vector_norm" ? "ord" : "p", 2.0));
  }
  attrs.SetFloat("p", p);
  return EmitWithDType(OpKind::kNorm, call, cx, x, std::move(attrs));
}

// cumsum / cumprod(self, dim, *, dtype=None).
ConvertResult ConvertCumulative(OpKind op, AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return EmitWithDType(op, call, cx, x, std::move(attrs));
}

// topk(self, k, dim=-1, largest=True, sorted=True) -> (values, indices).
ConvertResult ConvertTopK(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t k, call.Int("k"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", -1));
  ASSIGN_OR_RETURN(bool largest, call.Bool("largest", true));
  ir::Attributes attrs;
  attrs.SetInt("k", k);
  attrs.SetInt("axis", dim);
  attrs.SetBool("largest", largest);
  const ir::NodeId n = cx.graph().AddNode(OpKind::kTopK, {x}, std::move(attrs),
                                          std::string(call.op()),
                                          {call.OutputName(0), call.OutputName(1)});
  return cx.graph().node(n).outputs;
}

// sort(self, dim=-1, descending=False), sort.stable(self, *, stable, dim=-1,
// descending=False) -> (values, indices); argsort takes the indices. Kiln's
// sort is always stable, which is one of the orders an unstable sort may return.
ConvertResult ConvertSort(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", -1));
  ASSIGN_OR_RETURN(bool descending, call.Bool("descending", false));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  attrs.SetBool("descending", descending);
  const std::string base = call.OutputName(0);
  const ir::NodeId n = cx.graph().AddNode(OpKind::kSort, {x}, std::move(attrs),
                                          std::string(call.op()), {base + ".values", base});
  const std::vector<ir::ValueId>& outs = cx.graph().node(n).outputs;
  if (call.op() == "aten::argsort") return One(outs[1]);
  return outs;
}

// kthvalue(self, k, dim=-1, keepdim=False) -> (values, indices): the k-th
// smallest, from a TopK of the k smallest.
ConvertResult ConvertKthvalue(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t k, call.Int("k"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", -1));
  ASSIGN_OR_RETURN(bool keepdim, call.Bool("keepdim", false));
  if (k < 1) return call.InvalidArgument(absl::StrCat("k must be positive, got ", k));
  ir::Attributes attrs;
  attrs.SetInt("k", k);
  attrs.SetInt("axis", dim);
  attrs.SetBool("largest", false);
  const std::string base = call.OutputName(0);
  const ir::NodeId n = cx.graph().AddNode(OpKind::kTopK, {x}, std::move(attrs),
                                          std::string(call.op()),
                                          {base + ".smallest", base + ".at"});
  std::vector<ir::ValueId> result;
  for (ir::ValueId v : std::vector<ir::ValueId>(cx.graph().node(n).outputs)) {
    ir::Attributes pick;
    pick.SetInt("axis", dim);
    const char* suffix = result.empty() ? "" : ".indices";
    if (keepdim) {
      pick.SetInt("start", k - 1);
      pick.SetInt("end", k);
      result.push_back(cx.Emit(call, OpKind::kSlice, {v}, std::move(pick), suffix));
    } else {
      pick.SetInt("index", k - 1);
      result.push_back(cx.Emit(call, OpKind::kSelect, {v}, std::move(pick), suffix));
    }
  }
  return result;
}

// embedding(weight, indices, padding_idx=-1, scale_grad_by_freq, sparse) =
// IndexSelect of the table's rows (padding_idx only matters for training).
ConvertResult ConvertEmbedding(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId weight, call.Tensor("weight"));
  ASSIGN_OR_RETURN(ir::ValueId indices, call.Tensor("indices"));
  ir::Attributes attrs;
  attrs.SetInt("axis", 0);
  return One(cx.Emit(call, OpKind::kIndexSelect, {weight, indices}, std::move(attrs)));
}

// lstm.input(input, hx[], params[], has_biases, num_layers, dropout, train,
// bidirectional, batch_first); gru.input / rnn_tanh.input / rnn_relu.input(
// input, hx, params[], ...): one LSTM or RNN node over the weights in
// PyTorch's order. Packed sequences (the .data overloads) are not translated.
ConvertResult ConvertRecurrent(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = call.op();
  const bool lstm = op == "aten::lstm";
  if (call.overload() == "data") return call.Unimplemented("packed sequences");
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  std::vector<ir::ValueId> states;
  if (lstm) {
    ASSIGN_OR_RETURN(states, call.Tensors("hx"));
  } else {
    ASSIGN_OR_RETURN(ir::ValueId h, call.Tensor("hx"));
    states = {h};
  }
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> params, call.Tensors("params"));
  ASSIGN_OR_RETURN(bool has_biases, call.Bool("has_biases"));
  ASSIGN_OR_RETURN(int64_t num_layers, call.Int("num_layers"));
  ASSIGN_OR_RETURN(bool train, call.Bool("train"));
  ASSIGN_OR_RETURN(bool bidirectional, call.Bool("bidirectional"));
  ASSIGN_OR_RETURN(bool batch_first, call.Bool("batch_first"));
  if (train) return call.Unimplemented("training mode (dropout between layers)");
  ir::Attributes attrs;
  if (!lstm) {
    attrs.SetString("cell", op == "aten::gru" ? "gru" : op == "aten::rnn_relu" ? "relu" : "tanh");
  }
  attrs.SetInt("num_layers", num_layers);
  attrs.SetBool("bidirectional", bidirectional);
  attrs.SetBool("batch_first", batch_first);
  attrs.SetBool("has_biases", has_biases);
  attrs.SetBool("has_state", true);
  std::vector<ir::ValueId> inputs = {x};
  inputs.insert(inputs.end(), states.begin(), states.end());
  inputs.insert(inputs.end(), params.begin(), params.end());
  std::vector<std::string> names;
  for (size_t i = 0; i < call.num_outputs(); ++i) names.push_back(call.OutputName(i));
  ir::NodeId n = cx.graph().AddNode(lstm ? OpKind::kLSTM : OpKind::kRNN, std::move(inputs),
                                    std::move(attrs), std::string(op), names);
  return cx.graph().node(n).outputs;
}

}  // namespace kiln::importer::aten
