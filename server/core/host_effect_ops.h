// Ops whose effect reaches outside the tensors: a model that holds one is
// refused at load, before anything runs it in kilnd (the libtorch fallback,
// the verified import's reference run). libtorch's other aten ops read and
// write tensors only; these read or create files on the host.
#pragma once

#include "absl/status/status.h"
#include "engine/ir/graph.h"

namespace kiln::server {

// OK when no node of `graph` (in any block) runs one of these ops through the
// fallback; otherwise InvalidArgument listing every such op and the first
// node of each.
absl::Status RefuseHostEffectOps(const ir::Graph& graph);

}  // namespace kiln::server
