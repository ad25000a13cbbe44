// The interface between kilnd and its libtorch plugin (libkiln_torch.so, see
// torch_backend.h): one C entry point returning a table of functions. Both
// sides are built from the same tree, so the table passes C++ types; kBuildId
// (checked on load) catches a plugin left over from another build.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/fallback/verify.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/ir/graph.h"
#include "engine/kernels/kernel.h"
#include "engine/runtime/model.h"

namespace kiln::server::torch {

// Sizes of the types that cross, as the plugin was compiled.
struct PluginLayout {
  int version = 1;  // bump when PluginApi changes
  size_t graph = sizeof(ir::Graph);
  size_t kernel_def = sizeof(kernels::KernelDef);
  size_t import_options = sizeof(importer::ImportOptions);
  size_t verify_options = sizeof(fallback::VerifyOptions);
  size_t verified_model = sizeof(fallback::VerifiedModel);

  bool operator==(const PluginLayout& o) const {
    return version == o.version && graph == o.graph && kernel_def == o.kernel_def &&
           import_options == o.import_options && verify_options == o.verify_options &&
           verified_model == o.verified_model;
  }
};

struct PluginApi {
  PluginLayout layout;
  absl::StatusOr<ir::Graph> (*import_torchscript)(std::string_view bytes,
                                                  const importer::ImportOptions& options);
  // Installs the Fallback kernel in the plugin's own kernel registry (its
  // verified imports run there) and returns it, for the caller's registry.
  kernels::KernelDef (*fallback_kernel)(int num_threads);
  absl::StatusOr<fallback::VerifiedModel> (*verify_model)(std::string_view model_bytes,
                                                          const importer::ImportOptions& import,
                                                          std::unique_ptr<runtime::Model> model,
                                                          const fallback::ModelBuilder& build,
                                                          const fallback::VerifyOptions& options);
  std::string (*verify_summary)(const fallback::VerifyReport& report);
};

// The plugin's file name, looked for next to the running executable.
inline constexpr char kPluginFile[] = "libkiln_torch.so";
// The entry point: `const PluginApi* KilnTorchPlugin()`.
inline constexpr char kPluginEntry[] = "KilnTorchPlugin";

}  // namespace kiln::server::torch
