// Infers what a graph's inputs must be when the model file does not say (a
// traced TorchScript file records no dtypes or shapes), stating only what the
// model itself fixes: a convolution's weight fixes its input's rank and
// channel count, a Linear's its last dim (any leading dims), a constant
// floating weight its input's dtype (conv, linear, matmul, batch/layer norm),
// embedding and gather indices are INT64, and the condition of a
// where/masked_fill is BOOL. Everything else stays open and is compiled per
// request signature.
#pragma once

#include <vector>

#include "engine/ir/graph.h"

namespace kiln::passes {

// One TensorType per graph input: the graph's own type where known, refined by
// what its consumers imply. Dims the graph does not constrain are -1; dims is
// nullopt when nothing fixes the rank. dtype stays kUnknown when no consumer
// implies one: such an input takes whatever dtype a request brings.
std::vector<ir::TensorType> InferInputContract(const ir::Graph& graph);

// Whether the dims InferInputContract gives `input` are a Linear's: shown as
// [-1, in_features], but any number of leading dims (none included) goes
// before the last, as in PyTorch.
bool TakesAnyLeadingDims(const ir::Graph& graph, ir::ValueId input);

// Whether `input` is only ever used as indices (of IndexSelect, what
// nn.Embedding imports to, or Gather) or for its size: token ids. Such an input
// takes INT32 as well as the INT64 the contract implies, as PyTorch's embedding
// and gather do (and as Triton clients often send them).
bool IsIndexOnlyInput(const ir::Graph& graph, ir::ValueId input);

}  // namespace kiln::passes
