#include <set>

#include "server/torch/torch_backend.h"

namespace kiln::server::torch {

std::vector<std::string> FallbackOps(const ir::Graph& graph) {
  std::set<std::string> ops;
  for (const ir::Node& node : graph.nodes()) {
    if (node.kind == ir::OpKind::kFallback) ops.insert(node.source_op);
  }
  return std::vector<std::string>(ops.begin(), ops.end());
}

}  // namespace kiln::server::torch
