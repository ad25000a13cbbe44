// kiln's exit statuses: one table from absl/gRPC status codes to the number a
// script can test, also printed by `kiln --help`.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace kiln::cli {

constexpr int kExitOk = 0;
// A command line CLI11 cannot parse: unknown flag, missing argument.
constexpr int kExitUsage = 1;

// The exit status for a failed command's status (never 0 or kExitUsage).
int ExitCodeFor(absl::StatusCode code);

// The table as text, one "  N  meaning" line per status, for --help.
std::string ExitCodeTable();

}  // namespace kiln::cli
