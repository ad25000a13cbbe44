// Broadcasting elementwise ops: arithmetic (Add, Sub, Mul, Div, Pow, Maximum,
// Minimum, FloorDiv, TruncDiv, Remainder, Fmod, Atan2), comparisons (-> BOOL), logical
// ops (-> BOOL) and Where.
//
// Prepare asks engine/common/type_promotion for the dtype PyTorch computes in
// and returns (from the operands' dtypes and kinds: dimensioned tensor, 0-dim
// tensor, Python number), turns the shapes into a loop plan (see broadcast.h)
// and picks the typed row function. Constant operands of another dtype are
// converted once in Prepare; run-time operands are converted into the
// workspace at the start of Eval. FP16 and BF16 compute in float32 and round
// the result back, as PyTorch's CPU kernels do. Each row runs as one of four
// plain loops (vector-vector, vector-scalar, scalar-vector, scalar-scalar)
// that GCC vectorises.
//
// The arithmetic follows PyTorch's CPU kernels: Maximum/Minimum propagate NaN,
// FloorDiv and Remainder use Python's rounding (the sign of the divisor), and
// Pow by a scalar exponent of 2, 3, 0.5, -1, -0.5 or -2 is computed as the
// products, square roots and reciprocals PyTorch uses for those exponents.
// Integer division by zero fails the request (PyTorch raises) instead of
// trapping. An integer base to a negative exponent follows libtorch's powi.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/common/type_promotion.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {
namespace {

using ir::OpKind;

struct ElementwisePlan;
// Runs the op on `operands` (already in the compute dtype) into `out`.
using RunFn = absl::Status (*)(const ElementwisePlan&, EvalContext&, const void* const* operands,
                               void* out);

struct ElementwisePlan {
  BroadcastPlan bc;
  Tensor scalars[kMaxOperands];  // constants converted to the compute dtype
  // Run-time operands whose dtype is not the kernel dtype: converted into the
  // workspace at `offset` (bytes) before the loop.
  bool convert[kMaxOperands] = {};
  size_t offset[kMaxOperands] = {};
  DType kernel_dtype = DType::kUnknown;  // what the loop reads (FP32 for FP16/BF16)
  // When the loop's output dtype (`loop_out`) is not the result's (an FP16
  // result computed in FP32, an in-place result kept in the destination's
  // dtype), the loop writes to the workspace at `out_offset`, converted after.
  DType loop_out = DType::kUnknown;
  bool narrow_output = false;
  size_t out_offset = 0;
  int num_operands = 2;
  RunFn run = nullptr;
  int pow_exponent_code = 0;  // see PowCode
};

// ---------------------------------------------------------------- functors

template <typename T>
struct AddOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
      return a || b;  // PyTorch: True + True is True
    } else {
      return static_cast<T>(a + b);
    }
  }
};
template <typename T>
struct SubOp {
  static T Apply(T a, T b) { return static_cast<T>(a - b); }
};
template <typename T>
struct MulOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
      return a && b;
    } else {
      return static_cast<T>(a * b);
    }
  }
};
template <typename T>
struct BitAndOp {
  static T Apply(T a, T b) { return static_cast<T>(a & b); }
};
template <typename T>
struct BitOrOp {
  static T Apply(T a, T b) { return static_cast<T>(a | b); }
};
template <typename T>
struct BitXorOp {
  static T Apply(T a, T b) { return static_cast<T>(a ^ b); }
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
      T q = static_cast<T>(a / b);
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      return q;
    }
  }
};
template <typename T>
struct TruncDivOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::trunc(a / b);  // PyTorch's div_trunc for floats
    } else {
      return b == 0 ? T(0) : static_cast<T>(a / b);  // C++ rounds toward zero
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
      T r = static_cast<T>(a % b);
      if (r != 0 && (r < 0) != (b < 0)) r = static_cast<T>(r + b);
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
      return b == 0 ? T(0) : static_cast<T>(a % b);
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
// Integer powers by squaring, wrapping on overflow as PyTorch's do (computed in
// uint64 and truncated, which wraps the same way without signed overflow). A
// negative exponent gives what libtorch's powi gives: 1 ** e is 1, (-1) ** e is
// -1 or 1 by e's parity, and every other base truncates to 0 (1 / x rounded
// toward zero; 0 too, no error).
template <typename T>
struct IntPowOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_signed_v<T>) {
      if (b < 0) {
        if (a == 1) return T(1);
        if (a == -1) return (b & 1) != 0 ? T(-1) : T(1);
        return T(0);
      }
    }
    uint64_t base = static_cast<uint64_t>(static_cast<int64_t>(a)), r = 1;
    for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
      if (e & 1) r *= base;
      base *= base;
    }
    return static_cast<T>(r);
  }
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

// Elements of operand `o` (the converted constant where there is one).
int64_t OperandElements(const ElementwisePlan& p, const EvalContext& ctx, int o) {
  return p.scalars[o].defined() && p.scalars[o].dtype() != DType::kUnknown
             ? p.scalars[o].num_elements()
             : ctx.inputs[o]->num_elements();
}

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
absl::Status RunBinary(const ElementwisePlan& p, EvalContext& ctx, const void* const* operands,
                       void* out_data) {
  const T* a = static_cast<const T*>(operands[0]);
  const T* b = static_cast<const T*>(operands[1]);
  Out* out = static_cast<Out*>(out_data);
  ForEachRow(p.bc, ctx.outputs[0]->num_elements(), ctx.num_threads, kCost,
             [&](int64_t o, const int64_t* off, const int64_t* s, int64_t n) {
               Row<T, Out, Op>(a + off[0], s[0], b + off[1], s[1], out + o, n);
             });
  return absl::OkStatus();
}

// Integer division and remainder: a zero divisor fails the request.
template <typename T, typename Op>
absl::Status RunIntDivision(const ElementwisePlan& p, EvalContext& ctx,
                            const void* const* operands, void* out) {
  const T* b = static_cast<const T*>(operands[1]);
  const int64_t nb = OperandElements(p, ctx, 1);
  for (int64_t i = 0; i < nb; ++i) {
    if (b[i] == 0) return InvalidArg(ctx.node, "integer division by zero");
  }
  return RunBinary<T, T, Op>(p, ctx, operands, out);
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
absl::Status RunPowScalar(const ElementwisePlan&, EvalContext& ctx, const void* const* operands,
                          void* out_data) {
  const float* a = static_cast<const float*>(operands[0]);
  float* out = static_cast<float*>(out_data);
  const int64_t n = ctx.outputs[0]->num_elements();
  ParallelFor(n, ctx.num_threads, n * 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = PowScalarOp<kCode>::Apply(a[i]);
  });
  return absl::OkStatus();
}

// Where: cond (bool) ? a : b, copied as raw elements of `T` (any dtype of that size).
template <typename T>
absl::Status RunWhere(const ElementwisePlan& p, EvalContext& ctx, const void* const* operands,
                      void* out_data) {
  const bool* c = static_cast<const bool*>(operands[0]);
  const T* a = static_cast<const T*>(operands[1]);
  const T* b = static_cast<const T*>(operands[2]);
  T* out = static_cast<T*>(out_data);
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

// The typed loops exist for every dtype the loop computes in: FP16 and BF16
// are computed as FP32 (see KernelDType), so they never reach these switches.
#define KILN_INT_CASES(MACRO)                  \
  case DType::kInt64: return MACRO(int64_t);   \
  case DType::kInt32: return MACRO(int32_t);   \
  case DType::kInt16: return MACRO(int16_t);   \
  case DType::kInt8: return MACRO(int8_t);     \
  case DType::kUInt8: return MACRO(uint8_t);

template <template <typename> class Op>
RunFn ArithFn(DType t) {
#define KILN_ARITH(T) RunBinary<T, T, Op<T>>
  switch (t) {
    case DType::kF32: return KILN_ARITH(float);
    case DType::kF64: return KILN_ARITH(double);
    case DType::kBool: return KILN_ARITH(bool);
    KILN_INT_CASES(KILN_ARITH)
    default: return nullptr;
  }
#undef KILN_ARITH
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
#define KILN_INTDIV(T) RunIntDivision<T, Op<T>>
  switch (t) {
    case DType::kF32: return RunBinary<float, float, Op<float>, 4>;
    case DType::kF64: return RunBinary<double, double, Op<double>, 4>;
    KILN_INT_CASES(KILN_INTDIV)
    default: return nullptr;
  }
#undef KILN_INTDIV
}

RunFn IntPowFn(DType t) {
#define KILN_INTPOW(T) RunBinary<T, T, IntPowOp<T>>
  switch (t) {
    KILN_INT_CASES(KILN_INTPOW)
    default: return nullptr;
  }
#undef KILN_INTPOW
}

template <template <typename> class Op>
RunFn BitwiseFn(DType t) {
#define KILN_BITWISE(T) RunBinary<T, T, Op<T>>
  switch (t) {
    case DType::kBool: return RunBinary<bool, bool, Op<bool>>;
    KILN_INT_CASES(KILN_BITWISE)
    default: return nullptr;
  }
#undef KILN_BITWISE
}

template <template <typename> class Op>
RunFn CompareFn(DType t) {
#define KILN_COMPARE(T) RunBinary<T, bool, Op<T>>
  switch (t) {
    case DType::kF32: return KILN_COMPARE(float);
    case DType::kF64: return KILN_COMPARE(double);
    case DType::kBool: return KILN_COMPARE(bool);
    KILN_INT_CASES(KILN_COMPARE)
    default: return nullptr;
  }
#undef KILN_COMPARE
}
#undef KILN_INT_CASES

bool IsBitwise(const ir::Node& node) { return node.attrs.GetBool("bitwise"); }

RunFn SelectFn(const ir::Node& node, DType t) {
  const bool bitwise = IsBitwise(node);
  switch (node.kind) {
    case OpKind::kAdd: return ArithFn<AddOp>(t);
    case OpKind::kSub: return ArithFn<SubOp>(t);
    case OpKind::kMul: return ArithFn<MulOp>(t);
    case OpKind::kDiv: return FloatFn<DivOp>(t);  // integer true division computes in float
    case OpKind::kMaximum: return ArithFn<MaximumOp>(t);
    case OpKind::kMinimum: return ArithFn<MinimumOp>(t);
    case OpKind::kFloorDiv: return IntDivFn<FloorDivOp>(t);
    case OpKind::kTruncDiv: return IntDivFn<TruncDivOp>(t);
    case OpKind::kRemainder: return IntDivFn<RemainderOp>(t);
    case OpKind::kFmod: return IntDivFn<FmodOp>(t);
    case OpKind::kAtan2: return FloatFn<Atan2Op>(t);
    case OpKind::kPow: return IsIntegral(t) ? IntPowFn(t) : FloatFn<PowOp>(t);
    case OpKind::kEqual: return CompareFn<EqOp>(t);
    case OpKind::kNotEqual: return CompareFn<NeOp>(t);
    case OpKind::kLess: return CompareFn<LtOp>(t);
    case OpKind::kLessEqual: return CompareFn<LeOp>(t);
    case OpKind::kGreater: return CompareFn<GtOp>(t);
    case OpKind::kGreaterEqual: return CompareFn<GeOp>(t);
    case OpKind::kLogicalAnd: return bitwise ? BitwiseFn<BitAndOp>(t) : CompareFn<AndOp>(t);
    case OpKind::kLogicalOr: return bitwise ? BitwiseFn<BitOrOp>(t) : CompareFn<OrOp>(t);
    case OpKind::kLogicalXor: return bitwise ? BitwiseFn<BitXorOp>(t) : CompareFn<XorOp>(t);
    default: return nullptr;
  }
}

// The promotion rule PyTorch applies to each op (engine/common/type_promotion).
PromotedOp PromotionFor(const ir::Node& node) {
  switch (node.kind) {
    case OpKind::kSub: return PromotedOp::kSub;
    case OpKind::kMul: return PromotedOp::kMul;
    case OpKind::kDiv: return PromotedOp::kTrueDivide;
    case OpKind::kAtan2: return PromotedOp::kFloatMath;
    case OpKind::kMaximum:
    case OpKind::kMinimum: return PromotedOp::kMaximum;
    case OpKind::kFloorDiv:
    case OpKind::kTruncDiv:
    case OpKind::kRemainder:
    case OpKind::kFmod: return PromotedOp::kFloorDivide;
    case OpKind::kEqual:
    case OpKind::kNotEqual:
    case OpKind::kLess:
    case OpKind::kLessEqual:
    case OpKind::kGreater:
    case OpKind::kGreaterEqual: return PromotedOp::kCompare;
    case OpKind::kLogicalAnd:
    case OpKind::kLogicalOr:
    case OpKind::kLogicalXor: return IsBitwise(node) ? PromotedOp::kBitwise : PromotedOp::kLogical;
    default: return PromotedOp::kAdd;  // add, pow, where
  }
}

// How input `i` takes part in promotion: a Python number (an int/float/bool
// value, or any 0-dim constant: libtorch's interpreter promotes the 0-dim
// constants of a frozen graph, the tracer's numbers and frozen 0-dim buffers
// alike, as Python numbers), a 0-dim tensor computed at run time, or a
// dimensioned tensor.
PromotionOperand OperandOf(const PrepareContext& ctx, size_t i) {
  const TensorInfo& in = ctx.inputs[i];
  const bool number = in.scalar || (in.constant != nullptr && in.dims.empty());
  const OperandKind kind = number                ? OperandKind::kScalar
                           : in.dims.empty()     ? OperandKind::kZeroDim
                                                 : OperandKind::kTensor;
  return {in.dtype, kind};
}

// The dtype the loops compute in: FP16 and BF16 are storage types.
DType KernelDType(DType compute) {
  return compute == DType::kF16 || compute == DType::kBF16 ? DType::kF32 : compute;
}

// Arranges for inputs [first, first + count) to reach the loop as `kernel`:
// constants are converted now, run-time operands get a workspace slot.
void PlanOperands(PrepareContext& ctx, ElementwisePlan* plan, size_t first, size_t count,
                  DType kernel) {
  plan->kernel_dtype = kernel;
  for (size_t i = first; i < first + count; ++i) {
    const TensorInfo& in = ctx.inputs[i];
    if (in.dtype == kernel) continue;
    if (in.constant != nullptr) {
      Tensor c = Tensor::Zeros(kernel, in.dims);
      ConvertElements(in.constant->raw_data(), in.dtype, c.raw_data(), kernel, c.num_elements());
      plan->scalars[i] = std::move(c);
    } else {
      plan->convert[i] = true;
      plan->offset[i] = ctx.workspace_bytes;
      ctx.workspace_bytes += (NumElements(in.dims) * DTypeSize(kernel) + 63) / 64 * 64;
    }
  }
}

// Whether input `i` is a constant with a negative element.
bool HasNegativeConstant(const PrepareContext& ctx, size_t i) {
  const TensorInfo& in = ctx.inputs[i];
  if (in.constant == nullptr) return false;
  for (int64_t k = 0; k < in.constant->num_elements(); ++k) {
    if (LoadAnyAsDouble(in.constant->raw_data(), in.dtype, k) < 0) return true;
  }
  return false;
}

// The scalar exponent special case, when input 1 is a 0-dim constant.
int PowCodeFor(const PrepareContext& ctx, DType kernel) {
  if (!IsScalarConstant(ctx, 1) || kernel != DType::kF32) return kPowGeneric;
  const double e = LoadAnyAsDouble(ctx.inputs[1].constant->raw_data(), ctx.inputs[1].dtype, 0);
  if (e == 2) return kPowSquare;
  if (e == 3) return kPowCube;
  if (e == 0.5) return kPowSqrt;
  if (e == -1) return kPowRecip;
  if (e == -0.5) return kPowRsqrt;
  if (e == -2) return kPowRecipSq;
  return kPowGeneric;
}

// The op's types by PyTorch's promotion, with the node named in errors.
absl::StatusOr<BinaryTypes> TypesOf(const PrepareContext& ctx, size_t a, size_t b) {
  const PromotedOp op = PromotionFor(ctx.node);
  PromotionOperand oa = OperandOf(ctx, a), ob = OperandOf(ctx, b);
  if (op == PromotedOp::kMaximum || op == PromotedOp::kLogical ||
      ctx.node.attrs.GetBool("tensor_operands")) {
    // These take tensors only, so a 0-dim operand here is a 0-dim tensor
    // (clamp's tensor bounds, a saved trace's constant in floor_divide), not
    // a Python number.
    if (oa.kind == OperandKind::kScalar) oa.kind = OperandKind::kZeroDim;
    if (ob.kind == OperandKind::kScalar) ob.kind = OperandKind::kZeroDim;
  }
  absl::StatusOr<BinaryTypes> types =
      BinaryOpTypes(op, oa, ob, /*in_place=*/ctx.node.attrs.GetBool("in_place"));
  if (!types.ok()) {
    return InvalidArg(ctx.node, "operands ", DTypeName(ctx.inputs[a].dtype), " and ",
                      DTypeName(ctx.inputs[b].dtype), ": ", types.status().message());
  }
  return types;
}

absl::Status PrepareBinary(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  ASSIGN_OR_RETURN(BinaryTypes types, TypesOf(ctx, 0, 1));
  const DType kernel = KernelDType(types.compute);
  auto plan = std::make_shared<ElementwisePlan>();
  plan->run = SelectFn(ctx.node, kernel);
  if (plan->run == nullptr) {
    return Unimplemented(ctx.node, "no kernel for ", DTypeName(types.compute), " operands (from ",
                         DTypeName(ctx.inputs[0].dtype), " and ", DTypeName(ctx.inputs[1].dtype),
                         ")");
  }
  if (ctx.node.kind == OpKind::kPow && IsIntegral(kernel) && HasNegativeConstant(ctx, 1)) {
    // libtorch raises for a Python number exponent ("Integers to negative
    // integer powers are not allowed") and computes for a tensor one; the
    // frozen graph no longer says which, so the fallback decides.
    return Unimplemented(ctx.node, "an integer base to a constant negative exponent");
  }
  const Dims& a = ctx.inputs[0].dims;
  const Dims& b = ctx.inputs[1].dims;
  ASSIGN_OR_RETURN(Dims out, BroadcastDims(ctx.node, {&a, &b}));
  ASSIGN_OR_RETURN(plan->bc, MakeBroadcastPlan(ctx.node, out, {&a, &b}));
  PlanOperands(ctx, plan.get(), 0, 2, kernel);
  // The loop's result dtype: bool for comparisons, else the kernel dtype; an
  // in-place result of another dtype is converted like an FP16 one. Asked of
  // the op, not of the result: an in-place comparison (x.eq_(y)) writes its
  // bools into x's dtype.
  const PromotedOp promoted = PromotionFor(ctx.node);
  const bool bool_loop = promoted == PromotedOp::kCompare || promoted == PromotedOp::kLogical;
  const DType loop_out = bool_loop && types.compute != DType::kBool ? DType::kBool : kernel;
  plan->loop_out = loop_out;
  if (loop_out != types.result) {
    plan->narrow_output = true;
    plan->out_offset = ctx.workspace_bytes;
    ctx.workspace_bytes += NumElements(out) * DTypeSize(loop_out);
  }
  plan->kernel_dtype = kernel;
  if (ctx.node.kind == OpKind::kPow && NumElements(a) == NumElements(out)) {
    switch (PowCodeFor(ctx, kernel)) {
      case kPowSquare: plan->run = RunPowScalar<kPowSquare>; break;
      case kPowCube: plan->run = RunPowScalar<kPowCube>; break;
      case kPowSqrt: plan->run = RunPowScalar<kPowSqrt>; break;
      case kPowRecip: plan->run = RunPowScalar<kPowRecip>; break;
      case kPowRsqrt: plan->run = RunPowScalar<kPowRsqrt>; break;
      case kPowRecipSq: plan->run = RunPowScalar<kPowRecipSq>; break;
      default: break;
    }
  }
  ctx.outputs = {TensorInfo{types.result, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status PrepareWhere(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 3, 3));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kBool));
  ASSIGN_OR_RETURN(BinaryTypes types, TypesOf(ctx, 1, 2));
  auto plan = std::make_shared<ElementwisePlan>();
  plan->num_operands = 3;
  // Where copies elements, so FP16/BF16 stay as they are (no FP32 detour).
  const DType t = types.result;
  plan->loop_out = t;
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
  PlanOperands(ctx, plan.get(), 1, 2, t);
  ctx.outputs = {TensorInfo{t, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status EvalElementwise(EvalContext& ctx) {
  const ElementwisePlan& p = StateAs<ElementwisePlan>(ctx);
  const void* operands[kMaxOperands] = {};
  char* ws = static_cast<char*>(ctx.workspace);
  for (int o = 0; o < p.num_operands; ++o) {
    if (p.scalars[o].defined() && p.scalars[o].dtype() != DType::kUnknown) {
      operands[o] = p.scalars[o].raw_data();
    } else if (p.convert[o]) {
      const Tensor& in = *ctx.inputs[o];
      ConvertElements(in.raw_data(), in.dtype(), ws + p.offset[o], p.kernel_dtype,
                      in.num_elements());
      operands[o] = ws + p.offset[o];
    } else {
      operands[o] = ctx.inputs[o]->raw_data();
    }
  }
  Tensor& out = *ctx.outputs[0];
  if (!p.narrow_output) return p.run(p, ctx, operands, out.raw_data());
  // The loop computed in a wider (or other) dtype: round into the output.
  RETURN_IF_ERROR(p.run(p, ctx, operands, ws + p.out_offset));
  ConvertElements(ws + p.out_offset, p.loop_out, out.raw_data(), out.dtype(), out.num_elements());
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> ElementwiseKernels() {
  // Registered for any dtype: Prepare picks the typed loop for the promoted
  // dtype (all ten; FP16/BF16 through FP32) and rejects what PyTorch rejects.
  static const KernelDef kKernels[] = {
      {OpKind::kAdd, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kSub, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kMul, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kDiv, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kPow, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kMaximum, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kMinimum, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kFloorDiv, DType::kUnknown, PrepareBinary, EvalElementwise},
      {OpKind::kTruncDiv, DType::kUnknown, PrepareBinary, EvalElementwise},
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
