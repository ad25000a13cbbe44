// Linear (x[..., K] * W[N, K]^T + b[N]) in FP32 on oneDNN's matmul.
//
// Takes a plain input of any rank (its leading dims fold into M), a constant
// weight and an optional constant bias. The weight is reordered once, in
// Prepare, into the blocked format oneDNN picks for this M, K, N and CPU, and
// the plan keeps that copy: no per-request packing, and no transposed-operand
// GEMM. A fused Relu/Clip and activation (Gelu, Silu, ...: the
// fuse_conv_epilogue pass) run as eltwise post-ops on each output block while
// it is in cache. Shapes and errors are the native kernel's: its Prepare runs
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
  dnnl::matmul matmul;
  memory::desc src, dst, bias_desc, scratch;
  memory weights;  // reordered once, owned here
  const void* bias = nullptr;  // the node's constant
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
  s->src = memory::desc({m, k}, memory::data_type::f32, memory::format_tag::ab);
  s->dst = memory::desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc weights_any({k, n}, memory::data_type::f32, memory::format_tag::any);
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
  s->matmul = dnnl::matmul(pd);

  // Weights, once: PyTorch's [N, K] row-major is the [K, N] matrix in "ba".
  const memory::desc given_desc({k, n}, memory::data_type::f32, memory::format_tag::ba);
  s->weights = memory(pd.weights_desc(), Engine());
  memory given = Wrap(given_desc, ctx.inputs[1].constant->raw_data());
  dnnl::reorder(given, s->weights).execute(Stream(), given, s->weights);
  Stream().wait();

  s->scratch = pd.scratchpad_desc();
  ctx.workspace_bytes = s->scratch.get_size();
  ctx.outputs = {TensorInfo{DType::kF32, out}};
  ctx.state = std::move(s);
  return absl::OkStatus();
}

absl::Status EvalLinear(EvalContext& ctx) {
  const auto& s = *static_cast<const LinearState*>(ctx.state);
  UseThreads(ctx.num_threads);
  dnnl::stream& stream = Stream();
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, Wrap(s.src, ctx.inputs[0]->raw_data())},
      {DNNL_ARG_WEIGHTS, s.weights},
      {DNNL_ARG_DST, Wrap(s.dst, ctx.outputs[0]->raw_data())},
      {DNNL_ARG_SCRATCHPAD, Wrap(s.scratch, ctx.workspace)}};
  if (s.bias != nullptr) args.emplace(DNNL_ARG_BIAS, Wrap(s.bias_desc, s.bias));
  s.matmul.execute(stream, args);
  stream.wait();
  return absl::OkStatus();
}

}  // namespace

KernelDef LinearKernel() {
  KernelDef k{ir::OpKind::kLinear, DType::kF32, PrepareLinear, EvalLinear};
  k.provider = Provider::kOneDnn;
  k.supports = SupportsLinear;
  k.name = "onednn.linear";
  return k;
}

}  // namespace kiln::kernels::onednn
