// The gRPC transport of kilnd, beside server/http/http_server.h: listens on
// HOST:PORT (with TLS from server/security/tls.h when asked) and serves
// GRPCInferenceService and Kiln's ModelRepositoryService over the core
// (server/core/inference_core.h, repository_core.h), and gRPC's health
// service. Each RPC is counted while it runs and logged at debug level when
// it ends.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/security/tls.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace kiln::server {

class InferenceCore;
class InferenceService;
class RepositoryCore;
class RepositoryService;
namespace security {
class Authenticator;
}  // namespace security

struct GrpcServerOptions {
  // "HOST:PORT", IPv6 hosts bracketed; port 0 picks a free one.
  std::string address = "127.0.0.1:8001";
  // The largest message received or sent (a model upload is one message).
  int max_message_bytes = 1 << 30;
  // RPCs being handled now: incremented and decremented around each one
  // (shared with the HTTP front end, for the shutdown log). May be null.
  std::atomic<int>* in_flight = nullptr;
  // TLS with these files; plain gRPC when empty.
  security::TlsFiles tls;
};

class GrpcServer {
 public:
  // Binds the address and starts serving the services over `inference` and
  // `repository`, checked by `auth` (null: no checks); the three must outlive
  // the server. Fails with InvalidArgument for TLS files that do not make a
  // certificate and its key, Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options,
                                                           InferenceCore* inference,
                                                           RepositoryCore* repository,
                                                           const security::Authenticator* auth);
  ~GrpcServer();

  // The bound port (the chosen one when the address's port was 0).
  int port() const { return port_; }

  // Blocks until Shutdown() has completed.
  void Wait();

  // Stops accepting calls and waits for those in flight; what still runs at
  // `deadline` is cancelled.
  void Shutdown(std::chrono::system_clock::time_point deadline);

 private:
  GrpcServer() = default;

  // Declared before the server, so they outlive it.
  std::unique_ptr<InferenceService> inference_;
  std::unique_ptr<RepositoryService> repository_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace kiln::server
