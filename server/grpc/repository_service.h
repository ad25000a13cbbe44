// Kiln's own ModelRepositoryService (proto/kiln/v1/repository_service.proto):
// streaming, verified, resumable uploads, deletes, and cache statistics. Like
// InferenceService, it only translates; ModelRegistry and UploadStore do the
// work.
#pragma once

#include <cstdint>

#include "kiln/v1/repository_service.grpc.pb.h"
#include "server/core/model_registry.h"
#include "server/security/access_policy.h"
#include "server/core/upload_store.h"

namespace kiln::server {

class RepositoryService final : public v1::ModelRepositoryService::Service {
 public:
  // `registry` and `uploads` must outlive the service. Uploads above
  // `max_upload_bytes` are RESOURCE_EXHAUSTED before a byte is stored.
  // `auth` (may be null: no checks) says who may call what and must outlive
  // the service too.
  RepositoryService(ModelRegistry* registry, UploadStore* uploads, uint64_t max_upload_bytes,
                    const security::Authenticator* auth = nullptr);

  grpc::Status QueryModelFile(grpc::ServerContext* context,
                              const v1::QueryModelFileRequest* request,
                              v1::QueryModelFileResponse* response) override;
  grpc::Status UploadModel(grpc::ServerContext* context,
                           grpc::ServerReader<v1::UploadModelRequest>* reader,
                           v1::UploadModelResponse* response) override;
  grpc::Status DeleteModel(grpc::ServerContext* context, const v1::DeleteModelRequest* request,
                           v1::DeleteModelResponse* response) override;
  grpc::Status CacheStatistics(grpc::ServerContext* context,
                               const v1::CacheStatisticsRequest* request,
                               v1::CacheStatisticsResponse* response) override;

 private:
  // The caller's right to `rpc` (server/grpc/grpc_auth.h).
  grpc::Status Authorize(const grpc::ServerContextBase& context, security::Rpc rpc) const;

  ModelRegistry* registry_;
  UploadStore* uploads_;
  uint64_t max_upload_bytes_;
  const security::Authenticator* auth_;
};

}  // namespace kiln::server
