// What the server needs from libtorch: importing TorchScript, the Fallback
// kernel for ops Kiln does not translate, and the verified import's reference
// run. They run only where libtorch is linked (torch_backend_linked.cc):
// kiln-torch-worker, the program kilnd starts for each of them
// (import_worker.h, torch/fallback_worker.h), and in-process servers of tests
// and tools. kilnd never links libtorch, whose loading (with the ~300
// libraries it pulls in) takes 1 to 3 s, longer than everything else a
// restart from the compiled-graph cache does: its versions of these
// (torch_backend_kilnd.cc) fail, and nothing in kilnd calls them, since kilnd
// always has a worker program (RegistryOptions::torch_worker).
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

// OK where libtorch is linked; FailedPrecondition in kilnd.
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

// Whether libtorch can run every Fallback node of `graph` (the operator
// exists, the node's named arguments fit its schema: fallback::CheckFallbackNode);
// Unimplemented listing every one it cannot. FailedPrecondition in kilnd.
absl::Status CheckFallbackNodes(const ir::Graph& graph);

// The ops of `graph` that run through the libtorch fallback, sorted and
// unique (as importer::FallbackOps; needs no libtorch).
std::vector<std::string> FallbackOps(const ir::Graph& graph);

}  // namespace kiln::server::torch
