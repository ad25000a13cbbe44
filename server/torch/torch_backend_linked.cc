// torch_backend.h with libtorch linked in: kiln-torch-worker, and tests and
// tools that run the server in process (kilnd has torch_backend_kilnd.cc).
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/fallback/fallback.h"
#include "engine/fallback/torch_reference.h"
#include "server/torch/torch_backend.h"

namespace kiln::server::torch {

absl::Status Load() { return absl::OkStatus(); }

absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view bytes,
                                            const importer::ImportOptions& options) {
  return importer::ImportTorchScript(bytes, options);
}

absl::StatusOr<kernels::KernelDef> LibtorchFallbackKernel(int num_threads) {
  return fallback::LibtorchFallbackKernel(num_threads);
}

absl::Status CheckFallbackNodes(const ir::Graph& graph) {
  std::set<std::string> problems;
  for (const ir::Node& node : graph.nodes()) {
    if (node.kind != ir::OpKind::kFallback) continue;
    if (absl::Status s = fallback::CheckFallbackNode(node); !s.ok()) {
      problems.insert(absl::StrCat(node.source_op, " (", s.message(), ")"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "Kiln has no translation for ", problems.size(),
      " op(s) of this program that libtorch 1.13's fallback cannot run either: ",
      absl::StrJoin(problems, "; ")));
}

absl::StatusOr<verify::ReferenceResult> RunReference(std::string_view model_bytes,
                                                     const verify::ReferenceRequest& request) {
  return fallback::RunReference(model_bytes, request);
}

}  // namespace kiln::server::torch
