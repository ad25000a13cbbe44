// Infers what a graph's inputs must be when the model file does not say (a
// traced TorchScript file records no dtypes or shapes): a convolution's weight
// fixes its input's rank and channel count, a Linear's weight fixes the last
// dim, and float-only ops imply a floating dtype.
#pragma once

#include <vector>

#include "engine/ir/graph.h"

namespace kiln::passes {

// One TensorType per graph input: the graph's own type where known, refined by
// what the first consumers imply. Dims the graph does not constrain are -1;
// dims is nullopt when nothing fixes the rank. dtype stays kUnknown when no
// consumer implies one.
std::vector<ir::TensorType> InferInputContract(const ir::Graph& graph);

}  // namespace kiln::passes
