// Linear (x[..., K] * W[N, K]^T + b[N]) and batched MatMul in FP32 on
// oneDNN's matmul.
//
// MatMul: two operands of the same rank, 3 or 4 ([..., M, K] x [..., K, N]),
// whose batch dims agree or are 1 (broadcast), as attention's QK^T and
// scores x V are: one primitive over every batch, where Kiln's own kernel
// runs one GEMM per batch (twelve small parallel regions per attention
// layer). Other ranks and mixes run natively.
//
// Takes a plain input of any rank (its leading dims fold into M), a constant
// weight and an optional constant bias. The weight is reordered once, in
// Prepare, into the blocked format oneDNN picks for this M, K, N and CPU, and
// the plan keeps that copy (shared with the model's plans for other batch
// sizes when the format is the same: PrepackedWeights): no per-request
// packing, and no transposed-operand GEMM. A fused Relu/Clip and activation (Gelu, Silu, ...: the
// fuse_conv_epilogue pass) run as eltwise post-ops on each output block while
// it is in cache. Under Precision::kBf16 (a model's opt-in) input and weights
// are bfloat16, accumulation and output float32. Shapes and errors are the native kernel's: its Prepare runs
// first on the same operands.
#include <memory>

#include "engine/common/status_macros.h"
#include "engine/kernels/conv_epilogue.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/onednn/onednn.h"
#include "engine/kernels/onednn/onednn_kernels.h"

namespace kiln::kernels::onednn {
namespace {

using dnnl::memory;

struct LinearState {
  PrimitiveCall matmul;  // source, destination, scratchpad given per call
  memory::desc src, dst, bias_desc, scratch;
  std::shared_ptr<const memory> weights;  // reordered once, shared by the model's plans
  const void* bias = nullptr;  // the node's constant
  // Under Precision::kBf16: the float32 input, converted into the workspace
  // at `src_offset` (as `src`) per call.
  bool convert_src = false;
  memory::desc given_src;
  PrimitiveCall src_reorder;
  size_t src_offset = 0, scratch_offset = 0;
};

bool SupportsLinear(const PrepareContext& ctx) {
  if (!ctx.allow_layouts || ctx.inputs.size() < 2) return false;
  const TensorInfo& x = ctx.inputs[0];
  const TensorInfo& w = ctx.inputs[1];
  if (x.dtype != DType::kF32 || x.dims.empty() || NumElements(x.dims) == 0 ||
      w.constant == nullptr || w.dtype != DType::kF32 || w.dims.size() != 2 ||
      NumElements(w.dims) == 0) {
    return false;
  }
  if (ctx.inputs.size() > 2 && ctx.inputs[2].present &&
      (ctx.inputs[2].constant == nullptr || ctx.inputs[2].dtype != DType::kF32)) {
    return false;
  }
  return !ctx.node.attrs.Has(kAccumulateAttr);
}

absl::Status PrepareLinear(PrepareContext& ctx) {
  ASSIGN_OR_RETURN(const Dims out, NativeOutputDims(ctx));
  const Dims& w = ctx.inputs[1].dims;
  const int64_t n = w[0], k = w[1];
  const int64_t m = NumElements(ctx.inputs[0].dims) / k;

  auto s = std::make_shared<LinearState>();
  // Under Precision::kBf16 input and weights are bfloat16; bias, output,
  // post-ops and accumulation stay float32.
  const memory::data_type operand = OperandType(ctx.precision);
  s->src = memory::desc({m, k}, operand, memory::format_tag::ab);
  s->dst = memory::desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc weights_any({k, n}, operand, memory::format_tag::any);
  const bool has_bias = ctx.inputs.size() > 2 && ctx.inputs[2].present;
  if (has_bias) {
    s->bias = ctx.inputs[2].constant->raw_data();
    s->bias_desc = memory::desc({1, n}, memory::data_type::f32, memory::format_tag::ab);
  }
  ASSIGN_OR_RETURN(const ConvEpilogue e, ConvEpilogueFromAttrs(ctx.node, DType::kF32, n));
  dnnl::post_ops ops;
  AppendClampAndActivation(e, ops);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  UseThreads(ctx.num_threads);
  const auto desc = has_bias ? dnnl::matmul::desc(s->src, weights_any, s->bias_desc, s->dst)
                             : dnnl::matmul::desc(s->src, weights_any, s->dst);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(desc, attr, Engine());
  } catch (const dnnl::error& err) {
    return Unimplemented(ctx.node, "oneDNN has no matmul for this shape: ", err.what());
  }

  // Weights, once: PyTorch's [N, K] row-major is the [K, N] matrix in "ba".
  const memory::desc given_desc({k, n}, memory::data_type::f32, memory::format_tag::ba);
  s->weights = PrepackedWeights(ctx.inputs[1].constant->raw_data(), given_desc, pd.weights_desc(),
                                /*transform=*/{}, ctx.packed_weights);

  WorkspaceLayout ws;
  if (operand != memory::data_type::f32) {
    s->convert_src = true;
    s->given_src = memory::desc({m, k}, memory::data_type::f32, memory::format_tag::ab);
    s->src_reorder = PrimitiveCall::Reorder(s->given_src, s->src);
    s->src_offset = ws.Add(s->src.get_size());
  }
  s->scratch = pd.scratchpad_desc();
  s->scratch_offset = ws.Add(s->scratch.get_size());
  std::vector<PrimitiveCall::Arg> args = {
      {DNNL_ARG_SRC, s->src},
      {DNNL_ARG_DST, s->dst},
      {DNNL_ARG_SCRATCHPAD, s->scratch},
      {DNNL_ARG_WEIGHTS, s->weights->get_desc(), s->weights->get_data_handle()}};
  if (s->bias != nullptr) args.push_back({DNNL_ARG_BIAS, s->bias_desc, s->bias});
  s->matmul = PrimitiveCall(dnnl::matmul(pd), std::move(args));
  ctx.workspace_bytes = ws.total();
  ctx.outputs = {TensorInfo{DType::kF32, out}};
  ctx.state = std::move(s);
  return absl::OkStatus();
}

absl::Status EvalLinear(EvalContext& ctx) {
  const auto& s = *static_cast<const LinearState*>(ctx.state);
  UseThreads(ctx.num_threads);
  dnnl::stream& stream = Stream();
  const void* src = ctx.inputs[0]->raw_data();
  if (s.convert_src) {
    void* converted = At(ctx.workspace, s.src_offset);
    s.src_reorder.Execute(stream, {src, converted});
    src = converted;
  }
  s.matmul.Execute(stream,
                   {src, ctx.outputs[0]->raw_data(), At(ctx.workspace, s.scratch_offset)});
  stream.wait();
  return absl::OkStatus();
}

// ---------------------------------------------------------------- MatMul

struct MatMulState {
  PrimitiveCall matmul;  // a, b, c, scratchpad
  memory::desc a, b, c, scratch;
};

memory::format_tag PlainTag(size_t rank) {
  return rank == 3 ? memory::format_tag::abc : memory::format_tag::abcd;
}

bool SupportsMatMul(const PrepareContext& ctx) {
  if (!ctx.allow_layouts || ctx.inputs.size() != 2) return false;
  const TensorInfo& a = ctx.inputs[0];
  const TensorInfo& b = ctx.inputs[1];
  if (a.dtype != DType::kF32 || b.dtype != DType::kF32 || a.dims.size() != b.dims.size() ||
      (a.dims.size() != 3 && a.dims.size() != 4) || NumElements(a.dims) == 0 ||
      NumElements(b.dims) == 0) {
    return false;
  }
  for (size_t d = 0; d + 2 < a.dims.size(); ++d) {
    if (a.dims[d] != b.dims[d] && a.dims[d] != 1 && b.dims[d] != 1) return false;
  }
  return !ctx.node.attrs.Has(kAccumulateAttr);
}

absl::Status PrepareMatMul(PrepareContext& ctx) {
  ASSIGN_OR_RETURN(const Dims out, NativeOutputDims(ctx));
  const Dims& a = ctx.inputs[0].dims;
  const Dims& b = ctx.inputs[1].dims;
  auto s = std::make_shared<MatMulState>();
  const memory::format_tag tag = PlainTag(a.size());
  s->a = memory::desc(ToDims(a), memory::data_type::f32, tag);
  s->b = memory::desc(ToDims(b), memory::data_type::f32, tag);
  s->c = memory::desc(ToDims(out), memory::data_type::f32, tag);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  UseThreads(ctx.num_threads);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(s->a, s->b, s->c), attr, Engine());
  } catch (const dnnl::error& err) {
    return Unimplemented(ctx.node, "oneDNN has no matmul for these shapes: ", err.what());
  }
  s->scratch = pd.scratchpad_desc();
  s->matmul = PrimitiveCall(dnnl::matmul(pd), {{DNNL_ARG_SRC, s->a},
                                               {DNNL_ARG_WEIGHTS, s->b},
                                               {DNNL_ARG_DST, s->c},
                                               {DNNL_ARG_SCRATCHPAD, s->scratch}});
  ctx.workspace_bytes = s->scratch.get_size();
  ctx.outputs = {TensorInfo{DType::kF32, out}};
  ctx.state = std::move(s);
  return absl::OkStatus();
}

absl::Status EvalMatMul(EvalContext& ctx) {
  const auto& s = *static_cast<const MatMulState*>(ctx.state);
  UseThreads(ctx.num_threads);
  dnnl::stream& stream = Stream();
  s.matmul.Execute(stream, {ctx.inputs[0]->raw_data(), ctx.inputs[1]->raw_data(),
                            ctx.outputs[0]->raw_data(), ctx.workspace});
  stream.wait();
  return absl::OkStatus();
}

}  // namespace

KernelDef MatMulKernel() {
  KernelDef k{ir::OpKind::kMatMul, DType::kF32, PrepareMatMul, EvalMatMul};
  k.provider = Provider::kOneDnn;
  k.supports = SupportsMatMul;
  k.name = "onednn.matmul";
  return k;
}

KernelDef LinearKernel() {
  KernelDef k{ir::OpKind::kLinear, DType::kF32, PrepareLinear, EvalLinear};
  k.provider = Provider::kOneDnn;
  k.supports = SupportsLinear;
  k.name = "onednn.linear";
  return k;
}

}  // namespace kiln::kernels::onednn
