#include "server/grpc/repository_service.h"

#include "server/grpc/grpc_auth.h"

namespace kiln::server {

using security::Caller;
using security::Rpc;

RepositoryService::RepositoryService(RepositoryCore* core, const security::Authenticator* auth)
    : core_(core), auth_(auth) {}

grpc::Status RepositoryService::QueryModelFile(grpc::ServerContext* context,
                                               const v1::QueryModelFileRequest* request,
                                               v1::QueryModelFileResponse* response) {
  return security::Serve(auth_, *context, Rpc::kQueryModelFile, [&](const Caller& caller) {
    return core_->QueryModelFile(caller, *request, response);
  });
}

grpc::Status RepositoryService::UploadModel(grpc::ServerContext* context,
                                            grpc::ServerReader<v1::UploadModelRequest>* reader,
                                            v1::UploadModelResponse* response) {
  return security::Serve(auth_, *context, Rpc::kUploadModel, [&](const Caller& caller) {
    return core_->UploadModel(
        caller, [reader](v1::UploadModelRequest* message) { return reader->Read(message); },
        response);
  });
}

grpc::Status RepositoryService::DeleteModel(grpc::ServerContext* context,
                                            const v1::DeleteModelRequest* request,
                                            v1::DeleteModelResponse*) {
  return security::Serve(auth_, *context, Rpc::kDeleteModel, [&](const Caller& caller) {
    return core_->DeleteModel(caller, *request);
  });
}

grpc::Status RepositoryService::CacheStatistics(grpc::ServerContext* context,
                                                const v1::CacheStatisticsRequest* request,
                                                v1::CacheStatisticsResponse* response) {
  return security::Serve(auth_, *context, Rpc::kCacheStatistics, [&](const Caller& caller) {
    return core_->CacheStatistics(caller, *request, response);
  });
}

}  // namespace kiln::server
