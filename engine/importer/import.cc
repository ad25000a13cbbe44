// Format detection by content: the zip directory says which front reads a file.
#include "engine/importer/import.h"

#include "absl/strings/match.h"
#include "engine/importer/export/pt2_archive.h"

namespace kiln::importer {

const char* ModelFormatName(ModelFormat format) {
  switch (format) {
    case ModelFormat::kTorchScript: return "torchscript";
    case ModelFormat::kExportedProgram: return "exported_program";
    case ModelFormat::kLegacyExportedProgram: return "exported_program (torch 2.1-2.7 layout)";
    case ModelFormat::kUnknown: break;
  }
  return "unknown";
}

ModelFormat DetectFormat(std::string_view bytes) {
  if (!LooksLikeZip(bytes)) return ModelFormat::kUnknown;
  absl::StatusOr<ZipArchive> zip = ZipArchive::Open(bytes);
  if (!zip.ok()) return ModelFormat::kUnknown;
  bool torchscript = false, legacy = false;
  for (const ZipEntry& e : zip->entries()) {
    if (e.name == "archive_format" || absl::EndsWith(e.name, "/archive_format")) {
      return ModelFormat::kExportedProgram;
    }
    legacy |= absl::EndsWith(e.name, "serialized_exported_program.json");
    torchscript |= absl::EndsWith(e.name, "/data.pkl") || absl::EndsWith(e.name, "/constants.pkl");
  }
  if (legacy) return ModelFormat::kLegacyExportedProgram;
  if (torchscript) return ModelFormat::kTorchScript;
  return ModelFormat::kUnknown;
}

}  // namespace kiln::importer
