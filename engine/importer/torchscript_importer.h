// Imports a TorchScript archive (torch.jit.save) into Kiln's graph IR. This and
// the fallback are the only parts of Kiln that include libtorch headers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

struct ImportOptions {
  // Overrides the forward() parameter names, by position (empty: keep).
  std::vector<std::string> input_names;
  // Output names by position (empty: keep). By default outputs are named
  // after their place in forward()'s result: "output0", "output1", ...,
  // "output1.0" for a nested position, a dict's keys for its values.
  std::vector<std::string> output_names;
  // Defaults of the inputs, by position (nullopt: none); ImportTorchScript
  // fills them from forward()'s int/float/bool parameters declared with one.
  std::vector<std::optional<Tensor>> input_defaults;
  // Unsupported ops are an error listing all of them, instead of Fallback
  // nodes that run libtorch's implementation.
  bool strict = false;
  // Op kinds ("aten::gelu") to run through the fallback even though Kiln
  // translates them (serving a model whose native translation diverges).
  std::vector<std::string> force_fallback;
};

// Loads `bytes` with torch::jit::load, freezes, inlines and cleans the graph,
// then translates every node through the aten op table; control flow becomes
// If and Loop nodes with blocks, run-time ints, floats, bools and lists
// become values of those kinds, and an op Kiln cannot translate a Fallback
// node (see FallbackOps). Graph inputs are named after forward()'s parameters
// (self dropped; a tuple parameter "p" becomes "p.0", "p.1", ...); a result
// that is a tuple, tensor-list literal or string-keyed dict (nested too) is
// flattened into one output per tensor (see ImportOptions::output_names). Fails with
// InvalidArgument when libtorch cannot read the archive, and, with
// options.strict, with Unimplemented listing every unsupported op at once.
absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view bytes,
                                            const ImportOptions& options = {});

// Same, reading the archive from a file.
absl::StatusOr<ir::Graph> ImportTorchScriptFile(const std::string& path,
                                                const ImportOptions& options = {});

// The source ops ("aten::cumsum") of the graph's Fallback nodes, sorted, once each.
std::vector<std::string> FallbackOps(const ir::Graph& graph);

}  // namespace kiln::importer
