// torch_backend.h with libtorch linked in: kiln-torch-worker, and tests and
// tools that run the server in process (kilnd has torch_backend_kilnd.cc).
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

absl::StatusOr<verify::ReferenceResult> RunReference(std::string_view model_bytes,
                                                     const verify::ReferenceRequest& request) {
  return fallback::RunReference(model_bytes, request);
}

}  // namespace kiln::server::torch
