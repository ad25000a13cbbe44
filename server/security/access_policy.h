// Who may call what: the one table of Kiln's RPCs and the role each needs, and
// the check both front ends run before a request does anything
// (Authenticator::Check). gRPC handlers call it with the request's
// "authorization" metadata (server/grpc/grpc_auth.h), the HTTP routes with
// the Authorization header of the request; each HTTP route names the RPC it
// translates to, so one table serves both protocols.
//
//   public  liveness and readiness (probes), and /metrics on its own port
//   infer   server and model metadata, statistics, inference, the status of
//           shared-memory regions
//   admin   all of the above, and load, upload, unload, delete, repository index,
//           registering and unregistering shared-memory regions (kilnd maps the
//           named object and may write outputs into it)
//
// A token is sent as "Bearer TOKEN". No token, or one that is not in the
// token file, is Unauthenticated; a token whose role lacks the right is
// PermissionDenied. Without a token file every RPC is allowed (kilnd's
// behaviour before authentication existed).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/security/tokens.h"

namespace kiln::server::security {

// Every RPC of GRPCInferenceService and kiln.v1.ModelRepositoryService.
enum class Rpc {
  kServerLive,
  kServerReady,
  kModelReady,
  kServerMetadata,
  kModelMetadata,
  kModelInfer,
  kModelStatistics,
  kRepositoryIndex,
  kRepositoryModelLoad,
  kRepositoryModelUnload,
  kQueryModelFile,
  kUploadModel,
  kDeleteModel,
  kCacheStatistics,
  kSystemSharedMemoryStatus,
  kSystemSharedMemoryRegister,
  kSystemSharedMemoryUnregister,
};

// What a caller must hold to make an RPC.
enum class Access { kPublic, kInfer, kAdmin };

// The RPC's full gRPC method name ("/inference.GRPCInferenceService/ModelInfer").
absl::string_view RpcMethod(Rpc rpc);
// The RPC's short name ("ModelInfer"), for messages.
absl::string_view RpcName(Rpc rpc);
// The access the table gives `rpc`.
Access RequiredAccess(Rpc rpc);
// The RPC whose full method name is `method`; NotFound for any other.
absl::StatusOr<Rpc> RpcForMethod(absl::string_view method);

class Authenticator {
 public:
  // Checks nothing: every call is allowed (no --auth-tokens).
  Authenticator() = default;
  explicit Authenticator(TokenTable tokens);

  // Reads and parses --auth-tokens FILE (tokens.h). InvalidArgument naming
  // the line for a malformed file, NotFound when it cannot be read.
  static absl::StatusOr<std::unique_ptr<Authenticator>> FromFile(const std::string& path);

  // Whether tokens are checked at all.
  bool enabled() const { return enabled_; }

  // OK when `authorization` (the header's or metadata entry's value; empty
  // when absent) allows `rpc`. Unauthenticated without a valid bearer token,
  // PermissionDenied when its role may not make the call. The messages never
  // quote the token.
  absl::Status Check(Rpc rpc, absl::string_view authorization) const;

 private:
  bool enabled_ = false;
  TokenTable tokens_;
};

}  // namespace kiln::server::security
