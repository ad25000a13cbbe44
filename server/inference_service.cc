#include "server/inference_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/common/status_macros.h"
#include "server/grpc_status.h"
#include "server/tensor_codec.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::server {
namespace {

// Kiln serves exactly one version per model, stored under REPO/NAME/1/.
constexpr char kVersion[] = "1";
constexpr char kPlatform[] = "pytorch_torchscript";
constexpr char kFileParam[] = "file:1/model.pt";
constexpr char kConfigParam[] = "config";

using Clock = std::chrono::steady_clock;

uint64_t ElapsedNs(Clock::time_point since) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

// Logs a failed RPC (one line per failure) and converts the status.
grpc::Status Reply(absl::string_view rpc, absl::string_view model, const absl::Status& status) {
  if (!status.ok()) {
    spdlog::warn("{} '{}' failed: {}: {}", std::string(rpc), std::string(model),
                 absl::StatusCodeToString(status.code()), std::string(status.message()));
  }
  return ToGrpcStatus(status);
}

absl::Status CheckVersion(absl::string_view model, absl::string_view version) {
  if (version.empty() || version == kVersion) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("model '", model, "' has no version '", version,
                                          "' (Kiln serves version ", kVersion, " only)"));
}

// Fills one ModelMetadata tensor entry. A spec without a known rank is sent as
// shape [-1] and flagged in the model's properties as "<input|output>.<name>.rank"
// = "dynamic", since the protocol has no way to say "any rank".
void FillTensorMetadata(const runtime::TensorSpec& spec, absl::string_view kind,
                        inference::ModelMetadataResponse::TensorMetadata* out,
                        inference::ModelMetadataResponse* response) {
  out->set_name(spec.name);
  out->set_datatype(std::string(DTypeName(spec.dtype)));
  if (spec.dims.has_value()) {
    for (int64_t d : *spec.dims) out->add_shape(d);
  } else {
    out->add_shape(-1);
    (*response->mutable_properties())[absl::StrCat(kind, ".", spec.name, ".rank")] = "dynamic";
  }
}

void FillDuration(const Duration& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

// Reads the upload parameters of RepositoryModelLoad.
struct LoadParams {
  std::optional<absl::string_view> file;
  std::optional<std::string> config;
};

absl::StatusOr<LoadParams> ParseLoadParams(const inference::RepositoryModelLoadRequest& request,
                                           uint64_t max_upload_bytes) {
  LoadParams params;
  for (const auto& [key, value] : request.parameters()) {
    if (key == kConfigParam) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        return absl::InvalidArgumentError("parameter 'config' must be a string_param (JSON)");
      }
      params.config = value.string_param();
    } else if (key == kFileParam) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBytesParam) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", kFileParam, "' must be a bytes_param"));
      }
      if (value.bytes_param().size() > max_upload_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "model upload of ", value.bytes_param().size(), " bytes exceeds the server's limit of ",
            max_upload_bytes, " bytes (--max-upload-bytes)"));
      }
      params.file = value.bytes_param();
    } else if (absl::StartsWith(key, "file:")) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported file parameter '", key,
                                                     "'; Kiln accepts only '", kFileParam, "'"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown load parameter '", key, "'"));
    }
  }
  return params;
}

}  // namespace

InferenceService::InferenceService(ModelRegistry* registry, ServiceOptions options)
    : registry_(registry), options_(options) {}

grpc::Status InferenceService::ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                                          inference::ServerLiveResponse* response) {
  response->set_live(true);
  return grpc::Status::OK;
}

grpc::Status InferenceService::ServerReady(grpc::ServerContext*,
                                           const inference::ServerReadyRequest*,
                                           inference::ServerReadyResponse* response) {
  // The repository was loaded before the server started listening, so once
  // requests arrive the server is ready, even with no (or failed) models.
  response->set_ready(true);
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelReady(grpc::ServerContext*,
                                          const inference::ModelReadyRequest* request,
                                          inference::ModelReadyResponse* response) {
  response->set_ready(CheckVersion(request->name(), request->version()).ok() &&
                      registry_->IsReady(request->name()));
  return grpc::Status::OK;
}

grpc::Status InferenceService::ServerMetadata(grpc::ServerContext*,
                                              const inference::ServerMetadataRequest*,
                                              inference::ServerMetadataResponse* response) {
  response->set_name("kiln");
  response->set_version(KILN_VERSION);
  for (const char* extension : {"model_repository", "statistics", "binary_tensor_data"}) {
    response->add_extensions(extension);
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelMetadata(grpc::ServerContext*,
                                             const inference::ModelMetadataRequest* request,
                                             inference::ModelMetadataResponse* response) {
  const std::string& name = request->name();
  absl::Status status = CheckVersion(name, request->version());
  absl::StatusOr<ServingModel> serving = status.ok() ? registry_->Get(name) : status;
  if (!serving.ok()) return Reply("ModelMetadata", name, serving.status());
  response->set_name(name);
  response->add_versions(std::string(kVersion));
  response->set_platform(std::string(kPlatform));
  (*response->mutable_properties())["sha256"] = serving->sha256;
  for (const runtime::TensorSpec& spec : serving->model->inputs()) {
    FillTensorMetadata(spec, "input", response->add_inputs(), response);
  }
  for (const runtime::TensorSpec& spec : serving->model->outputs()) {
    FillTensorMetadata(spec, "output", response->add_outputs(), response);
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelInfer(grpc::ServerContext*,
                                          const inference::ModelInferRequest* request,
                                          inference::ModelInferResponse* response) {
  const Clock::time_point start = Clock::now();
  const std::string& name = request->model_name();
  absl::Status status = CheckVersion(name, request->model_version());
  absl::StatusOr<ServingModel> serving = status.ok() ? registry_->Get(name) : status;
  if (!serving.ok()) return Reply("ModelInfer", name, serving.status());

  InferTimings timings;
  auto fail = [&](const absl::Status& error) {
    serving->stats->RecordFailure(ElapsedNs(start));
    return Reply("ModelInfer", name, error);
  };

  absl::StatusOr<std::vector<runtime::NamedTensor>> inputs = DecodeInputs(*request);
  if (!inputs.ok()) return fail(inputs.status());
  timings.input_ns = ElapsedNs(start);

  const Clock::time_point infer_start = Clock::now();
  absl::StatusOr<std::vector<runtime::NamedTensor>> outputs =
      serving->model->Infer(*inputs, RequestedOutputs(*request));
  if (!outputs.ok()) return fail(outputs.status());
  timings.infer_ns = ElapsedNs(infer_start);

  const Clock::time_point output_start = Clock::now();
  response->set_model_name(name);
  response->set_model_version(std::string(kVersion));
  response->set_id(request->id());
  EncodeOutputs(*outputs, response);
  timings.output_ns = ElapsedNs(output_start);
  serving->stats->RecordSuccess(timings);
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelStatistics(grpc::ServerContext*,
                                               const inference::ModelStatisticsRequest* request,
                                               inference::ModelStatisticsResponse* response) {
  const std::string& name = request->name();
  absl::Status status = CheckVersion(name, request->version());
  auto stats = status.ok() ? registry_->Statistics(name) : status;
  if (!stats.ok()) return Reply("ModelStatistics", name, stats.status());
  for (const auto& [model_name, s] : *stats) {
    inference::ModelStatistics* out = response->add_model_stats();
    out->set_name(model_name);
    out->set_version(std::string(kVersion));
    out->set_last_inference(s.last_inference_ms);
    out->set_inference_count(s.inference_count);
    out->set_execution_count(s.execution_count);
    inference::InferStatistics* infer = out->mutable_inference_stats();
    FillDuration(s.success, infer->mutable_success());
    FillDuration(s.fail, infer->mutable_fail());
    // No request queue: requests run on the gRPC thread that received them.
    FillDuration(Duration{}, infer->mutable_queue());
    FillDuration(s.compute_input, infer->mutable_compute_input());
    FillDuration(s.compute_infer, infer->mutable_compute_infer());
    FillDuration(s.compute_output, infer->mutable_compute_output());
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::RepositoryIndex(grpc::ServerContext*,
                                               const inference::RepositoryIndexRequest* request,
                                               inference::RepositoryIndexResponse* response) {
  for (const ModelIndexEntry& entry : registry_->Index()) {
    if (request->ready() && entry.state != ModelState::kReady) continue;
    auto* model = response->add_models();
    model->set_name(entry.name);
    model->set_version(std::string(kVersion));
    model->set_state(std::string(ModelStateName(entry.state)));
    model->set_reason(entry.reason);
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::RepositoryModelLoad(
    grpc::ServerContext*, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  const std::string& name = request->model_name();
  absl::StatusOr<LoadParams> params = ParseLoadParams(*request, options_.max_upload_bytes);
  if (!params.ok()) return Reply("RepositoryModelLoad", name, params.status());
  // The registry logs every load, failed or not.
  return ToGrpcStatus(registry_->Load(name, params->file, std::move(params->config)));
}

grpc::Status InferenceService::RepositoryModelUnload(
    grpc::ServerContext*, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  return Reply("RepositoryModelUnload", request->model_name(),
               registry_->Unload(request->model_name()));
}

}  // namespace kiln::server
