// Load order matters for the "a failed load changes nothing" promise: a new
// file is imported (or found in the cache) and built into a runtime::Model
// first; only then is it moved into the repository, and only after that is the
// model swapped into the registry. Any failure before the move leaves the
// serving model and the repository as they were.
#include "server/core/model_registry.h"

#include "engine/common/mapped_file.h"
#include "server/torch/fallback_kernel.h"
#include "server/torch/fallback_worker.h"
#include "server/torch/import_worker.h"

#include "server/scheduler/compute_pool.h"
#include "server/torch/model_import.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/cache/file_io.h"
#include "engine/cache/engine_version.h"
#include "engine/cache/graph_serializer.h"
#include "engine/common/precision.h"
#include "engine/common/sha256.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16_rate.h"
#include "engine/kernels/thread_binding.h"
#include "engine/passes/pass.h"
#include "engine/runtime/arena_pool.h"
#include "server/core/host_effect_ops.h"
#include "server/core/import_checks.h"
#include "server/core/model_contract.h"
#include "server/core/model_warmup.h"
#include "server/scheduler/dynamic_batcher.h"
#include "server/torch/torch_backend.h"
#include "server/torch/torch_reference_client.h"

namespace kiln::server {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

uint64_t NsSince(Clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

void Add(Duration& d, uint64_t ns) {
  d.count += 1;
  d.ns += ns;
}

std::string Label(absl::string_view name, int64_t version) {
  return absl::StrCat(name, ":", version);
}

// "precision": "bf16" asks for speed: on a CPU whose bfloat16 GEMMs do not run
// kBf16MinSpeedup faster than its float32 ones (measured once per process,
// kernels/bf16_rate.h), the model runs float32 and its metadata says why;
// "bf16_always" runs bfloat16 anyway. Either way the metadata gives the rates.
void ChoosePrecision(ModelConfig& config, int threads) {
  if (config.precision != Precision::kBf16) return;
  const kernels::Bf16Rate& rate = kernels::MeasuredBf16Rate(threads);
  const std::string measured =
      rate.error.empty()
          ? absl::StrFormat("this CPU's bfloat16 GEMMs ran at %.2fx its float32 rate "
                            "(%.0f against %.0f GFLOP/s at %d threads)",
                            rate.speedup(), rate.bf16_gflops, rate.f32_gflops, threads)
          : absl::StrCat("this CPU has no bfloat16 GEMM: ", rate.error);
  if (config.precision_forced || rate.speedup() >= kernels::kBf16MinSpeedup) {
    config.precision_note = measured;
    return;
  }
  config.precision = Precision::kFp32;
  config.precision_note = absl::StrCat("\"bf16\" requested, float32 used: ", measured,
                                       "; \"bf16_always\" runs bfloat16 anyway");
}

absl::StatusOr<ModelConfig> ParseConfig(const std::optional<std::string>& json, int threads) {
  if (!json.has_value()) return ModelConfig{};
  absl::StatusOr<ModelConfig> config = ParseModelConfig(*json);
  if (config.ok()) ChoosePrecision(*config, threads);
  return config;
}

PlanStats Snapshot(const cache::PlanCounters& c) {
  PlanStats s;
  s.memory_hits = c.memory_hits;
  s.disk_hits = c.disk_hits;
  s.misses = c.misses;
  s.evictions = c.evictions;
  s.compile_count = c.compile_count;
  s.compile_ns = c.compile_ns;
  s.hit_ns = c.hit_ns;
  s.bytes_held = static_cast<uint64_t>(std::max<int64_t>(0, c.bytes_held));
  return s;
}

}  // namespace

absl::string_view ModelStateName(ModelState state) {
  return state == ModelState::kReady ? "READY" : "UNAVAILABLE";
}

void ModelStats::RecordStart() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.pending += 1;
}

void ModelStats::RecordSuccess(const InferTimings& timings) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stats_.pending > 0) stats_.pending -= 1;
  stats_.inference_count += timings.inferences;
  stats_.execution_count += timings.executions;
  stats_.last_inference_ms = NowMs();
  stats_.batcher_queued += timings.route == InferTimings::BatcherRoute::kQueued;
  stats_.batcher_around += timings.route == InferTimings::BatcherRoute::kAround;
  if (timings.executions > 0) {
    BatchStats& batch = stats_.batches[timings.batch_size];
    Add(batch.compute_input, timings.input_ns);
    Add(batch.compute_infer, timings.infer_ns);
    Add(batch.compute_output, timings.output_ns);
  }
  const uint64_t total_ns = timings.input_ns + timings.queue_ns + timings.infer_ns + timings.output_ns;
  Add(stats_.success, total_ns);
  stats_.success_us.Observe(static_cast<double>(total_ns) / 1e3);
  Add(stats_.compute_input, timings.input_ns);
  Add(stats_.queue, timings.queue_ns);
  Add(stats_.compute_infer, timings.infer_ns);
  Add(stats_.compute_output, timings.output_ns);
}

void ModelStats::RecordFailure(uint64_t total_ns, FailureReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stats_.pending > 0) stats_.pending -= 1;
  stats_.last_inference_ms = NowMs();
  Add(stats_.fail, total_ns);
  ++stats_.fail_by_reason[static_cast<int>(reason)];
}

FailureReason FailureReasonOf(const absl::Status& error, bool ran) {
  switch (error.code()) {
    case absl::StatusCode::kCancelled:
      return FailureReason::kCanceled;
    // What the client sent: no such input, a wrong shape or datatype, an
    // option the model lacks.
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kOutOfRange:
      return FailureReason::kOther;
    case absl::StatusCode::kUnavailable:
      return FailureReason::kRejected;
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
      return ran ? FailureReason::kBackend : FailureReason::kRejected;
    default:
      return ran ? FailureReason::kBackend : FailureReason::kOther;
  }
}

StatsSnapshot ModelStats::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

ModelRegistry::ModelRegistry(ModelRepository* repository, RegistryOptions options)
    : repository_(repository), options_(std::move(options)) {
  // Ops without a native translation run through libtorch: in each model's
  // sandboxed worker process, or in process when imports are
  // (server/torch/fallback_kernel.h).
  InstallServerFallbackKernel(options_.compile.num_threads);
}

void ModelRegistry::LoadAll() {
  const std::vector<std::string> names = repository_->List();
  spdlog::info("model repository {}: {} model(s)", repository_->root(), names.size());
  const Clock::time_point start = Clock::now();
  for (const std::string& name : names) {
    // Load() logs the outcome; a failure must not stop the others.
    (void)Load(name, std::nullopt);
  }
  if (!names.empty()) spdlog::info("repository loaded in {:.1f} ms", Ms(NsSince(start)));
}

absl::StatusOr<std::unique_lock<std::timed_mutex>> ModelRegistry::LockLoads(
    const std::string& what) {
  std::unique_lock<std::timed_mutex> lock(load_mu_, std::defer_lock);
  if (!lock.try_lock_until(options_.limits.LoadDeadline())) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": waiting for another load to finish: ran past ",
                     options_.limits.LoadDeadlineName()));
  }
  load_deadline_ = options_.limits.LoadDeadline();
  return lock;
}

// ------------------------------------------------------------------- building

ModelRegistry::PendingGraph::~PendingGraph() {
  if (!answer_path.empty()) ::unlink(answer_path.c_str());
}

void ModelRegistry::CommitGraph(const std::string& graph_id, PendingGraph& pending,
                                const ir::Graph* served) {
  cache::CompiledGraphCache& cache = *options_.cache;
  if (served != nullptr) {
    if (cache.has_disk()) {
      absl::StatusOr<cache::SerializedGraph> serialized = cache::SerializeGraph(*served);
      if (serialized.ok()) {
        cache.StoreGraph(graph_id, serialized->Pieces());
      } else {
        spdlog::info("the served graph is not cached on disk: {}",
                     std::string(serialized.status().message()));
      }
    }
  } else if (!pending.answer_path.empty()) {
    cache.AdoptGraphFile(graph_id, pending.answer_path);
    pending.answer_path.clear();
  } else if (pending.serialized.has_value()) {
    cache.StoreGraph(graph_id, pending.serialized->Pieces());
  }
  pending.serialized.reset();
}

absl::StatusOr<ir::Graph> ModelRegistry::ObtainGraph(const std::string& path,
                                                     const std::string& graph_id,
                                                     const std::string& label, LoadInfo* info,
                                                     PendingGraph* pending) {
  cache::CompiledGraphCache& cache = *options_.cache;
  if (std::optional<ir::Graph> cached = cache.LoadGraph(graph_id)) {
    info->graph_source = "disk-cache";
    return *std::move(cached);
  }
  const Clock::time_point start = Clock::now();
  if (!options_.torch_worker.empty()) {
    // With a disk cache the child's answer is written next to the cache's
    // entries, so a build that succeeds renames it into place: the graph
    // (hundreds of MB for a large model) is written once.
    ImportAnswer answer;
    const std::string dir =
        cache.has_disk() ? cache.GraphDir() : repository_->StagingDir();
    answer.path = (std::filesystem::path(dir) /
                   absl::StrCat(cache::kTempPrefix, "import-", cache::UniqueSuffix()))
                      .string();
    answer.key = cache.GraphKey(graph_id);
    answer.keep = cache.has_disk();
    // The child gets what is left of the load's time.
    ImportLimits limits = options_.import_limits;
    limits.timeout_s = static_cast<int>(std::max<int64_t>(
        1, std::chrono::ceil<std::chrono::seconds>(load_deadline_ - Clock::now()).count()));
    limits.stop = options_.limits.ForLoad(load_deadline_).stop;
    // A file that needs no libtorch (a torch.export archive, told from its
    // zip directory) is imported by a program that does not load it.
    const std::string& worker = !options_.import_worker.empty() && IsExportArchiveFile(path)
                                    ? options_.import_worker
                                    : options_.torch_worker;
    absl::StatusOr<cache::Payload> serialized =
        ImportInChildProcess(worker, path, answer, limits);
    if (NeedsLibtorchFallback(serialized.status()) && worker != options_.torch_worker) {
      // A .pt2 with ops Kiln does not translate: imported again where
      // libtorch checks that its fallback can run them.
      const absl::Status needs = serialized.status();
      serialized = ImportInChildProcess(options_.torch_worker, path, answer, limits);
      if (absl::IsFailedPrecondition(serialized.status())) {  // no worker to run libtorch
        return absl::UnimplementedError(
            absl::StrCat(UntranslatedOpsMessage(needs), "; ", serialized.status().message()));
      }
    }
    if (serialized.ok()) {
      if (answer.keep) pending->answer_path = answer.path;  // removed unless committed
      absl::StatusOr<ir::Graph> graph = cache::ParseGraph(serialized->view(), serialized->owner());
      if (!graph.ok()) {
        return absl::InternalError(absl::StrCat("the import process's graph does not read back: ",
                                                graph.status().message()));
      }
      info->graph_source = "import";
      info->import_ns = NsSince(start);
      return graph;
    }
    if (!IsNotSerializable(serialized.status())) return serialized.status();
    if (options_.import_limits.sandbox) {
      // Importing in process would run the file's code outside the sandbox.
      return absl::UnimplementedError(absl::StrCat(
          "the sandboxed import could not hand the imported graph over (",
          serialized.status().message(), "); kilnd does not import it unsandboxed"));
    }
    // The child read the file without trouble; only the hand-over failed.
    spdlog::warn("{}: the imported graph cannot be handed over ({}); importing in process", label,
                 std::string(serialized.status().message()));
  }
  // Mapped, as in the import child: a .pt2's aligned weights then view the
  // file's pages instead of being copied (ImportExportedProgram).
  absl::StatusOr<std::shared_ptr<const MappedFile>> mapped = MappedFile::Open(path);
  std::string read;
  std::string_view bytes;
  std::shared_ptr<const void> owner;
  if (mapped.ok() && (*mapped)->size() > 0) {
    bytes = std::string_view((*mapped)->data(), (*mapped)->size());
    owner = *std::move(mapped);
  } else {
    ASSIGN_OR_RETURN(read, cache::ReadFileToString(path));
    bytes = read;
  }
  absl::StatusOr<ir::Graph> imported = ImportModel(bytes, std::move(owner));
  if (NeedsLibtorchFallback(imported.status())) {
    return absl::UnimplementedError(absl::StrCat(
        UntranslatedOpsMessage(imported.status()),
        "; this kilnd has no libtorch fallback (it was built without libtorch)"));
  }
  ASSIGN_OR_RETURN(ir::Graph graph, std::move(imported));
  info->graph_source = "import-in-process";
  info->import_ns = NsSince(start);
  if (cache.has_disk()) {
    absl::StatusOr<cache::SerializedGraph> serialized = cache::SerializeGraph(graph);
    if (serialized.ok()) {
      pending->serialized = *std::move(serialized);  // holds the tensors, not a copy
    } else {
      spdlog::info("{}: the imported graph is not cached on disk: {}", label,
                   std::string(serialized.status().message()));
    }
  }
  return graph;
}

absl::StatusOr<ir::Graph> ModelRegistry::ImportForced(
    const std::string& path, const std::vector<std::string>& ops, ImportLimits limits,
    std::chrono::steady_clock::time_point deadline) {
  if (options_.torch_worker.empty()) {
    ASSIGN_OR_RETURN(std::string bytes, cache::ReadFileToString(path));
    importer::ImportOptions forced;
    forced.force_fallback = ops;
    return torch::ImportTorchScript(bytes, forced);
  }
  ImportAnswer answer;
  answer.path = (std::filesystem::path(repository_->StagingDir()) /
                 absl::StrCat(cache::kTempPrefix, "import-", cache::UniqueSuffix()))
                    .string();
  answer.key = "forced-import";
  limits.timeout_s = static_cast<int>(std::max<int64_t>(
      1, std::chrono::ceil<std::chrono::seconds>(deadline - Clock::now()).count()));
  ASSIGN_OR_RETURN(cache::Payload serialized,
                   ImportInChildProcess(options_.torch_worker, path, answer, limits, ops));
  absl::StatusOr<ir::Graph> graph = cache::ParseGraph(serialized.view(), serialized.owner());
  if (!graph.ok()) {
    return absl::InternalError(absl::StrCat("the import process's graph does not read back: ",
                                            graph.status().message()));
  }
  return graph;
}

absl::StatusOr<ModelRegistry::Built> ModelRegistry::Build(
    const std::string& name, int64_t version, const std::string& path, const ModelConfig& config,
    const std::optional<std::string>& known_sha256) {
  // Compiling and verifying run OpenMP loops (oneDNN's weight reorders, the
  // verified import's runs): on a thread of their own, whose OpenMP team ends
  // with it (compute_pool.h says why that matters).
  absl::StatusOr<Built> built = absl::InternalError("the load did not run");
  RunOnShortLivedThread([&] {
    if (absl::Status pinned = kernels::PinTeam(options_.load_team_cpus); !pinned.ok())
      spdlog::warn("load of {}: {}", name, std::string(pinned.message()));
    built = BuildHere(name, version, path, config, known_sha256);
  });
  return built;
}

absl::StatusOr<ModelRegistry::Built> ModelRegistry::BuildHere(
    const std::string& name, int64_t version, const std::string& path, const ModelConfig& config,
    const std::optional<std::string>& known_sha256) {
  const Clock::time_point start = Clock::now();
  const std::string label = Label(name, version);
  Built built;
  if (known_sha256.has_value()) {
    std::error_code ec;
    built.sha256 = *known_sha256;
    built.size = std::filesystem::file_size(path, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot stat '", path, "': ", ec.message()));
  } else {
    ASSIGN_OR_RETURN(cache::FileDigest digest, options_.cache->DigestFile(path));
    built.sha256 = digest.sha256;
    built.size = digest.size;
  }
  built.load.hash_ns = NsSince(start);
  const Clock::time_point graph_start = Clock::now();
  // The imported graph enters the disk cache only once the model it makes
  // has passed every check below: a graph found there is trusted as is. It
  // is stored as served, under the settings that decided it.
  const std::string graph_id =
      cache::CompiledGraphCache::GraphId(built.sha256, GraphSettings(config));
  PendingGraph pending;
  ASSIGN_OR_RETURN(ir::Graph graph, ObtainGraph(path, graph_id, label, &built.load, &pending));
  built.load.graph_ns = NsSince(graph_start);
  RETURN_IF_ERROR(CheckStrict(graph, config));
  // Before the verified import runs the file in this process.
  RETURN_IF_ERROR(RefuseHostEffectOps(graph));

  runtime::ModelOptions options = config.model;
  RETURN_IF_ERROR(FillDeclaredNames(graph, options));
  options.compile = options_.compile;
  options.compile.precision = config.precision;
  // Its fallback ops (and those of the models the verified import rebuilds)
  // run in a worker process of the model's own, started when first needed.
  std::shared_ptr<FallbackWorker> fallback_worker;
  if (!options_.torch_worker.empty()) {
    FallbackWorkerOptions worker;
    worker.binary = options_.torch_worker;
    worker.limits = options_.import_limits;
    worker.num_threads = options_.compile.num_threads;
    worker.label = label;
    fallback_worker = std::make_shared<FallbackWorker>(std::move(worker));
    options.services = fallback_worker;
  }
  built.counters = std::make_shared<cache::PlanCounters>();
  built.weight_bytes = graph.ConstantBytes();
  // Verification on first use: the signatures the load cannot verify are
  // verified by their first request (server/core/first_use_verifier.h).
  const std::string first_use_unavailable = FirstUseUnavailable(options_.torch_worker);
  std::string first_use_off;
  if (!config.verify.enabled) {
    first_use_off = "off: verification is disabled by the load config";
  } else if (!config.verify.on_first_use) {
    first_use_off = "off: \"on_first_use\": false in the load config";
  } else if (!options_.verify_on_first_use) {
    first_use_off = "off: kilnd runs with --verify-on-first-use off";
  } else if (!first_use_unavailable.empty()) {
    first_use_off = first_use_unavailable;
  } else if (config.dry_run) {
    first_use_off = "off: a dry run serves no request";
  }
  // The libtorch runs of the file at `file` (in the sandboxed worker), and
  // its imports with ops forced onto the fallback, bounded by `deadline`.
  auto import_limits = [this](std::chrono::steady_clock::time_point deadline) {
    ImportLimits limits = options_.import_limits;
    limits.stop = options_.limits.ForLoad(deadline).stop;
    return limits;
  };
  if (first_use_off.empty()) {
    FirstUseOptions first_use;
    first_use.label = label;
    first_use.tolerance = config.precision == Precision::kBf16
                              ? std::max(config.verify.tolerance, kBf16Tolerance)
                              : config.verify.tolerance;
    first_use.precision = config.precision;
    first_use.import = config.import;
    first_use.timeout = std::chrono::seconds(options_.limits.load_timeout_s);
    // Signatures verified on first use are remembered under the repository's
    // hidden .kiln-verified/ (never a model), in a file named after what
    // decides a verification: another file, other load settings or tolerance,
    // another engine version each verify afresh.
    first_use.record_path = absl::StrCat(
        repository_->root(), "/.kiln-verified/",
        Sha256Hex(absl::StrCat(built.sha256, "\n", GraphSettings(config), "\n",
                               first_use.tolerance, "\n", PrecisionName(config.precision), "\n",
                               first_use.max_forced_ops, "\n", cache::EngineVersion())));
    first_use.reference = [this, import_limits](const std::string& file,
                                                std::chrono::steady_clock::time_point deadline)
        -> std::unique_ptr<verify::TorchReference> {
      return std::make_unique<ChildTorchReference>(options_.torch_worker, file,
                                                   repository_->StagingDir(),
                                                   import_limits(deadline), deadline);
    };
    built.first_use = std::make_shared<FirstUseVerifier>(std::move(first_use));
    built.first_use->set_model_path(path);
  }
  // Builds the model of the imported graph, or of one the verified import
  // rebuilt with ops forced onto the fallback. The plan key names the graph
  // exactly: its file, the names the config gives its inputs and outputs,
  // and the ops it runs through the fallback (a rebuilt graph compiles other
  // plans). Verification serves the last model built. `gated`: the model
  // verifies its signatures on first use (not one that verification on first
  // use rebuilt for one signature). Holds no reference to the verifier, which
  // holds it.
  auto models_built = std::make_shared<int>(0);
  std::weak_ptr<FirstUseVerifier> gate = built.first_use;
  std::shared_ptr<cache::CompiledGraphCache> plan_cache = options_.cache;
  std::shared_ptr<cache::PlanCounters> counters = built.counters;
  auto build = [models_built, config, options, plan_cache, graph_id, label, counters, gate](
                   ir::Graph g, bool gated) -> absl::StatusOr<std::unique_ptr<runtime::Model>> {
    ++*models_built;
    if (config.accumulate_float64) passes::AccumulateInFloat64(g);
    runtime::ModelOptions o = options;
    if (gated) o.gate = gate.lock();
    std::vector<std::string> inputs, outputs;
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      inputs.push_back(i < o.inputs.size() ? o.inputs[i].name : g.value(g.inputs()[i]).name);
    }
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      outputs.push_back(i < o.outputs.size() ? o.outputs[i].name : g.output_names()[i]);
    }
    const std::string model_key = absl::StrCat(
        plan_cache->GraphKey(graph_id), ";inputs=", absl::StrJoin(inputs, ","),
        ";outputs=", absl::StrJoin(outputs, ","), ";fallback=",
        absl::StrJoin(torch::FallbackOps(g), ","));
    // A dry run leaves no trace: neither its graph nor its plans enter the cache.
    if (!config.dry_run) o.executables = plan_cache->Provider(model_key, label, counters);
    return runtime::Model::Create(std::move(g), std::move(o));
  };
  if (built.first_use != nullptr) {
    built.first_use->set_rebuild(
        [this, build, import_limits](const std::string& file, const importer::ImportOptions& forced,
                                     std::chrono::steady_clock::time_point deadline)
            -> absl::StatusOr<std::unique_ptr<runtime::Model>> {
          ASSIGN_OR_RETURN(ir::Graph g, ImportForced(file, forced.force_fallback,
                                                     import_limits(deadline), deadline));
          return build(std::move(g), /*gated=*/false);
        });
  }
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Model> model, build(std::move(graph), true));
  // The verified import runs the file through libtorch in the sandboxed
  // worker (unless imports run in process), and so do its re-imports with
  // ops forced onto the fallback.
  std::unique_ptr<verify::TorchReference> reference;
  ImportLimits limits = import_limits(load_deadline_);
  if (!options_.torch_worker.empty()) {
    reference = std::make_unique<ChildTorchReference>(options_.torch_worker, path,
                                                      repository_->StagingDir(), limits,
                                                      load_deadline_);
  } else {
    ASSIGN_OR_RETURN(std::string bytes, cache::ReadFileToString(path));
    reference = std::make_unique<InProcessTorchReference>(std::move(bytes));
  }
  auto rebuild = [&](const importer::ImportOptions& forced)
      -> absl::StatusOr<std::unique_ptr<runtime::Model>> {
    ASSIGN_OR_RETURN(ir::Graph g, ImportForced(path, forced.force_fallback, limits, load_deadline_));
    return build(std::move(g), true);
  };
  runtime::RunOptions load_run = options_.limits.ForLoad(load_deadline_);
  load_run.services = fallback_worker;
  std::string verified_signature;
  ASSIGN_OR_RETURN(model, CheckImport(label, path, config, std::move(model), *reference, rebuild,
                                      /*verify=*/built.load.graph_source != "disk-cache",
                                      load_run, &verified_signature));
  if (built.first_use == nullptr) {
    model->set_property("verify.first_use", first_use_off);
  } else if (!verified_signature.empty()) {
    built.first_use->MarkVerified(verified_signature, model->properties().at("verify"));
  }
  // Warm-up before READY: the first request finds its plan compiled.
  if (!config.warmup.empty()) {
    const Clock::time_point warmup_start = Clock::now();
    const std::string model_dir =
        std::filesystem::path(repository_->ConfigPath(name)).parent_path().string();
    ASSIGN_OR_RETURN(built.load.warmup_runs, RunWarmup(*model, config, model_dir, load_run));
    if (options_.split_teams && options_.compile.num_threads > 1) {
      // Requests that queue up run on one thread each (compute_pool.h), on
      // plans of their own: those are compiled here too.
      runtime::RunOptions narrow = load_run;
      narrow.num_threads = 1;
      ASSIGN_OR_RETURN(uint64_t narrow_runs, RunWarmup(*model, config, model_dir, narrow));
      built.load.warmup_runs += narrow_runs;
    }
    built.load.warmup_ns = NsSince(warmup_start);
    spdlog::info("model {}: warm-up ran {} sample(s) {} time(s) in {:.1f} ms", label,
                 config.warmup.size(), built.load.warmup_runs, Ms(built.load.warmup_ns));
  }
  built.model = std::move(model);
  built.batcher = DynamicBatcher::Create(config, built.model);
  if (built.batcher != nullptr) {
    spdlog::info("model {}: dynamic batching {}", label, built.batcher->Describe());
  }
  if (!config.dry_run) {
    CommitGraph(graph_id, pending, *models_built > 1 ? &built.model->graph() : nullptr);
  }
  built.load.load_ns = NsSince(start);
  return built;
}

// ------------------------------------------------------------ registry state

void ModelRegistry::StopServingLocked(Version& v, const std::string& reason) {
  if (v.model != nullptr) options_.cache->Forget(v.counters);
  // In-flight requests still hold the model; it is freed when they finish.
  v.model.reset();
  v.batcher.reset();
  // The arenas' free blocks may be this model's largest: give them back
  // (the next run of any model takes a new one).
  runtime::ArenaPool::Global().Trim();
  v.state = ModelState::kUnavailable;
  v.reason = reason;
}

void ModelRegistry::Serve(const std::string& name, int64_t version, Built built,
                          const std::string& path) {
  spdlog::info(
      "model {} ready in {:.1f} ms (hash {:.1f} ms, graph from {} {:.1f} ms, contract {:.1f} ms; "
      "{} input(s), {} output(s), {} node(s), {:.1f} MB of weights; sha256 {})",
      Label(name, version), Ms(built.load.load_ns), Ms(built.load.hash_ns),
      built.load.graph_source, Ms(built.load.graph_ns),
      Ms(built.load.load_ns - built.load.hash_ns - built.load.graph_ns),
      built.model->inputs().size(), built.model->outputs().size(),
      built.model->graph().nodes().size(), static_cast<double>(built.weight_bytes) / 1e6,
      built.sha256.substr(0, 16));
  std::lock_guard<std::mutex> lock(mu_);
  Version& v = entries_[name].versions[version];
  if (v.model != nullptr) options_.cache->Forget(v.counters);
  v.state = ModelState::kReady;
  v.reason.clear();
  v.model = std::move(built.model);
  v.batcher = std::move(built.batcher);
  v.counters = std::move(built.counters);
  v.sha256 = built.sha256;
  v.load = built.load;
  v.weight_bytes = built.weight_bytes;
  // An upload's file has moved from the staging area to `path`.
  if (built.first_use != nullptr) built.first_use->set_model_path(path);
  files_[built.sha256] = {path, built.size};
}

void ModelRegistry::MarkFailed(const std::string& name, int64_t version,
                               const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  Version& v = entries_[name].versions[version];
  if (v.state == ModelState::kReady) return;  // keep serving what loaded before
  v.reason = std::string(status.message());
}

absl::Status ModelRegistry::ApplyPolicyLocked(const std::string& name, const ModelConfig& config,
                                              bool reload_ready, int64_t just_loaded) {
  const std::vector<int64_t> on_disk = repository_->Versions(name);
  const std::vector<int64_t> wanted = config.version_policy.Select(on_disk);
  const std::string not_served =
      absl::StrCat("not served under version policy '", config.version_policy.ToString(), "'");
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& entry = entries_[name];
    for (auto& [version, v] : entry.versions) {
      if (std::find(wanted.begin(), wanted.end(), version) == wanted.end()) {
        if (v.state == ModelState::kReady)
          spdlog::info("model {}: {}", Label(name, version), not_served);
        StopServingLocked(v, not_served);
      }
    }
    for (int64_t version : on_disk) {
      if (std::find(wanted.begin(), wanted.end(), version) == wanted.end()) {
        entry.versions[version].reason = not_served;
      }
    }
  }
  if (wanted.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "version policy '", config.version_policy.ToString(), "' selects none of the versions [",
        absl::StrJoin(on_disk, ", "), "] in the repository"));
  }
  absl::Status first_error;
  for (int64_t version : wanted) {
    if (version == just_loaded) continue;
    if (!reload_ready && IsReady(name, std::to_string(version))) continue;
    const std::string path = repository_->ModelPath(name, version);
    absl::StatusOr<Built> built = Build(name, version, path, config);
    if (!built.ok()) {
      const absl::Status status = Annotate(
          built.status(), absl::StrCat("while loading model ", Label(name, version), ": "));
      spdlog::warn("{}", std::string(status.message()));
      MarkFailed(name, version, status);
      if (first_error.ok()) first_error = status;
      continue;
    }
    Serve(name, version, *std::move(built), path);
  }
  return first_error;
}

absl::Status ModelRegistry::LoadFromRepositoryLocked(const std::string& name,
                                                     std::optional<std::string> config_json,
                                                     bool reload_ready) {
  RETURN_IF_ERROR(ValidateModelName(name));
  if (!repository_->HasModel(name)) {
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  }
  const bool override_config = config_json.has_value();
  if (!override_config) {
    ASSIGN_OR_RETURN(config_json, repository_->ReadConfig(name));
  }
  absl::StatusOr<ModelConfig> config = ParseConfig(config_json, options_.compile.num_threads);
  if (!config.ok()) {
    const absl::Status status =
        Annotate(config.status(), absl::StrCat("while loading model '", name, "': "));
    spdlog::warn("{}", std::string(status.message()));
    for (int64_t version : repository_->Versions(name)) MarkFailed(name, version, status);
    return status;
  }
  absl::Status status = ApplyPolicyLocked(name, *config, reload_ready);
  if (status.ok() && override_config) {
    RETURN_IF_ERROR(repository_->WriteConfig(name, config_json));
  }
  return status;
}

absl::Status ModelRegistry::Load(const std::string& name, std::optional<std::string> config_json) {
  ASSIGN_OR_RETURN(auto load_lock, LockLoads(absl::StrCat("model '", name, "'")));
  return LoadFromRepositoryLocked(name, std::move(config_json), /*reload_ready=*/true);
}

absl::StatusOr<UploadResult> ModelRegistry::Upload(UploadRequest request) {
  // The staged file is ours: it is either moved into the repository or removed.
  struct RemoveUnlessInstalled {
    std::string path;
    bool installed = false;
    ~RemoveUnlessInstalled() {
      if (!installed) ::unlink(path.c_str());
    }
  } staged{request.staged_path};

  const Clock::time_point start = Clock::now();
  const std::string& name = request.name;
  ASSIGN_OR_RETURN(auto load_lock, LockLoads(absl::StrCat("model '", name, "'")));
  RETURN_IF_ERROR(ValidateModelName(name));
  RETURN_IF_ERROR(CheckVersion(request.version, "the next version"));
  ASSIGN_OR_RETURN(std::optional<std::string> stored_config, repository_->ReadConfig(name));
  const std::optional<std::string> config_json =
      request.config_json.has_value() ? request.config_json : stored_config;
  const bool config_changed = config_json != stored_config;
  absl::StatusOr<ModelConfig> config = ParseConfig(config_json, options_.compile.num_threads);
  if (!config.ok()) {
    return Annotate(config.status(), absl::StrCat("while loading model '", name, "': "));
  }

  const std::vector<int64_t> on_disk = repository_->Versions(name);
  const int64_t latest = on_disk.empty() ? 0 : on_disk.back();
  const int64_t target = request.version > 0 ? request.version : latest + 1;
  RETURN_IF_ERROR(CheckVersion(target));
  {
    // The same file and config again: nothing to do.
    const int64_t same = request.version > 0 ? request.version : latest;
    std::lock_guard<std::mutex> lock(mu_);
    auto entry = entries_.find(name);
    if (!config_changed && !config->dry_run && entry != entries_.end()) {
      auto v = entry->second.versions.find(same);
      if (v != entry->second.versions.end() && v->second.state == ModelState::kReady &&
          v->second.sha256 == request.sha256) {
        spdlog::info("model {} already holds this file (sha256 {}); unchanged", Label(name, same),
                     request.sha256.substr(0, 16));
        return UploadResult{same, /*unchanged=*/true, Ms(NsSince(start)), /*dry_run=*/false,
                            ContractJson(*v->second.model, name, same, /*dry_run=*/false)};
      }
    }
  }

  // The upload path checked the file's SHA-256 already (UploadStore, or the
  // bytes of a single-message load).
  absl::StatusOr<Built> built = Build(name, target, request.staged_path, *config, request.sha256);
  if (!built.ok()) {
    const absl::Status status =
        Annotate(built.status(), absl::StrCat("while loading model ", Label(name, target), ": "));
    spdlog::warn("upload rejected: {}", std::string(status.message()));
    return status;
  }
  if (config->dry_run) {
    // The staged file is removed on return; nothing was installed or served.
    spdlog::info("dry run of model {}: imported and validated, nothing stored",
                 Label(name, target));
    return UploadResult{target, /*unchanged=*/false, Ms(NsSince(start)), /*dry_run=*/true,
                        ContractJson(*built->model, name, target, /*dry_run=*/true)};
  }
  std::string contract = ContractJson(*built->model, name, target, /*dry_run=*/false);
  // The point of no return: the verified file becomes the version.
  RETURN_IF_ERROR(repository_->InstallModel(name, target, request.staged_path));
  staged.installed = true;
  options_.cache->RememberDigest(repository_->ModelPath(name, target),
                                 cache::FileDigest{built->sha256, built->size});
  if (request.config_json.has_value()) {
    RETURN_IF_ERROR(repository_->WriteConfig(name, request.config_json));
  }
  const std::string path = repository_->ModelPath(name, target);
  Serve(name, target, *std::move(built), path);
  // The other versions: stop those the policy no longer selects, load those
  // it does (all of them again when the config changed).
  absl::Status others =
      ApplyPolicyLocked(name, *config, /*reload_ready=*/config_changed, /*just_loaded=*/target);
  if (!others.ok()) spdlog::warn("model '{}': {}", name, std::string(others.message()));
  return UploadResult{target, /*unchanged=*/false, Ms(NsSince(start)), /*dry_run=*/false,
                      std::move(contract)};
}

absl::StatusOr<std::string> ModelRegistry::DryRunLoad(const std::string& name,
                                                      std::optional<std::string> config_json) {
  ASSIGN_OR_RETURN(auto load_lock, LockLoads(absl::StrCat("model '", name, "'")));
  RETURN_IF_ERROR(ValidateModelName(name));
  if (!repository_->HasModel(name)) {
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  }
  if (!config_json.has_value()) {
    ASSIGN_OR_RETURN(config_json, repository_->ReadConfig(name));
  }
  absl::StatusOr<ModelConfig> config = ParseConfig(config_json, options_.compile.num_threads);
  if (!config.ok()) {
    return Annotate(config.status(), absl::StrCat("while loading model '", name, "': "));
  }
  const std::vector<int64_t> wanted =
      config->version_policy.Select(repository_->Versions(name));
  if (wanted.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("version policy '", config->version_policy.ToString(),
                     "' selects none of the versions of model '", name, "'"));
  }
  const int64_t version = wanted.back();
  absl::StatusOr<Built> built =
      Build(name, version, repository_->ModelPath(name, version), *config);
  if (!built.ok()) {
    return Annotate(built.status(),
                    absl::StrCat("while loading model ", Label(name, version), ": "));
  }
  spdlog::info("dry run of model {}: imported and validated, nothing changed",
               Label(name, version));
  return ContractJson(*built->model, name, version, /*dry_run=*/true);
}

absl::StatusOr<std::string> ModelRegistry::Contract(absl::string_view name,
                                                    int64_t version) const {
  ASSIGN_OR_RETURN(ServingModel serving,
                   Get(name, version > 0 ? std::to_string(version) : std::string()));
  return ContractJson(*serving.model, std::string(name), serving.version, /*dry_run=*/false);
}

absl::Status ModelRegistry::Unload(const std::string& name) {
  RETURN_IF_ERROR(ValidateModelName(name));
  ASSIGN_OR_RETURN(auto load_lock, LockLoads(absl::StrCat("model '", name, "'")));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      for (auto& [version, v] : it->second.versions) StopServingLocked(v, "unloaded");
      spdlog::info("unloaded model '{}'", name);
      return absl::OkStatus();
    }
  }
  if (repository_->HasModel(name)) return absl::OkStatus();  // already not serving
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
}

absl::Status ModelRegistry::Delete(const std::string& name, int64_t version) {
  RETURN_IF_ERROR(ValidateModelName(name));
  if (version < 0)
    return absl::InvalidArgumentError(absl::StrCat("version ", version, " is negative"));
  ASSIGN_OR_RETURN(auto load_lock, LockLoads(absl::StrCat("model '", name, "'")));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      for (auto v = it->second.versions.begin(); v != it->second.versions.end();) {
        if (version == 0 || v->first == version) {
          StopServingLocked(v->second, "deleted");
          v = it->second.versions.erase(v);
        } else {
          ++v;
        }
      }
      if (it->second.versions.empty()) entries_.erase(it);
    }
  }
  RETURN_IF_ERROR(repository_->Delete(name, version));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = files_.begin(); it != files_.end();) {
      std::error_code ec;
      it = ::access(it->second.first.c_str(), F_OK) == 0 ? std::next(it) : files_.erase(it);
    }
  }
  spdlog::info("deleted model '{}'{}", name, version > 0 ? absl::StrCat(" version ", version) : "");
  // Deleting the served version of "latest 1" makes the previous one current.
  if (version > 0 && repository_->HasModel(name)) {
    return LoadFromRepositoryLocked(name, std::nullopt, /*reload_ready=*/false);
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ queries

absl::StatusOr<ServingModel> ModelRegistry::Get(absl::string_view name,
                                                absl::string_view version) const {
  std::optional<int64_t> wanted;
  if (!version.empty()) {
    ASSIGN_OR_RETURN(wanted, ParseVersion(version));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      const auto& versions = it->second.versions;
      ServingModel serving;
      for (const auto& [number, v] : versions) {
        if (v.state == ModelState::kReady) serving.ready_versions.push_back(number);
      }
      const Version* chosen = nullptr;
      if (wanted.has_value()) {
        auto v = versions.find(*wanted);
        if (v == versions.end()) {
          return absl::NotFoundError(absl::StrCat("model '", name, "' has no version ", *wanted));
        }
        if (v->second.state != ModelState::kReady) {
          return absl::FailedPreconditionError(absl::StrCat(
              "model '", name, "' version ", *wanted, " is not ready: ", v->second.reason));
        }
        chosen = &v->second;
        serving.version = *wanted;
      } else if (!serving.ready_versions.empty()) {
        serving.version = serving.ready_versions.back();
        chosen = &versions.at(serving.version);
      } else {
        std::string reason = versions.empty() ? "no versions" : versions.rbegin()->second.reason;
        return absl::FailedPreconditionError(
            absl::StrCat("model '", name, "' is not ready: ", reason));
      }
      serving.model = chosen->model;
      serving.batcher = chosen->batcher;
      serving.stats = chosen->stats;
      serving.sha256 = chosen->sha256;
      return serving;
    }
  }
  if (repository_->HasModel(name)) {
    return absl::FailedPreconditionError(absl::StrCat("model '", name, "' is not loaded"));
  }
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
}

bool ModelRegistry::IsReady(absl::string_view name, absl::string_view version) const {
  return Get(name, version).ok();
}

std::vector<ModelIndexEntry> ModelRegistry::Index() const {
  // Read the disk first, outside the lock.
  std::map<std::string, std::vector<int64_t>> on_disk;
  for (const std::string& name : repository_->List()) on_disk[name] = repository_->Versions(name);
  std::vector<ModelIndexEntry> index;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, entry] : entries_) {
    for (const auto& [version, v] : entry.versions) {
      index.push_back({name, version, v.state, v.reason});
    }
  }
  for (const auto& [name, versions] : on_disk) {
    auto known = entries_.find(name);
    for (int64_t version : versions) {
      if (known == entries_.end()) {
        index.push_back({name, version, ModelState::kUnavailable, "not loaded"});
      } else if (known->second.versions.count(version) == 0) {
        index.push_back({name, version, ModelState::kUnavailable, "not loaded"});
      }
    }
  }
  std::sort(index.begin(), index.end(), [](const ModelIndexEntry& a, const ModelIndexEntry& b) {
    return std::tie(a.name, a.version) < std::tie(b.name, b.version);
  });
  return index;
}

absl::StatusOr<std::vector<VersionStatistics>> ModelRegistry::Statistics(absl::string_view name,
                                                                         int64_t version) const {
  std::vector<VersionStatistics> stats;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [model_name, entry] : entries_) {
    if (!name.empty() && model_name != name) continue;
    for (const auto& [number, v] : entry.versions) {
      if (version != 0 && number != version) continue;
      // Versions never loaded (only listed for the index) have no statistics.
      if (v.sha256.empty()) continue;
      VersionStatistics s;
      s.name = model_name;
      s.version = number;
      s.state = v.state;
      s.sha256 = v.sha256;
      s.infer = v.stats->Snapshot();
      s.load = v.load;
      s.plans = Snapshot(*v.counters);
      s.weight_bytes = v.weight_bytes;
      s.batched = v.batcher != nullptr && v.batcher->queues();
      if (v.model != nullptr) {
        std::set<std::string> ops;
        for (std::string& op : torch::FallbackOps(v.model->graph())) ops.insert(std::move(op));
        for (const auto& [op, signatures] : v.model->signature_fallbacks()) ops.insert(op);
        s.fallback_ops = ops.size();
      }
      stats.push_back(std::move(s));
    }
  }
  if (!name.empty() && stats.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no statistics for ", version != 0 ? absl::StrCat("version ", version, " of ") : "",
        "unknown model '", name, "'"));
  }
  return stats;
}

std::optional<std::string> ModelRegistry::FindFile(const std::string& sha256,
                                                   uint64_t size) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(sha256);
  if (it == files_.end() || it->second.second != size) return std::nullopt;
  if (::access(it->second.first.c_str(), R_OK) != 0) return std::nullopt;
  return it->second.first;
}

}  // namespace kiln::server
