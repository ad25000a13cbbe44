// Imports a TorchScript archive (torch.jit.save) into Kiln's graph IR. This and
// the fallback are the only parts of Kiln that include libtorch headers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

struct ImportOptions {
  // Overrides the forward() parameter names, by position (empty: keep).
  std::vector<std::string> input_names;
  // Output names by position; default "output0", "output1", ...
  std::vector<std::string> output_names;
};

// Loads `bytes` with torch::jit::load, freezes, inlines and cleans the graph,
// then translates every node through the aten op table. Graph inputs are named
// after forward()'s parameters (self dropped). Fails with InvalidArgument when
// libtorch cannot read the archive, and with Unimplemented listing every
// unsupported op kind at once.
absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view bytes,
                                            const ImportOptions& options = {});

// Same, reading the archive from a file.
absl::StatusOr<ir::Graph> ImportTorchScriptFile(const std::string& path,
                                                const ImportOptions& options = {});

}  // namespace kiln::importer
