// libkiln_torch.so: the importer and the libtorch fallback behind the table
// kilnd loads on first use (torch_backend.h). Linked with a version script
// that exports only the entry point, so its own copies of Kiln's engine
// libraries bind to each other and never to kilnd's.
#include "server/torch_plugin.h"

#include "engine/fallback/fallback.h"

namespace kiln::server::torch {
namespace {

absl::StatusOr<ir::Graph> Import(std::string_view bytes, const importer::ImportOptions& options) {
  return importer::ImportTorchScript(bytes, options);
}

kernels::KernelDef FallbackKernel(int num_threads) {
  fallback::InstallFallbackKernel(num_threads);
  const kernels::KernelDef* kernel = kernels::FindKernel(ir::OpKind::kFallback, DType::kUnknown);
  return kernel != nullptr ? *kernel : kernels::KernelDef{};
}

absl::StatusOr<fallback::VerifiedModel> Verify(std::string_view model_bytes,
                                               const importer::ImportOptions& import,
                                               std::unique_ptr<runtime::Model> model,
                                               const fallback::ModelBuilder& build,
                                               const fallback::VerifyOptions& options) {
  return fallback::VerifyModel(model_bytes, import, std::move(model), build, options);
}

std::string Summary(const fallback::VerifyReport& report) { return report.Summary(); }

}  // namespace
}  // namespace kiln::server::torch

extern "C" const kiln::server::torch::PluginApi* KilnTorchPlugin() {
  // The plugin's own registry needs the kernel too, before any model runs
  // here (a verified import).
  kiln::fallback::InstallFallbackKernel();
  static const kiln::server::torch::PluginApi api{
      kiln::server::torch::PluginLayout{}, kiln::server::torch::Import,
      kiln::server::torch::FallbackKernel, kiln::server::torch::Verify,
      kiln::server::torch::Summary};
  return &api;
}
