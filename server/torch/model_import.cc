#include "server/torch/model_import.h"

#include "engine/importer/export/exported_program_importer.h"
#include "server/torch/torch_backend.h"

namespace kiln::server {

namespace {
bool IsExport(importer::ModelFormat f) {
  return f == importer::ModelFormat::kExportedProgram ||
         f == importer::ModelFormat::kLegacyExportedProgram;
}
}  // namespace

bool ImportNeedsTorch(std::string_view bytes) { return !IsExport(importer::DetectFormat(bytes)); }

absl::StatusOr<ir::Graph> ImportModel(std::string_view bytes,
                                      const importer::ImportOptions& options) {
  return ImportModel(bytes, nullptr, options);
}

absl::StatusOr<ir::Graph> ImportModel(std::string_view bytes, std::shared_ptr<const void> owner,
                                      const importer::ImportOptions& options) {
  if (IsExport(importer::DetectFormat(bytes))) {
    return importer::ImportExportedProgram(bytes, std::move(owner), options);
  }
  return torch::ImportTorchScript(bytes, options);
}

}  // namespace kiln::server
