// Kiln's libtorch fallback: runs an op Kiln does not translate natively
// through libtorch's own operator registry, as one Fallback node of the plan
// (engine/importer/fallback_convert.cc emits them). This library and the
// importer are the only Kiln code that links libtorch; the runtime knows the
// fallback only as a kernel installed at startup, so builds without libtorch
// still run every native op.
#pragma once

#include "absl/status/status.h"
#include "engine/ir/graph.h"
#include "engine/kernels/kernel.h"

namespace kiln::fallback {

// The same kernel, not installed: for a server whose own Fallback kernel
// decides where each node runs (server/torch/fallback_kernel.h) and calls
// this one where libtorch runs (its worker process, or in process). Loads
// torchvision's operators and sets libtorch's intra-op threads as
// InstallFallbackKernel does.
kernels::KernelDef LibtorchFallbackKernel(int num_threads);

// Installs the Fallback kernel into the kernel registry
// (kernels::InstallKernel). Idempotent; call once at startup, before models
// are compiled. Also sets libtorch's intra-op threads to `num_threads` when
// it is positive.
void InstallFallbackKernel(int num_threads = 0);

// Whether libtorch can run Fallback node `node`: it has the operator, and the
// node's arguments fit its schema (a node of the torch.export front names
// them, and torch 2.x may name one libtorch 1.13 lacks). Unimplemented
// saying what does not fit. The kernel checks the same when it prepares.
absl::Status CheckFallbackNode(const ir::Node& node);

}  // namespace kiln::fallback
