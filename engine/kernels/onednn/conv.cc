// 2-D FP32 convolution on oneDNN (regular, grouped and depthwise), in NHWC.
//
// Takes a batched 4-D input in NCHW (the first convolution of a network: it
// reorders the input into the workspace first) or NHWC, constant weights and
// bias, and writes its output in NHWC. The weights are reordered once, in
// Prepare, into the blocked format oneDNN picks for this shape and CPU, and
// the plan keeps that copy. Under Precision::kBf16 (a model's opt-in) source
// and weights are bfloat16, accumulation and output float32. The epilogue the fuse_conv_epilogue pass wrote
// (a batch norm's per-channel scale and shift, a Relu/Clip clamp) runs as
// post-ops on each output block while it is in cache: a binary multiply and
// add by per-channel tensors, then an eltwise clip, the unfused ops'
// arithmetic in their order; a fused residual Add (input 3, NHWC like the
// output) is a binary add of the whole tensor between the two. Shapes and attribute errors are the native
// kernel's: its Prepare runs first on the same operands, so a convolution
// either runs here with the same output dims or not at all.
#include <cmath>
#include <limits>
#include <memory>

#include "engine/common/mapped_file.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/conv_epilogue.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/onednn/onednn.h"
#include "engine/kernels/onednn/onednn_kernels.h"

namespace kiln::kernels::onednn {
namespace {

using dnnl::memory;

struct ConvState {
  dnnl::convolution_forward conv;
  memory::desc src, dst;
  memory weights;                       // reordered once, owned here
  const void* bias = nullptr;           // the node's constant
  memory::desc bias_desc;
  std::vector<std::pair<int, const void*>> post_args;  // binary post-op operands
  std::vector<memory::desc> post_descs;
  int residual_post_op = -1;            // index of the residual's binary add
  // An NCHW input, or any input under Precision::kBf16: converted into the
  // workspace at `src_offset` (as `src`) first.
  bool reorder_src = false;
  dnnl::reorder src_reorder;
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
  const bool has_bias = ctx.inputs.size() > 2 && ctx.inputs[2].present;
  if (has_bias) {
    s->bias = ctx.inputs[2].constant->raw_data();
    s->bias_desc = memory::desc({w[0]}, memory::data_type::f32, memory::format_tag::x);
  }

  // The epilogue as Kiln's kernel reads it (conv_epilogue.h), as post-ops.
  ASSIGN_OR_RETURN(const ConvEpilogue e, ConvEpilogueFromAttrs(node, DType::kF32, w[0]));
  dnnl::post_ops ops;
  if (e.scale != nullptr) {
    const memory::desc per_channel({1, w[0], 1, 1}, memory::data_type::f32,
                                   memory::format_tag::nchw);
    ops.append_binary(dnnl::algorithm::binary_mul, per_channel);
    ops.append_binary(dnnl::algorithm::binary_add, per_channel);
    s->post_args = {{0, e.scale->raw_data()}, {1, e.shift->raw_data()}};
    s->post_descs = {per_channel, per_channel};
  }
  if (e.residual) {
    s->residual_post_op = ops.len();
    ops.append_binary(dnnl::algorithm::binary_add, s->dst);
  }
  AppendClampAndActivation(e, ops);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  UseThreads(ctx.num_threads);
  const auto desc = has_bias
      ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, s->src, weights_any,
                                        s->bias_desc, s->dst, ToDims(stride), dil, pad_l, pad_r)
      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, s->src, weights_any,
                                        s->dst, ToDims(stride), dil, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd;
  try {
    pd = dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
  } catch (const dnnl::error& e) {
    return Unimplemented(node, "oneDNN has no convolution for this shape: ", e.what());
  }
  s->conv = dnnl::convolution_forward(pd);

  // Weights, once: from PyTorch's [O, I/g, kH, kW] into the chosen format.
  const memory::desc plain_weights(wdims, memory::data_type::f32,
                                   groups == 1 ? memory::format_tag::oihw
                                               : memory::format_tag::goihw);
  s->weights = memory(pd.weights_desc(), Engine());
  memory given = Wrap(plain_weights, ctx.inputs[1].constant->raw_data());
  dnnl::reorder(given, s->weights).execute(Stream(), given, s->weights);
  Stream().wait();
  // The plan runs the reordered copy; a mapped original's pages go back.
  ReleaseResidentPages(ctx.inputs[1].constant->raw_data(), ctx.inputs[1].constant->byte_size());

  WorkspaceLayout ws;
  if (ctx.inputs[0].layout != ir::Layout::kNHWC || operand != memory::data_type::f32) {
    s->reorder_src = true;
    s->plain_src = ImageDesc(x, ctx.inputs[0].layout);
    s->src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
        Engine(), s->plain_src, Engine(), s->src));
    s->src_offset = ws.Add(s->src.get_size());
  }
  s->scratch = pd.scratchpad_desc();
  s->scratch_offset = ws.Add(s->scratch.get_size());
  SetNhwcOutput(ctx, out, std::move(s), ws.total());
  return absl::OkStatus();
}

absl::Status EvalConv(EvalContext& ctx) {
  const auto& s = *static_cast<const ConvState*>(ctx.state);
  UseThreads(ctx.num_threads);
  dnnl::stream& stream = Stream();
  memory src = Wrap(s.src, ctx.inputs[0]->raw_data());
  if (s.reorder_src) {
    memory plain = Wrap(s.plain_src, ctx.inputs[0]->raw_data());
    src = Wrap(s.src, At(ctx.workspace, s.src_offset));
    s.src_reorder.execute(stream, plain, src);
  }
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src},
      {DNNL_ARG_WEIGHTS, s.weights},
      {DNNL_ARG_DST, Wrap(s.dst, ctx.outputs[0]->raw_data())},
      {DNNL_ARG_SCRATCHPAD, Wrap(s.scratch, At(ctx.workspace, s.scratch_offset))}};
  if (s.bias != nullptr) args.emplace(DNNL_ARG_BIAS, Wrap(s.bias_desc, s.bias));
  for (size_t i = 0; i < s.post_args.size(); ++i) {
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(s.post_args[i].first) | DNNL_ARG_SRC_1,
                 Wrap(s.post_descs[i], s.post_args[i].second));
  }
  if (s.residual_post_op >= 0) {
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(s.residual_post_op) | DNNL_ARG_SRC_1,
                 Wrap(s.dst, ctx.inputs[3]->raw_data()));
  }
  s.conv.execute(stream, args);
  stream.wait();
  return absl::OkStatus();
}

}  // namespace

KernelDef ConvKernel() {
  KernelDef k{ir::OpKind::kConv, DType::kF32, PrepareConv, EvalConv};
  k.provider = Provider::kOneDnn;
  k.supports = SupportsConv;
  k.takes_layouts = true;
  k.name = "onednn.conv";
  return k;
}

}  // namespace kiln::kernels::onednn
