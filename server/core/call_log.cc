#include "server/core/call_log.h"

#include <spdlog/spdlog.h>

#include <string>

#include "absl/strings/escaping.h"

namespace kiln::server {

void LogFailedCall(absl::string_view what, absl::string_view model, const absl::Status& status) {
  spdlog::warn("{} '{}' failed: {}: {}", std::string(what), absl::CHexEscape(model),
               absl::StatusCodeToString(status.code()), std::string(status.message()));
}

absl::Status LogIfFailed(absl::string_view what, absl::string_view model, absl::Status status) {
  if (!status.ok()) LogFailedCall(what, model, status);
  return status;
}

}  // namespace kiln::server
