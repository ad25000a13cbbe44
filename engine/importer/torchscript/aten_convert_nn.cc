// TorchScript-only converters for neural-network ops: adaptive pools, whose
// output size may be a scripted Optional[int] list (None keeps that input
// size). The shared ones are in engine/importer/aten/convert_nn.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/aten_op_table.h"

namespace kiln::importer {
namespace {

using ir::OpKind;

// PyTorch lets int[2] arguments be written as one int; expands to `n` values.
absl::StatusOr<std::vector<int64_t>> IntsPerDim(const ImportContext& ctx, const TorchNode& node,
                                                size_t i, size_t n) {
  ASSIGN_OR_RETURN(std::vector<int64_t> v, ctx.ConstInts(node, i));
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  if (v.size() != n) {
    return ctx.InvalidArgument(
        node, absl::StrCat("argument ", i, " has ", v.size(), " values, expected ", n));
  }
  return v;
}

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

// The number of spatial dims of a pool: from the op's name
// (max_pool3d), else from a constant weight's rank, else from `fallback`.
size_t SpatialDims(const TorchNode& node, const ImportContext& ctx, size_t fallback) {
  const std::string kind = node.kind().toUnqualString();
  for (char d : {'1', '2', '3'}) {
    if (kind.find(std::string(1, d) + "d") != std::string::npos) return d - '0';
  }
  if (std::optional<at::Tensor> w = ctx.ConstTensor(node, 1); w && w->dim() >= 3) {
    return static_cast<size_t>(w->dim() - 2);
  }
  return fallback;
}


}  // namespace

// adaptive_{avg,max}_pool{1,2,3}d(self, output_size).
ConvertResult ConvertAdaptiveAvgPool2d(const TorchNode& node, ImportContext& ctx) {
  const size_t spatial = SpatialDims(node, ctx, 2);
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  // None entries (keep that input size) arrive as -1 from a scripted Optional list.
  std::vector<int64_t> output_size;
  std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[1]);
  if (c && c->isList()) {
    for (const c10::IValue& v : c->toListRef()) output_size.push_back(v.isNone() ? -1 : v.toInt());
    if (output_size.size() == 1 && spatial > 1) output_size.assign(spatial, output_size[0]);
  } else {
    ASSIGN_OR_RETURN(output_size, IntsPerDim(ctx, node, 1, spatial));
  }
  ir::Attributes attrs;
  attrs.SetInts("output_size", std::move(output_size));
  if (node.outputs().size() == 2) {  // adaptive_max_poolNd -> (values, indices)
    ir::NodeId n = ctx.graph().AddNode(
        OpKind::kAdaptiveMaxPool, {x}, std::move(attrs), node.kind().toQualString(),
        {node.outputs()[0]->debugName(), node.outputs()[1]->debugName()});
    return ctx.graph().node(n).outputs;
  }
  return One(ctx.Emit(node, OpKind::kAdaptiveAvgPool, {x}, std::move(attrs)));
}

}  // namespace kiln::importer
