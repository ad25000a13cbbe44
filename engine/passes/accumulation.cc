// The accuracy a model's load config may ask for (see pass.h).
#include "engine/passes/pass.h"

namespace kiln::passes {

int AccumulateInFloat64(ir::Graph& graph) {
  int marked = 0;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    ir::Node& node = graph.mutable_node(static_cast<ir::NodeId>(n));
    if (node.kind != ir::OpKind::kConv) continue;
    node.attrs.SetString("accumulate", "float64");
    ++marked;
  }
  return marked;
}

}  // namespace kiln::passes
