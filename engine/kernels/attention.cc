// MultiHeadAttention: PyTorch's fused aten::_native_multi_head_attention (what
// nn.MultiheadAttention and the transformer layers of vit_b_16 become after
// freezing), in float32 or float64 (one table row each, computed in that type
// throughout, as PyTorch does).
//
// Inputs q [B, L, E], k and v [B, S, E], in_proj_w [3E, E], out_w [E, E],
// optional in_proj_b [3E], out_b [E] and mask (BOOL, true = masked out:
// attr mask_type 1 makes it a key padding mask [B, S], otherwise it
// broadcasts against [B, H, L, S] from the right). The steps follow
// PyTorch's native implementation: project q, k, v with one GEMM each, add
// the biases and divide q by sqrt(E / H); per (batch, head) one GEMM for the
// scores, a row softmax (masked entries excluded; a fully masked row gives
// zeros), one GEMM into the concatenated heads; then the output projection.
// Heads are read in place from the projected rows (leading dim E), so no
// reshuffling copy is made. With need_weights the second output holds the
// attention weights, averaged over heads when average_weights is set;
// otherwise it is empty ([0]).
//
// ScaledDotProductAttention (op_kinds.def says what it computes): Kiln's own
// kernel runs the ops the node stands for one after another, each through the
// kernel it would have had unfused (PrepareKernel on a node of its own):
// transpositions, MatMul, Div/Mul by the scale, Add of the mask, Softmax,
// MatMul. So it takes every shape and broadcast the unfused ops take, with
// their numbers and their errors; intermediates live in the workspace. FP16
// and BF16 operands compute in FP32 and round once at the end, as PyTorch's
// fused attention does. The oneDNN provider's kernel (onednn/attention.cc) is the fast
// path for float32: row tiles, never the whole score matrix.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/gemm.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

enum Input { kQ = 0, kK, kV, kInW, kOutW, kInB, kOutB, kMask };

struct AttentionPlan {
  int64_t b = 1, l = 1, s = 1, e = 1, heads = 1, d = 1;
  bool need_weights = false, average = true;
  bool has_in_bias = false, has_out_bias = false;
  bool has_mask = false, key_padding = false;
  std::vector<int64_t> mask_strides;  // over [B, H, L, S], 0 where broadcast
  // Workspace layout (elements of the input dtype).
  size_t q_off = 0, k_off = 0, v_off = 0, scores_off = 0, concat_off = 0;
};

absl::Status PrepareAttention(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 5, 8));
  const DType t = ctx.inputs[kQ].dtype;  // FP32, or FP64 (its own table row)
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, kQ, DType::kF32));
  for (size_t i : {kK, kV, kInW, kOutW}) RETURN_IF_ERROR(CheckDType(ctx, i, t));
  const Dims& q = ctx.inputs[kQ].dims;
  const Dims& k = ctx.inputs[kK].dims;
  const Dims& v = ctx.inputs[kV].dims;
  if (q.size() != 3 || k.size() != 3 || v.size() != 3 || k != v || q[0] != k[0] || q[2] != k[2]) {
    return InvalidArg(ctx.node, "expected query [B, L, E] and key, value [B, S, E], got ",
                      DimsToString(q), ", ", DimsToString(k), ", ", DimsToString(v));
  }
  auto p = std::make_shared<AttentionPlan>();
  p->b = q[0];
  p->l = q[1];
  p->s = k[1];
  p->e = q[2];
  p->heads = ctx.node.attrs.GetInt("num_heads", 1);
  if (p->heads < 1 || p->e % p->heads != 0) {
    return InvalidArg(ctx.node, "embedding dim ", p->e, " is not divisible by num_heads ",
                      p->heads);
  }
  p->d = p->e / p->heads;
  if (ctx.inputs[kInW].dims != Dims{3 * p->e, p->e} || ctx.inputs[kOutW].dims != Dims{p->e, p->e}) {
    return InvalidArg(ctx.node, "expected in_proj_weight [", 3 * p->e, ", ", p->e,
                      "] and out_proj.weight [", p->e, ", ", p->e, "], got ",
                      DimsToString(ctx.inputs[kInW].dims), " and ",
                      DimsToString(ctx.inputs[kOutW].dims));
  }
  if (HasInput(ctx, kInB)) {
    RETURN_IF_ERROR(CheckDType(ctx, kInB, t));
    if (ctx.inputs[kInB].dims != Dims{3 * p->e}) return InvalidArg(ctx.node, "bad in_proj_bias");
    p->has_in_bias = true;
  }
  if (HasInput(ctx, kOutB)) {
    RETURN_IF_ERROR(CheckDType(ctx, kOutB, t));
    if (ctx.inputs[kOutB].dims != Dims{p->e}) return InvalidArg(ctx.node, "bad out_proj.bias");
    p->has_out_bias = true;
  }
  if (HasInput(ctx, kMask)) {
    RETURN_IF_ERROR(CheckDType(ctx, kMask, DType::kBool));
    p->has_mask = true;
    Dims m = ctx.inputs[kMask].dims;
    p->key_padding = ctx.node.attrs.GetInt("mask_type", 0) == 1;
    if (p->key_padding) {
      if (m != Dims{p->b, p->s}) {
        return InvalidArg(ctx.node, "expected key padding mask [", p->b, ", ", p->s, "], got ",
                          DimsToString(m));
      }
      m = {p->b, 1, 1, p->s};
    }
    const Dims full = {p->b, p->heads, p->l, p->s};
    if (m.size() > 4) return InvalidArg(ctx.node, "mask has more than 4 dims");
    m.insert(m.begin(), 4 - m.size(), 1);
    p->mask_strides.assign(4, 0);
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      if (m[i] != 1 && m[i] != full[i]) {
        return InvalidArg(ctx.node, "mask ", DimsToString(ctx.inputs[kMask].dims),
                          " does not broadcast to ", DimsToString(full));
      }
      p->mask_strides[i] = m[i] == 1 ? 0 : stride;
      stride *= m[i];
    }
  }
  p->need_weights = ctx.node.attrs.GetBool("need_weights", false);
  p->average = ctx.node.attrs.GetBool("average_weights", true);
  size_t off = 0;
  auto take = [&](int64_t floats) {
    const size_t at = off;
    off += static_cast<size_t>((floats + 15) / 16 * 16);
    return at;
  };
  p->q_off = take(p->b * p->l * p->e);
  p->k_off = take(p->b * p->s * p->e);
  p->v_off = take(p->b * p->s * p->e);
  p->scores_off = take(p->l * p->s);
  p->concat_off = take(p->b * p->l * p->e);
  ctx.workspace_bytes = off * DTypeSize(t);
  Dims weights = {0};
  if (p->need_weights) {
    weights = p->average ? Dims{p->b, p->l, p->s} : Dims{p->b, p->heads, p->l, p->s};
  }
  ctx.outputs = {TensorInfo{t, q}, TensorInfo{t, weights}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// rows x [rows, E] @ w[E_out, E]^T + bias -> out [rows, E_out].
template <typename T>
void Project(int64_t rows, int64_t e_in, int64_t e_out, const T* x, const T* w, const T* bias,
             T* out) {
  if (bias != nullptr) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(out + r * e_out, bias, e_out * sizeof(T));
  }
  Xgemm<T>(false, true, rows, e_out, e_in, T(1), x, e_in, w, e_in, bias != nullptr ? T(1) : T(0),
           out, e_out);
}

template <typename T>
absl::Status EvalAttention(EvalContext& ctx) {
  const AttentionPlan& p = StateAs<AttentionPlan>(ctx);
  T* ws = static_cast<T*>(ctx.workspace);
  T* q = ws + p.q_off;
  T* k = ws + p.k_off;
  T* v = ws + p.v_off;
  T* scores = ws + p.scores_off;
  T* concat = ws + p.concat_off;
  const T* w_in = ctx.inputs[kInW]->data<T>();
  const T* b_in = p.has_in_bias ? ctx.inputs[kInB]->data<T>() : nullptr;
  const int64_t e = p.e;
  Project(p.b * p.l, e, e, ctx.inputs[kQ]->data<T>(), w_in, b_in, q);
  Project(p.b * p.s, e, e, ctx.inputs[kK]->data<T>(), w_in + e * e, b_in ? b_in + e : nullptr, k);
  Project(p.b * p.s, e, e, ctx.inputs[kV]->data<T>(), w_in + 2 * e * e,
          b_in ? b_in + 2 * e : nullptr, v);
  const T scale = T(1) / std::sqrt(static_cast<T>(p.d));
  for (int64_t i = 0; i < p.b * p.l * e; ++i) q[i] *= scale;

  const bool* mask = p.has_mask ? ctx.inputs[kMask]->data<bool>() : nullptr;
  T* weights = p.need_weights ? ctx.outputs[1]->data<T>() : nullptr;
  if (weights != nullptr && p.average) {
    std::fill(weights, weights + p.b * p.l * p.s, T(0));
  }
  for (int64_t b = 0; b < p.b; ++b) {
    for (int64_t h = 0; h < p.heads; ++h) {
      const T* qh = q + b * p.l * e + h * p.d;
      const T* kh = k + b * p.s * e + h * p.d;
      const T* vh = v + b * p.s * e + h * p.d;
      // scores[L, S] = q_h [L, D] k_h^T.
      Xgemm<T>(false, true, p.l, p.s, p.d, T(1), qh, e, kh, e, T(0), scores, p.s);
      for (int64_t i = 0; i < p.l; ++i) {
        T* row = scores + i * p.s;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < p.s; ++j) {
          if (mask != nullptr) {
            const int64_t mo = b * p.mask_strides[0] + h * p.mask_strides[1] +
                               i * p.mask_strides[2] + j * p.mask_strides[3];
            if (mask[mo]) row[j] = -std::numeric_limits<T>::infinity();
          }
          m = std::max(m, row[j]);
        }
        if (m == -std::numeric_limits<T>::infinity()) {
          std::fill(row, row + p.s, T(0));  // every key masked out
        } else {
          double sum = 0.0;
          for (int64_t j = 0; j < p.s; ++j) {
            row[j] = std::exp(row[j] - m);
            sum += row[j];
          }
          const T inv = static_cast<T>(1.0 / sum);
          for (int64_t j = 0; j < p.s; ++j) row[j] *= inv;
        }
        if (weights != nullptr) {
          if (p.average) {
            T* dst = weights + (b * p.l + i) * p.s;
            for (int64_t j = 0; j < p.s; ++j) dst[j] += row[j] / static_cast<T>(p.heads);
          } else {
            std::memcpy(weights + ((b * p.heads + h) * p.l + i) * p.s, row, p.s * sizeof(T));
          }
        }
      }
      // concat[:, h*D:(h+1)*D] = scores [L, S] v_h [S, D].
      Xgemm<T>(false, false, p.l, p.d, p.s, T(1), scores, p.s, vh, e, T(0),
               concat + b * p.l * e + h * p.d, e);
    }
  }
  Project(p.b * p.l, e, e, concat, ctx.inputs[kOutW]->data<T>(),
          p.has_out_bias ? ctx.inputs[kOutB]->data<T>() : nullptr, ctx.outputs[0]->data<T>());
  return absl::OkStatus();
}

// ---- ScaledDotProductAttention: the composite kernel ----

enum SdpaInput { kSdpaQ = 0, kSdpaK, kSdpaV, kSdpaMask, kSdpaScale, kSdpaInputs };
// Operand ids of a sub-step: node inputs are [0, kSdpaInputs), intermediates
// follow; kSdpaOutput is the node's output.
constexpr int kSdpaOutput = -1;

struct SdpaStep {
  ir::Node node;
  const KernelDef* kernel = nullptr;
  std::shared_ptr<void> state;
  std::vector<int> inputs;
  int output = kSdpaOutput;
  size_t workspace = 0;
};

struct SdpaTemp {
  TensorInfo info;
  size_t offset = 0;  // in the workspace
};

struct SdpaPlan {
  std::vector<SdpaStep> steps;
  std::vector<SdpaTemp> temps;        // operand id kSdpaInputs + i
  std::vector<std::unique_ptr<Tensor>> constants;  // the scale when it is an attribute
  std::vector<TensorInfo> infos;      // per operand id, while preparing
  size_t step_workspace = 0;          // offset of the steps' shared workspace
};

class SdpaBuilder {
 public:
  SdpaBuilder(PrepareContext& ctx, SdpaPlan& plan) : ctx_(ctx), plan_(plan) {
    plan_.steps.reserve(12);  // steps are referenced by address while preparing
    for (int i = 0; i < kSdpaInputs; ++i) {
      plan_.infos.push_back(i < static_cast<int>(ctx.inputs.size()) ? ctx.inputs[i] : TensorInfo{});
      if (i >= static_cast<int>(ctx.inputs.size())) plan_.infos.back().present = false;
    }
  }

  // Adds a step of `kind` on `inputs`; returns its output's operand id.
  absl::StatusOr<int> Step(ir::OpKind kind, std::vector<int> inputs, ir::Attributes attrs = {}) {
    SdpaStep& step = plan_.steps.emplace_back();
    step.node.kind = kind;
    step.node.attrs = std::move(attrs);
    step.node.source_op = ctx_.node.source_op;
    step.node.outputs = {0};
    PrepareContext sub{step.node};
    for (size_t i = 0; i < inputs.size(); ++i) {
      step.node.inputs.push_back(static_cast<ir::ValueId>(i));
      sub.inputs.push_back(plan_.infos[inputs[i]]);
    }
    sub.num_threads = ctx_.num_threads;
    sub.precision = ctx_.precision;
    ASSIGN_OR_RETURN(step.kernel, PrepareKernel(sub));
    if (sub.dynamic_outputs || sub.outputs.size() != 1 || step.kernel->aliases_input0) {
      return Unimplemented(ctx_.node, "the ", ir::OpName(kind),
                           " step of attention has no static kernel");
    }
    step.state = std::move(sub.state);
    step.workspace = sub.workspace_bytes;
    step.inputs = std::move(inputs);
    TensorInfo out = sub.outputs[0];
    out.constant = nullptr;
    out.scalar = false;
    plan_.infos.push_back(out);
    plan_.temps.push_back(SdpaTemp{out});
    step.output = static_cast<int>(plan_.infos.size()) - 1;
    return step.output;
  }

  // A step transposing `operand` by the node's attribute `attr` ([dim0, dim1]), if set.
  absl::StatusOr<int> Transposed(int operand, const char* attr) {
    if (!ctx_.node.attrs.Has(attr)) return operand;
    const std::vector<int64_t> dims = ctx_.node.attrs.GetInts(attr);
    if (dims.size() != 2) return InvalidArg(ctx_.node, attr, " must name two dims");
    return Transpose(operand, dims[0], dims[1]);
  }

  absl::StatusOr<int> Transpose(int operand, int64_t dim0, int64_t dim1) {
    ir::Attributes attrs;
    attrs.SetInt("dim0", dim0);
    attrs.SetInt("dim1", dim1);
    return Step(ir::OpKind::kPermute, {operand}, std::move(attrs));
  }

  // A constant number operand (a Python float).
  int Number(double value) {
    auto t = std::make_unique<Tensor>(Tensor::Zeros(DType::kF64, {}));
    t->data<double>()[0] = value;
    TensorInfo info{DType::kF64, {}, t.get()};
    info.scalar = true;
    plan_.constants.push_back(std::move(t));
    plan_.infos.push_back(info);
    plan_.temps.push_back(SdpaTemp{info});  // never written: the constant is used
    return static_cast<int>(plan_.infos.size()) - 1;
  }

  const TensorInfo& info(int operand) const { return plan_.infos[operand]; }

 private:
  PrepareContext& ctx_;
  SdpaPlan& plan_;
};

absl::Status PrepareSdpa(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 3, 5));
  const ir::Attributes& attrs = ctx.node.attrs;
  auto plan = std::make_shared<SdpaPlan>();
  SdpaBuilder b(ctx, *plan);
  ASSIGN_OR_RETURN(int q, b.Transposed(kSdpaQ, "q_perm"));
  ASSIGN_OR_RETURN(int k, b.Transposed(kSdpaK, "k_perm"));
  ASSIGN_OR_RETURN(int v, b.Transposed(kSdpaV, "v_perm"));
  ASSIGN_OR_RETURN(int kt, b.Transpose(k, -2, -1));
  const bool has_scale_input = HasInput(ctx, kSdpaScale);
  ir::OpKind scale_op = ir::OpKind::kMul;
  int scale = -1;
  if (has_scale_input) {
    const std::string op = attrs.GetString("scale_op", "mul");
    if (op != "mul" && op != "div") return InvalidArg(ctx.node, "scale_op must be mul or div");
    scale_op = op == "div" ? ir::OpKind::kDiv : ir::OpKind::kMul;
    scale = kSdpaScale;
  } else {
    double value = attrs.GetFloat("scale", 0.0);
    if (!attrs.Has("scale")) {
      const Dims& qd = b.info(q).dims;
      if (qd.empty()) return InvalidArg(ctx.node, "query must have at least one dim");
      value = 1.0 / std::sqrt(static_cast<double>(qd.back()));
    }
    scale = b.Number(value);
  }
  const bool on_query = attrs.GetString("scale_on", "scores") == "query";
  if (on_query) {
    ASSIGN_OR_RETURN(q, b.Step(scale_op, {q, scale}));
  }
  ASSIGN_OR_RETURN(int scores, b.Step(ir::OpKind::kMatMul, {q, kt}));
  if (!on_query) {
    ASSIGN_OR_RETURN(scores, b.Step(scale_op, {scores, scale}));
  }
  if (HasInput(ctx, kSdpaMask)) {
    int mask = kSdpaMask;
    if (ctx.inputs[kSdpaMask].dtype == DType::kBool && attrs.GetString("bool_mask") == "keep") {
      // aten::scaled_dot_product_attention's BOOL mask: true takes part.
      const int zero = b.Number(0.0), minus_inf = b.Number(-std::numeric_limits<double>::infinity());
      ASSIGN_OR_RETURN(mask, b.Step(ir::OpKind::kWhere, {mask, zero, minus_inf}));
    }
    ASSIGN_OR_RETURN(scores, b.Step(ir::OpKind::kAdd, {scores, mask}));
  }
  ir::Attributes softmax;
  softmax.SetInt("axis", -1);
  if (attrs.GetBool("safe", false)) softmax.SetBool("safe", true);  // kernels/safe_softmax.h
  ASSIGN_OR_RETURN(int probs, b.Step(ir::OpKind::kSoftmax, {scores}, std::move(softmax)));
  ASSIGN_OR_RETURN(int out, b.Step(ir::OpKind::kMatMul, {probs, v}));
  ASSIGN_OR_RETURN(out, b.Transposed(out, "out_perm"));

  // The last step writes the node's output; every other intermediate gets a
  // region of the workspace, then one region the steps share for their own.
  plan->steps.back().output = kSdpaOutput;
  size_t offset = 0;
  for (const SdpaStep& step : plan->steps) {
    if (step.output == kSdpaOutput) continue;
    SdpaTemp& temp = plan->temps[step.output - kSdpaInputs];
    temp.offset = offset;
    offset += (NumElements(temp.info.dims) * DTypeSize(temp.info.dtype) + 63) / 64 * 64;
  }
  plan->step_workspace = offset;
  size_t shared = 0;
  for (const SdpaStep& step : plan->steps) shared = std::max(shared, step.workspace);
  ctx.workspace_bytes = offset + shared;
  ctx.outputs = {b.info(out)};
  ctx.outputs[0].constant = nullptr;
  ctx.outputs[0].scalar = false;
  plan->infos.clear();
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status EvalSdpa(EvalContext& ctx) {
  const auto& plan = *static_cast<const SdpaPlan*>(ctx.state);
  char* ws = static_cast<char*>(ctx.workspace);
  std::vector<Tensor> temps;
  temps.reserve(plan.temps.size());
  for (size_t i = 0; i < plan.temps.size(); ++i) {
    const SdpaTemp& t = plan.temps[i];
    void* data = t.info.constant != nullptr ? const_cast<void*>(t.info.constant->raw_data())
                                            : ws + t.offset;
    temps.push_back(Tensor::Wrap(t.info.dtype, t.info.dims, data));
  }
  auto operand = [&](int id) -> const Tensor* {
    if (id < kSdpaInputs) return id < static_cast<int>(ctx.inputs.size()) ? ctx.inputs[id] : nullptr;
    return &temps[id - kSdpaInputs];
  };
  for (const SdpaStep& step : plan.steps) {
    EvalContext sub{step.node};
    for (int id : step.inputs) sub.inputs.push_back(operand(id));
    sub.outputs = {step.output == kSdpaOutput ? ctx.outputs[0] : &temps[step.output - kSdpaInputs]};
    sub.workspace = ws + plan.step_workspace;
    sub.state = step.state.get();
    sub.num_threads = ctx.num_threads;
    RETURN_IF_ERROR(step.kernel->eval(sub));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> AttentionKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kMultiHeadAttention, DType::kF32, PrepareAttention, EvalAttention<float>},
      {ir::OpKind::kMultiHeadAttention, DType::kF64, PrepareAttention, EvalAttention<double>},
      // FP16 and BF16 run the FP32 kernel widened (widen.cc): rounded once, as
      // PyTorch's fused attention kernels round.
      {ir::OpKind::kScaledDotProductAttention, DType::kF32, PrepareSdpa, EvalSdpa},
      {ir::OpKind::kScaledDotProductAttention, DType::kF64, PrepareSdpa, EvalSdpa},
  };
  return kKernels;
}

}  // namespace kiln::kernels
