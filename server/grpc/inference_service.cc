#include "server/grpc/inference_service.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/local/entry_head.h"
#include "server/core/call_log.h"
#include "server/core/infer_request_reader.h"
#include "server/grpc/grpc_auth.h"
#include "server/grpc/grpc_status.h"

namespace kiln::server {
namespace {

using security::Caller;
using security::Rpc;

// The load answer: RepositoryModelLoadResponse has no fields, so the derived
// contract (server/core/model_contract.h) travels as trailing metadata
// (the `kiln` CLI and Python clients read it).
constexpr char kContractTrailer[] = "kiln-contract";
// gRPC peers refuse metadata above 8 KiB by default.
constexpr size_t kMaxTrailerBytes = 7 << 10;

void AddContractTrailer(grpc::ServerContext* context, const std::string& contract) {
  if (contract.size() > kMaxTrailerBytes) {
    context->AddTrailingMetadata(
        kContractTrailer,
        absl::StrCat("{\"truncated\": true, \"bytes\": ", contract.size(),
                     ", \"see\": \"ModelMetadata properties\"}"));
    return;
  }
  context->AddTrailingMetadata(kContractTrailer, contract);
}

// One ModelInfer call: its messages live until gRPC is done with the call.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  void OnDone() override { delete this; }
  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  RawOutputs outputs;  // the answer's raw outputs (InferCall::raw_outputs)
};

// `response` as gRPC sends it: the message, then each output's bytes as a
// raw_output_contents entry whose slice holds its tensor (`raw`: the answer's
// outputs, EncodeOutputs) until gRPC lets it go: the bytes are not copied
// into the message or a serialization of it.
grpc::ByteBuffer AnswerBytes(const inference::ModelInferResponse& response, RawOutputs* raw) {
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + 2 * raw->entries.size());
  slices.emplace_back(response.SerializeAsString());
  for (size_t i = 0; i < raw->entries.size(); ++i) {
    const absl::string_view bytes = raw->bytes(i);
    const local_wire::EntryHead head(inference::ModelInferResponse::kRawOutputContentsFieldNumber,
                                     bytes.size());
    slices.emplace_back(head.view().data(), head.view().size());
    if (bytes.empty()) continue;
    auto* held = new Tensor(*std::move(raw->entries[i]));
    slices.emplace_back(const_cast<char*>(bytes.data()), bytes.size(),
                        [](void* p) { delete static_cast<Tensor*>(p); }, held);
  }
  raw->entries.clear();
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace

InferenceService::InferenceService(InferenceCore* core, const security::Authenticator* auth,
                                   std::atomic<int>* in_flight)
    : core_(core), auth_(auth), in_flight_(in_flight) {}

grpc::Status InferenceService::ServerLive(grpc::ServerContext* context,
                                          const inference::ServerLiveRequest*,
                                          inference::ServerLiveResponse* response) {
  return security::Serve(auth_, *context, Rpc::kServerLive,
                         [&](const Caller& caller) { return core_->ServerLive(caller, response); });
}

grpc::Status InferenceService::ServerReady(grpc::ServerContext* context,
                                           const inference::ServerReadyRequest*,
                                           inference::ServerReadyResponse* response) {
  return security::Serve(auth_, *context, Rpc::kServerReady, [&](const Caller& caller) {
    return core_->ServerReady(caller, response);
  });
}

grpc::Status InferenceService::ModelReady(grpc::ServerContext* context,
                                          const inference::ModelReadyRequest* request,
                                          inference::ModelReadyResponse* response) {
  return security::Serve(auth_, *context, Rpc::kModelReady, [&](const Caller& caller) {
    return core_->ModelReady(caller, *request, response);
  });
}

grpc::Status InferenceService::ServerMetadata(grpc::ServerContext* context,
                                              const inference::ServerMetadataRequest*,
                                              inference::ServerMetadataResponse* response) {
  return security::Serve(auth_, *context, Rpc::kServerMetadata, [&](const Caller& caller) {
    return core_->ServerMetadata(caller, response);
  });
}

grpc::Status InferenceService::ModelMetadata(grpc::ServerContext* context,
                                             const inference::ModelMetadataRequest* request,
                                             inference::ModelMetadataResponse* response) {
  return security::Serve(auth_, *context, Rpc::kModelMetadata, [&](const Caller& caller) {
    return core_->ModelMetadata(caller, *request, response);
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request_bytes,
                                                       grpc::ByteBuffer* response_bytes) {
  auto* reactor = new InferReactor();
  // Counted, and its debug line written, as one step: a call logged as started
  // is one that shutdown's "draining N in flight" counts.
  const int n = in_flight_ != nullptr ? in_flight_->fetch_add(1) + 1 : 0;
  if (spdlog::should_log(spdlog::level::debug))  // no string built per call otherwise
    spdlog::debug("rpc {} started ({} in flight)", std::string(security::RpcMethod(Rpc::kModelInfer)), n);
  absl::StatusOr<Caller> caller = security::Authenticate(auth_, *context, Rpc::kModelInfer);
  if (!caller.ok()) {
    if (in_flight_ != nullptr) in_flight_->fetch_sub(1);
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  // The request's bytes as gRPC holds them (slices of what it read); the
  // tensors' bytes stay there until the decoder copies them into the inputs,
  // before core_->ModelInfer returns.
  std::vector<grpc::Slice> slices;
  (void)request_bytes->Dump(&slices);  // an empty message may have none
  std::vector<absl::string_view> pieces;
  pieces.reserve(slices.size());
  RawInputs raw;
  for (const grpc::Slice& s : slices) {
    pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (!ReadInferRequest(pieces, &reactor->request, &raw)) {
    if (in_flight_ != nullptr) in_flight_->fetch_sub(1);
    const absl::Status bad = absl::InvalidArgumentError(
        "ModelInfer: the request is not a serialized inference.ModelInferRequest");
    LogFailedCall("ModelInfer", "", bad);
    reactor->Finish(ToGrpcStatus(bad));
    return reactor;
  }
  InferCall call;
  call.deadline = context->deadline();
  call.cancelled = [context] { return context->IsCancelled(); };
  call.raw_outputs = &reactor->outputs;
  core_->ModelInfer(
      *caller, reactor->request, &reactor->response, std::move(call),
      [in_flight = in_flight_, reactor, response_bytes](const absl::Status& status) {
        grpc::Status answer = ToGrpcStatus(status);
        if (!status.ok()) {
          LogFailedCall("ModelInfer", reactor->request.model_name(), status);
        } else {
          *response_bytes = AnswerBytes(reactor->response, &reactor->outputs);
        }
        if (in_flight != nullptr) in_flight->fetch_sub(1);
        reactor->Finish(answer);
      },
      &raw);
  return reactor;
}

grpc::Status InferenceService::ModelStatistics(grpc::ServerContext* context,
                                               const inference::ModelStatisticsRequest* request,
                                               inference::ModelStatisticsResponse* response) {
  return security::Serve(auth_, *context, Rpc::kModelStatistics, [&](const Caller& caller) {
    return core_->ModelStatistics(caller, *request, response);
  });
}

grpc::Status InferenceService::RepositoryIndex(grpc::ServerContext* context,
                                               const inference::RepositoryIndexRequest* request,
                                               inference::RepositoryIndexResponse* response) {
  return security::Serve(auth_, *context, Rpc::kRepositoryIndex, [&](const Caller& caller) {
    return core_->RepositoryIndex(caller, *request, response);
  });
}

grpc::Status InferenceService::RepositoryModelLoad(
    grpc::ServerContext* context, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  return security::Serve(auth_, *context, Rpc::kRepositoryModelLoad, [&](const Caller& caller) {
    absl::StatusOr<ModelLoadResult> loaded = core_->RepositoryModelLoad(caller, *request);
    if (!loaded.ok()) return loaded.status();
    if (loaded->contract_json.has_value()) AddContractTrailer(context, *loaded->contract_json);
    return absl::OkStatus();
  });
}

grpc::Status InferenceService::RepositoryModelUnload(
    grpc::ServerContext* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  return security::Serve(auth_, *context, Rpc::kRepositoryModelUnload, [&](const Caller& caller) {
    return core_->RepositoryModelUnload(caller, *request);
  });
}

grpc::Status InferenceService::SystemSharedMemoryStatus(
    grpc::ServerContext* context, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  return security::Serve(auth_, *context, Rpc::kSystemSharedMemoryStatus,
                         [&](const Caller& caller) {
                           return core_->SystemSharedMemoryStatus(caller, *request, response);
                         });
}

grpc::Status InferenceService::SystemSharedMemoryRegister(
    grpc::ServerContext* context, const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  return security::Serve(
      auth_, *context, Rpc::kSystemSharedMemoryRegister,
      [&](const Caller& caller) { return core_->SystemSharedMemoryRegister(caller, *request); });
}

grpc::Status InferenceService::SystemSharedMemoryUnregister(
    grpc::ServerContext* context, const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return security::Serve(
      auth_, *context, Rpc::kSystemSharedMemoryUnregister,
      [&](const Caller& caller) { return core_->SystemSharedMemoryUnregister(caller, *request); });
}

}  // namespace kiln::server
