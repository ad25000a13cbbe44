// Converters for shape aten ops: flatten, view/reshape and cat (the other shape
// and indexing ops are in aten_convert_index.cc).
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

// view(self, size) / reshape(self, shape). A shape computed at run time (from
// aten::size, as in shufflenet's channel shuffle) becomes input 1, which the
// executor folds to a constant when the input shapes fix it.
ConvertResult ConvertReshape(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ImportContext::IntsArg arg, ctx.IntsInput(node, 1));
  if (!arg.values.has_value()) {
    return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kReshape, {x, arg.value})};
  }
  std::vector<int64_t> shape = *std::move(arg.values);
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
  ASSIGN_OR_RETURN(ir::ValueId list, ctx.AnyValue(node.inputs()[0], ctx.Where(node)));
  if (ctx.KindOf(list) == ir::ValueKind::kTensorList && ctx.ListElements(list) == nullptr) {
    // A list built at run time (appended to in a loop): Concat takes the list
    // whole and expands it when it runs.
    ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kConcat, {list}, std::move(attrs))};
  }
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> inputs, ctx.TensorListInput(node, 0));
  if (inputs.empty()) return ctx.InvalidArgument(node, "concatenates an empty list");
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return std::vector<ir::ValueId>{ctx.Emit(node, ir::OpKind::kConcat, std::move(inputs),
                                           std::move(attrs))};
}

}  // namespace kiln::importer
