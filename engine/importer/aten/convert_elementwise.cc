// Converters for elementwise aten ops: activations, add/sub/mul/div, binary
// ops with tensor or number operands, where/masked_fill, and the ops that are
// no-ops at inference time.
//
// Number operands become 0-dim values of their own kind (a Python int as
// INT64, a float as FP64); the kernels promote them as PyTorch promotes
// Python numbers (engine/common/type_promotion).
#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer::aten {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

// In-place forms (add_, mul_, ...) keep the destination's dtype; the kernel
// reads this attribute to promote accordingly.
ir::Attributes InPlaceAttrs(const AtenCall& call) {
  ir::Attributes attrs;
  if (OutOfPlaceOp(call.op()) != call.op()) attrs.SetBool("in_place", true);
  return attrs;
}

// a * alpha as one number: integral when both are.
Number Scaled(const Number& a, const Number& alpha) {
  Number n;
  if (a.IsIntegral() && alpha.IsIntegral()) {
    n.kind = Number::kInt;
    n.i = static_cast<int64_t>(a.ToDouble()) * static_cast<int64_t>(alpha.ToDouble());
  } else {
    n.kind = Number::kFloat;
    n.f = a.ToDouble() * alpha.ToDouble();
  }
  return n;
}

// Argument `name` as a tensor, or as a 0-dim number value.
absl::StatusOr<ir::ValueId> Operand(AtenCall& call, std::string_view name) {
  if (call.IsScalar(name)) return call.ScalarValue(name);
  return call.Tensor(name);
}

}  // namespace

ConvertResult ConvertUnary(OpKind op, AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  if (op == OpKind::kLogicalNot && OutOfPlaceOp(call.op()) != call.op()) {
    // x.logical_not_() writes its bools into x: 1/0 in x's dtype.
    ir::ValueId b = cx.Emit(call, op, {x}, {}, ".bool");
    return One(cx.Emit(call, OpKind::kCast, {b, x}));
  }
  return One(cx.Emit(call, op, {x}));
}

// round(self), or round.decimals(self, decimals) as PyTorch computes it:
// round_half_even(x * 10^d) / 10^d, or round_half_even(x / 10^-d) * 10^-d for
// a negative d.
ConvertResult ConvertRound(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t decimals, call.Int("decimals", 0));
  if (decimals == 0) return One(cx.Emit(call, OpKind::kRound, {x}));
  Number scale;
  scale.kind = Number::kFloat;
  scale.f = std::pow(10.0, static_cast<double>(decimals > 0 ? decimals : -decimals));
  const ir::ValueId s = cx.AddNumber(scale, call.OutputName(0) + ".scale");
  const ir::ValueId scaled =
      cx.Emit(call, decimals > 0 ? OpKind::kMul : OpKind::kDiv, {x, s}, {}, ".scaled");
  const ir::ValueId rounded = cx.Emit(call, OpKind::kRound, {scaled}, {}, ".rounded");
  return One(cx.Emit(call, decimals > 0 ? OpKind::kDiv : OpKind::kMul, {rounded, s}));
}

// add(self, other, alpha=1), sub(self, other, alpha=1), mul(self, other),
// div(self, other, rounding_mode=None); `other` (or `self`) may be a number.
// out = self op (alpha * other): alpha != 1 is folded into a number operand or
// becomes a Mul by a 0-dim constant.
ConvertResult ConvertBinary(OpKind op, AtenCall& call, ConvertContext& cx) {
  if (op == OpKind::kDiv && call.Has("rounding_mode")) {
    ASSIGN_OR_RETURN(std::string mode, call.String("rounding_mode"));
    ASSIGN_OR_RETURN(ir::ValueId a, Operand(call, "self"));
    ASSIGN_OR_RETURN(ir::ValueId b, Operand(call, "other"));
    if (mode == "floor") return One(cx.Emit(call, OpKind::kFloorDiv, {a, b}));
    if (mode == "trunc") return One(cx.Emit(call, OpKind::kTruncDiv, {a, b}));
    return call.InvalidArgument(absl::StrCat("unknown rounding_mode '", mode, "'"));
  }
  const bool takes_alpha = op == OpKind::kAdd || op == OpKind::kSub;
  Number alpha;
  alpha.i = 1;
  if (takes_alpha && call.Has("alpha")) {
    std::optional<Number> a = call.ConstNumber("alpha");
    if (!a) return call.InvalidArgument("alpha must be a constant number");
    alpha = *a;
  }
  const bool unit_alpha = alpha.ToDouble() == 1.0;
  const std::string name = call.OutputName(0);

  std::optional<Number> lhs_number = call.ConstNumber("self");
  std::optional<Number> rhs_number = call.ConstNumber("other");
  ir::ValueId lhs, rhs;
  if (rhs_number) {
    // Usual case (x + 1, x * 0.5): fold alpha into the number.
    if (lhs_number) return call.InvalidArgument("has no tensor operand");
    ASSIGN_OR_RETURN(lhs, call.Tensor("self"));
    rhs = cx.AddNumber(unit_alpha ? *rhs_number : Scaled(*rhs_number, alpha), name + ".other");
    return One(cx.Emit(call, op, {lhs, rhs}, InPlaceAttrs(call)));
  }
  ASSIGN_OR_RETURN(rhs, Operand(call, "other"));
  if (lhs_number) {
    lhs = cx.AddNumber(*lhs_number, name + ".self");
  } else {
    ASSIGN_OR_RETURN(lhs, Operand(call, "self"));
  }
  if (!unit_alpha) {
    ir::ValueId scale = cx.AddNumber(alpha, name + ".alpha");
    rhs = cx.Emit(call, OpKind::kMul, {rhs, scale}, {}, ".scaled");
  }
  return One(cx.Emit(call, op, {lhs, rhs}, InPlaceAttrs(call)));
}

// (self, other), or pow's (self, exponent).
ConvertResult ConvertBinaryOp(OpKind op, AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId a, Operand(call, "self"));
  ASSIGN_OR_RETURN(ir::ValueId b, Operand(call, op == OpKind::kPow ? "exponent" : "other"));
  return One(cx.Emit(call, op, {a, b}, InPlaceAttrs(call)));
}

// rsub(self, other, alpha=1) = other - alpha * self.
ConvertResult ConvertRsub(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId self, Operand(call, "self"));
  ASSIGN_OR_RETURN(ir::ValueId other, Operand(call, "other"));
  if (call.Has("alpha")) {
    // A Number, as add and sub take it: an integer alpha keeps integer operands integer.
    std::optional<Number> alpha = call.ConstNumber("alpha");
    if (!alpha) return call.InvalidArgument("alpha must be a constant number");
    if (alpha->ToDouble() != 1.0) {
      ir::ValueId s = cx.AddNumber(*alpha, call.OutputName(0) + ".alpha");
      self = cx.Emit(call, OpKind::kMul, {self, s}, {}, ".scaled");
    }
  }
  return One(cx.Emit(call, OpKind::kSub, {other, self}));
}

// where(condition, self, other); self and other may be numbers.
ConvertResult ConvertWhere(AtenCall& call, ConvertContext& cx) {
  if (!call.Has("self")) {
    return call.Unimplemented(
        "where(condition) (the indices of non-zeros) has a data-dependent shape");
  }
  ASSIGN_OR_RETURN(ir::ValueId cond, call.Tensor("condition"));
  ASSIGN_OR_RETURN(ir::ValueId a, Operand(call, "self"));
  ASSIGN_OR_RETURN(ir::ValueId b, Operand(call, "other"));
  return One(cx.Emit(call, OpKind::kWhere, {cond, a, b}));
}

// masked_fill(self, mask, value) = where(mask, value, self), with `value` cast
// to self's dtype first: masked_fill keeps self's dtype (an integer tensor
// filled with 1.5 stays integer), where Where would promote.
ConvertResult ConvertMaskedFill(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId self, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId mask, call.Tensor("mask"));
  ASSIGN_OR_RETURN(ir::ValueId value, Operand(call, "value"));
  value = cx.Emit(call, OpKind::kCast, {value, self}, {}, ".value");
  return One(cx.Emit(call, OpKind::kWhere, {mask, value, self}));
}

// hardtanh(self, min_val=-1, max_val=1) -> Clip. hardtanh keeps self's dtype
// whatever its bounds (libtorch writes into a tensor like self, an integer
// one with the bounds truncated), so the bounds count as integers for Clip
// (integer_bounds: an integer tensor stays integer; the float kernels ignore it).
ConvertResult ConvertHardtanh(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(double min, call.Double("min_val", -1.0));
  ASSIGN_OR_RETURN(double max, call.Double("max_val", 1.0));
  ir::Attributes attrs;
  attrs.SetFloat("min", min);
  attrs.SetFloat("max", max);
  attrs.SetBool("integer_bounds", true);
  return One(cx.Emit(call, OpKind::kClip, {x}, std::move(attrs)));
}

// relu6(self) = hardtanh(self, 0, 6).
ConvertResult ConvertRelu6(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ir::Attributes attrs;
  attrs.SetFloat("min", 0.0);
  attrs.SetFloat("max", 6.0);
  attrs.SetBool("integer_bounds", true);
  return One(cx.Emit(call, OpKind::kClip, {x}, std::move(attrs)));
}

// gelu(self, approximate="none"); older archives have no `approximate`.
ConvertResult ConvertGelu(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::string approximate, call.String("approximate", "none"));
  if (approximate != "none" && approximate != "tanh") {
    return call.InvalidArgument(absl::StrCat("unknown approximate='", approximate, "'"));
  }
  ir::Attributes attrs;
  attrs.SetString("approximate", approximate);
  return One(cx.Emit(call, OpKind::kGelu, {x}, std::move(attrs)));
}

ConvertResult PassThrough(AtenCall& call, ConvertContext& cx) {
  // dropout's argument is "input", the others' "self".
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor(call.Has("input") ? "input" : "self"));
  return One(x);
}

}  // namespace kiln::importer::aten
