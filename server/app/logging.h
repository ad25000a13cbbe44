// kilnd's log: one line per event on stderr, as text or as JSON lines.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace kiln::server {

// Installs the default spdlog logger writing to stderr. `level` is
// trace|debug|info|warn|error; `format` is "text" (`TIME LEVEL message`) or
// "json" (one object per line: time, level, logger, msg). Newlines inside a
// message are escaped, so every event stays one line either way; a text line
// also escapes control bytes and bytes that are not UTF-8 (\xNN), and JSON
// replaces the latter with U+FFFD. gRPC's own
// log lines go through the same logger. InvalidArgument for an unknown level
// or format.
absl::Status SetUpLogging(const std::string& level, const std::string& format);

}  // namespace kiln::server
