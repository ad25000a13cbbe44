// Runs a model config's "model_warmup" samples (Triton's ModelWarmup,
// model_config.h) on a freshly built model, before the registry serves it:
// each sample's inputs are made (zeros, random values, or the raw bytes of a
// file in the model directory's warmup/ folder) and run `count` times through
// runtime::Model::Infer, the path a request takes. Its plans are thus compiled,
// or read from the compiled-graph cache's disk, at load, and the first request
// finds them in memory.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/runtime/model.h"
#include "server/core/model_config.h"

namespace kiln::server {

// Runs every sample of `config.warmup` on `model`; `model_dir` is the model's
// directory (REPO/NAME), `run` bounds each run (the load's deadline and
// memory). Returns the number of runs. A sample that cannot be made (a file
// missing, of the wrong size, or outside the warmup folder) or whose run
// fails gives InvalidArgument (FailedPrecondition for a missing file) naming
// the sample and the input, with the model's own message.
absl::StatusOr<uint64_t> RunWarmup(const runtime::Model& model, const ModelConfig& config,
                                   const std::string& model_dir, const runtime::RunOptions& run);

}  // namespace kiln::server
