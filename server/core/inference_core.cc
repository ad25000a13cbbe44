#include "server/core/inference_core.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/sha256.h"
#include "engine/common/status_macros.h"
#include "server/core/call_log.h"
#include "server/core/model_config.h"
#include "server/core/model_contract.h"
#include "server/core/request_parameters.h"
#include "server/core/tensor_codec.h"
#include "server/scheduler/dynamic_batcher.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::server {
namespace {

using security::Caller;
using security::Rpc;

constexpr char kPlatform[] = "pytorch_torchscript";
// Triton's file override: "file:<version>/model.pt" (or model.pt2) carries the
// model file; its format is told by content, whichever name it comes under.
constexpr char kFilePrefix[] = "file:";
constexpr char kFileSuffix[] = "/model.pt";
constexpr char kExportFileSuffix[] = "/model.pt2";
constexpr char kConfigParam[] = "config";
// Optional: the SHA-256 (hex) the uploaded bytes must have.
constexpr char kSha256Param[] = "sha256";

// A request's version field: empty means "let the server choose".
absl::StatusOr<int64_t> RequestVersion(absl::string_view version) {
  if (version.empty()) return 0;
  return ParseVersion(version);
}

// Fills one ModelMetadata tensor entry. A spec without a known rank is sent as
// shape [-1] and flagged in the model's properties as "<input|output>.<name>.rank"
// = "dynamic", since the protocol has no way to say "any rank".
void FillTensorMetadata(const runtime::TensorSpec& spec, absl::string_view kind,
                        inference::ModelMetadataResponse::TensorMetadata* out,
                        inference::ModelMetadataResponse* response) {
  out->set_name(spec.name);
  out->set_datatype(ContractDatatype(spec));
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
  int64_t version = 0;
  std::optional<std::string> config;
  std::optional<std::string> sha256;
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
    } else if (key == kSha256Param) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam ||
          !cache::IsSha256Hex(value.string_param())) {
        return absl::InvalidArgumentError(
            "parameter 'sha256' must be a string_param of 64 lowercase hex digits");
      }
      params.sha256 = value.string_param();
    } else if (absl::StartsWith(key, kFilePrefix)) {
      // Only "file:<version>/model.pt[2]": anything else could name a path.
      absl::string_view rest = absl::string_view(key).substr(strlen(kFilePrefix));
      absl::StatusOr<int64_t> version = absl::InvalidArgumentError("");
      for (absl::string_view suffix : {kFileSuffix, kExportFileSuffix}) {
        if (absl::EndsWith(rest, suffix)) {
          version = ParseVersion(rest.substr(0, rest.size() - suffix.size()));
        }
      }
      if (!version.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unsupported file parameter '", key,
            "'; Kiln accepts only 'file:<version>/model.pt2' or 'file:<version>/model.pt', "
            "e.g. 'file:1/model.pt2'"));
      }
      if (params.file.has_value()) {
        return absl::InvalidArgumentError("only one file parameter per load");
      }
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBytesParam) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", key, "' must be a bytes_param"));
      }
      if (value.bytes_param().size() > max_upload_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "model upload of ", value.bytes_param().size(), " bytes exceeds the server's limit of ",
            max_upload_bytes, " bytes (--max-upload-bytes)"));
      }
      params.file = value.bytes_param();
      params.version = *version;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown load parameter '", key, "'"));
    }
  }
  if (params.sha256.has_value() && !params.file.has_value()) {
    return absl::InvalidArgumentError("parameter 'sha256' needs a file parameter");
  }
  return params;
}

}  // namespace

InferenceCore::InferenceCore(ModelRegistry* registry, InferenceCoreOptions options)
    : registry_(registry),
      options_(options),
      pipeline_(std::make_unique<InferPipeline>(registry, options_.limits,
                                                options_.compute)) {}

absl::Status InferenceCore::ServerLive(const Caller& caller,
                                       inference::ServerLiveResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kServerLive));
  response->set_live(true);
  return absl::OkStatus();
}

absl::Status InferenceCore::ServerReady(const Caller& caller,
                                        inference::ServerReadyResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kServerReady));
  // The repository was loaded before the server started listening, so once
  // requests arrive the server is ready, even with no (or failed) models.
  response->set_ready(true);
  return absl::OkStatus();
}

absl::Status InferenceCore::ServerMetadata(const Caller& caller,
                                           inference::ServerMetadataResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kServerMetadata));
  response->set_name("kiln");
  response->set_version(KILN_VERSION);
  for (const char* extension :
       {"model_repository", "statistics", "binary_tensor_data", "system_shared_memory"}) {
    response->add_extensions(extension);
  }
  return absl::OkStatus();
}

absl::Status InferenceCore::ModelReady(const Caller& caller,
                                       const inference::ModelReadyRequest& request,
                                       inference::ModelReadyResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kModelReady));
  response->set_ready(registry_->IsReady(request.name(), request.version()));
  return absl::OkStatus();
}

absl::Status InferenceCore::ModelMetadata(const Caller& caller,
                                          const inference::ModelMetadataRequest& request,
                                          inference::ModelMetadataResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kModelMetadata));
  const std::string& name = request.name();
  absl::StatusOr<ServingModel> serving = registry_->Get(name, request.version());
  if (!serving.ok()) return LogIfFailed("ModelMetadata", name, serving.status());
  response->set_name(name);
  for (int64_t v : serving->ready_versions) response->add_versions(std::to_string(v));
  response->set_platform(std::string(kPlatform));
  // The version described, and its file's content identity.
  (*response->mutable_properties())["version"] = std::to_string(serving->version);
  (*response->mutable_properties())["sha256"] = serving->sha256;
  // What the load found: fallback ops, the verified import; and the imported
  // graph as text (what `kiln inspect` prints).
  for (const auto& [key, value] : serving->model->properties()) {
    (*response->mutable_properties())[key] = value;
  }
  (*response->mutable_properties())["graph"] = ir::PrintGraph(serving->model->graph());
  // Whether requests are batched, and why not (server/scheduler/dynamic_batcher.h).
  (*response->mutable_properties())["dynamic_batching"] =
      serving->batcher != nullptr ? serving->batcher->Describe()
                                  : "off: no max_batch_size in the config";
  // Which dtypes and dims are fixed, aliases, and where each tensor sits in
  // forward()'s arguments and result.
  std::map<std::string, std::string> contract;
  AddContractProperties(*serving->model, contract);
  for (auto& [key, value] : contract) (*response->mutable_properties())[key] = std::move(value);
  for (const runtime::TensorSpec& spec : serving->model->inputs()) {
    FillTensorMetadata(spec, "input", response->add_inputs(), response);
  }
  for (const runtime::TensorSpec& spec : serving->model->outputs()) {
    FillTensorMetadata(spec, "output", response->add_outputs(), response);
  }
  return absl::OkStatus();
}

absl::Status InferenceCore::ModelStatistics(const Caller& caller,
                                            const inference::ModelStatisticsRequest& request,
                                            inference::ModelStatisticsResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kModelStatistics));
  const std::string& name = request.name();
  absl::StatusOr<int64_t> version = RequestVersion(request.version());
  auto stats = version.ok() ? registry_->Statistics(name, *version) : version.status();
  if (!stats.ok()) return LogIfFailed("ModelStatistics", name, stats.status());
  for (const VersionStatistics& v : *stats) {
    const StatsSnapshot& s = v.infer;
    inference::ModelStatistics* out = response->add_model_stats();
    out->set_name(v.name);
    out->set_version(std::to_string(v.version));
    out->set_last_inference(s.last_inference_ms);
    out->set_inference_count(s.inference_count);
    out->set_execution_count(s.execution_count);
    inference::InferStatistics* infer = out->mutable_inference_stats();
    FillDuration(s.success, infer->mutable_success());
    FillDuration(s.fail, infer->mutable_fail());
    // Waiting for a compute thread (compute_pool.h), or in the batcher's queue.
    FillDuration(s.queue, infer->mutable_queue());
    FillDuration(s.compute_input, infer->mutable_compute_input());
    FillDuration(s.compute_infer, infer->mutable_compute_infer());
    FillDuration(s.compute_output, infer->mutable_compute_output());
    for (const auto& [size, batch] : s.batches) {
      inference::InferBatchStatistics* out_batch = out->add_batch_stats();
      out_batch->set_batch_size(size);
      FillDuration(batch.compute_input, out_batch->mutable_compute_input());
      FillDuration(batch.compute_infer, out_batch->mutable_compute_infer());
      FillDuration(batch.compute_output, out_batch->mutable_compute_output());
    }
    // Kiln has no response cache; these two count its compiled-plan cache:
    // hits in memory (and the time to answer them), and misses, which were
    // loaded from the disk cache or compiled (and the time that took).
    // kiln.v1 CacheStatistics breaks them down.
    FillDuration(Duration{v.plans.memory_hits, v.plans.hit_ns}, infer->mutable_cache_hit());
    FillDuration(Duration{v.plans.disk_hits + v.plans.misses, v.plans.compile_ns},
                 infer->mutable_cache_miss());
    inference::MemoryUsage* memory = out->add_memory_usage();
    memory->set_type("CPU");
    memory->set_id(0);
    memory->set_byte_size(v.weight_bytes + v.plans.bytes_held);
  }
  return absl::OkStatus();
}

absl::Status InferenceCore::RepositoryIndex(const Caller& caller,
                                            const inference::RepositoryIndexRequest& request,
                                            inference::RepositoryIndexResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kRepositoryIndex));
  for (const ModelIndexEntry& entry : registry_->Index()) {
    if (request.ready() && entry.state != ModelState::kReady) continue;
    auto* model = response->add_models();
    model->set_name(entry.name);
    model->set_version(std::to_string(entry.version));
    model->set_state(std::string(ModelStateName(entry.state)));
    model->set_reason(entry.reason);
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelLoadResult> InferenceCore::RepositoryModelLoad(
    const Caller& caller, const inference::RepositoryModelLoadRequest& request) {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kRepositoryModelLoad));
  constexpr absl::string_view kRpc = "RepositoryModelLoad";
  const std::string& name = request.model_name();
  absl::StatusOr<LoadParams> params = ParseLoadParams(request, options_.max_upload_bytes);
  if (!params.ok()) return LogIfFailed(kRpc, name, params.status());
  // The registry logs every load, failed or not.
  if (!params->file.has_value()) {
    bool dry_run = false;
    if (params->config.has_value()) {
      absl::StatusOr<ModelConfig> config = ParseModelConfig(*params->config);
      dry_run = config.ok() && config->dry_run;  // a bad config fails in the load below
    }
    if (dry_run) {
      absl::StatusOr<std::string> contract = registry_->DryRunLoad(name, params->config);
      if (!contract.ok()) return LogIfFailed(kRpc, name, contract.status());
      return ModelLoadResult{*std::move(contract)};
    }
    RETURN_IF_ERROR(registry_->Load(name, std::move(params->config)));
    ModelLoadResult result;
    if (absl::StatusOr<std::string> contract = registry_->Contract(name); contract.ok()) {
      result.contract_json = *std::move(contract);
    }
    return result;
  }
  absl::Status status = ValidateModelName(name);
  if (!status.ok()) return LogIfFailed(kRpc, name, status);
  const std::string sha256 = Sha256Hex(*params->file);
  if (params->sha256.has_value() && *params->sha256 != sha256) {
    return LogIfFailed(
        kRpc, name,
        absl::InvalidArgumentError(absl::StrCat("the uploaded file's SHA-256 is ", sha256,
                                                ", the 'sha256' parameter says ", *params->sha256,
                                                " (corrupted in transit?)")));
  }
  // Staged as a file first: the import runs on a file, and installing it is
  // then one rename.
  const std::string staged = (std::filesystem::path(registry_->repository().StagingDir()) /
                              absl::StrCat(cache::kTempPrefix, "load-", cache::UniqueSuffix()))
                                 .string();
  status = cache::WriteFileAtomically(staged, *params->file);
  if (!status.ok()) return LogIfFailed(kRpc, name, status);
  UploadRequest upload{name, params->version, staged, sha256, std::move(params->config)};
  ASSIGN_OR_RETURN(UploadResult uploaded, registry_->Upload(std::move(upload)));
  return ModelLoadResult{std::move(uploaded.contract_json)};
}

absl::Status InferenceCore::RepositoryModelUnload(
    const Caller& caller, const inference::RepositoryModelUnloadRequest& request) {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kRepositoryModelUnload));
  return LogIfFailed("RepositoryModelUnload", request.model_name(),
                     registry_->Unload(request.model_name()));
}

absl::Status InferenceCore::SystemSharedMemoryStatus(
    const Caller& caller, const inference::SystemSharedMemoryStatusRequest& request,
    inference::SystemSharedMemoryStatusResponse* response) {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kSystemSharedMemoryStatus));
  auto regions = pipeline_->shared_memory().Status(request.name());
  if (!regions.ok()) {
    return LogIfFailed("SystemSharedMemoryStatus", request.name(), regions.status());
  }
  for (const auto& region : *regions) {
    auto& out = (*response->mutable_regions())[region->name()];
    out.set_name(region->name());
    out.set_key(region->key());
    out.set_offset(region->offset());
    out.set_byte_size(region->byte_size());
  }
  return absl::OkStatus();
}

absl::Status InferenceCore::SystemSharedMemoryRegister(
    const Caller& caller, const inference::SystemSharedMemoryRegisterRequest& request) {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kSystemSharedMemoryRegister));
  return LogIfFailed("SystemSharedMemoryRegister", request.name(),
                     pipeline_->shared_memory().Register(request.name(), request.key(),
                                                         request.offset(), request.byte_size()));
}

absl::Status InferenceCore::SystemSharedMemoryUnregister(
    const Caller& caller, const inference::SystemSharedMemoryUnregisterRequest& request) {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kSystemSharedMemoryUnregister));
  return LogIfFailed("SystemSharedMemoryUnregister", request.name(),
                     pipeline_->shared_memory().Unregister(request.name()));
}

void InferenceCore::ModelInfer(const Caller& caller, const inference::ModelInferRequest& request,
                               inference::ModelInferResponse* response, InferCall call,
                               InferPipeline::Done done, const RawInputs* raw) {
  if (absl::Status allowed = security::Authorize(caller, Rpc::kModelInfer); !allowed.ok()) {
    done(std::move(allowed));
    return;
  }
  pipeline_->Infer(request, response, std::move(call), std::move(done), raw);
}

absl::Status InferenceCore::ModelInferSync(const Caller& caller,
                                           const inference::ModelInferRequest& request,
                                           inference::ModelInferResponse* response,
                                           InferCall call, const RawInputs* raw) {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kModelInfer));
  return pipeline_->InferSync(request, response, std::move(call), raw);
}

}  // namespace kiln::server
