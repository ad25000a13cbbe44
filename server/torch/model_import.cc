#include "server/torch/model_import.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/importer/export/exported_program_importer.h"
#include "server/torch/torch_backend.h"

namespace kiln::server {

namespace {
bool IsExport(importer::ModelFormat f) {
  return f == importer::ModelFormat::kExportedProgram ||
         f == importer::ModelFormat::kLegacyExportedProgram;
}
}  // namespace

bool NeedsLibtorchFallback(const absl::Status& s) {
  return absl::IsFailedPrecondition(s) &&
         s.message().find(kNeedsLibtorchFallback) != absl::string_view::npos;
}

std::string UntranslatedOpsMessage(const absl::Status& s) {
  std::string_view m(s.message().data(), s.message().size());
  const std::string_view marker = kNeedsLibtorchFallback;  // "<marker>: <ops>"
  if (m.rfind(marker, 0) == 0 && m.size() >= marker.size() + 2) m.remove_prefix(marker.size() + 2);
  return std::string(m);
}

bool ImportNeedsTorch(std::string_view bytes) { return !IsExport(importer::DetectFormat(bytes)); }

absl::StatusOr<ir::Graph> ImportModel(std::string_view bytes,
                                      const importer::ImportOptions& options) {
  return ImportModel(bytes, nullptr, options);
}

absl::StatusOr<ir::Graph> ImportModel(std::string_view bytes, std::shared_ptr<const void> owner,
                                      const importer::ImportOptions& options) {
  if (IsExport(importer::DetectFormat(bytes))) {
    ASSIGN_OR_RETURN(ir::Graph graph,
                     importer::ImportExportedProgram(bytes, std::move(owner), options));
    const std::vector<std::string> ops = torch::FallbackOps(graph);
    if (ops.empty()) return graph;
    if (!torch::Load().ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          kNeedsLibtorchFallback, ": Kiln has no translation for ", ops.size(),
          " op(s) of this program (", absl::StrJoin(ops, ", "),
          "), which run through libtorch's fallback"));
    }
    // Every op libtorch 1.13 lacks, or whose arguments it names otherwise,
    // listed at once now rather than found by the first request.
    RETURN_IF_ERROR(torch::CheckFallbackNodes(graph));
    return graph;
  }
  return torch::ImportTorchScript(bytes, options);
}

}  // namespace kiln::server
