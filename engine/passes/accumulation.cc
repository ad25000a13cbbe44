// The accuracy a model's load config may ask for (see pass.h).
#include "engine/passes/pass.h"

#include "engine/kernels/kernel.h"

namespace kiln::passes {

int AccumulateInFloat64(ir::Graph& graph) {
  int marked = 0;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    ir::Node& node = graph.mutable_node(static_cast<ir::NodeId>(n));
    if (!kernels::AccumulatesInFloat64(node.kind)) continue;
    node.attrs.SetString(kernels::kAccumulateAttr, kernels::kAccumulateFloat64);
    ++marked;
  }
  return marked;
}

}  // namespace kiln::passes
