// The GRPCInferenceService handlers. They only translate between protobuf and
// the registry/engine types and turn the result into a gRPC status through
// ToGrpcStatus(); all behaviour lives in ModelRegistry and the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "inference/grpc_service.grpc.pb.h"
#include "server/core/infer_pipeline.h"
#include "server/core/model_registry.h"
#include "server/core/run_limits.h"
#include "server/security/access_policy.h"

namespace kiln::server {

struct ServiceOptions {
  // Uploads (the "file:1/model.pt" parameter) above this are RESOURCE_EXHAUSTED.
  uint64_t max_upload_bytes = 512ull << 20;
  // Each ModelInfer's memory and time.
  RunLimits limits;
  // Compute threads ModelInfer runs the engine on (compute_pool.h).
  int concurrent_inferences = 1;
  // Who may call what (server/security/); null: everyone may call anything.
  // Must outlive the service.
  const security::Authenticator* auth = nullptr;
};

// ModelInfer uses gRPC's callback API: the call is answered from the thread
// that finishes the inference (infer_pipeline.h), the others are synchronous.
class InferenceService final
    : public inference::GRPCInferenceService::WithCallbackMethod_ModelInfer<
          inference::GRPCInferenceService::Service> {
 public:
  // `registry` must outlive the service.
  InferenceService(ModelRegistry* registry, ServiceOptions options);

  grpc::Status ServerLive(grpc::ServerContext* context, const inference::ServerLiveRequest* request,
                          inference::ServerLiveResponse* response) override;
  grpc::Status ServerReady(grpc::ServerContext* context,
                           const inference::ServerReadyRequest* request,
                           inference::ServerReadyResponse* response) override;
  grpc::Status ModelReady(grpc::ServerContext* context, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override;
  grpc::Status ServerMetadata(grpc::ServerContext* context,
                              const inference::ServerMetadataRequest* request,
                              inference::ServerMetadataResponse* response) override;
  grpc::Status ModelMetadata(grpc::ServerContext* context,
                             const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  grpc::Status ModelStatistics(grpc::ServerContext* context,
                               const inference::ModelStatisticsRequest* request,
                               inference::ModelStatisticsResponse* response) override;
  grpc::Status RepositoryIndex(grpc::ServerContext* context,
                               const inference::RepositoryIndexRequest* request,
                               inference::RepositoryIndexResponse* response) override;
  grpc::Status RepositoryModelLoad(grpc::ServerContext* context,
                                   const inference::RepositoryModelLoadRequest* request,
                                   inference::RepositoryModelLoadResponse* response) override;
  grpc::Status RepositoryModelUnload(grpc::ServerContext* context,
                                     const inference::RepositoryModelUnloadRequest* request,
                                     inference::RepositoryModelUnloadResponse* response) override;
  grpc::Status SystemSharedMemoryStatus(
      grpc::ServerContext* context, const inference::SystemSharedMemoryStatusRequest* request,
      inference::SystemSharedMemoryStatusResponse* response) override;
  grpc::Status SystemSharedMemoryRegister(
      grpc::ServerContext* context, const inference::SystemSharedMemoryRegisterRequest* request,
      inference::SystemSharedMemoryRegisterResponse* response) override;
  grpc::Status SystemSharedMemoryUnregister(
      grpc::ServerContext* context, const inference::SystemSharedMemoryUnregisterRequest* request,
      inference::SystemSharedMemoryUnregisterResponse* response) override;

  // The protocol-independent inference path (the HTTP front calls it too).
  InferPipeline& pipeline() { return *pipeline_; }

 private:
  // The caller's right to `rpc` (server/grpc/grpc_auth.h).
  grpc::Status Authorize(const grpc::ServerContextBase& context, security::Rpc rpc) const;

  ModelRegistry* registry_;
  ServiceOptions options_;
  // Inference itself, shared with the HTTP front.
  std::unique_ptr<InferPipeline> pipeline_;
};

}  // namespace kiln::server
