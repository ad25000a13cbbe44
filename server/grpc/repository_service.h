// Kiln's own ModelRepositoryService (proto/kiln/v1/repository_service.proto):
// streaming, verified, resumable uploads, deletes, and cache statistics. Like
// InferenceService, it only translates: each handler authenticates the call
// (server/grpc/grpc_auth.h) and calls RepositoryCore
// (server/core/repository_core.h), which does the work.
#pragma once

#include "kiln/v1/repository_service.grpc.pb.h"
#include "server/core/repository_core.h"
#include "server/security/access_policy.h"

namespace kiln::server {

class RepositoryService final : public v1::ModelRepositoryService::Service {
 public:
  // `core` must outlive the service. `auth` (may be null: no checks) says
  // who may call what and must outlive the service too.
  explicit RepositoryService(RepositoryCore* core, const security::Authenticator* auth = nullptr);

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
  RepositoryCore* core_;
  const security::Authenticator* auth_;
};

}  // namespace kiln::server
