#include "server/grpc/grpc_auth.h"

#include <spdlog/spdlog.h>

#include "absl/strings/escaping.h"

namespace kiln::server::security {

absl::StatusOr<Caller> Authenticate(const Authenticator* auth,
                                    const grpc::ServerContextBase& context, Rpc rpc) {
  if (auth == nullptr) return Caller::Unchecked();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const absl::string_view value = it == metadata.end()
                                      ? absl::string_view()
                                      : absl::string_view(it->second.data(), it->second.size());
  absl::StatusOr<Caller> caller = auth->Authenticate(rpc, value);
  if (!caller.ok()) {
    spdlog::warn("refused {} from {}: {}", std::string(RpcName(rpc)),
                 absl::CHexEscape(context.peer()), std::string(caller.status().message()));
  }
  return caller;
}

}  // namespace kiln::server::security
