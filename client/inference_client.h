// A small C++ client for Kiln (and any KServe v2 / Open Inference Protocol
// gRPC server): health, repository management, metadata, inference and
// statistics, plus Kiln's own streaming, resumable upload and cache
// statistics (kiln.v1). Every call returns absl::Status or StatusOr carrying the server's
// own error code and message. gRPC and protobuf types stay inside the .cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/common/tensor.h"

namespace inference {
class ModelInferResponse;
}

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

// An input whose bytes wait in a registered shared-memory region
// (RegisterSystemSharedMemory) instead of travelling in the request.
struct SharedMemoryTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  std::string region;
  uint64_t offset = 0;  // within the region
};

struct SharedMemoryRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
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
  // Kiln fills these from its compiled-plan cache (see CacheStatistics).
  Duration cache_hit;
  Duration cache_miss;
  uint64_t memory_bytes = 0;  // memory_usage, summed
};

// Kiln's own upload (kiln.v1 ModelRepositoryService.UploadModel).
struct UploadOptions {
  int64_t version = 0;  // 0: the next version (or the latest, if it holds this file)
  std::optional<std::string> config_json;  // nullopt keeps the model's config.json
  size_t chunk_bytes = 1 << 20;
  // A broken stream (server unreachable, connection lost) is resumed from the
  // bytes the server kept, up to this many attempts in all.
  int max_attempts = 5;
  // Test hook: end the stream after this many bytes of the file, as a lost
  // connection would (0: send everything).
  uint64_t stop_after_bytes = 0;
  // Called from the uploading thread after each chunk is handed to gRPC, and
  // once at the start, with the file offset reached and the file size.
  std::function<void(uint64_t sent, uint64_t total)> progress;
};

struct UploadResult {
  int64_t version = 0;
  std::string sha256;
  uint64_t size = 0;
  uint64_t bytes_sent = 0;      // over all attempts
  uint64_t resumed_from = 0;    // first attempt's offset (bytes the server already kept)
  bool already_on_server = false;  // the server held the file: nothing was sent
  bool unchanged = false;          // the latest version was this file and config already
  double load_ms = 0;              // server side: verify, import or cache, install, load
  int attempts = 0;
  bool dry_run = false;       // the config asked for a dry run: nothing stored or served
  std::string contract_json;  // the derived contract (names, datatypes, shapes, fallback ops)
};

struct ModelFileStatus {
  bool present = false;
  uint64_t received_bytes = 0;
};

// Per model version, from kiln.v1 CacheStatistics.
struct ModelCacheStatistics {
  std::string name;
  int64_t version = 0;
  std::string sha256;
  std::string state;
  double load_ms = 0;
  std::string graph_source;  // "disk-cache", "import", "import-in-process"
  double import_ms = 0;
  uint64_t plan_memory_hits = 0;
  uint64_t plan_disk_hits = 0;
  uint64_t plan_misses = 0;
  uint64_t plan_evictions = 0;
  uint64_t compile_count = 0;
  double compile_ms = 0;
  uint64_t bytes_held = 0;
  uint64_t weight_bytes = 0;
};

struct CacheTotals {
  uint64_t memory_limit_bytes = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_entries = 0;
  uint64_t evictions = 0;
  std::string disk_dir;
  uint64_t disk_graph_hits = 0;
  uint64_t disk_graph_misses = 0;
  uint64_t disk_plan_hits = 0;
  uint64_t disk_plan_misses = 0;
  uint64_t disk_corrupt = 0;
  uint64_t disk_writes = 0;
  uint64_t packed_hits = 0;
  uint64_t packed_writes = 0;
  uint64_t disk_bytes = 0;
  uint64_t disk_limit_bytes = 0;  // 0: no bound
  uint64_t disk_evictions = 0;
};

struct CacheStatistics {
  std::vector<ModelCacheStatistics> models;
  CacheTotals totals;
};

struct ClientOptions {
  // Deadline per call; zero means none.
  std::chrono::milliseconds timeout{0};
  // Sent with every call as "authorization: Bearer TOKEN" (kilnd's
  // --auth-tokens); empty: none.
  std::string token;
  // TLS: the CA certificates (PEM file) the server's certificate must chain
  // to. Empty with `tls` false: a plaintext connection.
  std::string tls_ca_file;
  bool tls = false;  // TLS with the system's CA certificates (or tls_ca_file's)
  // For mutual TLS: the client's certificate chain and key (PEM files).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Inference (Infer, InferProfiled, InferFromSharedMemory) over kilnd's
  // local socket at this path (kilnd --local-socket; proto/local/local_wire.h)
  // instead of gRPC: the same requests and answers with less work per call,
  // for a client on kilnd's machine. Every other call still goes over gRPC
  // to `target`. The timeout travels as the request's "timeout" parameter.
  std::string local_socket;
};

class InferenceClient {
 public:
  // Creates a channel to `target` ("host:port"), over TLS when the options
  // ask for it. The connection is made lazily, so an unreachable server (or a
  // failed handshake) shows up as Unavailable on the first call.
  // InvalidArgument for an empty target, NotFound for a TLS file that cannot
  // be read.
  static absl::StatusOr<std::unique_ptr<InferenceClient>> Connect(const std::string& target,
                                                                  ClientOptions options = {});
  ~InferenceClient();

  const std::string& target() const { return target_; }

  absl::StatusOr<bool> Live();
  absl::StatusOr<bool> Ready();
  absl::StatusOr<bool> ModelReady(const std::string& name);
  absl::StatusOr<ServerMetadata> GetServerMetadata();

  // Uploads `file_bytes` as model `name` in one RepositoryModelLoad message
  // (Triton's "file:<version>/model.pt" parameter, version 1 unless given,
  // with its SHA-256 in the "sha256" parameter), with an optional JSON load
  // configuration, and waits for the server to load it.
  absl::Status Upload(const std::string& name, absl::string_view file_bytes,
                      std::optional<std::string> config_json = std::nullopt,
                      int64_t version = 1);

  // Kiln's streaming upload of the file at `path`: asks whether the server
  // already holds its SHA-256 (then sends nothing), resumes a previously
  // interrupted upload, streams the rest in chunks, and waits for the server
  // to verify, import and serve it. NotFound when the file cannot be read.
  absl::StatusOr<UploadResult> UploadFile(const std::string& name, const std::string& path,
                                          const UploadOptions& options = {});
  // Same, from memory.
  absl::StatusOr<UploadResult> UploadBytes(const std::string& name, absl::string_view bytes,
                                           const UploadOptions& options = {});

  // Whether the server holds a file with this SHA-256 and size, and how many
  // bytes of an interrupted upload of it it kept.
  absl::StatusOr<ModelFileStatus> QueryModelFile(const std::string& sha256, uint64_t size);

  // Stops serving a model (or one version) and removes its files.
  absl::Status Delete(const std::string& name, int64_t version = 0);

  // Load and compiled-plan cache statistics (Kiln only).
  absl::StatusOr<CacheStatistics> GetCacheStatistics(const std::string& name = "",
                                                     int64_t version = 0);

  // Asks the server to (re)load `name` from its own repository.
  absl::Status Load(const std::string& name, std::optional<std::string> config_json = std::nullopt);

  absl::Status Unload(const std::string& name);

  // The server's models; only the ready ones when `ready_only`.
  absl::StatusOr<std::vector<ModelIndexEntry>> Index(bool ready_only = false);

  // Metadata of `version` (empty: the latest ready one).
  absl::StatusOr<ModelMetadata> Metadata(const std::string& name, const std::string& version = "");

  // Runs model `name` (`version`, or the latest ready one when empty). Inputs
  // travel as raw_input_contents; `outputs` names the outputs wanted (empty:
  // all). Returns the outputs in the server's order.
  absl::StatusOr<std::vector<NamedTensor>> Infer(const std::string& name,
                                                 const std::vector<NamedTensor>& inputs,
                                                 const std::vector<std::string>& outputs = {},
                                                 const std::string& version = "");

  // Same, with the request parameter "profile": true: Kiln runs it with its
  // profiler and answers with the per-node profile, the JSON of
  // runtime::Profile (engine/runtime/profiler.h), returned here. A server
  // without profiles answers no profile: Unimplemented.
  struct ProfiledInfer {
    std::vector<NamedTensor> outputs;
    std::string profile_json;
  };
  absl::StatusOr<ProfiledInfer> InferProfiled(const std::string& name,
                                              const std::vector<NamedTensor>& inputs,
                                              const std::string& version = "");

  // Same as Infer, with inputs read by the server from shared-memory regions
  // (the system shared-memory extension), after the `inputs` sent in the
  // request. Outputs come back in the response.
  absl::StatusOr<std::vector<NamedTensor>> InferFromSharedMemory(
      const std::string& name, const std::vector<SharedMemoryTensor>& shared_inputs,
      const std::vector<NamedTensor>& inputs = {}, const std::string& version = "");

  // The system shared-memory extension: registers `byte_size` bytes at
  // `offset` of the shared-memory object `key` (client/shared_memory.h makes
  // one) as region `name`; unregisters `name` (empty: every region); lists
  // `name` (empty: every region).
  absl::Status RegisterSystemSharedMemory(const std::string& name, const std::string& key,
                                          uint64_t offset, uint64_t byte_size);
  absl::Status UnregisterSystemSharedMemory(const std::string& name);
  absl::StatusOr<std::vector<SharedMemoryRegionStatus>> SystemSharedMemoryStatus(
      const std::string& name = "");

  // Statistics of `name`, or of every model when empty.
  absl::StatusOr<std::vector<ModelStatistics>> Statistics(const std::string& name = "");

 private:
  struct Impl;
  // Infer; `profile` sets the request parameter, `response` (may be null)
  // receives the whole answer.
  absl::StatusOr<std::vector<NamedTensor>> InferImpl(const std::string& name,
                                                     const std::vector<NamedTensor>& inputs,
                                                     const std::vector<std::string>& outputs,
                                                     const std::string& version, bool profile,
                                                     inference::ModelInferResponse* response,
                                                     const std::vector<SharedMemoryTensor>& shared = {});
  InferenceClient(std::string target, std::unique_ptr<Impl> impl);

  std::string target_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::client
