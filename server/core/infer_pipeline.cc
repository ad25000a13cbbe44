#include "server/core/infer_pipeline.h"

#include <algorithm>
#include <future>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/kernels/thread_binding.h"
#include "engine/runtime/arena_pool.h"
#include "engine/runtime/profiler.h"
#include "server/core/request_parameters.h"
#include "server/core/tensor_codec.h"
#include "server/scheduler/batch_scheduler.h"
#include "server/scheduler/compute_pool.h"
#include "server/scheduler/dynamic_batcher.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

using Clock = std::chrono::steady_clock;

// ModelInfer's request parameter "profile" (server/core/request_parameters.h): run
// with the profiler and answer with the per-node profile, the JSON of
// runtime::Profile, in the response parameter "profile" (`kiln profile`).
constexpr char kProfileParam[] = "profile";

uint64_t ElapsedNs(Clock::time_point since) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

}  // namespace

// One request from its decoding to its answer. Whoever holds it last answers:
// a request the pools drop at shutdown (they destroy its task unrun) is
// answered UNAVAILABLE by the destructor, so `done` always runs.
struct InferPipeline::Pending {
  const inference::ModelInferRequest* request = nullptr;
  inference::ModelInferResponse* response = nullptr;
  const SharedMemoryRegistry* shared_memory = nullptr;
  RawOutputs* raw_outputs = nullptr;  // InferCall::raw_outputs
  Done done;
  Clock::time_point start;
  ServingModel serving;
  InferParameters params;
  std::vector<runtime::NamedTensor> inputs;
  runtime::RunOptions run;
  runtime::Profiler profiler;
  InferTimings timings;
  bool answered = false;
  bool ran = false;  // the model started running it (for the failure's reason)
  // Its signature's key when it skipped the batcher's queue (DynamicBatcher::AloneKey).
  std::string alone_key;

  ~Pending() {
    if (!answered) Fail(absl::UnavailableError("the server is shutting down"));
  }

  void Fail(const absl::Status& error) {
    answered = true;
    if (serving.stats != nullptr) {
      serving.stats->RecordFailure(ElapsedNs(start), FailureReasonOf(error, ran));
    }
    done(error);
  }

  // Encodes the outputs and answers.
  void Answer(absl::StatusOr<std::vector<runtime::NamedTensor>> outputs) {
    if (!outputs.ok()) return Fail(outputs.status());
    const Clock::time_point output_start = Clock::now();
    response->set_model_name(request->model_name());
    response->set_model_version(std::to_string(serving.version));
    response->set_id(request->id());
    if (absl::Status s = EncodeOutputs(*outputs, *request, shared_memory, response, raw_outputs);
        !s.ok()) {
      response->clear_outputs();
      response->clear_raw_output_contents();
      if (raw_outputs != nullptr) raw_outputs->entries.clear();
      return Fail(s);
    }
    if (params.profile) {
      (*response->mutable_parameters())[kProfileParam].set_string_param(
          profiler.Finish().ToJson());
    }
    timings.output_ns = ElapsedNs(output_start);
    serving.stats->RecordSuccess(timings);
    answered = true;
    done(absl::OkStatus());
  }
};

InferPipeline::InferPipeline(ModelRegistry* registry, RunLimits limits, ComputeOptions compute)
    : registry_(registry),
      limits_(std::move(limits)),
      team_threads_(compute.team_threads),
      compute_(std::make_unique<ComputePool>(ComputePoolOptions{
          compute.threads, compute.team_threads, compute.split_teams,
          [cpus = compute.team_cpus](int team, int slot) {
            // Unpinned: each run sets its thread count (Executable::Run).
            if (team >= static_cast<int>(cpus.size()) || cpus[team].empty()) return;
            // A team's own thread pins its OpenMP team; a narrow thread (one
            // of the team's when it splits) itself, on CPU `slot` of the team.
            // Unpinned, the thread still runs: only slower when the kernel
            // co-locates its team (thread_binding.h).
            const std::vector<int> pin =
                slot < 0 ? cpus[team] : std::vector<int>{cpus[team][slot % cpus[team].size()]};
            if (absl::Status pinned = kernels::PinTeam(pin); !pinned.ok())
              spdlog::warn("compute thread {}{}: {}", team,
                           slot < 0 ? std::string() : absl::StrCat(" (narrow ", slot, ")"),
                           std::string(pinned.message()));
          },
          // The team too, when pinned: unpinned, its members' wake-up may
          // queue one behind the other on one CPU (thread_binding.h), and
          // the empty region would wait for that.
          [n = compute.team_threads, cpus = compute.team_cpus](int team) {
            if (team < static_cast<int>(cpus.size()) && !cpus[team].empty())
              kernels::WakeTeam(n);
          }})),
      batches_(std::make_unique<BatchScheduler>(compute_.get())) {
  // Arena blocks held: one per run that may be in flight (a team runs one
  // request on all its threads, or one per thread when split).
  const int per_team = compute.split_teams ? std::max(1, compute.team_threads) : 1;
  runtime::ArenaPool::Global().set_max_blocks(
      static_cast<size_t>(std::max(1, compute.threads) * per_team));
}

InferPipeline::~InferPipeline() {
  // The scheduler first: its batches run on the compute threads.
  batches_.reset();
  compute_.reset();
}

void InferPipeline::Infer(const inference::ModelInferRequest& request,
                          inference::ModelInferResponse* response, InferCall call, Done done,
                          const RawInputs* raw) {
  auto pending = std::make_shared<Pending>();
  pending->request = &request;
  pending->response = response;
  pending->shared_memory = &shared_memory_;
  pending->raw_outputs = call.raw_outputs;
  pending->done = std::move(done);
  pending->start = Clock::now();
  absl::StatusOr<ServingModel> serving = registry_->Get(request.model_name(), request.model_version());
  if (!serving.ok()) return pending->Fail(serving.status());
  pending->serving = *std::move(serving);
  pending->serving.stats->RecordStart();
  // A compute thread wakes while the request decodes (the batcher's queue
  // decides when a batched one runs, unless it may run at once).
  if (const DynamicBatcher* b = pending->serving.batcher.get();
      b == nullptr || !b->queues() || b->MayRunAtOnce()) {
    compute_->Prewake();
  }

  // Parameters first: one kilnd does not understand refuses the request.
  absl::StatusOr<InferParameters> params = ParseInferParameters(request);
  if (!params.ok()) return pending->Fail(params.status());
  pending->params = *params;
  absl::StatusOr<std::vector<runtime::NamedTensor>> inputs = DecodeInputs(request, &shared_memory_, raw);
  if (!inputs.ok()) return pending->Fail(inputs.status());
  pending->inputs = *std::move(inputs);
  pending->timings.input_ns = ElapsedNs(pending->start);

  std::chrono::system_clock::time_point deadline = call.deadline;
  if (pending->params.timeout.has_value()) {
    deadline = std::min(deadline, std::chrono::system_clock::now() + *pending->params.timeout);
  }
  pending->run = limits_.ForRequest(deadline, std::move(call.cancelled));
  if (pending->params.profile) pending->run.observer = &pending->profiler;

  DynamicBatcher* batcher = pending->serving.batcher.get();
  if (batcher != nullptr) {
    absl::StatusOr<int64_t> rows = batcher->CheckRows(pending->inputs);
    if (!rows.ok()) return pending->Fail(rows.status());
    pending->timings.inferences = pending->timings.batch_size = static_cast<uint64_t>(*rows);
  }
  // A profiled request runs alone: its profile is of its own run.
  if (batcher != nullptr && batcher->queues() && !pending->params.profile) {
    // While the batcher's measured costs choose single requests, they skip
    // its queue (DynamicBatcher::AloneKey) and it counts their runs.
    std::optional<std::string> alone = batcher->AloneKey(
        pending->inputs, RequestedOutputs(*pending->request),
        compute_->splits_teams() ? compute_->team_threads() : 0,
        static_cast<int64_t>(pending->timings.batch_size), compute_->all_idle());
    if (!alone.has_value()) {
      pending->timings.route = InferTimings::BatcherRoute::kQueued;
      return RunBatched(pending);
    }
    pending->alone_key = *std::move(alone);
    pending->timings.route = InferTimings::BatcherRoute::kAround;
  }
  RunDirect(pending);
}

void InferPipeline::RunDirect(const std::shared_ptr<Pending>& pending) {
  const Clock::time_point queued = Clock::now();
  const int workers = compute_->workers();
  auto task = [pending, queued, workers, team_threads = team_threads_](int threads) {
    pending->timings.queue_ns = ElapsedNs(queued);
    // A request still queued at its deadline, or whose client has gone, never runs.
    if (absl::Status check = pending->run.Check(); !check.ok()) {
      if (absl::IsDeadlineExceeded(check)) {
        check = absl::DeadlineExceededError(absl::StrCat(
            "deadline exceeded while waiting for a compute thread (", workers,
            " busy; --concurrent-inferences)"));
      }
      return pending->Fail(check);
    }
    const Clock::time_point infer_start = Clock::now();
    pending->ran = true;
    pending->run.num_threads = threads == team_threads ? 0 : threads;  // 0: the model's plan
    absl::StatusOr<std::vector<runtime::NamedTensor>> outputs =
        pending->alone_key.empty()
            ? pending->serving.model->Infer(pending->inputs, RequestedOutputs(*pending->request),
                                            pending->run)
            : pending->serving.batcher->InferAlone(
                  pending->alone_key, static_cast<int64_t>(pending->timings.batch_size),
                  pending->inputs, RequestedOutputs(*pending->request), pending->run);
    pending->timings.infer_ns = ElapsedNs(infer_start);
    pending->inputs.clear();
    pending->Answer(std::move(outputs));
  };
  // A profiled request runs on the whole team, as one alone would.
  if (pending->params.profile) {
    compute_->Submit([task = std::move(task), threads = team_threads_] { task(threads); });
  } else {
    compute_->SubmitSplittable(std::move(task));
  }
}

void InferPipeline::RunBatched(const std::shared_ptr<Pending>& pending) {
  std::shared_ptr<DynamicBatcher> batcher = pending->serving.batcher;
  batches_->Enqueue(std::move(batcher), std::move(pending->inputs),
                    RequestedOutputs(*pending->request), pending->run,
                    [pending](DynamicBatcher::Result result) {
                      pending->timings.queue_ns = result.queue_ns;
                      pending->timings.infer_ns = result.infer_ns;
                      pending->timings.executions = result.executions;
                      pending->timings.batch_size = static_cast<uint64_t>(result.batch_rows);
                      pending->ran = result.infer_ns > 0;
                      pending->Answer(std::move(result.outputs));
                    });
}

ComputeTotals InferPipeline::compute_totals() const {
  return ComputeTotals{compute_->narrow_runs(), compute_->splits()};
}

absl::Status InferPipeline::InferSync(const inference::ModelInferRequest& request,
                                      inference::ModelInferResponse* response, InferCall call,
                                      const RawInputs* raw) {
  std::promise<absl::Status> answered;
  std::future<absl::Status> status = answered.get_future();
  Infer(
      request, response, std::move(call),
      [&answered](absl::Status s) { answered.set_value(std::move(s)); }, raw);
  return status.get();
}

}  // namespace kiln::server
