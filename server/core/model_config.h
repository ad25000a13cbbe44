// The load configuration a model may carry (REPO/NAME/config.json, or the
// "config" parameter of RepositoryModelLoad):
//   {"inputs":  [{"name": "x", "datatype": "FP32", "dims": [-1, 3, 224, 224]}],
//    "outputs": [{"name": "logits"}]}
// Names apply by position (they rename forward()'s parameters and the graph
// outputs); datatype and dims, when given, become the model's declared contract.
// "dry_run": true imports and validates the model and answers with its
// contract, storing and serving nothing.
// An optional "version_policy" says which versions under REPO/NAME/ are served,
// in Triton's shape: {"latest": {"num_versions": N}} (the default, N = 1),
// {"all": {}}, or {"specific": {"versions": [1, 3]}}.
// "max_batch_size" and "dynamic_batching" are Triton's, with Triton's keys
// (server/scheduler/dynamic_batcher.h): dim 0 of every input and output is
// the batch dim, and requests are batched on it. Unlike Triton's, Kiln's
// "dims" include that dim (-1 in the dims a config declares).
// "model_warmup" is Triton's (WarmupSample below): sample requests run at
// load, before the version is READY.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/importer/import.h"
#include "engine/runtime/model.h"

namespace kiln::server {

struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int64_t num_versions = 1;       // kLatest
  std::vector<int64_t> versions;  // kSpecific

  // The versions to serve out of `available` (ascending), ascending.
  std::vector<int64_t> Select(const std::vector<int64_t>& available) const;
  // "latest 1", "all", "specific [1, 3]".
  std::string ToString() const;
};

// Verified import (engine/verify/verify.h): "verify": false, or
// {"enabled": true, "tolerance": 1e-4, "on_mismatch": "fail" | "fallback",
//  "on_first_use": true,
//  "inputs": [{"name": "x", "datatype": "FP32", "dims": [1, 3, 224, 224]}]}.
struct VerifyConfig {
  bool enabled = true;
  double tolerance = 1e-4;
  bool fallback_on_mismatch = false;  // serve diverging ops through libtorch instead of failing
  // Verify each signature the load could not on its first request
  // (server/core/first_use_verifier.h); "on_first_use": false turns it off.
  bool on_first_use = true;
  std::vector<runtime::TensorSpec> inputs;  // sample shapes, by input name
};

// The verified import's relative tolerance for a model served at
// "precision": "bf16". bfloat16 keeps 8 bits of mantissa (a relative rounding
// of 2^-9 per operand), which a network's depth accumulates: resnet18's
// logits move by about 2e-2 of their magnitude, mobilenet_v2's (depthwise
// layers, batch norms of small variance) by 9e-2. The opt-in's deviation is
// measured and published rather than held to float32's bound; this bound
// still refuses a wrong translation, which is off by the output's magnitude.
inline constexpr double kBf16Tolerance = 0.25;

// Triton's ModelQueuePolicy: what a request waiting in the batcher's queue
// may do. max_queue_size 0 is unbounded; default_timeout_us 0 never times out.
struct QueuePolicy {
  enum class TimeoutAction { kReject, kDelay };
  uint64_t max_queue_size = 0;
  uint64_t default_timeout_us = 0;
  // kReject: a request still queued at its timeout fails (DEADLINE_EXCEEDED);
  // kDelay: it stays, behind the requests that have not timed out.
  TimeoutAction timeout_action = TimeoutAction::kReject;
};

// Triton's ModelDynamicBatching.
struct DynamicBatching {
  std::vector<int64_t> preferred_batch_size;  // each in [1, max_batch_size]
  // Kiln's extension (after TensorFlow Serving's batching option): the sizes
  // a joined batch runs as, padded up to the next (batch_planner.h,
  // AllowedBatchSizes); each in [1, max_batch_size]. nullopt: absent (powers
  // of two, the preferred sizes and max_batch_size); empty: no padding.
  std::optional<std::vector<int64_t>> allowed_batch_sizes;
  uint64_t max_queue_delay_us = 0;
  bool preserve_ordering = false;
  // Kiln's extension: a planned batch is cut to the prefix whose measured
  // cost per row is lowest (batch_costs.h); false runs Triton's batch as it is.
  bool adaptive_batch_size = true;
  QueuePolicy default_queue_policy;
};

// One input of a warm-up sample (Triton's ModelWarmup.Input).
struct WarmupInput {
  enum class Source { kZero, kRandom, kFile };
  std::string name;  // the model input it feeds (its name or INPUT__<i> alias)
  DType dtype = DType::kUnknown;
  // Triton's: without the batch dim when the model has a max_batch_size (the
  // sample's batch_size is put in front), else the whole shape.
  std::vector<int64_t> dims;
  Source source = Source::kZero;
  // kFile: raw row-major bytes of exactly the tensor's size, in the model
  // directory's "warmup" folder (REPO/NAME/warmup/FILE, as Triton keeps
  // them); a relative path that stays inside it.
  std::string file;
};

// Triton's ModelWarmup: "model_warmup": [{"name": "zeros", "batch_size": 1,
//   "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [3, 224, 224],
//                    "zero_data": true}}, "count": 1}]
// with exactly one of "zero_data", "random_data", "input_data_file" per input.
// Each sample runs `count` times (0 as 1, as Triton) through the normal
// compile path, so its plan is compiled (or read from the disk cache) before
// the first request; a failure fails the load.
struct WarmupSample {
  std::string name;
  int64_t batch_size = 1;
  std::vector<WarmupInput> inputs;
  uint64_t count = 1;
};

struct ModelConfig {
  // "strict": true makes ops without a native translation an error listing
  // all of them, instead of running them through the libtorch fallback.
  bool strict = false;
  // Import and validate only: nothing is stored, served or replaced.
  bool dry_run = false;
  // "accumulation": "float64" makes float32 GEMM ops (convolutions, matmul,
  // linear, einsum) accumulate in double (passes::AccumulateInFloat64):
  // results closer to the exact ones, for about twice their time. Default
  // "float32".
  bool accumulate_float64 = false;
  // "precision": "bf16" runs the oneDNN convolutions and linear layers with
  // bfloat16 operands and float32 accumulation (engine/common/precision.h):
  // about twice as fast on some CPUs with AVX-512 BF16 (an AMD Zen 5), half as
  // fast on others (an Intel Xeon, kernels/bf16_rate.h), at bfloat16's
  // rounding of each operand. The verified import then judges the outputs with
  // kBf16Tolerance (unless the config sets a looser one) and publishes the
  // deviation it measured. Default "fp32". "bf16" is a request for speed:
  // on a CPU whose bfloat16 GEMMs are not faster than its float32 ones the
  // model runs float32 (the registry decides, kernels/bf16_rate.h);
  // "bf16_always" (precision_forced) runs bfloat16 on any CPU.
  Precision precision = Precision::kFp32;
  bool precision_forced = false;
  // How the precision was chosen, for the model's metadata ("precision"):
  // the CPU's measured bfloat16 and float32 GEMM rates. Set by the registry.
  std::string precision_note;
  VerifyConfig verify;
  VersionPolicy version_policy;
  // The largest batch (dim 0) a request or a formed batch may have; 0: the
  // model does not batch.
  int64_t max_batch_size = 0;
  // Set: requests are batched (needs max_batch_size > 0).
  std::optional<DynamicBatching> dynamic_batching;
  std::vector<WarmupSample> warmup;  // "model_warmup", run in order
  importer::ImportOptions import;
  // Declarations by position; an entry's name may be empty until
  // FillDeclaredNames() takes it from the imported graph.
  runtime::ModelOptions model;
};

// The load settings that decide the graph a model is served with beyond its
// file, as canonical text for the compiled-graph cache's key
// (CompiledGraphCache::GraphId): the verified import's, whose outcome may
// move ops onto the fallback, with the declarations its samples are made
// from, and the accumulation asked for. Empty when neither applies: the graph
// is then the file's import.
std::string GraphSettings(const ModelConfig& config);

// Parses the JSON text. Fails with InvalidArgument naming the offending key
// for malformed JSON, unknown keys, an unknown datatype or a dim below -1.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json);

// Gives every unnamed declaration the name of the graph input/output at its
// position, so the runtime can match declarations by name. InvalidArgument
// when the config declares more inputs or outputs than the graph has.
absl::Status FillDeclaredNames(const ir::Graph& graph, runtime::ModelOptions& options);

}  // namespace kiln::server
