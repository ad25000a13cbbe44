// Removes Identity nodes (dropout, contiguous, detach at inference) by rewiring
// their users to the Identity's input. An Identity that feeds a graph output
// directly from a graph input is kept, so every output stays a distinct value.
#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

class EliminateIdentityPass : public Pass {
 public:
  std::string name() const override { return "eliminate_identity"; }

  absl::StatusOr<bool> Run(ir::Graph& graph) const override {
    bool changed = false;
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      const ir::Node& node = graph.node(static_cast<ir::NodeId>(n));
      if (node.kind != ir::OpKind::kIdentity) continue;
      ir::ValueId in = node.inputs[0];
      ir::ValueId out = node.outputs[0];
      bool feeds_output = false;
      for (ir::ValueId v : graph.outputs()) feeds_output |= (v == out);
      if (feeds_output && graph.value(in).producer == ir::kNoNode) continue;
      graph.ReplaceAllUses(out, in);
      changed = true;
    }
    if (changed) graph = graph.Compacted();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeEliminateIdentityPass() {
  return std::make_unique<EliminateIdentityPass>();
}

}  // namespace kiln::passes
