// The GRPCInferenceService handlers. Each authenticates the call from its
// metadata (server/grpc/grpc_auth.h), calls the operation of InferenceCore
// (server/core/inference_core.h) and turns its result into a gRPC status
// through ToGrpcStatus(); all behaviour lives in the core.
#pragma once

#include <atomic>

#include "inference/grpc_service.grpc.pb.h"
#include "server/core/inference_core.h"
#include "server/security/access_policy.h"

namespace kiln::server {

// ModelInfer uses gRPC's callback API: the call is answered from the thread
// that finishes the inference (infer_pipeline.h), the others are synchronous.
// It takes the request as gRPC's bytes and reads it itself
// (server/core/infer_request_reader.h), so that the tensors' bytes are copied
// once, from gRPC's buffers into the inputs, instead of twice.
class InferenceService final
    : public inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
          inference::GRPCInferenceService::Service> {
 public:
  // `core` must outlive the service; so must `auth`, who may call what (null:
  // everyone may call anything), and `in_flight` (may be null), where
  // ModelInfer counts its calls while they run and logs each start at debug
  // level (grpc_server.cc: the other RPCs are counted and logged by an
  // interceptor, which ModelInfer goes without unless debug lines are logged,
  // and then only for the line at its end).
  InferenceService(InferenceCore* core, const security::Authenticator* auth,
                   std::atomic<int>* in_flight = nullptr);

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
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
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

 private:
  InferenceCore* core_;
  const security::Authenticator* auth_;
  std::atomic<int>* in_flight_;
};

}  // namespace kiln::server
