// The one place where Kiln's absl::Status becomes a gRPC status. Handlers return
// ToGrpcStatus(status) and never build grpc::Status themselves.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace kiln::server {

// Maps `status` to the gRPC status with the same code (the canonical codes are
// numerically identical) and the same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace kiln::server
