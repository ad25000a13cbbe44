// torch_backend.h for kilnd: libtorch comes from the plugin libkiln_torch.so
// beside the executable, loaded (RTLD_NOW | RTLD_LOCAL) the first time it is
// needed and never unloaded: graphs, kernels and models made by its code stay
// alive as long as the process.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "server/torch_backend.h"
#include "server/torch_plugin.h"

namespace kiln::server::torch {
namespace {

std::string PluginPath() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(kPluginFile) : (exe.parent_path() / kPluginFile).string();
}

// The plugin's table, or why it cannot be loaded. Loaded once.
const absl::StatusOr<const PluginApi*>& Plugin() {
  static const auto* plugin = [] {
    const auto start = std::chrono::steady_clock::now();
    const std::string path = PluginPath();
    auto fail = [&](absl::string_view why) {
      // Not a server fault: this kilnd was built or deployed without libtorch.
      // Models whose graphs are in the compiled-graph cache still serve natively.
      return new absl::StatusOr<const PluginApi*>(absl::FailedPreconditionError(absl::StrCat(
          "libtorch is needed (to import a model or run an op through the fallback) but its "
          "plugin '", path, "' cannot be used: ", why)));
    };
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return fail(::dlerror());
    auto entry = reinterpret_cast<const PluginApi* (*)()>(::dlsym(handle, kPluginEntry));
    if (entry == nullptr) return fail(absl::StrCat("no entry point ", kPluginEntry));
    const PluginApi* api = entry();
    if (!(api->layout == PluginLayout{})) {
      return fail("it comes from another build of Kiln (rebuild it with kilnd)");
    }
    spdlog::info("loaded libtorch in {:.1f} ms",
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                           start)
                     .count());
    return new absl::StatusOr<const PluginApi*>(api);
  }();
  return *plugin;
}

}  // namespace

absl::Status Load() { return Plugin().status(); }

absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view bytes,
                                            const importer::ImportOptions& options) {
  ASSIGN_OR_RETURN(const PluginApi* api, Plugin());
  return api->import_torchscript(bytes, options);
}

absl::StatusOr<kernels::KernelDef> LibtorchFallbackKernel(int num_threads) {
  ASSIGN_OR_RETURN(const PluginApi* api, Plugin());
  kernels::KernelDef def = api->fallback_kernel(num_threads);
  if (def.prepare == nullptr || def.eval == nullptr) {
    return absl::InternalError("the libtorch plugin has no Fallback kernel");
  }
  return def;
}

absl::StatusOr<verify::ReferenceResult> RunReference(std::string_view model_bytes,
                                                     const verify::ReferenceRequest& request) {
  ASSIGN_OR_RETURN(const PluginApi* api, Plugin());
  return api->run_reference(model_bytes, request);
}

}  // namespace kiln::server::torch
