// One inference, whichever protocol it came by: the model is looked up, the
// request's parameters and tensors are checked and decoded, the engine runs
// on a compute thread (server/scheduler/compute_pool.h) or through the
// model's dynamic batcher (server/scheduler/batch_scheduler.h), and the
// response is encoded and counted in the model's
// statistics. InferenceCore (inference_core.h) runs it for both front ends
// with the same protobuf messages, so both give the same answers and the same
// error messages.
//
// Asynchronous: Infer returns as soon as the work is queued, and `done` runs
// on the thread that finished it. On the direct path that is the compute
// thread itself, so the answer leaves kilnd without waking another thread:
// on a 2-core machine a woken serving thread could wait milliseconds for a
// core while the OpenMP team of the finished run still spins on one
// (docs/performance.md, kilnd's batch-1 overhead).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "inference/grpc_service.pb.h"
#include "server/core/infer_request_reader.h"
#include "server/core/model_registry.h"
#include "server/core/raw_outputs.h"
#include "server/core/run_limits.h"
#include "server/core/shared_memory.h"
#include "server/scheduler/compute_pool.h"

namespace kiln::server {

// The scheduler's (server/scheduler/): the pipeline holds them, and only its
// .cc needs to know them.
class BatchScheduler;
class ComputePool;

// What the protocol knows of one call.
struct InferCall {
  // The client's deadline (system_clock max when it set none); the request
  // also ends at --request-timeout-s and at its "timeout" parameter.
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  // Whether the client has gone (may be empty). Polled between nodes.
  std::function<bool()> cancelled;
  // Where the answer's raw outputs go, as their tensors, instead of into the
  // response's raw_output_contents (null: there). For a front that sends
  // them from the tensors (server/core/raw_outputs.h); it must live until
  // `done` has run, and holds the outputs after.
  RawOutputs* raw_outputs = nullptr;
};

// The compute threads inferences run on (compute_pool.h).
struct ComputeOptions {
  int threads = 1;       // compute threads: requests computing at once
  int team_threads = 1;  // each one's OpenMP team (kilnd --threads)
  // The CPUs compute thread i pins its team to (kernels::PlanTeamCpus,
  // engine/kernels/thread_binding.h); missing or empty: unpinned.
  std::vector<std::vector<int>> team_cpus;
  // While two or more requests wait, a team runs them one thread each
  // instead of one at a time on all its threads (ComputePoolOptions::split;
  // kilnd --split-teams).
  bool split_teams = false;
};

class InferPipeline {
 public:
  using Done = std::function<void(absl::Status)>;

  // `registry` must outlive the pipeline. `compute.threads` compute threads
  // run the engine.
  InferPipeline(ModelRegistry* registry, RunLimits limits, ComputeOptions compute);
  ~InferPipeline();  // finishes what runs; what is still queued is refused (UNAVAILABLE)
  InferPipeline(const InferPipeline&) = delete;
  InferPipeline& operator=(const InferPipeline&) = delete;

  // Runs one inference. `done` is called exactly once, maybe on another
  // thread, maybe before Infer returns; `response` is filled when it gets OK.
  // `request`, `response` and whatever `call.cancelled` reads must stay alive
  // until `done` has run. Errors carry the message the client is to see.
  // `raw` (may be null): the raw_input_contents entries the front left
  // outside `request` (server/core/infer_request_reader.h); read before Infer
  // returns, so they need only live until then.
  void Infer(const inference::ModelInferRequest& request, inference::ModelInferResponse* response,
             InferCall call, Done done, const RawInputs* raw = nullptr);

  // Infer, waiting for its end on the calling thread.
  absl::Status InferSync(const inference::ModelInferRequest& request,
                         inference::ModelInferResponse* response, InferCall call,
                         const RawInputs* raw = nullptr);

  // The regions of the system shared-memory extension both protocols
  // register and the tensors of a request may name (server/core/shared_memory.h).
  SharedMemoryRegistry& shared_memory() { return shared_memory_; }

  // What the compute threads did so far (/metrics).
  ComputeTotals compute_totals() const;

 private:
  struct Pending;
  void RunDirect(const std::shared_ptr<Pending>& pending);
  void RunBatched(const std::shared_ptr<Pending>& pending);

  ModelRegistry* registry_;
  RunLimits limits_;
  const int team_threads_;  // ComputeOptions::team_threads
  std::unique_ptr<ComputePool> compute_;
  // Forms the batched models' batches and runs them on compute_: one thread,
  // however many requests wait.
  std::unique_ptr<BatchScheduler> batches_;
  SharedMemoryRegistry shared_memory_;
};

}  // namespace kiln::server
