// The libtorch fallback out of kilnd: a long-lived, sandboxed worker process
// per model runs the model's Fallback nodes (ops Kiln does not translate, and
// native nodes whose kernel refused a signature, ir/fallback_twin.h), so
// libtorch never runs on a model's data inside kilnd.
//
//   kilnd                                       kiln-torch-worker --fallback-worker
//   Fallback kernel (fallback_kernel.cc)        (one per model) limits its
//     -> FallbackWorker::Run                    address space, enters the sandbox of
//        inputs copied into the arena ------->  server/security/sandbox.h, says FallbackReady;
//        FallbackCall on the socket             per call: prepares the op the first time
//        <------- FallbackReply                 (libtorch's own Fallback kernel,
//        outputs copied out of the arena        engine/fallback), runs it on the arena's
//                                               tensors, writes the outputs after them
//
// The worker starts as the import child does (import_worker.h,
// StartWorkerProcess: own process group, network namespace where allowed,
// then chroot into an empty root, an unprivileged uid when kilnd is root,
// no-new-privs, seccomp), on the first call that needs it, under
// --import-memory-mb. Messages are proto/kiln/v1/torch_worker.proto's
// Fallback* on a socket pair; tensor bytes lie in a memfd both processes map
// (inputs from offset 0, the worker's outputs after them; kilnd grows it for
// the inputs, the worker for the outputs, up to the memory limit). Each op is
// sent once per worker process; after that a call carries only tensor
// offsets.
//
// One call at a time per worker (a mutex): a model's fallback ops run one
// after the other, each with libtorch's intra-op threads (--threads). While it
// waits, Run polls the run's check (its deadline, cancellation, the server
// stopping): past it the worker is killed and the call ends with that status.
// A worker that dies (a crash, its memory limit, killed) fails the call with
// a status naming the op (Internal for a crash, ResourceExhausted for memory,
// DeadlineExceeded or Cancelled for the run's bounds); kilnd stays up, and the
// next call starts a fresh worker.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "engine/kernels/kernel.h"
#include "server/torch/import_worker.h"

namespace kiln::v1 {
class Node;
}  // namespace kiln::v1

namespace kiln::server {

struct FallbackWorkerOptions {
  // The program to run with --fallback-worker: kiln-torch-worker.
  std::string binary;
  // memory_bytes, sandbox and sandbox_root apply (timeout_s and stop do not:
  // each call is bounded by its run).
  ImportLimits limits;
  // libtorch's intra-op threads in the worker.
  int num_threads = 1;
  // For the log: "model 'm' version 1".
  std::string label;
};

class FallbackWorker : public kernels::KernelServices {
 public:
  explicit FallbackWorker(FallbackWorkerOptions options);
  ~FallbackWorker() override;  // kills the worker process, if any
  FallbackWorker(const FallbackWorker&) = delete;
  FallbackWorker& operator=(const FallbackWorker&) = delete;

  // Runs the Fallback node `op` (cache::NodeToProto's form), prepared in kilnd
  // as `op_id`, on ctx.inputs, setting ctx.outputs; ctx.check bounds the wait.
  absl::Status Run(uint64_t op_id, const v1::Node& op, kernels::EvalContext& ctx);

  // The worker process's id; -1 when none runs (before the first call, after
  // a death).
  int pid() const;

 private:
  absl::Status StartLocked(kernels::EvalContext& ctx);
  absl::Status CallLocked(uint64_t op_id, const v1::Node& op, kernels::EvalContext& ctx);
  // Maps the arena at `bytes` (growing the memfd to it when `grow`).
  absl::Status MapArenaLocked(uint64_t bytes, bool grow);
  // Sends `message` (length-prefixed); reads one back into `reply`, polling
  // ctx.check while it waits.
  absl::Status WriteLocked(const std::string& message);
  absl::Status ReadLocked(kernels::EvalContext& ctx, const std::string& op_name,
                          std::string* reply);
  // The worker is gone or must go: kills it if still running, reaps it, and
  // says why in a status naming `op_name`.
  absl::Status DeathLocked(const std::string& op_name);
  void StopLocked();
  void DrainStderrLocked();

  const FallbackWorkerOptions options_;
  mutable std::timed_mutex mu_;
  int pid_ = -1;
  int socket_ = -1;
  int stderr_ = -1;
  int memfd_ = -1;
  char* arena_ = nullptr;
  uint64_t arena_bytes_ = 0;
  std::set<uint64_t> sent_ops_;  // ops this worker process has been given
  std::string stderr_tail_;
  std::string stderr_line_;  // an incomplete line of its log
};

// kiln-torch-worker's --fallback-worker mode (fallback_worker_main.cc):
//   kiln-torch-worker --fallback-worker MEMORY_BYTES SANDBOX_ROOT|off NAMESPACES THREADS
// with the socket on descriptor 3 and the arena's memfd on 4. Returns the
// exit status. Test-only hook: KILN_TEST_FALLBACK_FAULT=crash|hang|oom|escape
// makes the worker crash, hang, allocate until its memory limit stops it, or
// answer its first call with the sandbox escape probe's findings
// (PermissionDenied, "sandbox probe: ..."), instead of running the op.
int FallbackWorkerMain(int argc, char** argv);

}  // namespace kiln::server
