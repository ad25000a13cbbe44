// The models the server knows: name -> state (READY or UNAVAILABLE with a
// reason), the loaded runtime::Model and its statistics. Thread-safe. Requests
// hold the model through a shared_ptr, so an unload or a reload never pulls a
// model out from under a running request.
#pragma once

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
#include "engine/runtime/model.h"
#include "server/model_repository.h"

namespace kiln::server {

enum class ModelState { kReady, kUnavailable };

// "READY" / "UNAVAILABLE", as Triton's repository index spells them.
absl::string_view ModelStateName(ModelState state);

struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// Cumulative per-model counters, in the shape of Triton's InferStatistics.
// One request counts as one inference (Kiln does not batch across requests).
struct StatsSnapshot {
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  uint64_t last_inference_ms = 0;  // since the epoch; 0 = never
  Duration success;                // whole request, decode to encode
  Duration fail;
  Duration compute_input;   // decoding the request
  Duration compute_infer;   // runtime::Model::Infer
  Duration compute_output;  // encoding the response
};

// Phase times of one successful request, in nanoseconds.
struct InferTimings {
  uint64_t input_ns = 0;
  uint64_t infer_ns = 0;
  uint64_t output_ns = 0;
};

class ModelStats {
 public:
  void RecordSuccess(const InferTimings& timings);
  void RecordFailure(uint64_t total_ns);
  StatsSnapshot Snapshot() const;

 private:
  mutable std::mutex mu_;
  StatsSnapshot stats_;
};

// What one request needs: the model, kept alive for the request's duration,
// and where to record its outcome.
struct ServingModel {
  std::shared_ptr<const runtime::Model> model;
  std::shared_ptr<ModelStats> stats;
  std::string sha256;  // of the model file being served
};

struct ModelIndexEntry {
  std::string name;
  ModelState state = ModelState::kUnavailable;
  std::string reason;
};

struct RegistryOptions {
  runtime::CompileOptions compile;
};

class ModelRegistry {
 public:
  // `repository` must outlive the registry.
  ModelRegistry(ModelRepository* repository, RegistryOptions options);

  // Loads every model in the repository. Failures are logged and leave that
  // model UNAVAILABLE with the error as its reason; the others still load.
  void LoadAll();

  // Loads or replaces model `name`. With `file`, imports those bytes (and
  // `config_json`, if any) and, only once they load, stores them in the
  // repository (replacing config.json, or removing it when no config is
  // given) and swaps the new model in. Without `file`, reloads from the
  // repository, with `config_json` (stored on success) overriding config.json.
  // A failed load leaves a serving model and its files untouched. Fails with
  // InvalidArgument for a bad name, config or model file, Unimplemented for
  // unsupported ops, NotFound when reloading a model the repository lacks.
  absl::Status Load(const std::string& name, std::optional<absl::string_view> file,
                    std::optional<std::string> config_json);

  // Stops serving `name` (files stay; LoadAll or Load brings it back).
  // NotFound when neither the registry nor the repository knows it.
  absl::Status Unload(const std::string& name);

  // The model to run a request on. NotFound for an unknown model,
  // FailedPrecondition (with the reason) for one that is not ready.
  absl::StatusOr<ServingModel> Get(absl::string_view name) const;

  bool IsReady(absl::string_view name) const;

  // Every model in the registry or the repository, sorted by name; models on
  // disk that were never loaded are UNAVAILABLE with reason "not loaded".
  std::vector<ModelIndexEntry> Index() const;

  // Statistics of `name` (or of every model the registry has seen when empty).
  // NotFound for an unknown name.
  absl::StatusOr<std::vector<std::pair<std::string, StatsSnapshot>>> Statistics(
      absl::string_view name) const;

 private:
  struct Entry {
    ModelState state = ModelState::kUnavailable;
    std::string reason;
    std::shared_ptr<const runtime::Model> model;
    std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>();
    std::string sha256;
  };

  absl::StatusOr<std::unique_ptr<runtime::Model>> Build(absl::string_view bytes,
                                                        const std::optional<std::string>& config);
  absl::Status LoadLocked(const std::string& name, std::optional<absl::string_view> file,
                          std::optional<std::string> config_json);
  void MarkFailed(const std::string& name, const absl::Status& status, bool create);

  ModelRepository* repository_;
  RegistryOptions options_;

  // Serializes loads and unloads (imports can take seconds); requests only
  // ever take mu_, briefly, so they never wait behind an import.
  std::mutex load_mu_;
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace kiln::server
