// Elementwise unary math: Neg, Abs, Sign, Sqrt, Rsqrt, Exp, Expm1, Log, Log2,
// Log10, Log1p, Reciprocal, Floor, Ceil, Round, Trunc, Frac, Erf, the
// trigonometric and hyperbolic functions, IsNan (-> BOOL) and LogicalNot (any
// dtype -> BOOL; with attr bitwise, ~x of an integer tensor in its dtype).
//
// One Prepare (same dims out as in) and one Eval template over a per-op
// functor, as in activation.cc. Float ops compute in float32 with the libm
// function PyTorch's CPU kernels use for that op (std::nearbyint for Round,
// which rounds half to even like torch.round; 1/sqrt for Rsqrt), so results
// agree to rounding; FP64 runs the same functors in double, FP16/BF16 the
// rest widened to FP32 (widen.cc). Neg, Abs and Sign also take INT64,
// INT32, INT16, INT8 and UINT8; IsNan takes every dtype (integers are never NaN).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "engine/common/half.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/typed.h"
#include "engine/kernels/vector_math.h"

namespace kiln::kernels {
namespace {

using ir::OpKind;

// FP32, or FP64 for the table's FP64 rows.
absl::Status PrepareFloat(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  ctx.outputs = {TensorInfo{t, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

absl::Status PrepareSameDType(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

absl::Status PrepareToBool(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  if (ctx.node.attrs.GetBool("bitwise") && ctx.inputs[0].dtype != DType::kBool) {
    // bitwise_not of an integer tensor: ~x in its own dtype.
    if (!IsIntegral(ctx.inputs[0].dtype)) {
      return Unimplemented(ctx.node, "bitwise not of ", DTypeName(ctx.inputs[0].dtype),
                           " is not supported");
    }
    ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, ctx.inputs[0].dims}};
    return absl::OkStatus();
  }
  if (!IsPlainDType(ctx.inputs[0].dtype)) {
    return Unimplemented(ctx.node, "input dtype ", DTypeName(ctx.inputs[0].dtype), " is not supported");
  }
  ctx.outputs = {TensorInfo{DType::kBool, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

// Functors: Apply(x) and a rough cost per element (simple float operations).
#define KILN_UNARY(Name, cost, expr)          \
  struct Name {                               \
    static constexpr int kCost = cost;        \
    template <typename T>                     \
    static T Apply(T x) {                     \
      return expr;                            \
    }                                         \
  };
KILN_UNARY(NegOp, 1, -x)
KILN_UNARY(AbsOp, 1, std::abs(x))
// sign(NaN) is NaN in PyTorch's float kernel.
KILN_UNARY(SignOp, 1, (x != x) ? x : static_cast<T>((T(0) < x) - (x < T(0))))
KILN_UNARY(SqrtOp, 4, std::sqrt(x))
KILN_UNARY(RsqrtOp, 5, T(1) / std::sqrt(x))
KILN_UNARY(ExpOp, 20, std::exp(x))
KILN_UNARY(Expm1Op, 20, std::expm1(x))
KILN_UNARY(LogOp, 20, std::log(x))
KILN_UNARY(Log2Op, 20, std::log2(x))
KILN_UNARY(Log10Op, 20, std::log10(x))
KILN_UNARY(Log1pOp, 20, std::log1p(x))
KILN_UNARY(ReciprocalOp, 2, T(1) / x)
KILN_UNARY(FloorOp, 1, std::floor(x))
KILN_UNARY(CeilOp, 1, std::ceil(x))
KILN_UNARY(RoundOp, 1, std::nearbyint(x))
KILN_UNARY(TruncOp, 1, std::trunc(x))
KILN_UNARY(FracOp, 2, x - std::trunc(x))
KILN_UNARY(ErfOp, 20, std::erf(x))
KILN_UNARY(SinOp, 20, std::sin(x))
KILN_UNARY(CosOp, 20, std::cos(x))
KILN_UNARY(TanOp, 20, std::tan(x))
KILN_UNARY(AsinOp, 20, std::asin(x))
KILN_UNARY(AcosOp, 20, std::acos(x))
KILN_UNARY(AtanOp, 20, std::atan(x))
KILN_UNARY(SinhOp, 20, std::sinh(x))
KILN_UNARY(CoshOp, 20, std::cosh(x))
KILN_UNARY(AsinhOp, 20, std::asinh(x))
KILN_UNARY(AcoshOp, 20, std::acosh(x))
KILN_UNARY(AtanhOp, 20, std::atanh(x))
#undef KILN_UNARY

template <typename T, typename Op>
absl::Status EvalUnary(EvalContext& ctx) {
  const T* in = ctx.inputs[0]->data<T>();
  T* out = ctx.outputs[0]->data<T>();
  const int64_t n = ctx.outputs[0]->num_elements();
  ParallelFor(n, ctx.num_threads, n * Op::kCost, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = Op::template Apply<T>(in[i]);
  });
  return absl::OkStatus();
}

// Float32 through glibc's vector math (vector_math.h) where the CPU has it;
// the scalar functor otherwise.
template <void (*Vector)(const float*, float*, int64_t), typename Op>
absl::Status EvalVector(EvalContext& ctx) {
  if (!HasVectorMath()) return EvalUnary<float, Op>(ctx);
  const float* in = ctx.inputs[0]->data<float>();
  float* out = ctx.outputs[0]->data<float>();
  const int64_t n = ctx.outputs[0]->num_elements();
  ParallelFor(n, ctx.num_threads, n * Op::kCost, [&](int64_t begin, int64_t end) {
    Vector(in + begin, out + begin, end - begin);
  });
  return absl::OkStatus();
}

template <typename T>
absl::Status EvalIsNan(EvalContext& ctx) {
  const T* in = ctx.inputs[0]->data<T>();
  bool* out = ctx.outputs[0]->data<bool>();
  const int64_t n = ctx.outputs[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = std::isnan(in[i]);
  return absl::OkStatus();
}

// Integers and bools are never NaN (torch.isnan gives all False).
absl::Status EvalNeverNan(EvalContext& ctx) {
  Tensor& out = *ctx.outputs[0];
  std::fill_n(out.data<bool>(), out.num_elements(), false);
  return absl::OkStatus();
}

absl::Status PrepareIsNan(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF32 && t != DType::kF64 && t != DType::kBool && !IsIntegral(t)) {
    return Unimplemented(ctx.node, "expected a float, integer or bool input, got ", DTypeName(t));
  }
  ctx.outputs = {TensorInfo{DType::kBool, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

// NanToNum: NaN -> attr nan (0), +inf -> posinf, -inf -> neginf (absent: the
// dtype's largest and lowest finite values, so FP16's are +-65504); each
// replacement is rounded into the dtype once, as torch.nan_to_num converts its
// numbers. Integers and bools are copied.
absl::Status PrepareNanToNum(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  if (DTypeSize(ctx.inputs[0].dtype) == 0) return InvalidArg(ctx.node, "input dtype is unknown");
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

template <typename T, typename Load, typename Store>
void NanToNumLoop(const T* in, T* out, int64_t n, double nan, double posinf, double neginf,
                  Load load, Store store) {
  const T nan_t = store(nan), posinf_t = store(posinf), neginf_t = store(neginf);
  for (int64_t i = 0; i < n; ++i) {
    const auto v = load(in[i]);
    out[i] = std::isnan(v) ? nan_t : std::isinf(v) ? (v > 0 ? posinf_t : neginf_t) : in[i];
  }
}

absl::Status EvalNanToNum(EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const int64_t n = x.num_elements();
  const DType t = x.dtype();
  if (!IsFloatingPoint(t)) {
    if (n > 0) std::memcpy(y.raw_data(), x.raw_data(), n * DTypeSize(t));
    return absl::OkStatus();
  }
  const ir::Attributes& a = ctx.node.attrs;
  double hi = std::numeric_limits<double>::max();
  if (t == DType::kF32) hi = std::numeric_limits<float>::max();
  if (t == DType::kF16) hi = 65504.0;
  if (t == DType::kBF16) hi = BF16ToFloat(0x7F7F);
  const double nan = a.GetFloat("nan", 0.0);
  const double posinf = a.GetFloat("posinf", hi);
  const double neginf = a.GetFloat("neginf", -hi);
  switch (t) {
    case DType::kF32:
      NanToNumLoop(x.data<float>(), y.data<float>(), n, nan, posinf, neginf,
                   [](float v) { return v; }, [](double v) { return static_cast<float>(v); });
      break;
    case DType::kF64:
      NanToNumLoop(x.data<double>(), y.data<double>(), n, nan, posinf, neginf,
                   [](double v) { return v; }, [](double v) { return v; });
      break;
    case DType::kF16:
      NanToNumLoop(x.data<uint16_t>(), y.data<uint16_t>(), n, nan, posinf, neginf,
                   [](uint16_t v) { return HalfToFloat(v); },
                   [](double v) { return FloatToHalf(static_cast<float>(v)); });
      break;
    case DType::kBF16:
      NanToNumLoop(x.data<uint16_t>(), y.data<uint16_t>(), n, nan, posinf, neginf,
                   [](uint16_t v) { return BF16ToFloat(v); },
                   [](double v) { return FloatToBF16(static_cast<float>(v)); });
      break;
    default:
      return Unimplemented(ctx.node, "dtype ", DTypeName(t));
  }
  return absl::OkStatus();
}

template <typename T>
void BitwiseNot(const Tensor& x, Tensor& y) {
  const T* in = x.data<T>();
  T* out = y.data<T>();
  for (int64_t i = 0; i < x.num_elements(); ++i) out[i] = static_cast<T>(~in[i]);
}

absl::Status EvalLogicalNot(EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  switch (ctx.outputs[0]->dtype()) {  // an integer output: bitwise_not
    case DType::kInt64: BitwiseNot<int64_t>(x, *ctx.outputs[0]); return absl::OkStatus();
    case DType::kInt32: BitwiseNot<int32_t>(x, *ctx.outputs[0]); return absl::OkStatus();
    case DType::kInt16: BitwiseNot<int16_t>(x, *ctx.outputs[0]); return absl::OkStatus();
    case DType::kInt8: BitwiseNot<int8_t>(x, *ctx.outputs[0]); return absl::OkStatus();
    case DType::kUInt8: BitwiseNot<uint8_t>(x, *ctx.outputs[0]); return absl::OkStatus();
    default: break;
  }
  bool* out = ctx.outputs[0]->data<bool>();
  const int64_t n = x.num_elements();
  if (x.dtype() == DType::kBool) {
    const bool* in = x.data<bool>();
    for (int64_t i = 0; i < n; ++i) out[i] = !in[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = LoadAsDouble(x.raw_data(), x.dtype(), i) == 0.0;
  }
  return absl::OkStatus();
}

// Neg, Abs, Sign on INT64.
absl::Status PrepareInt64(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kInt64));
  return PrepareSameDType(ctx);
}

// Neg, Abs, Sign on INT32, INT16, INT8 (the row's dtype is the input's).
absl::Status PrepareInt(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  if (!IsIntegral(ctx.inputs[0].dtype)) {
    return Unimplemented(ctx.node, "input dtype ", DTypeName(ctx.inputs[0].dtype),
                         " is not supported");
  }
  return PrepareSameDType(ctx);
}

}  // namespace

absl::Span<const KernelDef> UnaryKernels() {
  static const KernelDef kKernels[] = {
      {OpKind::kNeg, DType::kF32, PrepareFloat, EvalUnary<float, NegOp>},
      {OpKind::kNeg, DType::kInt64, PrepareInt64, EvalUnary<int64_t, NegOp>},
      {OpKind::kAbs, DType::kF32, PrepareFloat, EvalUnary<float, AbsOp>},
      {OpKind::kAbs, DType::kInt64, PrepareInt64, EvalUnary<int64_t, AbsOp>},
      {OpKind::kSign, DType::kF32, PrepareFloat, EvalUnary<float, SignOp>},
      {OpKind::kSign, DType::kInt64, PrepareInt64, EvalUnary<int64_t, SignOp>},
      {OpKind::kSqrt, DType::kF32, PrepareFloat, EvalUnary<float, SqrtOp>},
      {OpKind::kRsqrt, DType::kF32, PrepareFloat, EvalUnary<float, RsqrtOp>},
      {OpKind::kExp, DType::kF32, PrepareFloat, EvalVector<VectorExp, ExpOp>},
      {OpKind::kExpm1, DType::kF32, PrepareFloat, EvalVector<VectorExpm1, Expm1Op>},
      {OpKind::kLog, DType::kF32, PrepareFloat, EvalVector<VectorLog, LogOp>},
      {OpKind::kLog2, DType::kF32, PrepareFloat, EvalUnary<float, Log2Op>},
      {OpKind::kLog10, DType::kF32, PrepareFloat, EvalUnary<float, Log10Op>},
      {OpKind::kLog1p, DType::kF32, PrepareFloat, EvalVector<VectorLog1p, Log1pOp>},
      {OpKind::kReciprocal, DType::kF32, PrepareFloat, EvalUnary<float, ReciprocalOp>},
      {OpKind::kFloor, DType::kF32, PrepareFloat, EvalUnary<float, FloorOp>},
      {OpKind::kCeil, DType::kF32, PrepareFloat, EvalUnary<float, CeilOp>},
      {OpKind::kRound, DType::kF32, PrepareFloat, EvalUnary<float, RoundOp>},
      {OpKind::kTrunc, DType::kF32, PrepareFloat, EvalUnary<float, TruncOp>},
      {OpKind::kFrac, DType::kF32, PrepareFloat, EvalUnary<float, FracOp>},
      {OpKind::kErf, DType::kF32, PrepareFloat, EvalVector<VectorErf, ErfOp>},
      {OpKind::kSin, DType::kF32, PrepareFloat, EvalUnary<float, SinOp>},
      {OpKind::kCos, DType::kF32, PrepareFloat, EvalUnary<float, CosOp>},
      {OpKind::kTan, DType::kF32, PrepareFloat, EvalUnary<float, TanOp>},
      {OpKind::kAsin, DType::kF32, PrepareFloat, EvalUnary<float, AsinOp>},
      {OpKind::kAcos, DType::kF32, PrepareFloat, EvalUnary<float, AcosOp>},
      {OpKind::kAtan, DType::kF32, PrepareFloat, EvalUnary<float, AtanOp>},
      {OpKind::kSinh, DType::kF32, PrepareFloat, EvalUnary<float, SinhOp>},
      {OpKind::kCosh, DType::kF32, PrepareFloat, EvalUnary<float, CoshOp>},
      {OpKind::kAsinh, DType::kF32, PrepareFloat, EvalUnary<float, AsinhOp>},
      {OpKind::kAcosh, DType::kF32, PrepareFloat, EvalUnary<float, AcoshOp>},
      {OpKind::kAtanh, DType::kF32, PrepareFloat, EvalUnary<float, AtanhOp>},
      {OpKind::kIsNan, DType::kF32, PrepareIsNan, EvalIsNan<float>},
      {OpKind::kIsNan, DType::kF64, PrepareIsNan, EvalIsNan<double>},
      {OpKind::kIsNan, DType::kInt64, PrepareIsNan, EvalNeverNan},
      {OpKind::kIsNan, DType::kInt32, PrepareIsNan, EvalNeverNan},
      {OpKind::kIsNan, DType::kInt16, PrepareIsNan, EvalNeverNan},
      {OpKind::kIsNan, DType::kInt8, PrepareIsNan, EvalNeverNan},
      {OpKind::kIsNan, DType::kUInt8, PrepareIsNan, EvalNeverNan},
      {OpKind::kIsNan, DType::kBool, PrepareIsNan, EvalNeverNan},
      {OpKind::kLogicalNot, DType::kUnknown, PrepareToBool, EvalLogicalNot},
      // FP64: the same functors in double.
      {OpKind::kNeg, DType::kF64, PrepareFloat, EvalUnary<double, NegOp>},
      {OpKind::kAbs, DType::kF64, PrepareFloat, EvalUnary<double, AbsOp>},
      {OpKind::kSign, DType::kF64, PrepareFloat, EvalUnary<double, SignOp>},
      {OpKind::kSqrt, DType::kF64, PrepareFloat, EvalUnary<double, SqrtOp>},
      {OpKind::kRsqrt, DType::kF64, PrepareFloat, EvalUnary<double, RsqrtOp>},
      {OpKind::kExp, DType::kF64, PrepareFloat, EvalUnary<double, ExpOp>},
      {OpKind::kExpm1, DType::kF64, PrepareFloat, EvalUnary<double, Expm1Op>},
      {OpKind::kLog, DType::kF64, PrepareFloat, EvalUnary<double, LogOp>},
      {OpKind::kLog2, DType::kF64, PrepareFloat, EvalUnary<double, Log2Op>},
      {OpKind::kLog10, DType::kF64, PrepareFloat, EvalUnary<double, Log10Op>},
      {OpKind::kLog1p, DType::kF64, PrepareFloat, EvalUnary<double, Log1pOp>},
      {OpKind::kReciprocal, DType::kF64, PrepareFloat, EvalUnary<double, ReciprocalOp>},
      {OpKind::kFloor, DType::kF64, PrepareFloat, EvalUnary<double, FloorOp>},
      {OpKind::kCeil, DType::kF64, PrepareFloat, EvalUnary<double, CeilOp>},
      {OpKind::kRound, DType::kF64, PrepareFloat, EvalUnary<double, RoundOp>},
      {OpKind::kTrunc, DType::kF64, PrepareFloat, EvalUnary<double, TruncOp>},
      {OpKind::kFrac, DType::kF64, PrepareFloat, EvalUnary<double, FracOp>},
      {OpKind::kErf, DType::kF64, PrepareFloat, EvalUnary<double, ErfOp>},
      {OpKind::kSin, DType::kF64, PrepareFloat, EvalUnary<double, SinOp>},
      {OpKind::kCos, DType::kF64, PrepareFloat, EvalUnary<double, CosOp>},
      {OpKind::kTan, DType::kF64, PrepareFloat, EvalUnary<double, TanOp>},
      {OpKind::kAsin, DType::kF64, PrepareFloat, EvalUnary<double, AsinOp>},
      {OpKind::kAcos, DType::kF64, PrepareFloat, EvalUnary<double, AcosOp>},
      {OpKind::kAtan, DType::kF64, PrepareFloat, EvalUnary<double, AtanOp>},
      {OpKind::kSinh, DType::kF64, PrepareFloat, EvalUnary<double, SinhOp>},
      {OpKind::kCosh, DType::kF64, PrepareFloat, EvalUnary<double, CoshOp>},
      {OpKind::kAsinh, DType::kF64, PrepareFloat, EvalUnary<double, AsinhOp>},
      {OpKind::kAcosh, DType::kF64, PrepareFloat, EvalUnary<double, AcoshOp>},
      {OpKind::kAtanh, DType::kF64, PrepareFloat, EvalUnary<double, AtanhOp>},
      {OpKind::kNanToNum, DType::kUnknown, PrepareNanToNum, EvalNanToNum},
      // Narrower integers, as PyTorch's neg/abs/sign keep the dtype.
      {OpKind::kNeg, DType::kInt32, PrepareInt, EvalUnary<int32_t, NegOp>},
      {OpKind::kNeg, DType::kInt16, PrepareInt, EvalUnary<int16_t, NegOp>},
      {OpKind::kNeg, DType::kInt8, PrepareInt, EvalUnary<int8_t, NegOp>},
      {OpKind::kAbs, DType::kInt32, PrepareInt, EvalUnary<int32_t, AbsOp>},
      {OpKind::kAbs, DType::kInt16, PrepareInt, EvalUnary<int16_t, AbsOp>},
      {OpKind::kAbs, DType::kInt8, PrepareInt, EvalUnary<int8_t, AbsOp>},
      {OpKind::kSign, DType::kInt32, PrepareInt, EvalUnary<int32_t, SignOp>},
      {OpKind::kSign, DType::kInt16, PrepareInt, EvalUnary<int16_t, SignOp>},
      {OpKind::kSign, DType::kInt8, PrepareInt, EvalUnary<int8_t, SignOp>},
      // UINT8: neg wraps (-1 is 255), abs is the identity, as in PyTorch.
      {OpKind::kNeg, DType::kUInt8, PrepareInt, EvalUnary<uint8_t, NegOp>},
      {OpKind::kAbs, DType::kUInt8, PrepareInt, EvalUnary<uint8_t, AbsOp>},
      {OpKind::kSign, DType::kUInt8, PrepareInt, EvalUnary<uint8_t, SignOp>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
