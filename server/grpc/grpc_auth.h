// The authentication check of the gRPC handlers: each handler starts with
//   if (grpc::Status s = Authorize(auth, *context, Rpc::kX); !s.ok()) return s;
// (gRPC 1.51's server interceptors cannot end a call before its handler runs.)
#pragma once

#include <grpcpp/server_context.h>

#include "server/security/access_policy.h"

namespace kiln::server::security {

// Authenticator::Check on the call's "authorization" metadata; a refusal is
// logged (the RPC, the peer and why, never the token) and returned as the
// call's status. `auth` null: no check.
grpc::Status Authorize(const Authenticator* auth, const grpc::ServerContextBase& context, Rpc rpc);

}  // namespace kiln::server::security
