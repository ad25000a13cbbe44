// Load order matters for the "a failed load changes nothing" promise: the new
// bytes are imported and compiled into a runtime::Model first; only then are
// they written to the repository, and only after that is the model swapped into
// the registry. Any failure before the swap leaves the serving model and its
// files as they were.
#include "server/model_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/sha256.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript_importer.h"
#include "server/model_config.h"

namespace kiln::server {
namespace {

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void Add(Duration& d, uint64_t ns) {
  d.count += 1;
  d.ns += ns;
}

}  // namespace

absl::string_view ModelStateName(ModelState state) {
  return state == ModelState::kReady ? "READY" : "UNAVAILABLE";
}

void ModelStats::RecordSuccess(const InferTimings& timings) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.inference_count += 1;
  stats_.execution_count += 1;
  stats_.last_inference_ms = NowMs();
  Add(stats_.success, timings.input_ns + timings.infer_ns + timings.output_ns);
  Add(stats_.compute_input, timings.input_ns);
  Add(stats_.compute_infer, timings.infer_ns);
  Add(stats_.compute_output, timings.output_ns);
}

void ModelStats::RecordFailure(uint64_t total_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.last_inference_ms = NowMs();
  Add(stats_.fail, total_ns);
}

StatsSnapshot ModelStats::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

ModelRegistry::ModelRegistry(ModelRepository* repository, RegistryOptions options)
    : repository_(repository), options_(std::move(options)) {}

void ModelRegistry::LoadAll() {
  const std::vector<std::string> names = repository_->List();
  spdlog::info("model repository {}: {} model(s)", repository_->root(), names.size());
  for (const std::string& name : names) {
    // Load() logs the outcome; a failure must not stop the others.
    (void)Load(name, std::nullopt, std::nullopt);
  }
}

absl::StatusOr<std::unique_ptr<runtime::Model>> ModelRegistry::Build(
    absl::string_view bytes, const std::optional<std::string>& config) {
  ModelConfig parsed;
  if (config.has_value()) {
    ASSIGN_OR_RETURN(parsed, ParseModelConfig(*config));
  }
  ASSIGN_OR_RETURN(
      ir::Graph graph,
      importer::ImportTorchScript(std::string_view(bytes.data(), bytes.size()), parsed.import));
  RETURN_IF_ERROR(FillDeclaredNames(graph, parsed.model));
  parsed.model.compile = options_.compile;
  return runtime::Model::Create(std::move(graph), std::move(parsed.model));
}

absl::Status ModelRegistry::Load(const std::string& name, std::optional<absl::string_view> file,
                                 std::optional<std::string> config_json) {
  std::lock_guard<std::mutex> load_lock(load_mu_);
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = ValidateModelName(name);
  if (status.ok()) status = LoadLocked(name, file, std::move(config_json));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (status.ok()) {
    const ServingModel serving = *Get(name);
    spdlog::info("loaded model '{}' ({} input(s), {} output(s), {} node(s)) from {} in {:.1f} ms",
                 name, serving.model->inputs().size(), serving.model->outputs().size(),
                 serving.model->graph().nodes().size(), file.has_value() ? "upload" : "repository",
                 ms);
  } else {
    status = Annotate(status, absl::StrCat("while loading model '", name, "': "));
    spdlog::warn("{} (after {:.1f} ms)", std::string(status.message()), ms);
  }
  return status;
}

absl::Status ModelRegistry::LoadLocked(const std::string& name,
                                       std::optional<absl::string_view> file,
                                       std::optional<std::string> config_json) {
  const bool from_repository = !file.has_value();
  std::string stored_bytes;
  if (from_repository) {
    ASSIGN_OR_RETURN(stored_bytes, repository_->ReadModel(name));
    if (!config_json.has_value()) {
      ASSIGN_OR_RETURN(config_json, repository_->ReadConfig(name));
    }
  }
  const absl::string_view bytes = from_repository ? absl::string_view(stored_bytes) : *file;

  absl::StatusOr<std::unique_ptr<runtime::Model>> model = Build(bytes, config_json);
  if (!model.ok()) {
    // A model whose files are on disk stays listed, with the error as reason;
    // a rejected upload of a new name leaves no trace.
    MarkFailed(name, model.status(), /*create=*/from_repository);
    return model.status();
  }

  if (!from_repository) {
    RETURN_IF_ERROR(repository_->WriteModel(name, bytes));
    RETURN_IF_ERROR(repository_->WriteConfig(name, config_json));
  } else if (config_json.has_value()) {
    RETURN_IF_ERROR(repository_->WriteConfig(name, config_json));
  }

  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = entries_[name];
  entry.state = ModelState::kReady;
  entry.reason.clear();
  entry.model = std::shared_ptr<const runtime::Model>(std::move(*model));
  entry.sha256 = Sha256Hex(bytes);
  return absl::OkStatus();
}

void ModelRegistry::MarkFailed(const std::string& name, const absl::Status& status, bool create) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    if (!create) return;
    it = entries_.emplace(name, Entry{}).first;
  }
  if (it->second.state == ModelState::kReady) return;  // keep serving the old version
  it->second.reason = std::string(status.message());
}

absl::Status ModelRegistry::Unload(const std::string& name) {
  RETURN_IF_ERROR(ValidateModelName(name));
  std::lock_guard<std::mutex> load_lock(load_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      // In-flight requests still hold the model; it is freed when they finish.
      it->second.model.reset();
      it->second.state = ModelState::kUnavailable;
      it->second.reason = "unloaded";
      spdlog::info("unloaded model '{}'", name);
      return absl::OkStatus();
    }
  }
  if (repository_->HasModel(name)) return absl::OkStatus();  // already not serving
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
}

absl::StatusOr<ServingModel> ModelRegistry::Get(absl::string_view name) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      const Entry& entry = it->second;
      if (entry.state == ModelState::kReady) {
        return ServingModel{entry.model, entry.stats, entry.sha256};
      }
      return absl::FailedPreconditionError(
          absl::StrCat("model '", name, "' is not ready: ", entry.reason));
    }
  }
  if (repository_->HasModel(name)) {
    return absl::FailedPreconditionError(absl::StrCat("model '", name, "' is not loaded"));
  }
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
}

bool ModelRegistry::IsReady(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  return it != entries_.end() && it->second.state == ModelState::kReady;
}

std::vector<ModelIndexEntry> ModelRegistry::Index() const {
  // Read the disk first, outside the lock.
  const std::vector<std::string> on_disk = repository_->List();
  std::vector<ModelIndexEntry> index;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, entry] : entries_) {
    index.push_back({name, entry.state, entry.reason});
  }
  for (const std::string& name : on_disk) {
    if (entries_.count(name) == 0) {
      index.push_back({name, ModelState::kUnavailable, "not loaded"});
    }
  }
  std::sort(index.begin(), index.end(),
            [](const ModelIndexEntry& a, const ModelIndexEntry& b) { return a.name < b.name; });
  return index;
}

absl::StatusOr<std::vector<std::pair<std::string, StatsSnapshot>>> ModelRegistry::Statistics(
    absl::string_view name) const {
  std::vector<std::pair<std::string, StatsSnapshot>> stats;
  std::lock_guard<std::mutex> lock(mu_);
  if (!name.empty()) {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("no statistics for unknown model '", name, "'"));
    }
    stats.emplace_back(it->first, it->second.stats->Snapshot());
    return stats;
  }
  for (const auto& [model_name, entry] : entries_) {
    stats.emplace_back(model_name, entry.stats->Snapshot());
  }
  return stats;
}

}  // namespace kiln::server
