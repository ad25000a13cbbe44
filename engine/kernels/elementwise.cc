// Broadcasting elementwise ops: arithmetic (Add, Sub, Mul, Div, Pow, Maximum,
// Minimum, FloorDiv, Remainder, Fmod, Atan2), comparisons (-> BOOL), logical
// ops (-> BOOL) and Where.
//
// Prepare resolves the operand dtype, turns the shapes into a loop plan (see
// broadcast.h) and picks the typed row function, so Eval is one call. Operands
// must share a dtype, except that a 0-dim constant operand (a Python scalar)
// takes the other operand's dtype as PyTorch's type promotion would
// (WeakScalarAs). Each row runs as one of four plain loops (vector-vector,
// vector-scalar, scalar-vector, scalar-scalar) that GCC vectorises.
//
// The arithmetic follows PyTorch's CPU kernels: Maximum/Minimum propagate NaN,
// FloorDiv and Remainder use Python's rounding (the sign of the divisor), and
// Pow by a scalar exponent of 2, 3, 0.5, -1, -0.5 or -2 is computed as the
// products, square roots and reciprocals PyTorch uses for those exponents.
// Integer division by zero fails the request (PyTorch raises) instead of
// trapping.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {
namespace {

using ir::OpKind;

struct ElementwisePlan;
using RunFn = absl::Status (*)(const ElementwisePlan&, EvalContext&);

struct ElementwisePlan {
  BroadcastPlan bc;
  Tensor scalars[kMaxOperands];  // constants converted to the operand dtype (see CommonDType)
  RunFn run = nullptr;
  int pow_exponent_code = 0;  // see PowCode
};

// The data of operand `o`: the converted scalar when there is one.
const void* OperandData(const ElementwisePlan& p, const EvalContext& ctx, int o) {
  return p.scalars[o].defined() && p.scalars[o].dtype() != DType::kUnknown
             ? p.scalars[o].raw_data()
             : ctx.inputs[o]->raw_data();
}

// ---------------------------------------------------------------- functors

template <typename T>
struct AddOp {
  static T Apply(T a, T b) { return a + b; }
};
template <typename T>
struct SubOp {
  static T Apply(T a, T b) { return a - b; }
};
template <typename T>
struct MulOp {
  static T Apply(T a, T b) { return a * b; }
};
template <typename T>
struct DivOp {
  static T Apply(T a, T b) { return a / b; }
};
template <typename T>
struct MaximumOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a > b ? a : b;
  }
};
template <typename T>
struct MinimumOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? a : b;
  }
};
template <typename T>
struct FloorDivOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      // PyTorch's div_floor_floating: exact for huge quotients, where floor(a / b)
      // would round the quotient first.
      if (b == 0) return a / b;
      const T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
      if (div == 0) return std::copysign(T(0), a / b);
      T floordiv = std::floor(div);
      if (div - floordiv > T(0.5)) floordiv += 1;
      return floordiv;
    } else {
      if (b == 0) return 0;  // rejected in Eval before the loop runs
      T q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      return q;
    }
  }
};
template <typename T>
struct RemainderOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      T mod = std::fmod(a, b);
      if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
      return mod;
    } else {
      if (b == 0) return 0;
      T r = a % b;
      if (r != 0 && (r < 0) != (b < 0)) r += b;
      return r;
    }
  }
};
template <typename T>
struct FmodOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fmod(a, b);
    } else {
      return b == 0 ? 0 : a % b;
    }
  }
};
template <typename T>
struct Atan2Op {
  static T Apply(T a, T b) { return std::atan2(a, b); }
};
template <typename T>
struct PowOp {
  static T Apply(T a, T b) { return std::pow(a, b); }
};

// Comparisons and logical ops: T in, bool out.
template <typename T>
struct EqOp {
  static bool Apply(T a, T b) { return a == b; }
};
template <typename T>
struct NeOp {
  static bool Apply(T a, T b) { return a != b; }
};
template <typename T>
struct LtOp {
  static bool Apply(T a, T b) { return a < b; }
};
template <typename T>
struct LeOp {
  static bool Apply(T a, T b) { return a <= b; }
};
template <typename T>
struct GtOp {
  static bool Apply(T a, T b) { return a > b; }
};
template <typename T>
struct GeOp {
  static bool Apply(T a, T b) { return a >= b; }
};
template <typename T>
struct AndOp {
  static bool Apply(T a, T b) { return (a != T(0)) && (b != T(0)); }
};
template <typename T>
struct OrOp {
  static bool Apply(T a, T b) { return (a != T(0)) || (b != T(0)); }
};
template <typename T>
struct XorOp {
  static bool Apply(T a, T b) { return (a != T(0)) != (b != T(0)); }
};

// ---------------------------------------------------------------- row loops

template <typename T, typename Out, typename Op>
inline void Row(const T* a, int64_t sa, const T* b, int64_t sb, Out* out, int64_t n) {
  if (sa != 0 && sb != 0) {
    for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(a[i], b[i]);
  } else if (sa != 0) {
    const T y = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(a[i], y);
  } else if (sb != 0) {
    const T x = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(x, b[i]);
  } else {
    std::fill(out, out + n, Op::Apply(*a, *b));
  }
}

template <typename T, typename Out, typename Op, int kCost = 1>
absl::Status RunBinary(const ElementwisePlan& p, EvalContext& ctx) {
  const T* a = static_cast<const T*>(OperandData(p, ctx, 0));
  const T* b = static_cast<const T*>(OperandData(p, ctx, 1));
  Out* out = ctx.outputs[0]->data<Out>();
  ForEachRow(p.bc, ctx.outputs[0]->num_elements(), ctx.num_threads, kCost,
             [&](int64_t o, const int64_t* off, const int64_t* s, int64_t n) {
               Row<T, Out, Op>(a + off[0], s[0], b + off[1], s[1], out + o, n);
             });
  return absl::OkStatus();
}

// Integer division and remainder: a zero divisor fails the request.
template <typename T, typename Op>
absl::Status RunIntDivision(const ElementwisePlan& p, EvalContext& ctx) {
  const T* b = static_cast<const T*>(OperandData(p, ctx, 1));
  const int64_t nb = p.scalars[1].defined() && p.scalars[1].dtype() != DType::kUnknown
                         ? p.scalars[1].num_elements()
                         : ctx.inputs[1]->num_elements();
  for (int64_t i = 0; i < nb; ++i) {
    if (b[i] == 0) return InvalidArg(ctx.node, "integer division by zero");
  }
  return RunBinary<T, T, Op>(p, ctx);
}

// Pow with a scalar exponent PyTorch special-cases.
enum PowCode { kPowGeneric = 0, kPowSquare, kPowCube, kPowSqrt, kPowRecip, kPowRsqrt, kPowRecipSq };

template <int kCode>
struct PowScalarOp {
  static float Apply(float x) {
    if constexpr (kCode == kPowSquare) return x * x;
    if constexpr (kCode == kPowCube) return x * x * x;
    if constexpr (kCode == kPowSqrt) return std::sqrt(x);
    if constexpr (kCode == kPowRecip) return 1.0f / x;
    if constexpr (kCode == kPowRsqrt) return 1.0f / std::sqrt(x);
    return 1.0f / (x * x);
  }
};

template <int kCode>
absl::Status RunPowScalar(const ElementwisePlan&, EvalContext& ctx) {
  const float* a = ctx.inputs[0]->data<float>();
  float* out = ctx.outputs[0]->data<float>();
  const int64_t n = ctx.outputs[0]->num_elements();
  ParallelFor(n, ctx.num_threads, n * 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = PowScalarOp<kCode>::Apply(a[i]);
  });
  return absl::OkStatus();
}

// Where: cond (bool) ? a : b, copied as raw elements of `T` (any dtype of that size).
template <typename T>
absl::Status RunWhere(const ElementwisePlan& p, EvalContext& ctx) {
  const bool* c = static_cast<const bool*>(OperandData(p, ctx, 0));
  const T* a = static_cast<const T*>(OperandData(p, ctx, 1));
  const T* b = static_cast<const T*>(OperandData(p, ctx, 2));
  T* out = static_cast<T*>(ctx.outputs[0]->raw_data());
  ForEachRow(p.bc, ctx.outputs[0]->num_elements(), ctx.num_threads, 1,
             [&](int64_t o, const int64_t* off, const int64_t* s, int64_t n) {
               const bool* cr = c + off[0];
               const T* ar = a + off[1];
               const T* br = b + off[2];
               T* dst = out + o;
               for (int64_t i = 0; i < n; ++i) dst[i] = cr[i * s[0]] ? ar[i * s[1]] : br[i * s[2]];
             });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- dispatch

enum class Family { kArith, kCompare, kLogical };

template <template <typename> class Op>
RunFn ArithFn(DType t) {
  switch (t) {
    case DType::kF32: return RunBinary<float, float, Op<float>>;
    case DType::kF64: return RunBinary<double, double, Op<double>>;
    case DType::kInt64: return RunBinary<int64_t, int64_t, Op<int64_t>>;
    case DType::kInt32: return RunBinary<int32_t, int32_t, Op<int32_t>>;
    default: return nullptr;
  }
}

template <template <typename> class Op>
RunFn FloatFn(DType t) {
  switch (t) {
    case DType::kF32: return RunBinary<float, float, Op<float>, 20>;
    case DType::kF64: return RunBinary<double, double, Op<double>, 20>;
    default: return nullptr;
  }
}

template <template <typename> class Op>
RunFn IntDivFn(DType t) {
  switch (t) {
    case DType::kF32: return RunBinary<float, float, Op<float>, 4>;
    case DType::kF64: return RunBinary<double, double, Op<double>, 4>;
    case DType::kInt64: return RunIntDivision<int64_t, Op<int64_t>>;
    case DType::kInt32: return RunIntDivision<int32_t, Op<int32_t>>;
    default: return nullptr;
  }
}

template <template <typename> class Op>
RunFn CompareFn(DType t) {
  switch (t) {
    case DType::kF32: return RunBinary<float, bool, Op<float>>;
    case DType::kF64: return RunBinary<double, bool, Op<double>>;
    case DType::kInt64: return RunBinary<int64_t, bool, Op<int64_t>>;
    case DType::kInt32: return RunBinary<int32_t, bool, Op<int32_t>>;
    case DType::kUInt8: return RunBinary<uint8_t, bool, Op<uint8_t>>;
    case DType::kBool: return RunBinary<bool, bool, Op<bool>>;
    default: return nullptr;
  }
}

RunFn SelectFn(OpKind op, DType t) {
  switch (op) {
    case OpKind::kAdd: return ArithFn<AddOp>(t);
    case OpKind::kSub: return ArithFn<SubOp>(t);
    case OpKind::kMul: return ArithFn<MulOp>(t);
    case OpKind::kDiv: return FloatFn<DivOp>(t);  // integer true division is float in PyTorch
    case OpKind::kMaximum: return ArithFn<MaximumOp>(t);
    case OpKind::kMinimum: return ArithFn<MinimumOp>(t);
    case OpKind::kFloorDiv: return IntDivFn<FloorDivOp>(t);
    case OpKind::kRemainder: return IntDivFn<RemainderOp>(t);
    case OpKind::kFmod: return IntDivFn<FmodOp>(t);
    case OpKind::kAtan2: return FloatFn<Atan2Op>(t);
    case OpKind::kPow: return FloatFn<PowOp>(t);
    case OpKind::kEqual: return CompareFn<EqOp>(t);
    case OpKind::kNotEqual: return CompareFn<NeOp>(t);
    case OpKind::kLess: return CompareFn<LtOp>(t);
    case OpKind::kLessEqual: return CompareFn<LeOp>(t);
    case OpKind::kGreater: return CompareFn<GtOp>(t);
    case OpKind::kGreaterEqual: return CompareFn<GeOp>(t);
    case OpKind::kLogicalAnd: return CompareFn<AndOp>(t);
    case OpKind::kLogicalOr: return CompareFn<OrOp>(t);
    case OpKind::kLogicalXor: return CompareFn<XorOp>(t);
    default: return nullptr;
  }
}

bool ProducesBool(OpKind op) {
  switch (op) {
    case OpKind::kEqual:
    case OpKind::kNotEqual:
    case OpKind::kLess:
    case OpKind::kLessEqual:
    case OpKind::kGreater:
    case OpKind::kGreaterEqual:
    case OpKind::kLogicalAnd:
    case OpKind::kLogicalOr:
    case OpKind::kLogicalXor:
      return true;
    default:
      return false;
  }
}

// Resolves the common dtype of inputs [first, first + count): the dtype of
// the operands computed at run time (they must agree). A 0-dim constant (a
// Python scalar) takes that dtype (WeakScalarAs); a dimensioned constant (an
// arange or a weight) of another dtype is converted once when PyTorch's
// promotion gives the run-time operands' dtype (int64 constant + float input).
absl::StatusOr<DType> CommonDType(PrepareContext& ctx, ElementwisePlan* plan, size_t first,
                                  size_t count) {
  DType t = DType::kUnknown;
  for (size_t i = first; i < first + count; ++i) {
    if (ctx.inputs[i].constant == nullptr) {
      if (t != DType::kUnknown && t != ctx.inputs[i].dtype) {
        return InvalidArg(ctx.node, "operands have different dtypes: ", DTypeName(t), " and ",
                          DTypeName(ctx.inputs[i].dtype));
      }
      t = ctx.inputs[i].dtype;
    }
  }
  if (t == DType::kUnknown) {
    // Only constants: dimensioned ones promote, scalars follow.
    for (size_t i = first; i < first + count; ++i) {
      if (!IsScalarConstant(ctx, i)) {
        t = t == DType::kUnknown ? ctx.inputs[i].dtype : PromoteTypes(t, ctx.inputs[i].dtype);
      }
    }
    if (t == DType::kUnknown) t = ctx.inputs[first].dtype;  // all scalars: the first one's
  }
  for (size_t i = first; i < first + count; ++i) {
    if (ctx.inputs[i].dtype == t) continue;
    const Tensor& c = *ctx.inputs[i].constant;
    if (IsScalarConstant(ctx, i)) {
      ASSIGN_OR_RETURN(plan->scalars[i], WeakScalarAs(ctx.node, c, t));
    } else if (PromoteTypes(t, c.dtype()) == t && IsPlainDType(c.dtype())) {
      plan->scalars[i] = ConvertedTo(c, t);
    } else {
      return Unimplemented(ctx.node, "a ", DTypeName(c.dtype()), " constant with a ", DTypeName(t),
                           " operand (PyTorch would promote the operand to ",
                           DTypeName(PromoteTypes(t, c.dtype())), ")");
    }
  }
  return t;
}

// The scalar exponent special case, when input 1 is a 0-dim constant.
int PowCodeFor(const PrepareContext& ctx) {
  if (!IsScalarConstant(ctx, 1) || ctx.inputs[0].dtype != DType::kF32) return kPowGeneric;
  const double e = LoadAsDouble(ctx.inputs[1].constant->raw_data(), ctx.inputs[1].dtype, 0);
  if (e == 2) return kPowSquare;
  if (e == 3) return kPowCube;
  if (e == 0.5) return kPowSqrt;
  if (e == -1) return kPowRecip;
  if (e == -0.5) return kPowRsqrt;
  if (e == -2) return kPowRecipSq;
  return kPowGeneric;
}

absl::Status PrepareBinary(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  auto plan = std::make_shared<ElementwisePlan>();
  ASSIGN_OR_RETURN(DType t, CommonDType(ctx, plan.get(), 0, 2));
  const OpKind op = ctx.node.kind;
  if (ctx.node.attrs.GetBool("bitwise") && t != DType::kBool) {
    return Unimplemented(ctx.node, "bitwise operations on ", DTypeName(t), " are not supported");
  }
  plan->run = SelectFn(op, t);
  if (plan->run == nullptr) {
    return Unimplemented(ctx.node, "no kernel for operands of dtype ", DTypeName(t));
  }
  const Dims& a = ctx.inputs[0].dims;
  const Dims& b = ctx.inputs[1].dims;
  ASSIGN_OR_RETURN(Dims out, BroadcastDims(ctx.node, {&a, &b}));
  ASSIGN_OR_RETURN(plan->bc, MakeBroadcastPlan(ctx.node, out, {&a, &b}));
  if (op == OpKind::kPow && NumElements(a) == NumElements(out)) {
    switch (PowCodeFor(ctx)) {
      case kPowSquare: plan->run = RunPowScalar<kPowSquare>; break;
      case kPowCube: plan->run = RunPowScalar<kPowCube>; break;
      case kPowSqrt: plan->run = RunPowScalar<kPowSqrt>; break;
      case kPowRecip: plan->run = RunPowScalar<kPowRecip>; break;
      case kPowRsqrt: plan->run = RunPowScalar<kPowRsqrt>; break;
      case kPowRecipSq: plan->run = RunPowScalar<kPowRecipSq>; break;
      default: break;
    }
  }
  ctx.outputs = {TensorInfo{ProducesBool(op) ? DType::kBool : t, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status PrepareWhere(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 3, 3));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kBool));
  auto plan = std::make_shared<ElementwisePlan>();
  ASSIGN_OR_RETURN(DType t, CommonDType(ctx, plan.get(), 1, 2));
  switch (DTypeSize(t)) {
    case 1: plan->run = RunWhere<uint8_t>; break;
    case 2: plan->run = RunWhere<uint16_t>; break;
    case 4: plan->run = RunWhere<uint32_t>; break;
    case 8: plan->run = RunWhere<uint64_t>; break;
    default: return InvalidArg(ctx.node, "operands have unknown dtype");
  }
  const Dims& c = ctx.inputs[0].dims;
  const Dims& a = ctx.inputs[1].dims;
  const Dims& b = ctx.inputs[2].dims;
  ASSIGN_OR_RETURN(Dims out, BroadcastDims(ctx.node, {&c, &a, &b}));
  ASSIGN_OR_RETURN(plan->bc, MakeBroadcastPlan(ctx.node, out, {&c, &a, &b}));
  ctx.outputs = {TensorInfo{t, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status EvalElementwise(EvalContext& ctx) {
  const ElementwisePlan& p = StateAs<ElementwisePlan>(ctx);
  return p.run(p, ctx);
}

}  // namespace

absl::Span<const KernelDef> ElementwiseKernels() {
  // Registered for any dtype: Prepare picks the typed loop (FP32, FP64, INT64,
  // INT32; comparisons also UINT8 and BOOL) and rejects the rest.
  static const KernelDef kKernels[] = {
      {OpKind::kAdd, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kSub, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kMul, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kDiv, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kPow, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kMaximum, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kMinimum, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kFloorDiv, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kRemainder, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kFmod, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kAtan2, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kEqual, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kNotEqual, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kLess, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kLessEqual, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kGreater, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kGreaterEqual, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kLogicalAnd, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kLogicalOr, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kLogicalXor, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kWhere, DType::kUnknown, PrepareWhere, EvalElementwise},
  };
  return kKernels;
}

}  // namespace kiln::kernels
