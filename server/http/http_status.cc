#include "server/http/http_status.h"

#include <nlohmann/json.hpp>

#include "engine/common/json_text.h"

namespace kiln::server::http {

// Spelled out, like server/grpc/grpc_status.cc: the table says which status each
// code is meant to send. Triton maps its codes in HttpCodeFromError
// (src/http_server.cc); Kiln has more codes than Triton, and those follow
// google/rpc/code.proto's "HTTP Mapping" comments.
int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:  // Triton: 400 (google.rpc: 409)
    case absl::StatusCode::kCancelled:      // Triton: 400 (google.rpc: 499)
    case absl::StatusCode::kUnknown:        // Triton: 400 (google.rpc: 500)
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
      return 500;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;  // abseil's reserved future codes
  }
}

std::string ErrorBody(const std::string& message) {
  // A message may quote a client's bytes that are not UTF-8; the body must
  // still be valid JSON.
  return JsonText(nlohmann::json{{"error", message}});
}

std::string ErrorBody(const absl::Status& status) { return ErrorBody(std::string(status.message())); }

}  // namespace kiln::server::http
