// torch_backend.h with libtorch linked in: tests and tools that run the
// server in process (kilnd loads the plugin instead, torch_backend_plugin.cc).
#include "engine/fallback/fallback.h"
#include "server/torch_backend.h"

namespace kiln::server::torch {

absl::Status Load() { return absl::OkStatus(); }

absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view bytes,
                                            const importer::ImportOptions& options) {
  return importer::ImportTorchScript(bytes, options);
}

void InstallFallbackKernel(int num_threads) { fallback::InstallFallbackKernel(num_threads); }

absl::StatusOr<fallback::VerifiedModel> VerifyModel(std::string_view model_bytes,
                                                    const importer::ImportOptions& import,
                                                    std::unique_ptr<runtime::Model> model,
                                                    const fallback::ModelBuilder& build,
                                                    const fallback::VerifyOptions& options) {
  return fallback::VerifyModel(model_bytes, import, std::move(model), build, options);
}

std::string VerifySummary(const fallback::VerifyReport& report) { return report.Summary(); }

}  // namespace kiln::server::torch
