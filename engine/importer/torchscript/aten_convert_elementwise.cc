// TorchScript-only elementwise converters: add on tensors beside add.t on lists,
// true_divide. The shared ones are in engine/importer/aten/convert_elementwise.cc.
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/aten_op_table.h"

namespace kiln::importer {
namespace {

// A constant Python number operand: an int, float or bool constant, or a
// 0-dim tensor constant. The tracer records Python numbers as 0-dim tensor
// constants, and libtorch's interpreter promotes every 0-dim constant of a
// (frozen) graph as a Python number, so Kiln does the same.
std::optional<c10::Scalar> NumberOperand(const ImportContext& ctx, const TorchNode& node,
                                         size_t i) {
  std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[i]);
  if (!c) return std::nullopt;
  if (c->isDouble()) return c10::Scalar(c->toDouble());
  if (c->isInt()) return c10::Scalar(c->toInt());
  if (c->isBool()) return c10::Scalar(c->toBool());
  if (c->isTensor() && c->toTensor().dim() == 0) return c->toTensor().item();
  return std::nullopt;
}

// A Python number as a value of its own kind (int: INT64, float: FP64, bool:
// BOOL), which the kernels promote as PyTorch promotes wrapped numbers.
ir::ValueId AddNumber(ImportContext& ctx, const c10::Scalar& v, std::string name) {
  if (v.isBoolean()) return ctx.AddBool(v.toBool(), std::move(name));
  if (v.isIntegral(/*includeBool=*/false)) return ctx.AddInt(v.toLong(), std::move(name));
  return ctx.AddFloat(v.toDouble(), std::move(name));
}

// a * alpha as one number: integral when both are.
c10::Scalar Scaled(const c10::Scalar& a, const c10::Scalar& alpha) {
  if (a.isIntegral(/*includeBool=*/true) && alpha.isIntegral(/*includeBool=*/true)) {
    return c10::Scalar(a.toLong() * alpha.toLong());
  }
  return c10::Scalar(a.toDouble() * alpha.toDouble());
}

// In-place ops (add_, mul_, ...) keep the destination's dtype; the kernel
// reads this attribute to promote accordingly.
ir::Attributes InPlaceAttrs(const TorchNode& node) {
  ir::Attributes attrs;
  const std::string kind = node.kind().toUnqualString();
  if (!kind.empty() && kind.back() == '_' && kind.rfind("__", 0) != 0) {
    attrs.SetBool("in_place", true);  // add_, not __and__
  }
  return attrs;
}

}  // namespace

// add(self, other, alpha=1), sub(self, other, alpha=1), mul(self, other),
// div(self, other, rounding_mode=None); `other` (or `self`) may be a scalar.
// out = self op (alpha * other): alpha != 1 is folded into a scalar operand or
// becomes a Mul by a 0-dim constant.
ConvertResult ConvertBinary(ir::OpKind op, const TorchNode& node, ImportContext& ctx) {
  const size_t num_inputs = node.inputs().size();
  const bool takes_alpha = op == ir::OpKind::kAdd || op == ir::OpKind::kSub;
  const size_t max_inputs = op == ir::OpKind::kMul ? 2 : 3;
  if (num_inputs < 2 || num_inputs > max_inputs) {
    return ctx.InvalidArgument(node, absl::StrCat("unexpected number of inputs ", num_inputs));
  }
  if (op == ir::OpKind::kDiv && num_inputs == 3 && !ctx.IsNone(node, 2)) {
    return ctx.Unimplemented(node, "div with a rounding_mode is not supported");
  }
  c10::Scalar alpha(int64_t{1});
  if (takes_alpha && num_inputs == 3) {
    std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[2]);
    if (!c || !(c->isInt() || c->isDouble() || c->isBool())) {
      return ctx.InvalidArgument(node, "alpha must be a constant number");
    }
    alpha = c->toScalar();
  }
  const bool unit_alpha = alpha.toDouble() == 1.0;
  const std::string name = node.outputs()[0]->debugName();

  std::optional<c10::Scalar> lhs_number = NumberOperand(ctx, node, 0);
  std::optional<c10::Scalar> rhs_number = NumberOperand(ctx, node, 1);
  ir::ValueId lhs, rhs;
  if (rhs_number) {
    // Usual case (x + 1, x * 0.5): fold alpha into the number.
    if (lhs_number) return ctx.InvalidArgument(node, "has no tensor operand");
    ASSIGN_OR_RETURN(lhs, ctx.Input(node, 0));
    rhs = AddNumber(ctx, unit_alpha ? *rhs_number : Scaled(*rhs_number, alpha), name + ".other");
    return std::vector<ir::ValueId>{ctx.Emit(node, op, {lhs, rhs}, InPlaceAttrs(node))};
  }
  ASSIGN_OR_RETURN(rhs, ctx.Input(node, 1));
  if (lhs_number) {
    lhs = AddNumber(ctx, *lhs_number, name + ".self");
  } else {
    ASSIGN_OR_RETURN(lhs, ctx.Input(node, 0));
  }
  if (!unit_alpha) {
    ir::ValueId scale = AddNumber(ctx, alpha, name + ".alpha");
    rhs = ctx.Emit(node, ir::OpKind::kMul, {rhs, scale}, {}, ".scaled");
  }
  return std::vector<ir::ValueId>{ctx.Emit(node, op, {lhs, rhs}, InPlaceAttrs(node))};
}

}  // namespace kiln::importer
