// torch_backend.h for kilnd, which never runs libtorch: every use of it goes
// to kiln-torch-worker (import_worker.h, torch/fallback_worker.h), so these
// are reached only by a bug, or by a TorchScript file that kilnd's own
// --import-worker mode (for .pt2 archives) was handed.
#include "server/torch/torch_backend.h"

#include "absl/strings/str_cat.h"
#include "server/torch/import_worker.h"

namespace kiln::server::torch {
namespace {

absl::Status NotHere() {
  return absl::FailedPreconditionError(absl::StrCat(
      "libtorch is needed but runs only in ", kTorchWorkerFile, ", never in kilnd"));
}

}  // namespace

absl::Status Load() { return NotHere(); }

absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view, const importer::ImportOptions&) {
  return NotHere();
}

absl::StatusOr<kernels::KernelDef> LibtorchFallbackKernel(int) { return NotHere(); }

absl::Status CheckFallbackNodes(const ir::Graph&) { return NotHere(); }

absl::StatusOr<verify::ReferenceResult> RunReference(std::string_view,
                                                     const verify::ReferenceRequest&) {
  return NotHere();
}

}  // namespace kiln::server::torch
