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
#include "engine/verify/verify.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/ir/graph.h"
#include "engine/kernels/kernel.h"
#include "engine/runtime/model.h"

namespace kiln::server::torch {

// Sizes of the types that cross, as the plugin was compiled.
struct PluginLayout {
  int version = 2;  // bump when PluginApi changes
  size_t graph = sizeof(ir::Graph);
  size_t kernel_def = sizeof(kernels::KernelDef);
  size_t import_options = sizeof(importer::ImportOptions);
  size_t reference_request = sizeof(verify::ReferenceRequest);
  size_t reference_result = sizeof(verify::ReferenceResult);

  bool operator==(const PluginLayout& o) const {
    return version == o.version && graph == o.graph && kernel_def == o.kernel_def &&
           import_options == o.import_options && reference_request == o.reference_request &&
           reference_result == o.reference_result;
  }
};

struct PluginApi {
  PluginLayout layout;
  absl::StatusOr<ir::Graph> (*import_torchscript)(std::string_view bytes,
                                                  const importer::ImportOptions& options);
  // Installs the Fallback kernel in the plugin's own kernel registry (its
  // verified imports run there) and returns it, for the caller's registry.
  kernels::KernelDef (*fallback_kernel)(int num_threads);
  // The verified import's reference run (called only in the worker process).
  absl::StatusOr<verify::ReferenceResult> (*run_reference)(std::string_view model_bytes,
                                                           const verify::ReferenceRequest& request);
};

// The plugin's file name, looked for next to the running executable.
inline constexpr char kPluginFile[] = "libkiln_torch.so";
// The entry point: `const PluginApi* KilnTorchPlugin()`.
inline constexpr char kPluginEntry[] = "KilnTorchPlugin";

}  // namespace kiln::server::torch
