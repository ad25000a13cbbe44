// Helpers the runtime tests share to build graphs and their inputs.
#pragma once

#include <random>
#include <utility>

#include "absl/status/statusor.h"
#include "engine/common/status_macros.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"
#include "engine/runtime/executable.h"

namespace kiln::runtime::testing {

// A float32 tensor of uniform values in [lo, hi).
inline Tensor Random(Dims dims, std::mt19937& rng, double lo, double hi) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(u(rng));
  return t;
}

// How many nodes of `kind` graph `g` holds.
inline int Count(const ir::Graph& g, ir::OpKind kind) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.kind == kind;
  return n;
}

// `g` compiled three ways for `inputs`: with the oneDNN provider, with Kiln's
// own kernels only, and with Kiln's kernels and no passes (the unfused graph:
// the fusion tests' reference).
struct ThreeWays {
  std::unique_ptr<Executable> onednn, native, reference;
};
inline absl::StatusOr<ThreeWays> CompileThreeWays(const ir::Graph& g,
                                                  const std::vector<kernels::TensorInfo>& inputs) {
  CompileOptions onednn, native, reference;
  native.use_providers = reference.use_providers = false;
  reference.run_passes = false;
  ThreeWays w;
  ASSIGN_OR_RETURN(w.onednn, Executable::Compile(g, inputs, onednn));
  ASSIGN_OR_RETURN(w.native, Executable::Compile(g, inputs, native));
  ASSIGN_OR_RETURN(w.reference, Executable::Compile(g, inputs, reference));
  return w;
}

// The one output of node `n`.
inline ir::ValueId Out(ir::Graph& g, ir::NodeId n) { return g.node(n).outputs[0]; }

}  // namespace kiln::runtime::testing
