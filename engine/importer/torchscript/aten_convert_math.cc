// The elementwise math converters that read TorchScript's own forms:
// floor_divide, whose operands' TorchScript types tell a traced 0-dim tensor
// constant from a Python number, and softmin, which only scripted code records.
//
// Scalar operands become 0-dim values (a Python int as INT64, a float as
// FP64, as the scalar table types them); the kernels promote them as PyTorch
// promotes Python numbers (engine/common/type_promotion).
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

// floor_divide. Its Tensor overload sees a
// 0-dim constant tensor (what tracing records for a Python number, once the
// module is saved) as a 0-dim tensor, not as a number: an integer tensor
// floor-divided by a traced 1.5 is FP64 in libtorch (add, sub, mul and div
// without a rounding mode promote such a constant as a number). Attr tensor_operands
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

// floor_divide(self, other): floor rounding since PyTorch 1.13.
ConvertResult ConvertFloorDivide(const TorchNode& node, ImportContext& ctx) {
  return RoundingDivision(OpKind::kFloorDiv, node, ctx);
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
