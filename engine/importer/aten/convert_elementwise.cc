// Converters for elementwise aten ops: activations, add/sub/mul/div, binary
// ops with tensor or number operands, where/masked_fill, and the ops that are
// no-ops at inference time.
//
// Number operands become 0-dim values of their own kind (a Python int as
// INT64, a float as FP64); the kernels promote them as PyTorch promotes
// Python numbers (engine/common/type_promotion).
#include <cmath>
#include <limits>
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
  if (op == OpKind::kAdd && call.overload() == "t") return ConvertListConcat(call, cx);
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

// __and__ / bitwise_and and friends, bitwise_not: logical on BOOL (the masks
// models combine), bitwise on integers (attr bitwise). The in-place forms
// (bitwise_and_, ...) keep the destination's dtype (attr in_place).
ConvertResult ConvertBitwise(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = OutOfPlaceOp(call.op());
  ir::Attributes attrs = InPlaceAttrs(call);
  attrs.SetBool("bitwise", true);
  if (op == "aten::bitwise_not") {
    ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
    return One(cx.Emit(call, OpKind::kLogicalNot, {x}, std::move(attrs)));
  }
  const OpKind kind = op.find("and") != std::string_view::npos   ? OpKind::kLogicalAnd
                      : op.find("xor") != std::string_view::npos ? OpKind::kLogicalXor
                                                                 : OpKind::kLogicalOr;
  ASSIGN_OR_RETURN(ir::ValueId a, Operand(call, "self"));
  ASSIGN_OR_RETURN(ir::ValueId b, Operand(call, "other"));
  return One(cx.Emit(call, kind, {a, b}, std::move(attrs)));
}

// clamp / clip(self, min=None, max=None), clamp_min(self, min), clamp_max(self,
// max): Clip with constant bounds, Maximum/Minimum with tensor bounds.
ConvertResult ConvertClamp(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  const char* const names[] = {"min", "max"};
  bool tensor_bound = false;
  for (const char* name : names) {
    tensor_bound |= call.Has(name) && !call.IsScalar(name) && !call.ConstNumber(name).has_value();
  }
  if (tensor_bound) {
    ir::ValueId y = x;
    if (call.Has("min")) {
      ASSIGN_OR_RETURN(ir::ValueId lo, Operand(call, "min"));
      y = cx.Emit(call, OpKind::kMaximum, {y, lo}, {}, call.Has("max") ? ".lower" : "");
    }
    if (call.Has("max")) {
      ASSIGN_OR_RETURN(ir::ValueId hi, Operand(call, "max"));
      y = cx.Emit(call, OpKind::kMinimum, {y, hi});
    }
    return One(y);
  }
  // Python int bounds keep an integer tensor integer; a float bound makes the
  // result float (PyTorch's promotion), which the Clip kernel needs to know.
  ir::Attributes attrs;
  bool integer_bounds = true;
  for (const char* name : names) {
    if (!call.Has(name)) continue;
    std::optional<Number> n = call.ConstNumber(name);
    if (!n.has_value()) return call.Unimplemented(absl::StrCat(name, " known only at run time"));
    integer_bounds &= n->IsIntegral();
    attrs.SetFloat(name, n->ToDouble());
  }
  if (integer_bounds) attrs.SetBool("integer_bounds", true);
  return One(cx.Emit(call, OpKind::kClip, {x}, std::move(attrs)));
}

// addcmul(self, tensor1, tensor2, *, value=1) = self + value * tensor1 * tensor2;
// addcdiv with tensor1 / tensor2.
ConvertResult ConvertAddcmulDiv(AtenCall& call, ConvertContext& cx) {
  const bool div = OutOfPlaceOp(call.op()) == "aten::addcdiv";
  ASSIGN_OR_RETURN(ir::ValueId self, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId t1, call.Tensor("tensor1"));
  ASSIGN_OR_RETURN(ir::ValueId t2, call.Tensor("tensor2"));
  ASSIGN_OR_RETURN(double value, call.Double("value", 1.0));
  ir::ValueId p = cx.Emit(call, div ? OpKind::kDiv : OpKind::kMul, {t1, t2}, {}, ".product");
  if (value != 1.0) {
    // libtorch converts value to self's dtype (an integer tensor's 0.5 is 0,
    // and the result stays integer): never a Python float that would promote.
    const std::string name = call.OutputName(0) + ".value";
    ir::ValueId v;
    if (value == std::trunc(value) && std::abs(value) < 9.0e15) {
      v = cx.AddInt(static_cast<int64_t>(value), name);
    } else {
      v = cx.Emit(call, OpKind::kCast, {cx.AddFloat(value, name), self}, {}, ".value_cast");
    }
    p = cx.Emit(call, OpKind::kMul, {p, v}, {}, ".scaled");
  }
  return One(cx.Emit(call, OpKind::kAdd, {self, p}));
}

// lerp(self, end, weight): PyTorch's two-sided form, exact at both ends:
// weight < 0.5 ? self + weight * (end - self) : end - (end - self) * (1 - weight).
ConvertResult ConvertLerp(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId self, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId end, call.Tensor("end"));
  const std::string name = call.OutputName(0);
  const ir::ValueId diff = cx.Emit(call, OpKind::kSub, {end, self}, {}, ".diff");
  std::optional<Number> weight = call.ConstNumber("weight");
  if (!weight.has_value()) {
    // A tensor weight: the same two sides, chosen per element by |weight| < 0.5.
    ASSIGN_OR_RETURN(ir::ValueId w, Operand(call, "weight"));
    const ir::ValueId mag = cx.Emit(call, OpKind::kAbs, {w}, {}, ".abs");
    const ir::ValueId small =
        cx.Emit(call, OpKind::kLess, {mag, cx.AddFloat(0.5, name + ".half")}, {}, ".small");
    const ir::ValueId step = cx.Emit(call, OpKind::kMul, {w, diff}, {}, ".step");
    const ir::ValueId near = cx.Emit(call, OpKind::kAdd, {self, step}, {}, ".from_self");
    const ir::ValueId rest =
        cx.Emit(call, OpKind::kSub, {cx.AddFloat(1.0, name + ".one"), w}, {}, ".rest");
    const ir::ValueId back = cx.Emit(call, OpKind::kMul, {diff, rest}, {}, ".back");
    const ir::ValueId far = cx.Emit(call, OpKind::kSub, {end, back}, {}, ".from_end");
    return One(cx.Emit(call, OpKind::kWhere, {small, near, far}));
  }
  const double w = weight->ToDouble();
  const bool from_self = std::abs(w) < 0.5;
  const ir::ValueId s = cx.Emit(
      call, OpKind::kMul, {diff, cx.AddFloat(from_self ? w : 1.0 - w, name + ".weight")}, {},
      ".step");
  return One(cx.Emit(call, from_self ? OpKind::kAdd : OpKind::kSub, {from_self ? self : end, s}));
}

// square(self) = pow(self, 2), as libtorch computes it: a bool tensor squares
// to INT64 (bool and a Python int promote to int64), where self * self would
// stay BOOL. Pow by 2 is self * self for the float kernels (elementwise.cc).
ConvertResult ConvertSquare(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  const ir::ValueId two = cx.AddInt(2, call.OutputName(0) + ".exponent");
  return One(cx.Emit(call, OpKind::kPow, {x, two}, InPlaceAttrs(call)));
}

// isposinf / isneginf(self) = self == +-inf; isinf(self) = either;
// isfinite(self) = not (isnan or isinf). Integers and bools are never
// infinite (the comparison with a float number promotes them, exactly).
ConvertResult ConvertIsInf(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  const std::string_view op = call.op();
  const double inf = std::numeric_limits<double>::infinity();
  if (op == "aten::isposinf" || op == "aten::isneginf") {
    return One(cx.Emit(call, OpKind::kEqual, {x, cx.AddFloat(op == "aten::isposinf" ? inf : -inf)}));
  }
  const ir::ValueId pos = cx.Emit(call, OpKind::kEqual, {x, cx.AddFloat(inf)}, {}, ".posinf");
  const ir::ValueId neg = cx.Emit(call, OpKind::kEqual, {x, cx.AddFloat(-inf)}, {}, ".neginf");
  if (op == "aten::isinf") return One(cx.Emit(call, OpKind::kLogicalOr, {pos, neg}));
  const ir::ValueId inf_mask = cx.Emit(call, OpKind::kLogicalOr, {pos, neg}, {}, ".isinf");
  const ir::ValueId nan_mask = cx.Emit(call, OpKind::kIsNan, {x}, {}, ".isnan");
  const ir::ValueId either = cx.Emit(call, OpKind::kLogicalOr, {nan_mask, inf_mask}, {}, ".nonfinite");
  return One(cx.Emit(call, OpKind::kLogicalNot, {either}));
}

// nan_to_num(self, nan=None, posinf=None, neginf=None): None is 0 for nan and
// the dtype's largest / lowest finite value for the infinities (the kernel
// knows the dtype).
ConvertResult ConvertNanToNum(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ir::Attributes attrs;
  for (const char* name : {"nan", "posinf", "neginf"}) {
    if (!call.Has(name)) continue;
    ASSIGN_OR_RETURN(double v, call.Double(name));
    attrs.SetFloat(name, v);
  }
  return One(cx.Emit(call, OpKind::kNanToNum, {x}, std::move(attrs)));
}

// where(condition, self, other); self and other may be numbers.
ConvertResult ConvertWhere(AtenCall& call, ConvertContext& cx) {
  if (!call.Has("self")) {
    // where(condition): one 1-D index tensor per dim, NonZero's columns
    // (unbind(1): a list built at run time when neither the rank nor an
    // unpacking says how many).
    ASSIGN_OR_RETURN(ir::ValueId cond, call.Tensor("condition"));
    const ir::ValueId nz = cx.Emit(call, OpKind::kNonZero, {cond}, {}, ".nonzero");
    std::optional<size_t> rank = call.ListLength(0);
    if (const std::optional<Dims>& dims = cx.graph().value(cond).type.dims; dims.has_value()) {
      rank = dims->size();
    }
    if (!rank.has_value()) {
      ir::Attributes attrs;
      attrs.SetInt("axis", 1);
      return One(cx.EmitValue(call, OpKind::kSplitList, ir::ValueKind::kTensorList, {nz},
                              std::move(attrs)));
    }
    return One(cx.MakeTensorList(call, NonZeroColumns(call, cx, nz, *rank)));
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

// ---------------------------------------------------------------- parameterised activations

// leaky_relu(self, negative_slope=0.01).
ConvertResult ConvertLeakyRelu(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(double slope, call.Double("negative_slope", 0.01));
  ir::Attributes attrs;
  attrs.SetFloat("negative_slope", slope);
  return One(cx.Emit(call, OpKind::kLeakyRelu, {x}, std::move(attrs)));
}

// elu(self, alpha=1, scale=1, input_scale=1), selu(self), celu(self, alpha=1):
// all one Elu, scale * (x > 0 ? x : alpha * (exp(x * input_scale) - 1)).
ConvertResult ConvertElu(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = OutOfPlaceOp(call.op());
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  double alpha = 1.0, scale = 1.0, input_scale = 1.0;
  if (op == "aten::selu") {
    // The constants of torch.nn.SELU (Klambauer et al., 2017).
    alpha = 1.6732632423543772848170429916717;
    scale = 1.0507009873554804934193349852946;
  } else if (op == "aten::celu") {
    ASSIGN_OR_RETURN(alpha, call.Double("alpha", 1.0));
    input_scale = 1.0 / alpha;
  } else {
    ASSIGN_OR_RETURN(alpha, call.Double("alpha", 1.0));
    ASSIGN_OR_RETURN(scale, call.Double("scale", 1.0));
    ASSIGN_OR_RETURN(input_scale, call.Double("input_scale", 1.0));
  }
  ir::Attributes attrs;
  attrs.SetFloat("alpha", alpha);
  attrs.SetFloat("scale", scale);
  attrs.SetFloat("input_scale", input_scale);
  return One(cx.Emit(call, OpKind::kElu, {x}, std::move(attrs)));
}

// softplus(self, beta=1, threshold=20).
ConvertResult ConvertSoftplus(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(double beta, call.Double("beta", 1.0));
  ASSIGN_OR_RETURN(double threshold, call.Double("threshold", 20.0));
  ir::Attributes attrs;
  attrs.SetFloat("beta", beta);
  attrs.SetFloat("threshold", threshold);
  return One(cx.Emit(call, OpKind::kSoftplus, {x}, std::move(attrs)));
}

// hardshrink / softshrink(self, lambd=0.5).
ConvertResult ConvertShrink(AtenCall& call, ConvertContext& cx) {
  const bool hard = OutOfPlaceOp(call.op()) == "aten::hardshrink";
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(double lambd, call.Double("lambd", 0.5));
  ir::Attributes attrs;
  attrs.SetFloat("lambd", lambd);
  return One(cx.Emit(call, hard ? OpKind::kHardShrink : OpKind::kSoftShrink, {x},
                     std::move(attrs)));
}

// threshold(self, threshold, value): x <= threshold becomes value.
ConvertResult ConvertThreshold(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(double threshold, call.Double("threshold"));
  ASSIGN_OR_RETURN(double value, call.Double("value"));
  ir::Attributes attrs;
  attrs.SetFloat("threshold", threshold);
  attrs.SetFloat("value", value);
  return One(cx.Emit(call, OpKind::kThreshold, {x}, std::move(attrs)));
}

// prelu(self, weight), and _prelu_kernel, what export records for it.
ConvertResult ConvertPrelu(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId w, call.Tensor("weight"));
  return One(cx.Emit(call, OpKind::kPRelu, {x, w}));
}

// glu(self, dim=-1) = a * sigmoid(b) for the two halves a, b along dim.
ConvertResult ConvertGlu(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", -1));
  ir::ValueId half[2];
  for (int64_t k = 0; k < 2; ++k) {
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    attrs.SetInt("chunks", 2);
    attrs.SetInt("index", k);
    half[k] = cx.Emit(call, OpKind::kChunk, {x}, std::move(attrs), k == 0 ? ".a" : ".b");
  }
  const ir::ValueId gate = cx.Emit(call, OpKind::kSigmoid, {half[1]}, {}, ".gate");
  return One(cx.Emit(call, OpKind::kMul, {half[0], gate}));
}

ConvertResult PassThrough(AtenCall& call, ConvertContext& cx) {
  // dropout's argument is "input", the others' "self".
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor(call.Has("input") ? "input" : "self"));
  return One(x);
}

// floor_divide(self, other): floor rounding since PyTorch 1.13. A 0-dim
// constant tensor (what tracing records for a Python number, once the module
// is saved) stays a tensor operand here, not a number: an integer tensor
// floor-divided by a traced 1.5 is FP64 in libtorch (add, sub, mul and div
// without a rounding mode promote such a constant as a number). Attr
// tensor_operands tells the kernel; a number argument (the Scalar overload,
// scripted) stays one.
ConvertResult ConvertFloorDivide(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId a, Operand(call, "self"));
  ASSIGN_OR_RETURN(ir::ValueId b, Operand(call, "other"));
  ir::Attributes attrs = InPlaceAttrs(call);
  if (call.IsTensorTyped("self") && call.IsTensorTyped("other")) {
    attrs.SetBool("tensor_operands", true);
  }
  return One(cx.Emit(call, OpKind::kFloorDiv, {a, b}, std::move(attrs)));
}

// softmin(self, dim, dtype=None) = softmax(-self, dim) (scripted code records it).
ConvertResult ConvertSoftmin(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
  if (dtype) {  // libtorch casts the input first
    ir::Attributes cast;
    cast.SetString("dtype", DTypeName(*dtype));
    x = cx.Emit(call, OpKind::kCast, {x}, std::move(cast), ".cast");
  }
  ir::ValueId neg = cx.Emit(call, OpKind::kNeg, {x}, {}, ".neg");
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(cx.Emit(call, OpKind::kSoftmax, {neg}, std::move(attrs)));
}

}  // namespace kiln::importer::aten
