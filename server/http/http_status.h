// The one place where Kiln's absl::Status becomes an HTTP status, as
// server/grpc/grpc_status.h is for gRPC: both front ends map the same code, so a
// client sees the same error whichever protocol it speaks.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace kiln::server::http {

// The HTTP status for `code`: Triton's mapping where Triton has the code
// (NOT_FOUND 404, UNAVAILABLE 503, UNIMPLEMENTED 501, INTERNAL 500, and 400 for
// INVALID_ARGUMENT, ALREADY_EXISTS, CANCELLED, UNKNOWN), and for the codes
// Triton never sends, the HTTP mapping google.rpc.Code documents
// (DEADLINE_EXCEEDED 504, RESOURCE_EXHAUSTED 429, FAILED_PRECONDITION 400,
// PERMISSION_DENIED 403, UNAUTHENTICATED 401, ABORTED 409, OUT_OF_RANGE 400,
// DATA_LOSS 500). OK is 200.
int HttpStatusFor(absl::StatusCode code);

// The error body every failed request gets: {"error": "<message>"}.
std::string ErrorBody(const absl::Status& status);
std::string ErrorBody(const std::string& message);

}  // namespace kiln::server::http
