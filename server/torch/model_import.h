// Imports a model file whatever its format, told by content (never by the
// file's name): a torch.export archive (.pt2) through the native export front,
// which needs no libtorch, and TorchScript through the libtorch plugin.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/importer/import.h"
#include "engine/ir/graph.h"

namespace kiln::server {

// The start of the FailedPrecondition a process without libtorch answers for
// a torch.export archive with ops Kiln does not translate: they run through
// libtorch's fallback, so the import is done again where libtorch is (the
// registry's torch worker), or refused where there is none.
inline constexpr char kNeedsLibtorchFallback[] = "needs the libtorch fallback";

// Whether `s` is that answer, and what it says without its marker (the ops).
bool NeedsLibtorchFallback(const absl::Status& s);
std::string UntranslatedOpsMessage(const absl::Status& s);

// Whether importing `bytes` needs libtorch (everything but a torch.export archive).
bool ImportNeedsTorch(std::string_view bytes);

// The graph of the model in `bytes`; fails as the format's importer does.
absl::StatusOr<ir::Graph> ImportModel(std::string_view bytes,
                                      const importer::ImportOptions& options = {});

// The same over bytes that `owner` keeps alive and nothing writes (a mapping of
// the file): a torch.export archive's aligned weights are viewed there instead
// of copied (importer::ImportExportedProgram). TorchScript reads them as above.
absl::StatusOr<ir::Graph> ImportModel(std::string_view bytes, std::shared_ptr<const void> owner,
                                      const importer::ImportOptions& options = {});

}  // namespace kiln::server
