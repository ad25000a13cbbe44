// Softmax, LogSoftmax and LayerNorm in FP32 on oneDNN: vectorised exp and
// row statistics, one pass per row where Kiln's own kernels call expf per
// element. The tensor is viewed as [outer, axis, inner] (softmax) or
// [rows, normalized] (layer norm), in plain layout. Shapes and errors are the
// native kernel's: its Prepare runs first.
#include <memory>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/onednn/onednn.h"
#include "engine/kernels/onednn/onednn_kernels.h"
#include "engine/kernels/safe_softmax.h"

namespace kiln::kernels::onednn {
namespace {

using dnnl::memory;

struct NormState {
  PrimitiveCall primitive;  // softmax: source, destination, scratchpad; layer norm: below
  memory::desc data, stats, scale_shift;
  bool layer_norm = false, has_weight = false, has_bias = false;
  size_t mean_offset = 0, var_offset = 0, ones_offset = 0, zeros_offset = 0, scratch_offset = 0;
  int64_t cols = 0;
  int64_t outer = 0, len = 0, inner = 0;  // softmax: the input as [outer, len, inner]
  memory::desc scratch;
};

bool SupportsPlainF32(const PrepareContext& ctx) {
  return ctx.allow_layouts && ctx.inputs[0].dtype == DType::kF32 &&
         NumElements(ctx.inputs[0].dims) > 0;
}

// An axis of length 1 (a 0-dim tensor's too) is Kiln's own kernel's: its
// answer is exactly 1 (log: 0), which oneDNN's misses by an ulp.
bool SupportsSoftmax(const PrepareContext& ctx) {
  if (!SupportsPlainF32(ctx)) return false;
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = ctx.node.attrs.GetInt("axis", -1);
  if (rank == 0) return false;
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank && x[axis] > 1;
}

absl::Status PrepareSoftmax(PrepareContext& ctx) {
  RETURN_IF_ERROR(NativeOutputDims(ctx).status());
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(const int64_t axis,
                   NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", -1), rank == 0 ? 1 : rank));
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    (d < axis ? outer : d == axis ? len : inner) *= x[d];
  }
  auto s = std::make_shared<NormState>();
  s->outer = outer;
  s->len = len;
  s->inner = inner;
  s->data = memory::desc({outer, len, inner}, memory::data_type::f32, memory::format_tag::abc);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  UseThreads(ctx.num_threads);
  dnnl::primitive primitive;
  try {
    if (ctx.node.kind == ir::OpKind::kSoftmax) {
      const dnnl::softmax_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, s->data, 1}, attr, Engine());
      s->scratch = pd.scratchpad_desc();
      primitive = dnnl::softmax_forward(pd);
    } else {
      const dnnl::logsoftmax_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, s->data, 1}, attr, Engine());
      s->scratch = pd.scratchpad_desc();
      primitive = dnnl::logsoftmax_forward(pd);
    }
  } catch (const dnnl::error& e) {
    return Unimplemented(ctx.node, "oneDNN has no softmax for this shape: ", e.what());
  }
  s->primitive = PrimitiveCall(std::move(primitive), {{DNNL_ARG_SRC, s->data},
                                                      {DNNL_ARG_DST, s->data},
                                                      {DNNL_ARG_SCRATCHPAD, s->scratch}});
  ctx.workspace_bytes = s->scratch.get_size();
  ctx.outputs = {TensorInfo{DType::kF32, x}};
  ctx.state = std::move(s);
  return absl::OkStatus();
}

absl::Status EvalSoftmax(EvalContext& ctx) {
  const auto& s = *static_cast<const NormState*>(ctx.state);
  UseThreads(ctx.num_threads);
  dnnl::stream& stream = Stream();
  s.primitive.Execute(stream, {ctx.inputs[0]->raw_data(), ctx.outputs[0]->raw_data(), ctx.workspace});
  stream.wait();
  MatchNonFiniteSlices(ctx.inputs[0]->data<float>(), ctx.outputs[0]->data<float>(), s.outer, s.len,
                       s.inner, IsSafeSoftmax(ctx.node));
  return absl::OkStatus();
}

bool SupportsLayerNorm(const PrepareContext& ctx) {
  if (!SupportsPlainF32(ctx)) return false;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i].present && ctx.inputs[i].dtype != DType::kF32) return false;
  }
  return true;
}

// oneDNN 2.6 takes the affine as one [2, C] scale-and-shift tensor: the
// workspace holds it, filled from the weight and bias (or ones and zeros).
absl::Status PrepareLayerNorm(PrepareContext& ctx) {
  RETURN_IF_ERROR(NativeOutputDims(ctx).status());
  const Dims& x = ctx.inputs[0].dims;
  const std::vector<int64_t> shape = ctx.node.attrs.GetInts("normalized_shape");
  const int64_t cols = NumElements(shape);
  const int64_t rows = NumElements(x) / cols;
  auto s = std::make_shared<NormState>();
  s->layer_norm = true;
  s->cols = cols;
  s->has_weight = ctx.inputs.size() > 1 && ctx.inputs[1].present;
  s->has_bias = ctx.inputs.size() > 2 && ctx.inputs[2].present;
  s->data = memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab);
  const float eps = static_cast<float>(ctx.node.attrs.GetFloat("eps", 1e-5));
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  UseThreads(ctx.num_threads);
  try {
    const dnnl::layer_normalization_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, s->data, eps,
         dnnl::normalization_flags::use_scale_shift},
        attr, Engine());
    s->stats = pd.mean_desc();
    s->scale_shift = pd.weights_desc();
    s->scratch = pd.scratchpad_desc();
    s->primitive = PrimitiveCall(dnnl::layer_normalization_forward(pd),
                                 {{DNNL_ARG_SRC, s->data},
                                  {DNNL_ARG_DST, s->data},
                                  {DNNL_ARG_MEAN, s->stats},
                                  {DNNL_ARG_VARIANCE, s->stats},
                                  {DNNL_ARG_SCALE_SHIFT, s->scale_shift},
                                  {DNNL_ARG_SCRATCHPAD, s->scratch}});
  } catch (const dnnl::error& e) {
    return Unimplemented(ctx.node, "oneDNN has no layer norm for this shape: ", e.what());
  }
  WorkspaceLayout ws;
  s->mean_offset = ws.Add(s->stats.get_size());
  s->var_offset = ws.Add(s->stats.get_size());
  s->ones_offset = ws.Add(s->scale_shift.get_size());
  s->scratch_offset = ws.Add(s->scratch.get_size());
  ctx.workspace_bytes = ws.total();
  ctx.outputs = {TensorInfo{DType::kF32, x}};
  ctx.state = std::move(s);
  return absl::OkStatus();
}

absl::Status EvalLayerNorm(EvalContext& ctx) {
  const auto& s = *static_cast<const NormState*>(ctx.state);
  float* scale_shift = static_cast<float*>(At(ctx.workspace, s.ones_offset));
  for (int64_t c = 0; c < s.cols; ++c) {
    scale_shift[c] = s.has_weight ? ctx.inputs[1]->data<float>()[c] : 1.0f;
    scale_shift[s.cols + c] = s.has_bias ? ctx.inputs[2]->data<float>()[c] : 0.0f;
  }
  UseThreads(ctx.num_threads);
  dnnl::stream& stream = Stream();
  s.primitive.Execute(stream, {ctx.inputs[0]->raw_data(), ctx.outputs[0]->raw_data(),
                               At(ctx.workspace, s.mean_offset), At(ctx.workspace, s.var_offset),
                               scale_shift, At(ctx.workspace, s.scratch_offset)});
  stream.wait();
  return absl::OkStatus();
}

KernelDef Provided(ir::OpKind op, PrepareFn prepare, EvalFn eval, SupportsFn supports,
                   const char* name) {
  KernelDef k{op, DType::kF32, prepare, eval};
  k.provider = Provider::kOneDnn;
  k.supports = supports;
  k.name = name;
  return k;
}

}  // namespace

std::vector<KernelDef> NormKernels() {
  return {Provided(ir::OpKind::kSoftmax, PrepareSoftmax, EvalSoftmax, SupportsSoftmax,
                   "onednn.softmax"),
          Provided(ir::OpKind::kLogSoftmax, PrepareSoftmax, EvalSoftmax, SupportsSoftmax,
                   "onednn.logsoftmax"),
          Provided(ir::OpKind::kLayerNorm, PrepareLayerNorm, EvalLayerNorm, SupportsLayerNorm,
                   "onednn.layer_norm")};
}

}  // namespace kiln::kernels::onednn
