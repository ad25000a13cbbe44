// TorchScript-only cat: its list may be built at run time (appended to in a
// loop). The shared shape converters are in engine/importer/aten/convert_shape.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/aten_op_table.h"

namespace kiln::importer {

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
