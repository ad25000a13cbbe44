// The authentication of the gRPC handlers: each handler starts with
//   return Serve(auth, *context, Rpc::kX, [&](const Caller& caller) { ... });
// (gRPC 1.51's server interceptors cannot end a call before its handler runs.)
#pragma once

#include <grpcpp/server_context.h>

#include <utility>

#include "absl/status/statusor.h"
#include "server/grpc/grpc_status.h"
#include "server/security/access_policy.h"

namespace kiln::server::security {

// Authenticator::Authenticate on the call's "authorization" metadata; a
// refusal is logged (the RPC, the peer and why, never the token) and
// returned. `auth` null: Caller::Unchecked().
absl::StatusOr<Caller> Authenticate(const Authenticator* auth,
                                    const grpc::ServerContextBase& context, Rpc rpc);

// The body of a unary handler: authenticates the call for `rpc`, runs
// `op(caller)` (an absl::Status) when it is admitted, and maps the status.
template <typename Op>
grpc::Status Serve(const Authenticator* auth, const grpc::ServerContextBase& context, Rpc rpc,
                   Op&& op) {
  absl::StatusOr<Caller> caller = Authenticate(auth, context, rpc);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return ToGrpcStatus(std::forward<Op>(op)(*caller));
}

}  // namespace kiln::server::security
