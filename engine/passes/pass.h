// Graph-to-graph passes. A pass rewrites a graph in place and reports whether it
// changed anything; pipeline.cc holds the one ordered list.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir/graph.h"

namespace kiln::passes {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  // Returns whether the graph changed.
  virtual absl::StatusOr<bool> Run(ir::Graph& graph) const = 0;
};

std::unique_ptr<Pass> MakeResolveListsPass();
std::unique_ptr<Pass> MakeEliminateIdentityPass();
std::unique_ptr<Pass> MakeDeadCodeEliminationPass();
std::unique_ptr<Pass> MakeFuseConvEpiloguePass();
std::unique_ptr<Pass> MakeFuseSafeSoftmaxPass();
std::unique_ptr<Pass> MakeFuseAttentionPass();

// Whether `node` has no attributes but `allowed` (and a libtorch twin's,
// ir/fallback_twin.h): a pattern pass fuses only ops it fully understands.
bool OnlyAttrs(const ir::Node& node, std::initializer_list<const char*> allowed);

// Uses of each value: node inputs, block results, and graph outputs counted
// twice, so that a pattern pass's "one consumer" test never fuses one away.
std::vector<int> CountUses(const ir::Graph& graph);

// The clamp [lo, hi] a Relu (0, inf) or Clip (its min/max) node applies, as a
// convolution's fused post_min/post_max; nullopt for other ops and for a NaN
// bound (the Clip kernel's error stays).
std::optional<std::pair<double, double>> ClampBounds(const ir::Node& node);

struct PipelineOptions {
  std::vector<std::string> disabled;  // pass names to skip, for bisecting
  bool verify_each = true;            // run the verifier after every pass
};

// Runs the pipeline's passes in order. Fails with Internal naming the pass whose
// output does not verify.
absl::Status RunPipeline(ir::Graph& graph, const PipelineOptions& options = {});

// Names of the pipeline's passes, in order (part of the compiled-graph cache key).
std::vector<std::string> PipelinePassNames();

// Marks every GEMM op (kernels::AccumulatesInFloat64: convolutions, matmul,
// linear, einsum) to accumulate in float64 (the attribute accumulate =
// "float64", read by the kernels): a model's load-config choice of accuracy
// over speed, applied to its imported graph, not a step of the pipeline.
// Returns how many nodes it marked.
int AccumulateInFloat64(ir::Graph& graph);

}  // namespace kiln::passes
