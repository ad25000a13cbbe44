// libkiln_torch.so: the importer and the libtorch fallback behind the table
// kilnd loads on first use (torch_backend.h). Linked with a version script
// that exports only the entry point, so its own copies of Kiln's engine
// libraries bind to each other and never to kilnd's.
//
// libtorch's warnings (TORCH_WARN: deprecations, fallback ops' own notices)
// would go straight to stderr and break a JSON log; every entry point routes
// them into kilnd's log instead. libtorch keeps the handler per thread, so
// each call installs it for its duration.
#include "server/torch_plugin.h"

#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include "engine/fallback/fallback.h"
#include "engine/fallback/torch_extensions.h"
#include "engine/fallback/torch_reference.h"

namespace kiln::server::torch {
namespace {

class LogWarnings : public c10::WarningHandler {
 public:
  void process(const c10::SourceLocation& where, const std::string& msg,
               const bool verbatim) override {
    if (verbatim) {
      spdlog::warn("libtorch: {}", msg);
    } else {
      spdlog::warn("libtorch: {} ({}:{})", msg, where.file, where.line);
    }
  }
};

c10::WarningHandler* Handler() {
  static LogWarnings* handler = new LogWarnings();
  return handler;
}

absl::StatusOr<ir::Graph> Import(std::string_view bytes, const importer::ImportOptions& options) {
  c10::Warning::WarningHandlerGuard warnings(Handler());
  return importer::ImportTorchScript(bytes, options);
}

// The fallback kernel's own Prepare and Eval, wrapped to log warnings.
kernels::KernelDef& Wrapped() {
  static kernels::KernelDef kernel;
  return kernel;
}
absl::Status PrepareLogged(kernels::PrepareContext& ctx) {
  c10::Warning::WarningHandlerGuard warnings(Handler());
  return Wrapped().prepare(ctx);
}
absl::Status EvalLogged(kernels::EvalContext& ctx) {
  c10::Warning::WarningHandlerGuard warnings(Handler());
  return Wrapped().eval(ctx);
}

kernels::KernelDef FallbackKernel(int num_threads) {
  fallback::InstallFallbackKernel(num_threads);
  const kernels::KernelDef* kernel = kernels::FindKernel(ir::OpKind::kFallback, DType::kUnknown);
  if (kernel == nullptr) return kernels::KernelDef{};
  Wrapped() = *kernel;
  kernels::KernelDef logged = *kernel;
  logged.prepare = PrepareLogged;
  logged.eval = EvalLogged;
  return logged;
}

absl::StatusOr<verify::ReferenceResult> Reference(std::string_view model_bytes,
                                                  const verify::ReferenceRequest& request) {
  c10::Warning::WarningHandlerGuard warnings(Handler());
  return fallback::RunReference(model_bytes, request);
}

}  // namespace
}  // namespace kiln::server::torch

extern "C" const kiln::server::torch::PluginApi* KilnTorchPlugin() {
  // torchvision's operators (torchvision::nms, ...) before anything imports or
  // runs a model here, and before the import child's sandbox closes the files.
  kiln::fallback::LoadTorchVisionOps();
  static const kiln::server::torch::PluginApi api{
      kiln::server::torch::PluginLayout{}, kiln::server::torch::Import,
      kiln::server::torch::FallbackKernel, kiln::server::torch::Reference};
  return &api;
}
