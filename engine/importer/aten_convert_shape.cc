// Converters for shape aten ops: flatten, view/reshape, cat, and t() of a
// constant (folded at import, since Kiln IR has no transpose op).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten_op_table.h"

namespace kiln::importer {

// flatten(self, start_dim=0, end_dim=-1).
ConvertResult ConvertFlatten(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t start_dim, ctx.ConstInt(node, 1));
  ASSIGN_OR_RETURN(int64_t end_dim, ctx.ConstInt(node, 2));
  ir::Attributes attrs;
  attrs.SetInt("start_dim", start_dim);
  attrs.SetInt("end_dim", end_dim);
  return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kFlatten, {x}, std::move(attrs))};
}

// view(self, size) / reshape(self, shape). The shape must be a constant: a
// shape computed from aten::size at run time is Unimplemented (ConstInts says
// which element).
ConvertResult ConvertReshape(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ConstInts(node, 1));
  int inferred = 0;
  for (int64_t d : shape) {
    if (d == -1) {
      ++inferred;
    } else if (d < 0) {
      return ctx.InvalidArgument(node, absl::StrCat("invalid size ", d, " in shape ",
                                                    DimsToString(shape)));
    }
  }
  if (inferred > 1) {
    return ctx.InvalidArgument(node, absl::StrCat("shape ", DimsToString(shape),
                                                  " has more than one -1"));
  }
  ir::Attributes attrs;
  attrs.SetInts("shape", std::move(shape));
  return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kReshape, {x}, std::move(attrs))};
}

// cat(tensors, dim=0).
ConvertResult ConvertCat(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> inputs, ctx.TensorListInput(node, 0));
  if (inputs.empty()) return ctx.InvalidArgument(node, "concatenates an empty list");
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kConcat, std::move(inputs),
                                           std::move(attrs))};
}

// t(self) of a constant, e.g. the weight in addmm(bias, x, t(weight)) that
// older traces of nn.Linear record: transposed once at import.
ConvertResult ConvertTranspose2d(const TorchNode& node, ImportContext& ctx) {
  std::optional<at::Tensor> constant = ctx.ConstTensor(node, 0);
  if (!constant) {
    return ctx.Unimplemented(node, "transposing a tensor computed at run time is not supported "
                                   "(only constants are transposed, at import)");
  }
  if (constant->dim() > 2) {
    return ctx.InvalidArgument(node, absl::StrCat("expects a tensor of rank <= 2, got rank ",
                                                  constant->dim()));
  }
  ASSIGN_OR_RETURN(ir::ValueId id, ctx.AddTensorConstant(constant->t().contiguous(),
                                                         node.outputs()[0]->debugName()));
  return std::vector<ir::ValueId>{id};
}

}  // namespace kiln::importer
