// `kiln profile`: where a model's time goes, per node of its compiled graph.
//   kiln profile NAME -i x=img.npy [--runs N] [--warmup N] [--trace out.json] [--top K]
// Runs the model --warmup times unprofiled (the first request compiles), then
// --runs times with the request parameter "profile": true, merges the
// per-node profiles the server returns (engine/runtime/profiler.h) and prints
// them sorted by time; --trace writes the Chrome/Perfetto trace-event JSON.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/inference_client.h"

namespace kiln::cli {

struct ProfileOptions {
  int runs = 10;
  int warmup = 1;
  std::string trace_path;  // empty: no trace
  std::string json_path;   // empty: no merged profile JSON
  size_t top = 0;          // rows printed; 0: all
};

absl::Status Profile(client::InferenceClient& client, const std::string& name,
                     const std::vector<client::NamedTensor>& inputs, const std::string& version,
                     const ProfileOptions& options);

}  // namespace kiln::cli
