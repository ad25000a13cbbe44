// libFuzzer target for the model-file readers that need no libtorch: what
// kilnd does with the bytes of an uploaded file before anything runs. The
// format is told by content (importer::DetectFormat); a torch.export archive
// (.pt2: the zip reader, the archive's JSON program, its weights, and the
// older layout's torch.save pickles) is imported into Kiln's graph, which is
// then verified and printed; the unsupported-op listing reads it too. Anything
// may fail with a status; nothing may crash, leak, read out of bounds or hit
// undefined behaviour (AddressSanitizer and UBSan). Seeded with the .pt2
// fixtures when the build has them (tests/pt2), so mutations start from real
// archives instead of having to discover the zip format.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/importer/export/exported_program_importer.h"
#include "engine/importer/import.h"
#include "engine/ir/graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const kiln::importer::ModelFormat format = kiln::importer::DetectFormat(bytes);
  (void)kiln::importer::ModelFormatName(format);
  kiln::importer::ExportedProgramInfo info;
  absl::StatusOr<kiln::ir::Graph> graph = kiln::importer::ImportExportedProgram(bytes, {}, &info);
  if (graph.ok()) {
    (void)kiln::ir::VerifyGraph(*graph);
    (void)kiln::ir::PrintGraph(*graph);
  }
  (void)kiln::importer::UnsupportedExportOps(bytes);
  return 0;
}
