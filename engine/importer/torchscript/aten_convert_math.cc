// Converters for elementwise math beyond add/sub/mul/div: binary ops with
// tensor or scalar operands (pow, maximum, remainder, comparisons, logical
// ops), where and masked_fill, clamp, division with a rounding mode, the
// fused helpers addcmul/addcdiv/lerp, and the parameterised activations.
//
// Scalar operands become 0-dim values (a Python int as INT64, a float as
// FP64, as the scalar table types them); the kernels promote them as PyTorch
// promotes Python numbers (engine/common/type_promotion).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/aten_op_table.h"

namespace kiln::importer {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

// Input `i` as a tensor, or as a 0-dim scalar value.
absl::StatusOr<ir::ValueId> Operand(const TorchNode& node, ImportContext& ctx, size_t i) {
  if (ctx.IsScalarLike(node, i)) return ctx.ScalarInput(node, i);
  return ctx.Input(node, i);
}

// A float attribute from a constant Scalar argument, with a default when absent.
absl::StatusOr<double> FloatArg(const TorchNode& node, ImportContext& ctx, size_t i, double def) {
  if (i >= node.inputs().size() || ctx.IsNone(node, i)) return def;
  return ctx.ConstDouble(node, i);
}

ir::Attributes FloatAttrs(std::initializer_list<std::pair<const char*, double>> values) {
  ir::Attributes attrs;
  for (const auto& [name, v] : values) attrs.SetFloat(name, v);
  return attrs;
}

// floor_divide and div with a rounding mode. Their Tensor overloads see a
// 0-dim constant tensor (what tracing records for a Python number, once the
// module is saved) as a 0-dim tensor, not as a number: an integer tensor
// floor-divided by a traced 1.5 is FP64 in libtorch (add, sub, mul and div
// without a mode promote such a constant as a number). Attr tensor_operands
// tells the kernel; a number argument (the Scalar overload, scripted) stays one.
ConvertResult RoundingDivision(OpKind op, const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId a, Operand(node, ctx, 0));
  ASSIGN_OR_RETURN(ir::ValueId b, Operand(node, ctx, 1));
  ir::Attributes attrs;
  const std::string kind = node.kind().toUnqualString();
  if (!kind.empty() && kind.back() == '_') attrs.SetBool("in_place", true);
  auto is_tensor = [&](size_t i) {
    const torch::jit::Value* v = node.inputs()[i];
    return v->type()->kind() == c10::TypeKind::TensorType &&
           v->node()->kind() != c10::prim::NumToTensor;
  };
  if (is_tensor(0) && is_tensor(1)) attrs.SetBool("tensor_operands", true);
  return One(ctx.Emit(node, op, {a, b}, std::move(attrs)));
}

}  // namespace

ConvertResult ConvertBinaryOp(ir::OpKind op, const TorchNode& node, ImportContext& ctx) {
  if (node.inputs().size() < 2) return ctx.InvalidArgument(node, "expected 2 operands");
  ASSIGN_OR_RETURN(ir::ValueId a, Operand(node, ctx, 0));
  ASSIGN_OR_RETURN(ir::ValueId b, Operand(node, ctx, 1));
  // In-place forms (remainder_, ...) keep the destination's dtype.
  ir::Attributes attrs;
  const std::string kind = node.kind().toUnqualString();
  if (!kind.empty() && kind.back() == '_' && kind.rfind("__", 0) != 0) {
    attrs.SetBool("in_place", true);  // add_, not __and__
  }
  return One(ctx.Emit(node, op, {a, b}, std::move(attrs)));
}

// __and__ / bitwise_and and friends, bitwise_not: logical on BOOL (the masks
// models combine), bitwise on integers (attr bitwise). The in-place forms
// (bitwise_and_, ..., bitwise_not_) keep the destination's dtype (attr
// in_place); the translator rebinds the destination to the result.
ConvertResult ConvertBitwise(const TorchNode& node, ImportContext& ctx) {
  std::string kind = node.kind().toUnqualString();
  const bool in_place = kind.size() > 1 && kind.back() == '_' && kind[kind.size() - 2] != '_';
  if (in_place) kind.pop_back();
  if (kind == "bitwise_not") {
    ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
    ir::Attributes attrs;
    attrs.SetBool("bitwise", true);
    return One(ctx.Emit(node, OpKind::kLogicalNot, {x}, std::move(attrs)));
  }
  const OpKind op = kind.find("and") != std::string::npos  ? OpKind::kLogicalAnd
                    : kind.find("xor") != std::string::npos ? OpKind::kLogicalXor
                                                            : OpKind::kLogicalOr;
  ASSIGN_OR_RETURN(ir::ValueId a, Operand(node, ctx, 0));
  ASSIGN_OR_RETURN(ir::ValueId b, Operand(node, ctx, 1));
  ir::Attributes attrs;
  attrs.SetBool("bitwise", true);
  if (in_place) attrs.SetBool("in_place", true);
  return One(ctx.Emit(node, op, {a, b}, std::move(attrs)));
}

// greater, less_equal, ...: aliases of gt, le, ...
ConvertResult ConvertComparisonAlias(const TorchNode& node, ImportContext& ctx) {
  const std::string kind = node.kind().toUnqualString();
  const OpKind op = kind == "greater"         ? OpKind::kGreater
                    : kind == "greater_equal" ? OpKind::kGreaterEqual
                    : kind == "less"          ? OpKind::kLess
                    : kind == "less_equal"    ? OpKind::kLessEqual
                                              : OpKind::kNotEqual;
  return ConvertBinaryOp(op, node, ctx);
}

// div(self, other, *, rounding_mode): "floor" is FloorDiv, "trunc" TruncDiv (both
// keep integers integers, as PyTorch does).
ConvertResult ConvertDiv(const TorchNode& node, ImportContext& ctx) {
  if (node.inputs().size() < 3 || ctx.IsNone(node, 2)) return ConvertBinary(OpKind::kDiv, node, ctx);
  ASSIGN_OR_RETURN(std::string mode, ctx.ConstString(node, 2));
  if (mode == "floor") return RoundingDivision(OpKind::kFloorDiv, node, ctx);
  if (mode == "trunc") return RoundingDivision(OpKind::kTruncDiv, node, ctx);
  return ctx.InvalidArgument(node, absl::StrCat("unknown rounding_mode '", mode, "'"));
}

// floor_divide(self, other): floor rounding since PyTorch 1.13.
ConvertResult ConvertFloorDivide(const TorchNode& node, ImportContext& ctx) {
  return RoundingDivision(OpKind::kFloorDiv, node, ctx);
}

// clamp(self, min?, max?), clamp_min(self, min), clamp_max(self, max), and their
// in-place forms: Clip with constant bounds, Maximum/Minimum with tensor bounds.
ConvertResult ConvertClamp(const TorchNode& node, ImportContext& ctx) {
  const std::string kind = node.kind().toUnqualString();
  const bool only_min = kind.rfind("clamp_min", 0) == 0;
  const bool only_max = kind.rfind("clamp_max", 0) == 0;
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  const size_t min_i = only_max ? 99 : 1;
  const size_t max_i = only_min ? 99 : (only_max ? 1 : 2);
  auto is_tensor_bound = [&](size_t i) {
    return i < node.inputs().size() && !ctx.IsNone(node, i) && !ctx.IsScalarLike(node, i) &&
           !ctx.ConstantOf(node.inputs()[i]).has_value();
  };
  if (is_tensor_bound(min_i) || is_tensor_bound(max_i)) {
    ir::ValueId y = x;
    if (min_i < node.inputs().size() && !ctx.IsNone(node, min_i)) {
      ASSIGN_OR_RETURN(ir::ValueId lo, Operand(node, ctx, min_i));
      y = ctx.Emit(node, OpKind::kMaximum, {y, lo}, {}, ".lower");
    }
    if (max_i < node.inputs().size() && !ctx.IsNone(node, max_i)) {
      ASSIGN_OR_RETURN(ir::ValueId hi, Operand(node, ctx, max_i));
      y = ctx.Emit(node, OpKind::kMinimum, {y, hi});
    }
    return One(y);
  }
  ir::Attributes attrs;
  // Python int bounds keep an integer tensor integer; a float bound makes the
  // result float (PyTorch's promotion), which the Clip kernel needs to know.
  bool integer_bounds = true;
  for (size_t i : {min_i, max_i}) {
    if (i >= node.inputs().size() || ctx.IsNone(node, i)) continue;
    std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[i]);
    integer_bounds &= c.has_value() && (c->isInt() || c->isBool());
  }
  if (min_i < node.inputs().size() && !ctx.IsNone(node, min_i)) {
    ASSIGN_OR_RETURN(double lo, ctx.ConstDouble(node, min_i));
    attrs.SetFloat("min", lo);
  }
  if (max_i < node.inputs().size() && !ctx.IsNone(node, max_i)) {
    ASSIGN_OR_RETURN(double hi, ctx.ConstDouble(node, max_i));
    attrs.SetFloat("max", hi);
  }
  if (integer_bounds) attrs.SetBool("integer_bounds", true);
  return One(ctx.Emit(node, OpKind::kClip, {x}, std::move(attrs)));
}

// addcmul(self, t1, t2, value=1) = self + value * t1 * t2; addcdiv with t1 / t2.
ConvertResult ConvertAddcmulDiv(const TorchNode& node, ImportContext& ctx) {
  const bool div = std::string(node.kind().toUnqualString()).rfind("addcdiv", 0) == 0;
  ASSIGN_OR_RETURN(ir::ValueId self, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId t1, ctx.Input(node, 1));
  ASSIGN_OR_RETURN(ir::ValueId t2, ctx.Input(node, 2));
  ASSIGN_OR_RETURN(double value, FloatArg(node, ctx, 3, 1.0));
  ir::ValueId p = ctx.Emit(node, div ? OpKind::kDiv : OpKind::kMul, {t1, t2}, {}, ".product");
  if (value != 1.0) {
    // libtorch converts value to self's dtype (an integer tensor's 0.5 is 0,
    // and the result stays integer): never a Python float that would promote.
    const std::string name = node.output()->debugName() + ".value";
    ir::ValueId v;
    if (value == std::trunc(value) && std::abs(value) < 9.0e15) {
      v = ctx.AddInt(static_cast<int64_t>(value), name);
    } else {
      v = ctx.Emit(node, OpKind::kCast, {ctx.AddFloat(value, name), self}, {}, ".value_cast");
    }
    p = ctx.Emit(node, OpKind::kMul, {p, v}, {}, ".scaled");
  }
  return One(ctx.Emit(node, OpKind::kAdd, {self, p}));
}

// lerp(self, end, weight): PyTorch's two-sided form, exact at both ends:
// weight < 0.5 ? self + weight * (end - self) : end - (end - self) * (1 - weight).
ConvertResult ConvertLerp(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId self, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId end, ctx.Input(node, 1));
  const std::string name = node.output()->debugName();
  ir::ValueId diff = ctx.Emit(node, OpKind::kSub, {end, self}, {}, ".diff");
  if (!ctx.IsScalarLike(node, 2) && !ctx.ConstantOf(node.inputs()[2]).has_value()) {
    // A tensor weight: the same two sides, chosen per element by |weight| < 0.5.
    ASSIGN_OR_RETURN(ir::ValueId w, ctx.Input(node, 2));
    ir::ValueId mag = ctx.Emit(node, OpKind::kAbs, {w}, {}, ".abs");
    ir::ValueId small =
        ctx.Emit(node, OpKind::kLess, {mag, ctx.AddFloat(0.5, name + ".half")}, {}, ".small");
    ir::ValueId near = ctx.Emit(node, OpKind::kAdd,
                                {self, ctx.Emit(node, OpKind::kMul, {w, diff}, {}, ".step")}, {},
                                ".from_self");
    ir::ValueId rest =
        ctx.Emit(node, OpKind::kSub, {ctx.AddFloat(1.0, name + ".one"), w}, {}, ".rest");
    ir::ValueId far = ctx.Emit(node, OpKind::kSub,
                               {end, ctx.Emit(node, OpKind::kMul, {diff, rest}, {}, ".back")}, {},
                               ".from_end");
    return One(ctx.Emit(node, OpKind::kWhere, {small, near, far}));
  }
  ASSIGN_OR_RETURN(double w, ctx.ConstDouble(node, 2));
  if (std::abs(w) < 0.5) {
    ir::ValueId s = ctx.Emit(node, OpKind::kMul, {diff, ctx.AddFloat(w, name + ".weight")}, {},
                             ".step");
    return One(ctx.Emit(node, OpKind::kAdd, {self, s}));
  }
  ir::ValueId s = ctx.Emit(node, OpKind::kMul, {diff, ctx.AddFloat(1.0 - w, name + ".weight")}, {},
                           ".step");
  return One(ctx.Emit(node, OpKind::kSub, {end, s}));
}

// square(self) = pow(self, 2), as libtorch computes it: a bool tensor squares
// to INT64 (bool and a Python int promote to int64), where self * self would
// stay BOOL. Pow by 2 is self * self for the float kernels (elementwise.cc).
ConvertResult ConvertSquare(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ir::Attributes attrs;
  const std::string kind = node.kind().toUnqualString();
  if (kind == "square_") attrs.SetBool("in_place", true);
  ir::ValueId two = ctx.AddInt(2, node.output()->debugName() + ".exponent");
  return One(ctx.Emit(node, OpKind::kPow, {x, two}, std::move(attrs)));
}

// ---------------------------------------------------------------- activations

ConvertResult ConvertLeakyRelu(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(double slope, FloatArg(node, ctx, 1, 0.01));
  return One(ctx.Emit(node, OpKind::kLeakyRelu, {x}, FloatAttrs({{"negative_slope", slope}})));
}

// elu(self, alpha, scale, input_scale), selu(self), celu(self, alpha).
ConvertResult ConvertElu(const TorchNode& node, ImportContext& ctx) {
  const std::string kind = node.kind().toUnqualString();
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  double alpha = 1.0, scale = 1.0, input_scale = 1.0;
  if (kind.rfind("selu", 0) == 0) {
    alpha = 1.6732632423543772848170429916717;
    scale = 1.0507009873554804934193349852946;
  } else if (kind.rfind("celu", 0) == 0) {
    ASSIGN_OR_RETURN(alpha, FloatArg(node, ctx, 1, 1.0));
    input_scale = 1.0 / alpha;
  } else {
    ASSIGN_OR_RETURN(alpha, FloatArg(node, ctx, 1, 1.0));
    ASSIGN_OR_RETURN(scale, FloatArg(node, ctx, 2, 1.0));
    ASSIGN_OR_RETURN(input_scale, FloatArg(node, ctx, 3, 1.0));
  }
  return One(ctx.Emit(node, OpKind::kElu, {x},
                      FloatAttrs({{"alpha", alpha}, {"scale", scale}, {"input_scale", input_scale}})));
}

ConvertResult ConvertSoftplus(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(double beta, FloatArg(node, ctx, 1, 1.0));
  ASSIGN_OR_RETURN(double threshold, FloatArg(node, ctx, 2, 20.0));
  return One(ctx.Emit(node, OpKind::kSoftplus, {x},
                      FloatAttrs({{"beta", beta}, {"threshold", threshold}})));
}

// hardshrink / softshrink(self, lambd=0.5).
ConvertResult ConvertShrink(const TorchNode& node, ImportContext& ctx) {
  const bool hard = std::string(node.kind().toUnqualString()).rfind("hard", 0) == 0;
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(double lambd, FloatArg(node, ctx, 1, 0.5));
  return One(ctx.Emit(node, hard ? OpKind::kHardShrink : OpKind::kSoftShrink, {x},
                      FloatAttrs({{"lambd", lambd}})));
}

// threshold(self, threshold, value): x <= threshold becomes value.
ConvertResult ConvertThreshold(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(double threshold, ctx.ConstDouble(node, 1));
  ASSIGN_OR_RETURN(double value, ctx.ConstDouble(node, 2));
  return One(ctx.Emit(node, OpKind::kThreshold, {x},
                      FloatAttrs({{"threshold", threshold}, {"value", value}})));
}

ConvertResult ConvertPrelu(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId w, ctx.Input(node, 1));
  return One(ctx.Emit(node, OpKind::kPRelu, {x, w}));
}

// glu(self, dim=-1) = a * sigmoid(b) for the two halves a, b along dim.
ConvertResult ConvertGlu(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  int64_t dim = -1;
  if (node.inputs().size() > 1) {
    ASSIGN_OR_RETURN(dim, ctx.ConstInt(node, 1));
  }
  ir::ValueId half[2];
  for (int64_t k = 0; k < 2; ++k) {
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    attrs.SetInt("chunks", 2);
    attrs.SetInt("index", k);
    half[k] = ctx.Emit(node, OpKind::kChunk, {x}, std::move(attrs), k == 0 ? ".a" : ".b");
  }
  ir::ValueId gate = ctx.Emit(node, OpKind::kSigmoid, {half[1]}, {}, ".gate");
  return One(ctx.Emit(node, OpKind::kMul, {half[0], gate}));
}

// softmin(self, dim) = softmax(-self, dim) (aten::softmin exists in scripted code).
ConvertResult ConvertSoftmin(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
  ir::ValueId neg = ctx.Emit(node, OpKind::kNeg, {x}, {}, ".neg");
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(ctx.Emit(node, OpKind::kSoftmax, {neg}, std::move(attrs)));
}

}  // namespace kiln::importer
