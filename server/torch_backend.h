// What the server needs from libtorch: importing TorchScript, the Fallback
// kernel for ops Kiln does not translate, and the verified import's reference
// run (only ever called in the sandboxed worker process, import_worker.h,
// or by in-process servers of tests and tools). Loading
// libtorch (and the ~300 libraries it pulls in) takes 1 to 3 s, longer than
// everything else a restart from the compiled-graph cache does, so kilnd does
// not link it: it loads the plugin libkiln_torch.so (built next to kilnd, see
// torch_plugin.cc) the first time one of these is needed: an import, a model
// with fallback ops, a verified import. A restart whose models all come from
// the disk cache and run natively never loads libtorch. Tests and tools link
// the same functions directly instead (kiln_torch_linked).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/verify/verify.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/ir/graph.h"
#include "engine/kernels/kernel.h"
#include "engine/runtime/model.h"

namespace kiln::server::torch {

// Loads libtorch now unless it is already loaded. Internal when the plugin
// cannot be loaded (missing, or from another build), saying which file.
absl::Status Load();

// importer::ImportTorchScript through libtorch.
absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view bytes,
                                            const importer::ImportOptions& options = {});

// libtorch's own Fallback kernel (engine/fallback/fallback.h,
// LibtorchFallbackKernel), for the process where it runs: the fallback worker
// (server/torch/fallback_worker.h), or a server that runs fallback ops in
// process (--import-isolation none). Loads libtorch now.
absl::StatusOr<kernels::KernelDef> LibtorchFallbackKernel(int num_threads);

// fallback::RunReference through libtorch: runs the program in
// `model_bytes`, so never in kilnd itself.
absl::StatusOr<verify::ReferenceResult> RunReference(std::string_view model_bytes,
                                                     const verify::ReferenceRequest& request);

// The ops of `graph` that run through the libtorch fallback, sorted and
// unique (as importer::FallbackOps; needs no libtorch).
std::vector<std::string> FallbackOps(const ir::Graph& graph);

}  // namespace kiln::server::torch
