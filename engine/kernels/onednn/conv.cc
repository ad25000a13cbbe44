// 2-D FP32 convolution on oneDNN (regular, grouped and depthwise), in NHWC.
//
// Takes a batched 4-D input in NCHW (the first convolution of a network: it
// reorders the input into the workspace first) or NHWC, constant weights and
// bias, and writes its output in NHWC. The weights are reordered once, in
// Prepare, into the blocked format oneDNN picks for this shape and CPU, and
// the plan keeps that copy. Under Precision::kBf16 (a model's opt-in) source
// and weights are bfloat16, accumulation and output float32. The epilogue the
// fuse_conv_epilogue pass wrote: a batch norm's per-channel scale and shift
// are folded into the weights and bias as they are reordered
// (w' = w * scale, b' = b * scale + shift: what torch.jit.freeze and ONNX
// Runtime do; it moves a rounding, not a result beyond float tolerance, and
// spares the kernel two passes of per-channel post-ops, ~15% of a ResNet
// convolution); a 3x3 stride-1 convolution runs Winograd's algorithm
// where oneDNN has it (below, in PrepareConv); a fused residual Add (input 3, NHWC like the output) is
// oneDNN's sum post-op, accumulating into an output that holds the residual
// (the planner lets the output take the residual's buffer where that was its
// last use; otherwise the residual is copied in first: both cheaper than a
// binary add reading a third tensor, 5-30% of the convolution), then the clamp and activation run as
// eltwise post-ops on each output block while it is in cache. Shapes and attribute errors are the native
// kernel's: its Prepare runs first on the same operands, so a convolution
// either runs here with the same output dims or not at all.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/conv_epilogue.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/onednn/onednn.h"
#include "engine/kernels/onednn/onednn_kernels.h"

namespace kiln::kernels::onednn {
namespace {

using dnnl::memory;

struct ConvState {
  PrimitiveCall conv;  // source, destination, scratchpad given per call
  memory::desc src, dst;
  std::shared_ptr<const memory> weights;  // reordered once, shared by the model's plans
  const void* bias = nullptr;           // the node's constant, or folded_bias
  std::vector<float> folded_bias;       // bias * scale + shift of a folded batch norm
  memory::desc bias_desc;
  bool residual = false;                // sum post-op: the output starts as input 3
  // An input in another layout or type than the primitive's `src` (an NCHW
  // input, bfloat16 operands, Winograd's blocked layout): converted into the
  // workspace at `src_offset` first.
  bool reorder_src = false;
  // Winograd: the primitive writes oneDNN's blocked layout `conv_dst` into the
  // workspace at `dst_offset` (the residual reordered in first, for the sum
  // post-op), reordered out into the NHWC output after.
  bool blocked_dst = false;
  memory::desc conv_dst;
  PrimitiveCall dst_in, dst_out;
  size_t dst_offset = 0;
  PrimitiveCall src_reorder;
  memory::desc plain_src;
  size_t src_offset = 0, scratch_offset = 0;
  memory::desc scratch;
};

bool SupportsConv(const PrepareContext& ctx) {
  if (!ctx.allow_layouts || ctx.inputs.size() < 2) return false;
  const TensorInfo& x = ctx.inputs[0];
  const TensorInfo& w = ctx.inputs[1];
  if (x.dtype != DType::kF32 || x.dims.size() != 4 || w.constant == nullptr ||
      w.dtype != DType::kF32 || w.dims.size() != 4) {
    return false;
  }
  if (ctx.inputs.size() > 2 && ctx.inputs[2].present &&
      (ctx.inputs[2].constant == nullptr || ctx.inputs[2].dtype != DType::kF32)) {
    return false;
  }
  if (ctx.inputs.size() > 3 && ctx.inputs[3].present &&
      (ctx.inputs[3].layout != ir::Layout::kNHWC || ctx.inputs[3].dtype != DType::kF32)) {
    return false;
  }
  return !ctx.node.attrs.Has(kAccumulateAttr);
}

absl::Status PrepareConv(PrepareContext& ctx) {
  ASSIGN_OR_RETURN(const Dims out, NativeOutputDims(ctx));
  const ir::Node& node = ctx.node;
  const Dims& x = ctx.inputs[0].dims;
  const Dims& w = ctx.inputs[1].dims;
  const int64_t groups = node.attrs.GetInt("groups", 1);
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, SpatialAttr(node, "stride", 2, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, SpatialAttr(node, "padding", 2, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, SpatialAttr(node, "dilation", 2, 1));
  memory::dims pad_l(2), pad_r(2), dil(2);
  for (int i = 0; i < 2; ++i) {
    dil[i] = dilation[i] - 1;
    pad_l[i] = padding[i];
    // PyTorch floors the output size; oneDNN wants the right padding that
    // gives it exactly. A strided window that leaves the last input columns
    // unread (a 1x1 stride-2 downsample of an even size) makes that negative:
    // no right padding then gives the same floored size.
    const int64_t ext = (w[2 + i] - 1) * dilation[i] + 1;
    pad_r[i] = (out[2 + i] - 1) * stride[i] + ext - x[2 + i] - padding[i];
    if (pad_r[i] < 0 && (x[2 + i] + padding[i] - ext) / stride[i] + 1 == out[2 + i]) pad_r[i] = 0;
    if (pad_r[i] < 0) return Unimplemented(node, "negative right padding");
  }

  auto s = std::make_shared<ConvState>();
  // Under Precision::kBf16 the source and weights are bfloat16 (the source
  // converted into the workspace per call, the weights once here); the
  // output, bias, post-ops and accumulation stay float32. Grouped and
  // depthwise convolutions stay float32: memory-bound, they ran slower in
  // bfloat16 (the conversion costs more than the arithmetic saves:
  // mobilenet_v2 at batch 8 1.2x ONNX Runtime against 1.05x in float32).
  const memory::data_type operand =
      groups == 1 ? OperandType(ctx.precision) : memory::data_type::f32;
  s->src = ImageDesc(x, ir::Layout::kNHWC, operand);
  s->dst = ImageDesc(out, ir::Layout::kNHWC);
  const memory::dims wdims = groups == 1 ? ToDims(w)
                                         : memory::dims{groups, w[0] / groups, w[1], w[2], w[3]};
  const memory::desc weights_any(wdims, operand, memory::format_tag::any);
  // The epilogue as Kiln's kernel reads it (conv_epilogue.h).
  ASSIGN_OR_RETURN(const ConvEpilogue e, ConvEpilogueFromAttrs(node, DType::kF32, w[0]));
  const bool given_bias = ctx.inputs.size() > 2 && ctx.inputs[2].present;
  const Tensor& weights = *ctx.inputs[1].constant;
  std::function<std::vector<float>()> fold_weights;  // none: the constant as it is
  if (e.scale != nullptr) {
    // The batch norm folded: each output channel's weights and bias scaled.
    const float* scale = e.scale->data<float>();
    const float* shift = e.shift->data<float>();
    const float* bias = given_bias ? ctx.inputs[2].constant->data<float>() : nullptr;
    s->folded_bias.resize(w[0]);
    for (int64_t o = 0; o < w[0]; ++o) {
      s->folded_bias[o] = (bias != nullptr ? bias[o] : 0.0f) * scale[o] + shift[o];
    }
    s->bias = s->folded_bias.data();
    fold_weights = [&weights, scale, out_channels = w[0]] {
      const float* in = weights.data<float>();
      const int64_t per_channel = weights.num_elements() / out_channels;
      std::vector<float> folded(static_cast<size_t>(weights.num_elements()));
      for (int64_t o = 0; o < out_channels; ++o) {
        for (int64_t i = 0; i < per_channel; ++i) {
          folded[o * per_channel + i] = in[o * per_channel + i] * scale[o];
        }
      }
      return folded;
    };
  } else if (given_bias) {
    s->bias = ctx.inputs[2].constant->raw_data();
  }
  const bool has_bias = s->bias != nullptr;
  if (has_bias) s->bias_desc = memory::desc({w[0]}, memory::data_type::f32, memory::format_tag::x);

  dnnl::post_ops ops;
  if (e.residual) {
    s->residual = true;
    ops.append_sum(1.0f);
  }
  AppendClampAndActivation(e, ops);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  UseThreads(ctx.num_threads);
  auto make_desc = [&](dnnl::algorithm algorithm, const memory::desc& src,
                       const memory::desc& dst) {
    return has_bias ? dnnl::convolution_forward::desc(
                          dnnl::prop_kind::forward_inference, algorithm, src, weights_any,
                          s->bias_desc, dst, ToDims(stride), dil, pad_l, pad_r)
                    : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                      algorithm, src, weights_any, dst,
                                                      ToDims(stride), dil, pad_l, pad_r);
  };
  dnnl::convolution_forward::primitive_desc pd;
  // Winograd F(4x4, 3x3) for a 3x3 stride-1 float32 convolution, where oneDNN
  // has it (AVX-512; channels in blocks of 16): 2.25x fewer multiplies, 25-45%
  // off each 3x3 convolution of a ResNet (batch 1 and 8, 64-512 channels),
  // reorders to and from its blocked layout included. Its outputs differ from
  // the direct algorithm's by 0.7-2.4e-6 of their largest value at those
  // shapes: a change of summation order's size, inside every tolerance of the
  // verified import. Precision::kFp32Direct (`"precision": "fp32_direct"`)
  // keeps the direct algorithm. Not below 8x8 output pixels: there a 4x4
  // tile computes up to 30% padding (8x8 for ResNet's 7x7) and the
  // transformed weights (4x the plain ones: 38 MB for 512 channels) cost more
  // memory than the ~1% of the model's time they save (resnet18 and resnet50,
  // batch 1 and 8: -73 MB resident, 0-3% slower).
  constexpr int64_t kWinogradMinPixels = 64;
  if (groups == 1 && ctx.precision == Precision::kFp32 && w[2] == 3 && w[3] == 3 &&
      stride == std::vector<int64_t>{1, 1} && dilation == std::vector<int64_t>{1, 1} &&
      out[2] * out[3] >= kWinogradMinPixels) {
    const memory::desc any_src(ToDims(x), memory::data_type::f32, memory::format_tag::any);
    const memory::desc any_dst(ToDims(out), memory::data_type::f32, memory::format_tag::any);
    try {
      pd = dnnl::convolution_forward::primitive_desc(
          make_desc(dnnl::algorithm::convolution_winograd, any_src, any_dst), attr, Engine());
      s->blocked_dst = true;
      s->src = pd.src_desc();
      s->conv_dst = pd.dst_desc();
    } catch (const dnnl::error&) {
      // Not this shape or CPU: the direct algorithm below.
    }
  }
  if (!s->blocked_dst) {
    try {
      pd = dnnl::convolution_forward::primitive_desc(
          make_desc(dnnl::algorithm::convolution_direct, s->src, s->dst), attr, Engine());
    } catch (const dnnl::error& e) {
      return Unimplemented(node, "oneDNN has no convolution for this shape: ", e.what());
    }
  }

  // Weights, once: from PyTorch's [O, I/g, kH, kW] into the chosen format.
  const memory::desc plain_weights(wdims, memory::data_type::f32,
                                   groups == 1 ? memory::format_tag::oihw
                                               : memory::format_tag::goihw);
  // Shared with the model's plans for other batch sizes that pick the same
  // format (Winograd's transformed weights are 4x the plain ones).
  WeightTransform transform;
  if (e.scale != nullptr) {
    transform.name = "scale-output-channels";
    transform.variant = absl::string_view(static_cast<const char*>(e.scale->raw_data()),
                                          e.scale->byte_size());
    transform.make = std::move(fold_weights);
  }
  s->weights = PrepackedWeights(weights.raw_data(), plain_weights, pd.weights_desc(), transform,
                                ctx.packed_weights);

  WorkspaceLayout ws;
  s->plain_src = ImageDesc(x, ctx.inputs[0].layout);
  if (s->plain_src != s->src) {
    s->reorder_src = true;
    s->src_reorder = PrimitiveCall::Reorder(s->plain_src, s->src);
    s->src_offset = ws.Add(s->src.get_size());
  }
  if (s->blocked_dst) {
    s->dst_offset = ws.Add(s->conv_dst.get_size());
    s->dst_out = PrimitiveCall::Reorder(s->conv_dst, s->dst);
    if (s->residual) s->dst_in = PrimitiveCall::Reorder(s->dst, s->conv_dst);
  }
  s->scratch = pd.scratchpad_desc();
  s->scratch_offset = ws.Add(s->scratch.get_size());
  std::vector<PrimitiveCall::Arg> args = {
      {DNNL_ARG_SRC, s->src},
      {DNNL_ARG_DST, s->blocked_dst ? s->conv_dst : s->dst},
      {DNNL_ARG_SCRATCHPAD, s->scratch},
      {DNNL_ARG_WEIGHTS, s->weights->get_desc(), s->weights->get_data_handle()}};
  if (has_bias) args.push_back({DNNL_ARG_BIAS, s->bias_desc, s->bias});
  s->conv = PrimitiveCall(dnnl::convolution_forward(pd), std::move(args));
  SetNhwcOutput(ctx, out, std::move(s), ws.total());
  return absl::OkStatus();
}

absl::Status EvalConv(EvalContext& ctx) {
  const auto& s = *static_cast<const ConvState*>(ctx.state);
  UseThreads(ctx.num_threads);
  dnnl::stream& stream = Stream();
  const void* src = ctx.inputs[0]->raw_data();
  if (s.reorder_src) {
    void* converted = At(ctx.workspace, s.src_offset);
    s.src_reorder.Execute(stream, {src, converted});
    src = converted;
  }
  void* out = ctx.outputs[0]->raw_data();
  void* dst = out;
  if (s.blocked_dst) {
    dst = At(ctx.workspace, s.dst_offset);
    if (s.residual) s.dst_in.Execute(stream, {ctx.inputs[3]->raw_data(), dst});
  } else if (s.residual && ctx.inputs[3]->raw_data() != out) {
    std::memcpy(out, ctx.inputs[3]->raw_data(), ctx.outputs[0]->byte_size());
  }
  s.conv.Execute(stream, {src, dst, At(ctx.workspace, s.scratch_offset)});
  if (s.blocked_dst) s.dst_out.Execute(stream, {dst, out});
  stream.wait();
  return absl::OkStatus();
}

}  // namespace

KernelDef ConvKernel() {
  KernelDef k{ir::OpKind::kConv, DType::kF32, PrepareConv, EvalConv};
  k.provider = Provider::kOneDnn;
  k.supports = SupportsConv;
  k.takes_layouts = true;
  k.output0_may_reuse_input = 3;  // the residual
  k.name = "onednn.conv";
  return k;
}

}  // namespace kiln::kernels::onednn
