#include "server/security/access_policy.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/status_macros.h"

namespace kiln::server::security {
namespace {

struct RpcRow {
  Rpc rpc;
  const char* method;
  Access access;
};

// The policy. Readiness is public so that probes need no credentials; what
// tells about models or runs them is `infer`; what changes the repository (or
// lists it, with the reasons loads failed) is `admin`.
constexpr RpcRow kRpcs[] = {
    {Rpc::kServerLive, "/inference.GRPCInferenceService/ServerLive", Access::kPublic},
    {Rpc::kServerReady, "/inference.GRPCInferenceService/ServerReady", Access::kPublic},
    {Rpc::kModelReady, "/inference.GRPCInferenceService/ModelReady", Access::kPublic},
    {Rpc::kServerMetadata, "/inference.GRPCInferenceService/ServerMetadata", Access::kInfer},
    {Rpc::kModelMetadata, "/inference.GRPCInferenceService/ModelMetadata", Access::kInfer},
    {Rpc::kModelInfer, "/inference.GRPCInferenceService/ModelInfer", Access::kInfer},
    {Rpc::kModelStatistics, "/inference.GRPCInferenceService/ModelStatistics", Access::kInfer},
    {Rpc::kRepositoryIndex, "/inference.GRPCInferenceService/RepositoryIndex", Access::kAdmin},
    {Rpc::kRepositoryModelLoad, "/inference.GRPCInferenceService/RepositoryModelLoad",
     Access::kAdmin},
    {Rpc::kRepositoryModelUnload, "/inference.GRPCInferenceService/RepositoryModelUnload",
     Access::kAdmin},
    {Rpc::kQueryModelFile, "/kiln.v1.ModelRepositoryService/QueryModelFile", Access::kAdmin},
    {Rpc::kUploadModel, "/kiln.v1.ModelRepositoryService/UploadModel", Access::kAdmin},
    {Rpc::kDeleteModel, "/kiln.v1.ModelRepositoryService/DeleteModel", Access::kAdmin},
    {Rpc::kCacheStatistics, "/kiln.v1.ModelRepositoryService/CacheStatistics", Access::kInfer},
    // Registering makes kilnd map a shared-memory object the caller names and
    // write outputs into it: admin, like the repository.
    {Rpc::kSystemSharedMemoryStatus, "/inference.GRPCInferenceService/SystemSharedMemoryStatus",
     Access::kInfer},
    {Rpc::kSystemSharedMemoryRegister,
     "/inference.GRPCInferenceService/SystemSharedMemoryRegister", Access::kAdmin},
    {Rpc::kSystemSharedMemoryUnregister,
     "/inference.GRPCInferenceService/SystemSharedMemoryUnregister", Access::kAdmin},
};

const RpcRow& Row(Rpc rpc) {
  for (const RpcRow& row : kRpcs) {
    if (row.rpc == rpc) return row;
  }
  return kRpcs[0];  // unreachable: every Rpc has a row (access_policy_test)
}

bool Allows(Role role, Access access) {
  switch (access) {
    case Access::kPublic:
      return true;
    case Access::kInfer:
      return role == Role::kInfer || role == Role::kAdmin;
    case Access::kAdmin:
      return role == Role::kAdmin;
  }
  return false;
}

}  // namespace

absl::string_view RpcMethod(Rpc rpc) { return Row(rpc).method; }

absl::string_view RpcName(Rpc rpc) {
  absl::string_view method = Row(rpc).method;
  return method.substr(method.rfind('/') + 1);
}

Access RequiredAccess(Rpc rpc) { return Row(rpc).access; }

absl::StatusOr<Rpc> RpcForMethod(absl::string_view method) {
  for (const RpcRow& row : kRpcs) {
    if (method == row.method) return row.rpc;
  }
  return absl::NotFoundError(absl::StrCat("no RPC ", method));
}

Authenticator::Authenticator(TokenTable tokens) : enabled_(true), tokens_(std::move(tokens)) {}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::FromFile(const std::string& path) {
  absl::StatusOr<std::string> text = cache::ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("--auth-tokens ", path, ": ", text.status().message()));
  }
  absl::StatusOr<TokenTable> tokens = TokenTable::Parse(*text);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-tokens ", path, ": ", tokens.status().message()));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    spdlog::warn(
        "--auth-tokens {}: the file is readable by every user (mode {:o}); "
        "chmod 600 it, or 0440 for a Kubernetes Secret's defaultMode",
        path, st.st_mode & 0777);
  }
  spdlog::info("authentication: {} bearer token(s) from {}", tokens->size(), path);
  return std::make_unique<Authenticator>(*std::move(tokens));
}

absl::Status Authorize(const Caller& caller, Rpc rpc) {
  const Access access = RequiredAccess(rpc);
  if (!caller.checked() || access == Access::kPublic) return absl::OkStatus();
  if (!caller.role().has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(RpcName(rpc),
                     " needs a bearer token: send 'authorization: Bearer TOKEN' (kilnd runs "
                     "with --auth-tokens)"));
  }
  if (!Allows(*caller.role(), access)) {
    return absl::PermissionDeniedError(
        absl::StrCat(RpcName(rpc), " needs the role 'admin'; this token's role is '",
                     RoleName(*caller.role()), "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Caller> Authenticator::Authenticate(Rpc rpc, absl::string_view authorization) const {
  if (!enabled_) return Caller::Unchecked();
  // Probes need no credentials, and whatever they send is not looked at.
  if (RequiredAccess(rpc) == Access::kPublic) return Caller::Anonymous();
  authorization = absl::StripAsciiWhitespace(authorization);
  // Authorize words the refusal of a missing token.
  if (authorization.empty()) return Authorize(Caller::Anonymous(), rpc);
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !absl::StartsWithIgnoreCase(authorization, kScheme)) {
    return absl::UnauthenticatedError(absl::StrCat(
        RpcName(rpc), ": the authorization is not a bearer token (expected 'Bearer TOKEN')"));
  }
  const absl::string_view token =
      absl::StripLeadingAsciiWhitespace(authorization.substr(kScheme.size()));
  const std::optional<Role> role = tokens_.Find(token);
  if (!role.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(RpcName(rpc), ": the bearer token is not valid"));
  }
  const Caller caller = Caller::WithRole(*role);
  RETURN_IF_ERROR(Authorize(caller, rpc));
  return caller;
}

}  // namespace kiln::server::security
