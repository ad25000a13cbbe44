// Layouts in Executable::Compiler (compile/compiler.h; the layouts
// themselves: engine/runtime/layout.h): a kernel may give its output a
// non-plain layout (NHWC); where a consumer cannot take it (a dynamic step,
// a layout-sensitive op, a graph output) a Reorder node makes its plain twin,
// one per value and block, and elementwise ops run on NHWC bytes directly.
#include "engine/runtime/compile/compiler.h"

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/layout.h"

namespace kiln::runtime {

// A plain copy of `v` (a non-plain static value), made by a Reorder node
// inserted at the cursor and compiled into `program`; one per value and block.
absl::StatusOr<ir::ValueId> Executable::Compiler::PlainTwin(ir::ValueId v, Program& program) {
  const auto key = std::make_pair(v, cursor_.block);
  if (auto it = twins_.find(key); it != twins_.end()) return it->second;
  ir::Attributes attrs;
  attrs.SetString("to", ir::LayoutName(ir::Layout::kPlain));
  const ir::BlockId saved = g_.insertion_block();
  g_.SetInsertionBlock(cursor_.block);
  const ir::NodeId r = g_.AddNode(ir::OpKind::kReorder, {v}, std::move(attrs), "",
                                  {absl::StrCat(g_.value(v).name, ".plain")});
  g_.SetInsertionBlock(saved);
  std::vector<ir::NodeId>& nodes = g_.mutable_block(cursor_.block).nodes;
  nodes.pop_back();
  nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(cursor_.index), r);
  ++cursor_.index;
  slots_.resize(g_.values().size());
  for (size_t i = root_.size(); i < g_.values().size(); ++i) {
    root_.push_back(static_cast<ir::ValueId>(i));
  }
  RETURN_IF_ERROR(CompileKernelNode(r, program, /*static_ok=*/true));
  const ir::ValueId plain = g_.node(r).outputs[0];
  twins_.emplace(key, plain);
  return plain;
}

// Rewires the uses of non-plain values by node `id` (and the nodes and
// results of its blocks) to plain twins: for steps that run dynamically.
absl::Status Executable::Compiler::UsePlainOperands(ir::NodeId id, Program& program) {
  std::vector<ir::ValueId> uses;
  CollectUses(id, uses);
  for (ir::ValueId v : uses) {
    if (slots_[v].layout == ir::Layout::kPlain || !IsStatic(v)) continue;
    ASSIGN_OR_RETURN(const ir::ValueId plain, PlainTwin(v, program));
    ReplaceUsesIn(id, v, plain);
  }
  return absl::OkStatus();
}

void Executable::Compiler::ReplaceUsesIn(ir::NodeId id, ir::ValueId from, ir::ValueId to) {
  for (ir::ValueId& v : g_.mutable_node(id).inputs) {
    if (v == from) v = to;
  }
  const std::vector<ir::BlockId> blocks = g_.node(id).blocks;
  for (ir::BlockId b : blocks) {
    for (ir::NodeId inner : g_.block(b).nodes) ReplaceUsesIn(inner, from, to);
    for (ir::ValueId& r : g_.mutable_block(b).results) {
      if (r == from) r = to;
    }
  }
}

// An elementwise node whose tensor operands are all NHWC or single
// elements runs on the channels-last bytes: rewrites `infos` to the
// physical dims. False when some operand does not permute that way.
bool Executable::Compiler::PermuteElementwise(const ir::Node& node,
                               std::vector<kernels::TensorInfo>& infos) {
  if (!layout::IsElementwise(node.kind)) return false;
  bool any = false;
  for (const kernels::TensorInfo& i : infos) {
    if (!i.present) continue;
    if (i.layout == ir::Layout::kNHWC) {
      any = true;
    } else if (NumElements(i.dims) != 1 || i.dims.size() > 4) {
      return false;  // (a rank-5 element would make the output 5-D in physical order)
    }
  }
  if (!any) return false;
  for (kernels::TensorInfo& i : infos) {
    if (i.present && i.layout == ir::Layout::kNHWC) {
      i.dims = layout::PhysicalDims(i.dims, i.layout);
      i.layout = ir::Layout::kPlain;
    }
  }
  return true;
}

}  // namespace kiln::runtime
