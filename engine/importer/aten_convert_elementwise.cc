// Converters for elementwise aten ops: activations, add/sub/mul/div and the
// ops that are no-ops at inference time.
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten_op_table.h"

namespace kiln::importer {
namespace {

// A Python scalar operand (int/float/bool constant) or a 0-dim constant tensor.
// Both follow PyTorch's rule that they do not promote a dimensioned tensor of
// the same category, so they can take the other operand's dtype.
std::optional<double> ScalarOperand(const ImportContext& ctx, const TorchNode& node, size_t i) {
  std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[i]);
  if (!c) return std::nullopt;
  if (c->isDouble()) return c->toDouble();
  if (c->isInt()) return static_cast<double>(c->toInt());
  if (c->isBool()) return c->toBool() ? 1.0 : 0.0;
  if (c->isTensor() && c->toTensor().dim() == 0) return c->toTensor().item<double>();
  return std::nullopt;
}

// The dtype for a scalar combined with `other`. Graph inputs have no dtype at
// import time; Kiln's models are float32, so that is the default.
DType ScalarDType(const ImportContext& ctx, ir::ValueId other) {
  DType dtype = ctx.DTypeOf(other);
  return dtype == DType::kUnknown ? DType::kF32 : dtype;
}

}  // namespace

ConvertResult ConvertUnary(ir::OpKind op, const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  return std::vector<ir::ValueId>{ctx.Emit(node, op, {x})};
}

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
  double alpha = 1.0;
  if (takes_alpha && num_inputs == 3) {
    ASSIGN_OR_RETURN(alpha, ctx.ConstDouble(node, 2));
  }

  std::optional<double> lhs_scalar = ScalarOperand(ctx, node, 0);
  std::optional<double> rhs_scalar = ScalarOperand(ctx, node, 1);
  ir::ValueId lhs, rhs;
  if (rhs_scalar) {
    // Usual case (x + 1, x * 0.5): fold alpha into the scalar.
    if (lhs_scalar && !ctx.ConstTensor(node, 0)) {
      return ctx.InvalidArgument(node, "has no tensor operand");
    }
    ASSIGN_OR_RETURN(lhs, ctx.Input(node, 0));
    ASSIGN_OR_RETURN(rhs, ctx.AddScalarConstant(*rhs_scalar * alpha, ScalarDType(ctx, lhs),
                                                absl::StrCat(node.outputs()[0]->debugName(),
                                                             ".other")));
    return std::vector<ir::ValueId>{ctx.Emit(node, op, {lhs, rhs})};
  }
  ASSIGN_OR_RETURN(rhs, ctx.Input(node, 1));
  if (lhs_scalar) {
    ASSIGN_OR_RETURN(lhs, ctx.AddScalarConstant(*lhs_scalar, ScalarDType(ctx, rhs),
                                                absl::StrCat(node.outputs()[0]->debugName(),
                                                             ".self")));
  } else {
    ASSIGN_OR_RETURN(lhs, ctx.Input(node, 0));
  }
  if (alpha != 1.0) {
    ASSIGN_OR_RETURN(ir::ValueId scale,
                     ctx.AddScalarConstant(alpha, ScalarDType(ctx, rhs),
                                           absl::StrCat(node.outputs()[0]->debugName(),
                                                        ".alpha")));
    rhs = ctx.Emit(node, ir::OpKind::kMul, {rhs, scale}, {}, ".scaled");
  }
  return std::vector<ir::ValueId>{ctx.Emit(node, op, {lhs, rhs})};
}

// hardtanh(self, min_val=-1, max_val=1) -> Clip.
ConvertResult ConvertHardtanh(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(double min, ctx.ConstDouble(node, 1));
  ASSIGN_OR_RETURN(double max, ctx.ConstDouble(node, 2));
  ir::Attributes attrs;
  attrs.SetFloat("min", min);
  attrs.SetFloat("max", max);
  return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kClip, {x}, std::move(attrs))};
}

ConvertResult ConvertRelu6(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ir::Attributes attrs;
  attrs.SetFloat("min", 0.0);
  attrs.SetFloat("max", 6.0);
  return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kClip, {x}, std::move(attrs))};
}

// gelu(self, approximate="none"); older archives have no `approximate`.
ConvertResult ConvertGelu(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  std::string approximate = "none";
  if (node.inputs().size() > 1) {
    ASSIGN_OR_RETURN(approximate, ctx.ConstString(node, 1));
  }
  if (approximate != "none" && approximate != "tanh") {
    return ctx.InvalidArgument(node, absl::StrCat("unknown approximate='", approximate, "'"));
  }
  ir::Attributes attrs;
  attrs.SetString("approximate", approximate);
  return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kGelu, {x}, std::move(attrs))};
}

ConvertResult PassThrough(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  return std::vector<ir::ValueId>{x};
}

}  // namespace kiln::importer
