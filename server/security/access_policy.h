// Who may call what: the one table of Kiln's RPCs and the role each needs, and
// the check both front ends run before a request does anything
// (Authenticator::Authenticate). gRPC handlers call it with the request's
// "authorization" metadata (server/grpc/grpc_auth.h), the HTTP routes with
// the Authorization header of the request; each HTTP route names the RPC it
// translates to, so one table serves both protocols. What it returns, the
// Caller, is all the core (server/core/inference_core.h) knows of who asks.
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
#include <optional>
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

// Who makes a call, as authenticating its credentials found: the role of its
// bearer token, no role for a public call (no token is looked at), or
// unchecked when the server runs without authentication.
class Caller {
 public:
  // A caller of a server without --auth-tokens: may make every call.
  static Caller Unchecked() { return Caller(/*checked=*/false, std::nullopt); }
  // A caller whose token was not looked at: may make public calls.
  static Caller Anonymous() { return Caller(/*checked=*/true, std::nullopt); }
  // A caller with a valid token of `role`.
  static Caller WithRole(Role role) { return Caller(/*checked=*/true, role); }

  bool checked() const { return checked_; }
  const std::optional<Role>& role() const { return role_; }

 private:
  Caller(bool checked, std::optional<Role> role) : checked_(checked), role_(role) {}

  bool checked_;
  std::optional<Role> role_;
};

// OK when `caller` may make `rpc`: Unauthenticated for an anonymous caller of
// a call that is not public, PermissionDenied when its role lacks the right.
absl::Status Authorize(const Caller& caller, Rpc rpc);

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

  // The caller `authorization` (the header's or metadata entry's value; empty
  // when absent) identifies, when it may make `rpc` (Authorize).
  // Unauthenticated without a valid bearer token, PermissionDenied when its
  // role may not make the call. The messages never quote the token.
  absl::StatusOr<Caller> Authenticate(Rpc rpc, absl::string_view authorization) const;

  // Authenticate's verdict alone.
  absl::Status Check(Rpc rpc, absl::string_view authorization) const {
    return Authenticate(rpc, authorization).status();
  }

 private:
  bool enabled_ = false;
  TokenTable tokens_;
};

}  // namespace kiln::server::security
