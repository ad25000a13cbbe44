// Drops nodes whose outputs no graph output depends on.
#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

class DeadCodeEliminationPass : public Pass {
 public:
  std::string name() const override { return "dead_code_elimination"; }

  absl::StatusOr<bool> Run(ir::Graph& graph) const override {
    ir::Graph compacted = graph.Compacted();
    bool changed = compacted.nodes().size() != graph.nodes().size();
    graph = std::move(compacted);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeDeadCodeEliminationPass() {
  return std::make_unique<DeadCodeEliminationPass>();
}

}  // namespace kiln::passes
