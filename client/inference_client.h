// A small C++ client for Kiln (and any KServe v2 / Open Inference Protocol
// gRPC server): health, repository management, metadata, inference and
// statistics. Every call returns absl::Status or StatusOr carrying the server's
// own error code and message. gRPC and protobuf types stay inside the .cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/common/tensor.h"

namespace kiln::client {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct TensorMetadata {
  std::string name;
  std::string datatype;        // "FP32", ...
  std::vector<int64_t> shape;  // -1: dynamic
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
  std::map<std::string, std::string> properties;
};

struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

struct ModelIndexEntry {
  std::string name;
  std::string version;
  std::string state;  // "READY", "UNAVAILABLE"
  std::string reason;
};

struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

struct ModelStatistics {
  std::string name;
  std::string version;
  uint64_t last_inference_ms = 0;
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  Duration success;
  Duration fail;
  Duration queue;
  Duration compute_input;
  Duration compute_infer;
  Duration compute_output;
};

struct ClientOptions {
  // Deadline per call; zero means none.
  std::chrono::milliseconds timeout{0};
};

class InferenceClient {
 public:
  // Creates a channel to `target` ("host:port"). The connection is made
  // lazily, so an unreachable server shows up as Unavailable on the first
  // call. InvalidArgument for an empty target.
  static absl::StatusOr<std::unique_ptr<InferenceClient>> Connect(const std::string& target,
                                                                  ClientOptions options = {});
  ~InferenceClient();

  const std::string& target() const { return target_; }

  absl::StatusOr<bool> Live();
  absl::StatusOr<bool> Ready();
  absl::StatusOr<bool> ModelReady(const std::string& name);
  absl::StatusOr<ServerMetadata> GetServerMetadata();

  // Uploads `file_bytes` as model `name` (parameter "file:1/model.pt"), with
  // an optional JSON load configuration, and waits for the server to load it.
  absl::Status Upload(const std::string& name, absl::string_view file_bytes,
                      std::optional<std::string> config_json = std::nullopt);

  // Asks the server to (re)load `name` from its own repository.
  absl::Status Load(const std::string& name, std::optional<std::string> config_json = std::nullopt);

  absl::Status Unload(const std::string& name);

  // The server's models; only the ready ones when `ready_only`.
  absl::StatusOr<std::vector<ModelIndexEntry>> Index(bool ready_only = false);

  absl::StatusOr<ModelMetadata> Metadata(const std::string& name);

  // Runs model `name`. Inputs travel as raw_input_contents; `outputs` names
  // the outputs wanted (empty: all). Returns the outputs in the server's order.
  absl::StatusOr<std::vector<NamedTensor>> Infer(const std::string& name,
                                                 const std::vector<NamedTensor>& inputs,
                                                 const std::vector<std::string>& outputs = {});

  // Statistics of `name`, or of every model when empty.
  absl::StatusOr<std::vector<ModelStatistics>> Statistics(const std::string& name = "");

 private:
  struct Impl;
  InferenceClient(std::string target, std::unique_ptr<Impl> impl);

  std::string target_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::client
