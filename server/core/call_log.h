// The one log line of a failed call, whichever front end it came by.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

// Logs "WHAT 'MODEL' failed: CODE: MESSAGE" at warning level. The model name
// is the client's: it is escaped, so it cannot forge log lines.
void LogFailedCall(absl::string_view what, absl::string_view model, const absl::Status& status);

// `status`, logged by LogFailedCall when it is a failure.
absl::Status LogIfFailed(absl::string_view what, absl::string_view model, absl::Status status);

}  // namespace kiln::server
