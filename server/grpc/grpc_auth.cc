#include "server/grpc/grpc_auth.h"

#include <spdlog/spdlog.h>

#include "absl/strings/escaping.h"
#include "server/grpc/grpc_status.h"

namespace kiln::server::security {

grpc::Status Authorize(const Authenticator* auth, const grpc::ServerContextBase& context, Rpc rpc) {
  if (auth == nullptr || !auth->enabled()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const absl::string_view value = it == metadata.end()
                                      ? absl::string_view()
                                      : absl::string_view(it->second.data(), it->second.size());
  const absl::Status status = auth->Check(rpc, value);
  if (status.ok()) return grpc::Status::OK;
  spdlog::warn("refused {} from {}: {}", std::string(RpcName(rpc)),
               absl::CHexEscape(context.peer()), std::string(status.message()));
  return ToGrpcStatus(status);
}

}  // namespace kiln::server::security
