// `kiln inspect`: the imported graph as text, an op histogram, and which ops
// run natively or through the libtorch fallback.
//   kiln inspect MODEL.pt [--dot FILE] [--strict]   offline: imports the file here
//   kiln inspect NAME --remote [--version V]       the graph a server imported
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/inference_client.h"

namespace kiln::cli {

// Imports `path` with Kiln's importer (no server) and prints the report;
// writes Graphviz to `dot_path` when it is not empty. With `strict`, fails
// listing every op that has no native translation. Unimplemented in a build
// without libtorch.
absl::Status InspectFile(const std::string& path, const std::string& dot_path, bool strict);

// Replaces this process with the kiln-inspect binary next to it, passing
// `args`; returns only on failure (Unimplemented when the build has none).
absl::Status RunInspectBinary(const std::vector<std::string>& args);

// Prints the graph `name` was imported into on the server (ModelMetadata's
// "graph" property), its op histogram and its fallback ops.
absl::Status InspectRemote(client::InferenceClient& client, const std::string& name,
                           const std::string& version);

}  // namespace kiln::cli
