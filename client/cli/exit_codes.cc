#include "client/cli/exit_codes.h"

#include "absl/strings/str_cat.h"

namespace kiln::cli {
namespace {

struct Row {
  int exit_code;
  const char* meaning;
  // Status codes mapped to it; the last row takes every code not listed.
  absl::StatusCode codes[3];
};

using C = absl::StatusCode;
constexpr C kNone = C::kOk;  // padding: kOk is never looked up

// Grouped by what a script would do next: fix the command, retry, wait, or give up.
constexpr Row kTable[] = {
    {kExitOk, "success", {kNone, kNone, kNone}},
    {kExitUsage, "usage: bad command line (unknown flag, missing argument)", {kNone, kNone, kNone}},
    {2, "server unreachable or shutting down (UNAVAILABLE)", {C::kUnavailable, kNone, kNone}},
    {3, "invalid argument: bad input value, shape, datatype or model file (INVALID_ARGUMENT)",
     {C::kInvalidArgument, C::kOutOfRange, kNone}},
    {4, "not found: unknown model or version, missing local file (NOT_FOUND)",
     {C::kNotFound, kNone, kNone}},
    {5, "deadline exceeded: no answer within --timeout (DEADLINE_EXCEEDED)",
     {C::kDeadlineExceeded, kNone, kNone}},
    {6, "not ready: model or server not ready (FAILED_PRECONDITION, ABORTED)",
     {C::kFailedPrecondition, C::kAborted, kNone}},
    {7, "unsupported: op, datatype or RPC the server does not implement (UNIMPLEMENTED)",
     {C::kUnimplemented, kNone, kNone}},
    {8, "too large: upload or tensor over a server limit (RESOURCE_EXHAUSTED)",
     {C::kResourceExhausted, kNone, kNone}},
    {9, "refused: PERMISSION_DENIED, UNAUTHENTICATED, ALREADY_EXISTS",
     {C::kPermissionDenied, C::kUnauthenticated, C::kAlreadyExists}},
    {10, "any other error (INTERNAL, UNKNOWN, CANCELLED, DATA_LOSS)", {kNone, kNone, kNone}},
};

}  // namespace

int ExitCodeFor(absl::StatusCode code) {
  for (const Row& row : kTable) {
    for (C c : row.codes) {
      if (c != kNone && c == code) return row.exit_code;
    }
  }
  return kTable[sizeof(kTable) / sizeof(kTable[0]) - 1].exit_code;
}

std::string ExitCodeTable() {
  std::string out = "Exit status:\n";
  for (const Row& row : kTable) {
    absl::StrAppend(&out, row.exit_code < 10 ? "   " : "  ", row.exit_code, "  ", row.meaning, "\n");
  }
  return out;
}

}  // namespace kiln::cli
