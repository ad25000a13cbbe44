// The Fallback kernel a server installs (ModelRegistry does, at start-up):
// it decides where each Fallback node runs, and needs no libtorch itself.
//  - A run that brings a FallbackWorker (kernels::EvalContext::services; the
//    registry gives each model one when imports are isolated, the default):
//    in that model's sandboxed worker process (fallback_worker.h).
//  - Otherwise (a server with no worker program: those of tests and tools,
//    which link libtorch; never kilnd): in process, through libtorch's own
//    kernel (torch_backend.h).
// Prepare only keeps the node (serialized once, under an id of its own), so
// compiling a plan never loads libtorch; libtorch prepares the op where it
// runs, on the first call, and its errors (an unknown operator, a schema the
// node does not fit) surface from that call.
#pragma once

namespace kiln::server {

// Idempotent. `num_threads`: libtorch's intra-op threads when it runs in process.
void InstallServerFallbackKernel(int num_threads);

}  // namespace kiln::server
