#include "server/core/repository_core.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/status_macros.h"
#include "server/core/call_log.h"

namespace kiln::server {
namespace {

using security::Caller;
using security::Rpc;

absl::Status CheckSha256(absl::string_view sha256) {
  if (cache::IsSha256Hex(sha256)) return absl::OkStatus();
  return absl::InvalidArgumentError("sha256 must be 64 lowercase hex digits");
}

}  // namespace

RepositoryCore::RepositoryCore(ModelRegistry* registry, UploadStore* uploads,
                               uint64_t max_upload_bytes)
    : registry_(registry), uploads_(uploads), max_upload_bytes_(max_upload_bytes) {}

absl::Status RepositoryCore::QueryModelFile(const Caller& caller,
                                            const v1::QueryModelFileRequest& request,
                                            v1::QueryModelFileResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kQueryModelFile));
  absl::Status status = CheckSha256(request.sha256());
  if (!status.ok()) return LogIfFailed("QueryModelFile", "", status);
  const bool present = registry_->FindFile(request.sha256(), request.size()).has_value();
  response->set_present(present);
  response->set_received_bytes(present ? 0 : uploads_->Received(request.sha256(), request.size()));
  return absl::OkStatus();
}

absl::Status RepositoryCore::UploadModel(const Caller& caller, const UploadReader& read,
                                         v1::UploadModelResponse* response) {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kUploadModel));
  v1::UploadModelRequest message;
  if (!read(&message) || message.part_case() != v1::UploadModelRequest::kHeader) {
    return LogIfFailed("UploadModel", "",
                       absl::InvalidArgumentError("an upload starts with an UploadHeader message"));
  }
  const v1::UploadHeader header = message.header();
  const std::string& name = header.model_name();
  auto fail = [&](const absl::Status& s) { return LogIfFailed("UploadModel", name, s); };
  absl::Status status = ValidateModelName(name);
  if (status.ok()) status = CheckSha256(header.sha256());
  if (!status.ok()) return fail(status);
  // Before a byte is stored: a version out of range could never be served.
  status = CheckVersion(header.version(), "the next version");
  if (!status.ok()) return fail(status);
  if (header.total_size() > max_upload_bytes_) {
    return fail(absl::ResourceExhaustedError(absl::StrCat(
        "model upload of ", header.total_size(), " bytes exceeds the server's limit of ",
        max_upload_bytes_, " bytes (--max-upload-bytes)")));
  }
  if (header.offset() > header.total_size()) {
    return fail(absl::InvalidArgumentError("offset is past the declared size"));
  }

  std::string staged;
  std::unique_ptr<UploadStore::Session> session;
  uint64_t received = 0;
  const std::optional<std::string> known =
      registry_->FindFile(header.sha256(), header.total_size());
  if (known.has_value() && header.offset() == header.total_size()) {
    // The server has this file already: nothing was sent, install a copy.
    absl::StatusOr<std::string> clone = registry_->repository().CloneToStaging(*known);
    if (!clone.ok()) return fail(clone.status());
    staged = *clone;
    while (read(&message)) {
      if (message.part_case() == v1::UploadModelRequest::kChunk && !message.chunk().empty()) {
        ::unlink(staged.c_str());
        return fail(absl::InvalidArgumentError("chunks after offset == total_size"));
      }
    }
  } else {
    absl::StatusOr<std::unique_ptr<UploadStore::Session>> begun =
        uploads_->Begin(header.sha256(), header.total_size(), header.offset());
    if (!begun.ok()) return fail(begun.status());
    session = *std::move(begun);
    while (read(&message)) {
      if (message.part_case() != v1::UploadModelRequest::kChunk) {
        return fail(absl::InvalidArgumentError("only chunks may follow the header"));
      }
      status = session->Append(message.chunk());
      if (!status.ok()) return fail(status);
      received += message.chunk().size();
    }
    // The stream ended: complete, or cut off (then the bytes are kept).
    absl::StatusOr<std::string> complete = session->Finish();
    if (!complete.ok()) return fail(complete.status());
    staged = *complete;
  }

  UploadRequest upload{name, header.version(), staged, header.sha256(), std::nullopt};
  if (header.has_config_json()) upload.config_json = header.config_json();
  // The session stays open (holding this content's slot) until the file is
  // installed. A failed load was logged by the registry.
  ASSIGN_OR_RETURN(UploadResult result, registry_->Upload(std::move(upload)));
  response->set_model_name(name);
  response->set_version(result.version);
  response->set_sha256(header.sha256());
  response->set_bytes_received(received);
  response->set_unchanged(result.unchanged);
  response->set_load_ms(result.load_ms);
  response->set_dry_run(result.dry_run);
  response->set_contract_json(result.contract_json);
  spdlog::info("upload of model {}:{} done: {} byte(s) received in this call{}", name,
               result.version, received, result.unchanged ? ", unchanged" : "");
  return absl::OkStatus();
}

absl::Status RepositoryCore::DeleteModel(const Caller& caller,
                                         const v1::DeleteModelRequest& request) {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kDeleteModel));
  absl::Status status = CheckVersion(request.version(), "every version");
  if (status.ok()) status = registry_->Delete(request.model_name(), request.version());
  return LogIfFailed("DeleteModel", request.model_name(), status);
}

absl::Status RepositoryCore::CacheStatistics(const Caller& caller,
                                             const v1::CacheStatisticsRequest& request,
                                             v1::CacheStatisticsResponse* response) const {
  RETURN_IF_ERROR(security::Authorize(caller, Rpc::kCacheStatistics));
  absl::Status checked = CheckVersion(request.version(), "every version");
  if (!checked.ok()) return LogIfFailed("CacheStatistics", request.model_name(), checked);
  auto stats = registry_->Statistics(request.model_name(), request.version());
  if (!stats.ok()) return LogIfFailed("CacheStatistics", request.model_name(), stats.status());
  for (const VersionStatistics& v : *stats) {
    v1::ModelCacheStatistics* out = response->add_models();
    out->set_model_name(v.name);
    out->set_version(v.version);
    out->set_sha256(v.sha256);
    out->set_state(std::string(ModelStateName(v.state)));
    out->set_load_ms(static_cast<double>(v.load.load_ns) / 1e6);
    out->set_graph_source(v.load.graph_source);
    out->set_import_ms(static_cast<double>(v.load.import_ns) / 1e6);
    out->set_plan_memory_hits(v.plans.memory_hits);
    out->set_plan_disk_hits(v.plans.disk_hits);
    out->set_plan_misses(v.plans.misses);
    out->set_plan_evictions(v.plans.evictions);
    out->set_compile_count(v.plans.compile_count);
    out->set_compile_ms(static_cast<double>(v.plans.compile_ns) / 1e6);
    out->set_bytes_held(v.plans.bytes_held);
    out->set_weight_bytes(v.weight_bytes);
  }
  const cache::CacheTotals t = registry_->cache().Totals();
  v1::CacheTotals* totals = response->mutable_totals();
  totals->set_memory_limit_bytes(t.memory_limit_bytes);
  totals->set_memory_bytes(t.memory_bytes);
  totals->set_memory_entries(t.memory_entries);
  totals->set_evictions(t.evictions);
  totals->set_disk_dir(t.disk_dir);
  totals->set_disk_graph_hits(t.disk_graph_hits);
  totals->set_disk_graph_misses(t.disk_graph_misses);
  totals->set_disk_plan_hits(t.disk_plan_hits);
  totals->set_disk_plan_misses(t.disk_plan_misses);
  totals->set_disk_corrupt(t.disk_corrupt);
  totals->set_disk_writes(t.disk_writes);
  totals->set_packed_hits(t.packed_hits);
  totals->set_packed_writes(t.packed_writes);
  totals->set_disk_bytes(t.disk_bytes);
  totals->set_disk_limit_bytes(t.disk_limit_bytes);
  totals->set_disk_evictions(t.disk_evictions);
  return absl::OkStatus();
}

}  // namespace kiln::server
