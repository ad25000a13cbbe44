// Imports a TorchScript archive (torch.jit.save) into Kiln's graph IR. This
// front (engine/importer/torchscript/) and the fallback are the only parts of
// Kiln that include libtorch headers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/import.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

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
