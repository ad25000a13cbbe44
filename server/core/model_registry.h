// The models the server knows: for every model name, its versions, each READY
// or UNAVAILABLE (with a reason), the loaded runtime::Model, and statistics.
// Thread-safe. Requests hold the model through a shared_ptr, so an unload or a
// reload never pulls a model out from under a running request.
//
// Which versions are served is the model's version policy (config.json;
// latest 1 by default) applied to the versions on disk. Loading a version
// takes its imported graph from the compiled-graph cache when it holds the
// file's SHA-256 (no libtorch at all), else imports the file, in a child
// process when an import worker is configured.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/cache/compiled_graph_cache.h"
#include "engine/cache/graph_serializer.h"
#include "engine/runtime/model.h"
#include "server/core/first_use_verifier.h"
#include "server/core/histogram.h"
#include "server/core/model_config.h"
#include "server/core/model_repository.h"
#include "server/core/run_limits.h"
#include "server/torch/import_limits.h"

namespace kiln::server {

// A model's request queue (server/scheduler/dynamic_batcher.h). Declared only:
// the scheduler builds on the core, not the other way round.
class DynamicBatcher;

enum class ModelState { kReady, kUnavailable };

// "READY" / "UNAVAILABLE", as Triton's repository index spells them.
absl::string_view ModelStateName(ModelState state);

struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// Cumulative per-version counters, in the shape of Triton's InferStatistics.
// A request counts as many inferences as its batch size (dim 0) when the
// model has a max_batch_size, else one; an execution is one run of the model,
// of one request or of a batch of them (server/scheduler/).
struct BatchStats {
  Duration compute_input;
  Duration compute_infer;
  Duration compute_output;
};

// Why a request failed, in Triton's words (the `reason` label of
// nv_inference_request_failure): turned away before it ran (a full queue, its
// deadline passed while it waited, the server stopping), cancelled by its
// client, failed while the model ran, or anything else (a bad request: an
// unknown input, a wrong shape or datatype).
enum class FailureReason { kRejected, kCanceled, kBackend, kOther };
inline constexpr int kNumFailureReasons = 4;
inline constexpr const char* kFailureReasonNames[kNumFailureReasons] = {"REJECTED", "CANCELED",
                                                                        "BACKEND", "OTHER"};

// The reason of a request that failed with `error`; `ran`: whether the model
// had started running it.
FailureReason FailureReasonOf(const absl::Status& error, bool ran);

struct StatsSnapshot {
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  uint64_t last_inference_ms = 0;  // since the epoch; 0 = never
  Duration success;                // whole request, decode to encode
  Duration fail;
  uint64_t fail_by_reason[kNumFailureReasons] = {};  // indexed by FailureReason
  Duration compute_input;   // decoding the request
  Duration queue;           // waiting for a compute thread
  Duration compute_infer;   // runtime::Model::Infer
  Duration compute_output;  // encoding the response
  std::map<uint64_t, BatchStats> batches;  // by the executions' batch size
  // Successful requests' whole durations (`success`), in microseconds.
  HistogramCounts success_us{LatencyBoundsUs()};
  // Requests started and not yet answered: queued, running or encoding.
  uint64_t pending = 0;
  // Successful requests of a dynamically batched model, by their way to a
  // compute thread: through the batcher's queue, or around it (its measured
  // costs chose single requests, or an idle server ran a request of one row at
  // once: DynamicBatcher::AloneKey).
  uint64_t batcher_queued = 0;
  uint64_t batcher_around = 0;
};

// Phase times of one successful request, in nanoseconds.
struct InferTimings {
  uint64_t input_ns = 0;
  uint64_t queue_ns = 0;  // waiting for a compute thread
  uint64_t infer_ns = 0;
  uint64_t output_ns = 0;
  uint64_t inferences = 1;  // the request's batch size
  // Executions this request is counted for (0 for all but one request of a
  // batch), and their batch size.
  uint64_t executions = 1;
  uint64_t batch_size = 1;
  // A batched model's request: whether it went through the batcher's queue or
  // around it (kNone: the model is not batched, or the request was profiled).
  enum class BatcherRoute : uint8_t { kNone, kQueued, kAround };
  BatcherRoute route = BatcherRoute::kNone;
};

class ModelStats {
 public:
  // A request found its model: it is pending until its RecordSuccess or
  // RecordFailure, which every started request gets exactly once.
  void RecordStart();
  void RecordSuccess(const InferTimings& timings);
  void RecordFailure(uint64_t total_ns, FailureReason reason);
  StatsSnapshot Snapshot() const;

 private:
  mutable std::mutex mu_;
  StatsSnapshot stats_;
};

// How a version's last load went.
struct LoadInfo {
  uint64_t load_ns = 0;    // whole load: hash, graph, contract
  uint64_t hash_ns = 0;    // SHA-256 of the model file (the cache key)
  uint64_t graph_ns = 0;   // obtaining the graph: cache read or import
  uint64_t import_ns = 0;  // libtorch import; 0 when the graph came from the cache
  uint64_t warmup_ns = 0;  // the config's model_warmup samples (part of load_ns)
  uint64_t warmup_runs = 0;
  // "disk-cache" (no libtorch), "import" (isolated child), "import-in-process".
  std::string graph_source;
};

// Plain copy of cache::PlanCounters.
struct PlanStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t compile_count = 0;
  uint64_t compile_ns = 0;
  uint64_t hit_ns = 0;
  uint64_t bytes_held = 0;
};

// What one request needs: the model, kept alive for the request's duration,
// and where to record its outcome.
struct ServingModel {
  std::shared_ptr<const runtime::Model> model;
  // Null when the config has no max_batch_size.
  std::shared_ptr<DynamicBatcher> batcher;
  std::shared_ptr<ModelStats> stats;
  std::string sha256;  // of the model file being served
  int64_t version = 0;
  std::vector<int64_t> ready_versions;  // every READY version of the model
};

struct ModelIndexEntry {
  std::string name;
  int64_t version = 0;
  ModelState state = ModelState::kUnavailable;
  std::string reason;
};

struct VersionStatistics {
  std::string name;
  int64_t version = 0;
  ModelState state = ModelState::kUnavailable;
  std::string sha256;
  StatsSnapshot infer;
  LoadInfo load;
  PlanStats plans;
  uint64_t weight_bytes = 0;
  // Distinct source ops ("aten::...") run through the libtorch fallback: the
  // load's, and those a compiled signature's kernels refused. 0 when the
  // version is not served.
  uint64_t fallback_ops = 0;
  // Whether the version's requests go through a dynamic batcher now.
  bool batched = false;
};

struct RegistryOptions {
  runtime::CompileOptions compile;
  // The CPUs a load's thread pins its OpenMP team to (empty: unpinned): the
  // first compute thread's (InferPipeline), so that oneDNN, which picks a
  // weight's packed format from what the calling thread may run on, packs
  // for a load's plans what the compute threads' plans of other signatures
  // share instead of packing their own copy.
  std::vector<int> load_team_cpus;
  // Required: imported graphs and compiled plans go through it.
  std::shared_ptr<cache::CompiledGraphCache> cache;
  // kiln-torch-worker (ServerOptions::torch_worker); empty runs libtorch in
  // this process.
  std::string torch_worker;
  // The program for imports that need no libtorch (ServerOptions::import_worker);
  // empty: torch_worker.
  std::string import_worker;
  ImportLimits import_limits;
  // Each load's time limit and the bounds of the verified import's runs.
  RunLimits limits;
  // Verification on first use (server/core/first_use_verifier.h), unless a
  // model's config turns it off.
  bool verify_on_first_use = true;
  // The compute teams split into single-thread runs while requests wait
  // (ComputeOptions::split_teams): a model's warm-up compiles those plans too.
  bool split_teams = false;
};

// A complete file to install as a model version.
struct UploadRequest {
  std::string name;
  int64_t version = 0;      // 0: the next version, or the latest if unchanged
  std::string staged_path;  // a verified file in the staging area; consumed
  std::string sha256;       // of that file
  std::optional<std::string> config_json;  // nullopt keeps config.json
};

struct UploadResult {
  int64_t version = 0;
  bool unchanged = false;  // the latest version already held this file and config
  double load_ms = 0;
  bool dry_run = false;  // the config asked for a dry run: nothing was stored or served
  std::string contract_json;  // the model's contract (server/core/model_contract.h)
};

class ModelRegistry {
 public:
  // `repository` must outlive the registry.
  ModelRegistry(ModelRepository* repository, RegistryOptions options);

  // Loads every model in the repository. Failures are logged and leave that
  // version UNAVAILABLE with the error as its reason; the others still load.
  void LoadAll();

  // (Re)loads the versions of `name` its version policy selects from the
  // repository and stops serving the others. `config_json` (stored when a
  // version loads) overrides config.json. A version that fails keeps serving
  // what it served before. Fails with NotFound for a model the repository
  // lacks, InvalidArgument for a bad name or config, and the first version's
  // error when one fails.
  absl::Status Load(const std::string& name, std::optional<std::string> config_json);

  // Installs a verified file as a version of `request.name`: imports it (or
  // finds its graph in the cache) and builds the model first; only then moves
  // the file into the repository, stores the config, serves the version and
  // applies the version policy. Any failure before the move leaves the
  // repository and what is served untouched, and removes the staged file.
  absl::StatusOr<UploadResult> Upload(UploadRequest request);

  // A dry run of Load: builds the latest version the policy selects with
  // `config_json` (nullopt: config.json) and returns its contract JSON,
  // serving, storing and replacing nothing. Fails as Load does.
  absl::StatusOr<std::string> DryRunLoad(const std::string& name,
                                         std::optional<std::string> config_json);

  // The contract JSON of the version of `name` a request would get
  // (`version` 0: the highest READY one). Fails as Get does.
  absl::StatusOr<std::string> Contract(absl::string_view name, int64_t version = 0) const;

  // Stops serving every version of `name` (files stay; Load brings them back).
  // NotFound when neither the registry nor the repository knows it.
  absl::Status Unload(const std::string& name);

  // Stops serving and removes the files of one version (version > 0) or of
  // the whole model. Remaining versions are served as the policy says.
  // NotFound when there is nothing to delete.
  absl::Status Delete(const std::string& name, int64_t version);

  // The model to run a request on: `version` empty means the highest READY
  // version. NotFound for an unknown model or version, InvalidArgument for a
  // malformed version, FailedPrecondition (with the reason) for one that is
  // not ready.
  absl::StatusOr<ServingModel> Get(absl::string_view name, absl::string_view version = "") const;

  bool IsReady(absl::string_view name, absl::string_view version = "") const;

  // Every version the registry or the repository knows, sorted by name and
  // version; versions on disk that are not loaded are UNAVAILABLE with why.
  std::vector<ModelIndexEntry> Index() const;

  // Statistics of the versions of `name` (every model when empty; every
  // version when `version` is 0). NotFound for an unknown name or version.
  absl::StatusOr<std::vector<VersionStatistics>> Statistics(absl::string_view name,
                                                            int64_t version = 0) const;

  // The path of a model file the server holds with this content, if any.
  std::optional<std::string> FindFile(const std::string& sha256, uint64_t size) const;

  const cache::CompiledGraphCache& cache() const { return *options_.cache; }
  ModelRepository& repository() const { return *repository_; }

 private:
  struct Version {
    ModelState state = ModelState::kUnavailable;
    std::string reason;
    std::shared_ptr<const runtime::Model> model;
    std::shared_ptr<DynamicBatcher> batcher;
    std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>();
    std::shared_ptr<cache::PlanCounters> counters = std::make_shared<cache::PlanCounters>();
    std::string sha256;
    LoadInfo load;
    uint64_t weight_bytes = 0;
  };
  struct Entry {
    std::map<int64_t, Version> versions;
  };
  // A model built from a file, not yet serving.
  struct Built {
    std::shared_ptr<const runtime::Model> model;
    std::shared_ptr<DynamicBatcher> batcher;
    std::shared_ptr<cache::PlanCounters> counters;
    std::string sha256;
    uint64_t size = 0;
    LoadInfo load;
    uint64_t weight_bytes = 0;
    // Null when the model's signatures are not verified on first use.
    std::shared_ptr<FirstUseVerifier> first_use;
  };

  // An imported graph on its way into the disk cache: the import child's
  // answer file, or the serialized graph of an in-process import. The file is
  // removed unless committed.
  struct PendingGraph {
    std::string answer_path;
    std::optional<cache::SerializedGraph> serialized;
    PendingGraph() = default;
    PendingGraph(const PendingGraph&) = delete;
    PendingGraph& operator=(const PendingGraph&) = delete;
    ~PendingGraph();
  };

  // The graph of the model file at `path` under `graph_id`
  // (CompiledGraphCache::GraphId): from the disk cache, or imported (then left
  // in `pending` for CommitGraph).
  // The file at `path` imported again (in the worker child unless imports
  // run in process) with `ops` forced onto the fallback: the verified
  // import's repair. Not cached.
  absl::StatusOr<ir::Graph> ImportForced(const std::string& path,
                                         const std::vector<std::string>& ops, ImportLimits limits,
                                         std::chrono::steady_clock::time_point deadline);
  absl::StatusOr<ir::Graph> ObtainGraph(const std::string& path, const std::string& graph_id,
                                        const std::string& label, LoadInfo* info,
                                        PendingGraph* pending);
  // Puts the graph of a model that passed every load check into the disk
  // cache: the imported one in `pending`, or `served` when the checks
  // replaced it (ops the verified import moved onto the fallback).
  void CommitGraph(const std::string& graph_id, PendingGraph& pending,
                   const ir::Graph* served);
  // Builds the model in the file at `path`; `known_sha256` is its SHA-256
  // when the caller has just checked it (an upload), else it is computed.
  absl::StatusOr<Built> Build(const std::string& name, int64_t version, const std::string& path,
                              const ModelConfig& config,
                              const std::optional<std::string>& known_sha256 = std::nullopt);
  absl::StatusOr<Built> BuildHere(const std::string& name, int64_t version, const std::string& path,
                              const ModelConfig& config,
                              const std::optional<std::string>& known_sha256 = std::nullopt);
  // Loads the versions the policy selects (those already READY only when
  // `reload_ready`; never `just_loaded`), stops serving the rest. Returns the
  // first failure. load_mu_ held.
  absl::Status ApplyPolicyLocked(const std::string& name, const ModelConfig& config,
                                 bool reload_ready, int64_t just_loaded = 0);
  absl::Status LoadFromRepositoryLocked(const std::string& name,
                                        std::optional<std::string> config_json, bool reload_ready);
  // Makes `built` the serving model of `name`:`version`. mu_ not held.
  void Serve(const std::string& name, int64_t version, Built built, const std::string& path);
  // Records a failed load; a READY version keeps serving.
  void MarkFailed(const std::string& name, int64_t version, const absl::Status& status);
  // Stops serving one version, keeping its entry with `reason`. mu_ held.
  void StopServingLocked(Version& v, const std::string& reason);

  ModelRepository* repository_;
  RegistryOptions options_;

  // Takes load_mu_, waiting at most --load-timeout-s for the load holding it
  // (then DeadlineExceeded naming `what`), and starts this load's own
  // --load-timeout-s: load_deadline_.
  absl::StatusOr<std::unique_lock<std::timed_mutex>> LockLoads(const std::string& what);

  // Serializes loads, uploads, unloads and deletes (imports can take
  // seconds, each bounded by --load-timeout-s); requests only ever take mu_,
  // briefly, so they never wait behind an import.
  std::timed_mutex load_mu_;
  // When the load holding load_mu_ must end: what the import child and the
  // verified import's runs get.
  std::chrono::steady_clock::time_point load_deadline_;
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
  // Model files by content: SHA-256 -> (path, size), for "do you have it".
  std::map<std::string, std::pair<std::string, uint64_t>> files_;
};

}  // namespace kiln::server
