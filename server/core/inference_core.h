// What GRPCInferenceService does, whichever protocol asks: health, server and
// model metadata, statistics, inference, the model repository extension
// (index, load with an uploaded file, unload) and the system shared-memory
// extension. The gRPC front (server/grpc/inference_service.h) and the HTTP
// front (server/http/kserve_routes.h) authenticate the request, translate it
// to these protobuf messages, call the operation and map its status, so both
// protocols give the same answers and the same messages.
//
// Every operation takes the caller the front authenticated
// (server/security/access_policy.h) and checks its right to the call again,
// so the core refuses what its caller may not do whoever calls it. Failures
// are logged here (server/core/call_log.h), except an inference's, which each
// front logs under its own name, and what the registry logs itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"
#include "server/core/infer_pipeline.h"
#include "server/core/model_registry.h"
#include "server/core/run_limits.h"
#include "server/security/access_policy.h"

namespace kiln::server {

struct InferenceCoreOptions {
  // Uploads (the "file:1/model.pt" parameter) above this are RESOURCE_EXHAUSTED.
  uint64_t max_upload_bytes = 512ull << 20;
  // Each inference's memory and time.
  RunLimits limits;
  // The compute threads inferences run the engine on (infer_pipeline.h).
  ComputeOptions compute;
};

// What a successful load answers: the model's contract
// (server/core/model_contract.h) as JSON; none when the model loaded but its
// contract could not be derived.
struct ModelLoadResult {
  std::optional<std::string> contract_json;
};

class InferenceCore {
 public:
  // `registry` must outlive the core.
  InferenceCore(ModelRegistry* registry, InferenceCoreOptions options);

  // Each fills `response` and returns OK, or returns the error the client is
  // to see (the codes of the style guide: NotFound for an unknown model,
  // InvalidArgument for a bad request, ...).
  absl::Status ServerLive(const security::Caller& caller,
                          inference::ServerLiveResponse* response) const;
  absl::Status ServerReady(const security::Caller& caller,
                           inference::ServerReadyResponse* response) const;
  absl::Status ServerMetadata(const security::Caller& caller,
                              inference::ServerMetadataResponse* response) const;
  absl::Status ModelReady(const security::Caller& caller,
                          const inference::ModelReadyRequest& request,
                          inference::ModelReadyResponse* response) const;
  absl::Status ModelMetadata(const security::Caller& caller,
                             const inference::ModelMetadataRequest& request,
                             inference::ModelMetadataResponse* response) const;
  absl::Status ModelStatistics(const security::Caller& caller,
                               const inference::ModelStatisticsRequest& request,
                               inference::ModelStatisticsResponse* response) const;
  absl::Status RepositoryIndex(const security::Caller& caller,
                               const inference::RepositoryIndexRequest& request,
                               inference::RepositoryIndexResponse* response) const;
  absl::Status RepositoryModelUnload(const security::Caller& caller,
                                     const inference::RepositoryModelUnloadRequest& request);
  absl::Status SystemSharedMemoryStatus(const security::Caller& caller,
                                        const inference::SystemSharedMemoryStatusRequest& request,
                                        inference::SystemSharedMemoryStatusResponse* response);
  absl::Status SystemSharedMemoryRegister(
      const security::Caller& caller, const inference::SystemSharedMemoryRegisterRequest& request);
  absl::Status SystemSharedMemoryUnregister(
      const security::Caller& caller,
      const inference::SystemSharedMemoryUnregisterRequest& request);

  // Loads the model from the repository, dry-runs a config, or installs and
  // loads the file a "file:<version>/model.pt[2]" parameter carries (checked
  // against a "sha256" parameter); answers the model's contract.
  absl::StatusOr<ModelLoadResult> RepositoryModelLoad(
      const security::Caller& caller, const inference::RepositoryModelLoadRequest& request);

  // Runs one inference (InferPipeline::Infer): `done` is called exactly once,
  // maybe on another thread, maybe before ModelInfer returns; the lifetimes
  // are InferPipeline::Infer's. `call` carries the client's deadline and
  // whether it has gone; `raw`, the raw_input_contents a front left outside
  // `request` (server/core/infer_request_reader.h).
  void ModelInfer(const security::Caller& caller, const inference::ModelInferRequest& request,
                  inference::ModelInferResponse* response, InferCall call,
                  InferPipeline::Done done, const RawInputs* raw = nullptr);
  // ModelInfer, waiting for its end on the calling thread.
  absl::Status ModelInferSync(const security::Caller& caller,
                              const inference::ModelInferRequest& request,
                              inference::ModelInferResponse* response, InferCall call,
                              const RawInputs* raw = nullptr);

  // What the compute threads did so far (/metrics).
  ComputeTotals compute_totals() const { return pipeline_->compute_totals(); }

 private:
  ModelRegistry* registry_;
  InferenceCoreOptions options_;
  std::unique_ptr<InferPipeline> pipeline_;
};

}  // namespace kiln::server
