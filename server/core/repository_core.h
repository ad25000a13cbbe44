// What Kiln's own ModelRepositoryService (proto/kiln/v1/repository_service.proto)
// does, whatever carries it: streaming, verified, resumable uploads, deletes
// and cache statistics over ModelRegistry and UploadStore. The gRPC front
// (server/grpc/repository_service.h) authenticates, calls these and maps the
// status; like InferenceCore (inference_core.h), each operation checks the
// caller's right to it again and logs its failures.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "kiln/v1/repository_service.pb.h"
#include "server/core/model_registry.h"
#include "server/core/upload_store.h"
#include "server/security/access_policy.h"

namespace kiln::server {

class RepositoryCore {
 public:
  // Reads the next message of an upload's stream into `message`; false at
  // its end (complete or cut off).
  using UploadReader = std::function<bool(v1::UploadModelRequest* message)>;

  // `registry` and `uploads` must outlive the core. Uploads above
  // `max_upload_bytes` are RESOURCE_EXHAUSTED before a byte is stored.
  RepositoryCore(ModelRegistry* registry, UploadStore* uploads, uint64_t max_upload_bytes);

  // Whether the server holds the file, or how much of it an interrupted
  // upload kept. InvalidArgument for a malformed digest.
  absl::Status QueryModelFile(const security::Caller& caller,
                              const v1::QueryModelFileRequest& request,
                              v1::QueryModelFileResponse* response) const;
  // Receives an upload (an UploadHeader, then chunks) from `read`, installs
  // and loads it. A stream cut off keeps its bytes for a resumed upload.
  absl::Status UploadModel(const security::Caller& caller, const UploadReader& read,
                           v1::UploadModelResponse* response);
  // Deletes a model's version, or every version (0), from the repository.
  absl::Status DeleteModel(const security::Caller& caller, const v1::DeleteModelRequest& request);
  // The compiled-graph cache's counters, per model version and in total.
  absl::Status CacheStatistics(const security::Caller& caller,
                               const v1::CacheStatisticsRequest& request,
                               v1::CacheStatisticsResponse* response) const;

 private:
  ModelRegistry* registry_;
  UploadStore* uploads_;
  uint64_t max_upload_bytes_;
};

}  // namespace kiln::server
