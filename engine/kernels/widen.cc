// Kernel selection (PrepareKernel): FP16/BF16 through the FP32 kernels,
// PyTorch's integer rules for the unary float ops, and float64 accumulation.
//
// FP16 and BF16 are storage types: PyTorch's CPU kernels widen them to float,
// compute, and round the result back to nearest even, once per op. Kiln does
// the same for every op without one table row per op and dtype: when an op's
// own kernel does not take an FP16/BF16 operand (no row for it, or its Prepare
// refuses it), its FP32 kernel runs inside a wrapper that converts the
// FP16/BF16 inputs to FP32 (constants once in Prepare, run-time inputs into
// the workspace in Eval) and rounds the FP32 outputs back to the storage
// type; outputs of other dtypes (argmax's INT64 indices, a comparison's BOOL)
// pass through. Kernels that handle the storage types themselves (the
// elementwise family, casts, movement by element size) are used as they are.
//
// Integer and bool tensors: the unary float ops (sqrt, exp, log, sin, tanh,
// sigmoid, erf, reciprocal, logsumexp, ...) compute in FP32 and return FP32, as
// PyTorch's "promote integer inputs to float" does; floor, ceil, round and
// trunc of an integer, and sign of a bool, are the tensor itself (an alias, no copy).
//
// Float64 accumulation (a node's attribute accumulate = "float64", from a
// model's load config, see passes::AccumulateInFloat64): an FP32 MatMul,
// Linear, Einsum or ConvTranspose runs its FP64 kernel inside the same
// wrapper, FP32 operands widened to double and FP64 results rounded to float
// once. Conv handles the attribute itself (conv.cc: per slice, and before its
// float epilogue).
#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

size_t Align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

bool IsHalf(DType d) { return d == DType::kF16 || d == DType::kBF16; }

// Integer or bool (PyTorch promotes both to float in the unary float ops).
bool IsIntegerOrBool(DType d) { return d == DType::kBool || IsIntegral(d); }

// How PrepareWidened treats operands: FP16/BF16 in and out (storage types),
// integers and bools in, FP32 out (PyTorch's unary float ops), or FP32 in and
// out through the FP64 kernel (float64 accumulation).
enum class Widen { kStorage, kIntegerToFloat, kFloat32ToFloat64 };

bool Converts(Widen mode, DType d) {
  switch (mode) {
    case Widen::kStorage: return IsHalf(d);
    case Widen::kIntegerToFloat: return IsIntegerOrBool(d);
    case Widen::kFloat32ToFloat64: return d == DType::kF32;
  }
  return false;
}

// The dtype the wrapped kernel computes in.
DType WideType(Widen mode) { return mode == Widen::kFloat32ToFloat64 ? DType::kF64 : DType::kF32; }

// The ops whose FP64 kernel serves float64 accumulation through the wrapper
// (Conv does it itself).
bool AccumulatesThroughFloat64Kernel(ir::OpKind op) {
  return AccumulatesInFloat64(op) && op != ir::OpKind::kConv;
}

// The unary ops PyTorch computes in the default float dtype for integer and
// bool tensors.
bool PromotesIntegersToFloat(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kSqrt:
    case ir::OpKind::kRsqrt:
    case ir::OpKind::kExp:
    case ir::OpKind::kExpm1:
    case ir::OpKind::kLog:
    case ir::OpKind::kLog2:
    case ir::OpKind::kLog10:
    case ir::OpKind::kLog1p:
    case ir::OpKind::kSin:
    case ir::OpKind::kCos:
    case ir::OpKind::kTan:
    case ir::OpKind::kAsin:
    case ir::OpKind::kAcos:
    case ir::OpKind::kAtan:
    case ir::OpKind::kSinh:
    case ir::OpKind::kCosh:
    case ir::OpKind::kAsinh:
    case ir::OpKind::kAcosh:
    case ir::OpKind::kAtanh:
    case ir::OpKind::kTanh:
    case ir::OpKind::kSigmoid:
    case ir::OpKind::kErf:
    case ir::OpKind::kReciprocal:
    case ir::OpKind::kLogSumExp:
    // clamp with a float bound (with integer bounds the integer kernel runs).
    case ir::OpKind::kClip: return true;
    default: return false;
  }
}

// Ops that return an operand of `dtype` as it is: rounding an integer, the
// sign of a bool (PyTorch's sign(BOOL) is the tensor itself).
bool IsIdentityFor(ir::OpKind op, DType dtype) {
  if (op == ir::OpKind::kSign) return dtype == DType::kBool;
  return IsIntegral(dtype) && (op == ir::OpKind::kFloor || op == ir::OpKind::kCeil ||
                               op == ir::OpKind::kRound || op == ir::OpKind::kTrunc);
}

struct WidenState {
  DType wide = DType::kF32;        // what the inner kernel computes in
  EvalFn inner_eval = nullptr;     // the inner (FP32 or FP64) kernel's Eval
  std::shared_ptr<void> inner;     // and its state
  std::vector<Tensor> constants;   // per input: a constant widened
  std::vector<size_t> in_offset;   // per input: workspace bytes of its wide copy, or kNone
  std::vector<size_t> out_offset;  // per output: workspace bytes of the wide result, or kNone
  size_t inner_workspace = 0;      // where the inner kernel's own workspace starts
};

// `wide_kernel` is the op's kernel for WideType(mode).
absl::Status PrepareWidened(const KernelDef& wide_kernel, Widen mode, PrepareContext& ctx) {
  auto st = std::make_shared<WidenState>();
  const DType wide = WideType(mode);
  st->wide = wide;
  st->inner_eval = wide_kernel.eval;
  PrepareContext inner{ctx.node, ctx.inputs, {}, 0, nullptr, ctx.num_threads};
  inner.outputs.resize(ctx.outputs.size());
  const size_t n = ctx.inputs.size();
  st->constants.resize(n);  // sized once: inner.inputs point into it
  st->in_offset.assign(n, kNone);
  // The dtype wide outputs are rounded to: the FP16/BF16 operands' storage
  // type, FP32 for float64 accumulation; unknown: wide outputs stay wide.
  DType narrow = mode == Widen::kFloat32ToFloat64 ? DType::kF32 : DType::kUnknown;
  size_t ws = 0;
  for (size_t i = 0; i < n; ++i) {
    TensorInfo& in = inner.inputs[i];
    if (!in.present || !Converts(mode, in.dtype)) continue;
    if (narrow == DType::kUnknown && mode == Widen::kStorage) narrow = in.dtype;
    if (in.constant != nullptr) {
      Tensor c = Tensor::Zeros(wide, in.dims);
      ConvertElements(in.constant->raw_data(), in.dtype, c.raw_data(), wide, c.num_elements());
      st->constants[i] = std::move(c);
      in.constant = &st->constants[i];
    } else {
      st->in_offset[i] = ws;
      ws += Align64(NumElements(in.dims) * DTypeSize(wide));
    }
    in.dtype = wide;
  }
  RETURN_IF_ERROR(wide_kernel.prepare(inner));
  if (inner.dynamic_outputs) {
    return Unimplemented(ctx.node, "widened operands with run-time output shapes");
  }
  ctx.outputs = inner.outputs;
  st->out_offset.assign(ctx.outputs.size(), kNone);
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    if (ctx.outputs[o].dtype != wide || narrow == DType::kUnknown) continue;
    ctx.outputs[o].dtype = narrow;
    ctx.outputs[o].constant = nullptr;
    st->out_offset[o] = ws;
    ws += Align64(NumElements(ctx.outputs[o].dims) * DTypeSize(wide));
  }
  st->inner_workspace = ws;
  ctx.workspace_bytes = ws + inner.workspace_bytes;
  st->inner = std::move(inner.state);
  ctx.state = std::move(st);
  return absl::OkStatus();
}

// Per run: the wide copies live in this run's workspace (plans run
// concurrently, so nothing per run is kept in the shared state). The operand
// pointer vectors are the executor's own, moved into the inner context rather
// than copied; only the wrapping tensors' dims are allocated.
absl::Status EvalWidened(EvalContext& ctx) {
  const WidenState& st = StateAs<WidenState>(ctx);
  char* ws = static_cast<char*>(ctx.workspace);
  const size_t n = ctx.inputs.size();
  absl::InlinedVector<Tensor, 4> wrapped(n + ctx.outputs.size());
  absl::InlinedVector<Tensor*, 4> rounded(ctx.outputs.size(), nullptr);  // narrowed outputs
  for (size_t i = 0; i < n; ++i) {
    const Tensor* in = ctx.inputs[i];
    if (in == nullptr) continue;
    if (st.constants[i].defined() && st.constants[i].dtype() != DType::kUnknown) {
      ctx.inputs[i] = &st.constants[i];
    } else if (st.in_offset[i] != kNone) {
      ConvertElements(in->raw_data(), in->dtype(), ws + st.in_offset[i], st.wide,
                      in->num_elements());
      wrapped[i] = Tensor::Wrap(st.wide, in->dims(), ws + st.in_offset[i]);
      ctx.inputs[i] = &wrapped[i];
    }
  }
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    if (st.out_offset[o] == kNone) continue;
    rounded[o] = ctx.outputs[o];
    wrapped[n + o] = Tensor::Wrap(st.wide, rounded[o]->dims(), ws + st.out_offset[o]);
    ctx.outputs[o] = &wrapped[n + o];
  }
  EvalContext inner{ctx.node, std::move(ctx.inputs), std::move(ctx.outputs),
                    ws + st.inner_workspace, st.inner.get(), ctx.num_threads};
  RETURN_IF_ERROR(st.inner_eval(inner));
  for (size_t o = 0; o < rounded.size(); ++o) {
    if (rounded[o] == nullptr) continue;
    Tensor& out = *rounded[o];
    ConvertElements(ws + st.out_offset[o], st.wide, out.raw_data(), out.dtype(),
                    out.num_elements());
  }
  // The vectors go back to the caller with its outputs (the widened inputs
  // still point at this run's copies; callers drop the context after Eval).
  ctx.inputs = std::move(inner.inputs);
  ctx.outputs = std::move(inner.outputs);
  for (size_t o = 0; o < rounded.size(); ++o) {
    if (rounded[o] != nullptr) ctx.outputs[o] = rounded[o];
  }
  return absl::OkStatus();
}

absl::Status NoPrepare(PrepareContext& ctx) {
  return absl::InternalError(absl::StrCat(NodeContext(ctx.node), "the widening wrapper is "
                                                                 "prepared by PrepareKernel"));
}

// What a widened node runs: Eval reads the FP32 kernel from the state.
const KernelDef kWidenedKernel{ir::OpKind::kIdentity, DType::kUnknown, NoPrepare, EvalWidened};

// PrepareContext holds a reference, so it is not assignable: what Prepare filled.
void Adopt(PrepareContext& to, PrepareContext& from) {
  to.outputs = std::move(from.outputs);
  to.workspace_bytes = from.workspace_bytes;
  to.state = std::move(from.state);
  to.dynamic_outputs = from.dynamic_outputs;
}

bool HasOperand(const PrepareContext& ctx, bool (*is)(DType)) {
  for (const TensorInfo& in : ctx.inputs) {
    if (in.present && is(in.dtype)) return true;
  }
  return false;
}

absl::Status PrepareSame(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

// floor/ceil/round/trunc of an integer tensor, sign of a bool one, an Expand
// to the input's own dims: the output is the input.
const KernelDef kInputAsOutput{ir::OpKind::kIdentity, DType::kUnknown, PrepareSame, nullptr,
                                 /*aliases_input0=*/true};

}  // namespace

bool AccumulatesInFloat64(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kConv:
    case ir::OpKind::kConvTranspose:
    case ir::OpKind::kMatMul:
    case ir::OpKind::kLinear:
    case ir::OpKind::kEinsum: return true;
    default: return false;
  }
}

absl::StatusOr<const KernelDef*> PrepareKernel(PrepareContext& ctx) {
  const ir::OpKind op = ctx.node.kind;
  const DType dtype = ctx.inputs.empty() ? DType::kUnknown : ctx.inputs[0].dtype;
  bool laid_out = false;
  for (const TensorInfo& in : ctx.inputs) laid_out |= in.present && in.layout != ir::Layout::kPlain;
  for (const KernelDef& k : ProviderKernels()) {
    if (k.op != op || (k.dtype != dtype && k.dtype != DType::kUnknown)) continue;
    if ((laid_out && !k.takes_layouts) || (k.supports != nullptr && !k.supports(ctx))) continue;
    PrepareContext attempt = ctx;
    if (k.prepare(attempt).ok()) {
      Adopt(ctx, attempt);
      return &k;
    }
  }
  if (dtype == DType::kF32 && AccumulatesThroughFloat64Kernel(op) &&
      ctx.node.attrs.GetString(kAccumulateAttr, "") == kAccumulateFloat64) {
    const KernelDef* fp64 = FindKernel(op, DType::kF64);
    if (fp64 == nullptr) {
      return absl::InternalError(
          absl::StrCat(NodeContext(ctx.node), "float64 accumulation without an FP64 kernel"));
    }
    PrepareContext widened{ctx.node, ctx.inputs, {}, 0, nullptr, ctx.num_threads};
    widened.outputs.resize(ctx.outputs.size());
    RETURN_IF_ERROR(PrepareWidened(*fp64, Widen::kFloat32ToFloat64, widened));
    Adopt(ctx, widened);
    return &kWidenedKernel;
  }
  const KernelDef* kernel = FindKernel(op, dtype);
  if (laid_out && (kernel == nullptr || !kernel->takes_layouts)) {
    return absl::FailedPreconditionError(
        absl::StrCat(NodeContext(ctx.node), "no kernel takes this input layout"));
  }
  absl::Status refused;
  if (kernel != nullptr) {
    PrepareContext attempt{ctx.node, ctx.inputs, {}, 0, nullptr, ctx.num_threads};
    attempt.outputs.resize(ctx.outputs.size());
    refused = kernel->prepare(attempt);
    if (refused.ok()) {
      Adopt(ctx, attempt);
      // Core ATen writes every batched matmul as expand + view + bmm, each
      // operand expanded to the dims it already has: a view, not a copy.
      if (op == ir::OpKind::kExpand && ctx.outputs.size() == 1 &&
          ctx.outputs[0].dtype == ctx.inputs[0].dtype &&
          ctx.outputs[0].dims == ctx.inputs[0].dims && ctx.outputs[0].constant == nullptr) {
        ctx.state = nullptr;
        return &kInputAsOutput;
      }
      return kernel;
    }
  } else {
    refused = absl::NotFoundError(absl::StrCat("no kernel for input dtype ", DTypeName(dtype)));
  }
  // A refused FP16/BF16 operand: the FP32 kernel, widened. The fallback runs
  // libtorch's own kernel for each dtype, and ops on scalars and lists have no
  // FP32 kernel to widen.
  const bool data_refusal = refused.code() == absl::StatusCode::kNotFound ||
                            refused.code() == absl::StatusCode::kUnimplemented ||
                            refused.code() == absl::StatusCode::kInvalidArgument;
  if (!data_refusal || op == ir::OpKind::kFallback || IsNonTensorOp(op)) return refused;
  Widen mode;
  if (HasOperand(ctx, IsHalf)) {
    mode = Widen::kStorage;
  } else if (HasOperand(ctx, IsIntegerOrBool) && PromotesIntegersToFloat(op)) {
    mode = Widen::kIntegerToFloat;
  } else if (IsIdentityFor(op, ctx.inputs[0].dtype)) {
    PrepareContext same{ctx.node, ctx.inputs, {}, 0, nullptr, ctx.num_threads};
    RETURN_IF_ERROR(PrepareSame(same));
    Adopt(ctx, same);
    return &kInputAsOutput;
  } else {
    return refused;
  }
  const KernelDef* fp32 = FindKernel(op, DType::kF32);
  if (fp32 == nullptr) return refused;
  PrepareContext widened{ctx.node, ctx.inputs, {}, 0, nullptr, ctx.num_threads};
  widened.outputs.resize(ctx.outputs.size());
  if (!PrepareWidened(*fp32, mode, widened).ok()) return refused;
  Adopt(ctx, widened);
  return &kWidenedKernel;
}

}  // namespace kiln::kernels
