#include "server/torch/torch_reference_client.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/status_macros.h"
#include "server/torch/torch_backend.h"
#include "server/torch/torch_reference_codec.h"

namespace kiln::server {

ChildTorchReference::ChildTorchReference(std::string worker_binary, std::string model_path,
                                         std::string scratch_dir, ImportLimits limits,
                                         std::chrono::steady_clock::time_point deadline)
    : worker_binary_(std::move(worker_binary)),
      model_path_(std::move(model_path)),
      scratch_dir_(std::move(scratch_dir)),
      limits_(std::move(limits)),
      deadline_(deadline) {}

absl::StatusOr<verify::ReferenceResult> ChildTorchReference::Run(
    const verify::ReferenceRequest& request) {
  const std::string base = (std::filesystem::path(scratch_dir_) /
                            absl::StrCat(cache::kTempPrefix, "reference-", cache::UniqueSuffix()))
                               .string();
  const std::string request_path = base + ".request";
  struct RemoveOnExit {
    const std::string& path;
    ~RemoveOnExit() { ::unlink(path.c_str()); }
  } remove_request{request_path};
  const std::string serialized = ReferenceRequestToProto(request).SerializeAsString();
  RETURN_IF_ERROR(cache::WriteFileAtomically(request_path, serialized));
  ImportAnswer answer;
  answer.path = base + ".answer";
  answer.key = "reference";
  ImportLimits limits = limits_;
  limits.timeout_s = static_cast<int>(std::max<int64_t>(
      1, std::chrono::ceil<std::chrono::seconds>(deadline_ - std::chrono::steady_clock::now())
             .count()));
  ASSIGN_OR_RETURN(cache::Payload payload, ReferenceInChildProcess(worker_binary_, model_path_,
                                                                   request_path, answer, limits));
  v1::ReferenceAnswer proto;
  if (!proto.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::InternalError("the verified import's libtorch run answered what does not parse");
  }
  return ReferenceResultFromProto(proto);
}

absl::StatusOr<verify::ReferenceResult> InProcessTorchReference::Run(
    const verify::ReferenceRequest& request) {
  return torch::RunReference(bytes_, request);
}

}  // namespace kiln::server
