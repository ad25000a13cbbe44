// What a load checks about an imported model besides its contract: strict
// mode (no op may run through the libtorch fallback), which ops fall back,
// and the verified import against libtorch (engine/verify/verify.h). The
// results become the model's properties, which ModelMetadata publishes:
//   fallback_ops         "aten::i0,aten::logcumsumexp" (empty: all native)
//   verify               "passed on x=FP32[1, 3, 224, 224]: output0 max |diff| 2.1e-06"
//   verify.max_abs_diff.<output>   per output, e.g. "2.1e-06"
//   verify.fallback_ops  ops forced onto the fallback to match libtorch
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/verify/verify.h"
#include "engine/runtime/model.h"
#include "server/core/model_config.h"

namespace kiln::server {

// Fails with Unimplemented listing every op that would run through the
// fallback when the config is strict.
absl::Status CheckStrict(const ir::Graph& graph, const ModelConfig& config);

// Sets the fallback and verification properties on the model and returns the
// model to serve (a rebuilt one when verify.on_mismatch is "fallback" and
// ops had to be forced onto the fallback, by `rebuild`). `model_path` is the
// file the graph came from, `reference` runs it through libtorch (in the
// sandboxed worker; server/torch/torch_reference_client.h); `verify` false skips
// the libtorch run (the graph came from the disk cache, verified when first
// imported). Fails with InvalidArgument
// naming the first diverging node when Kiln and libtorch disagree; Kiln's
// runs of the samples are bounded by `run` (the load's deadline, the
// per-request memory limit), failing with its status prefixed "verified
// import: ". `verified_signature`, when given, receives the signature key
// (runtime::SignatureKey) the verification passed on, or stays empty.
absl::StatusOr<std::unique_ptr<runtime::Model>> CheckImport(
    const std::string& label, const std::string& model_path, const ModelConfig& config,
    std::unique_ptr<runtime::Model> model, verify::TorchReference& reference,
    const verify::ModelRebuilder& rebuild, bool verify, const runtime::RunOptions& run,
    std::string* verified_signature = nullptr);

}  // namespace kiln::server
