#include "server/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>
#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "server/grpc/inference_service.h"
#include "server/grpc/repository_service.h"
#include "server/security/access_policy.h"

namespace kiln::server {
namespace {

// One debug line per RPC when it ends (method, status, time) and the count of
// RPCs in flight, which shutdown reports while it drains. Health probes log at
// trace level: an orchestrator sends one every few seconds.
//
// ModelInfer goes without it unless debug lines are logged: gRPC 1.51 passes
// each batch of a call that has an interceptor through the completion queue
// once more after the interceptor has run (CallOpSet's
// ContinueFinalizeResultAfterInterception starts an empty batch), which for a
// callback handler is more work and thread switches on every call
// (docs/performance.md: one to two fewer switches per call in gRPC's
// threads without it). ModelInfer counts itself in flight and logs its own
// start (inference_service.cc), so that a call logged as started is always one
// shutdown counts as in flight.
class RequestInterceptor : public grpc::experimental::Interceptor {
 public:
  // `handler_counts`: the RPC's handler counts it in `in_flight` and logs its
  // start; this interceptor logs only its end.
  RequestInterceptor(grpc::experimental::ServerRpcInfo* info, std::atomic<int>* in_flight,
                     bool handler_counts)
      : method_(info->method()),
        in_flight_(in_flight),
        handler_counts_(handler_counts),
        level_(method_.rfind("/grpc.health.", 0) == 0 ? spdlog::level::trace
                                                      : spdlog::level::debug) {}

  ~RequestInterceptor() override {
    if (started_ && counts()) in_flight_->fetch_sub(1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using Hook = grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(Hook::POST_RECV_INITIAL_METADATA) && !started_) {
      started_ = true;
      start_ = std::chrono::steady_clock::now();
      if (!handler_counts_) {
        const int n = counts() ? in_flight_->fetch_add(1) + 1 : 0;
        spdlog::log(level_, "rpc {} started ({} in flight)", method_, n);
      }
    }
    if (methods->QueryInterceptionHookPoint(Hook::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
              .count();
      spdlog::log(
          level_, "rpc {} {} in {:.1f} ms", method_,
          status.ok() ? std::string("OK") : absl::StrCat("failed (code ", status.error_code(), ")"),
          ms);
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  std::atomic<int>* const in_flight_;
  bool counts() const { return !handler_counts_ && in_flight_ != nullptr; }

  const bool handler_counts_;
  const spdlog::level::level_enum level_;
  bool started_ = false;
  std::chrono::steady_clock::time_point start_;
};

class RequestInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RequestInterceptorFactory(std::atomic<int>* in_flight) : in_flight_(in_flight) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (security::RpcMethod(security::Rpc::kModelInfer) == info->method()) {
      if (!spdlog::should_log(spdlog::level::debug)) return nullptr;
      return new RequestInterceptor(info, in_flight_, /*handler_counts=*/true);
    }
    return new RequestInterceptor(info, in_flight_, /*handler_counts=*/false);
  }

 private:
  std::atomic<int>* const in_flight_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                              InferenceCore* inference,
                                                              RepositoryCore* repository,
                                                              const security::Authenticator* auth) {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  ASSIGN_OR_RETURN(credentials, security::GrpcServerCredentials(options.tls));
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  server->inference_ = std::make_unique<InferenceService>(inference, auth, options.in_flight);
  server->repository_ = std::make_unique<RepositoryService>(repository, auth);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT on its listening sockets by default: another
  // process could then bind the same port and take a share of the
  // connections, and port 0 could end up with more than the one port
  // advertised. One socket, bound once.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.address, credentials, &server->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(server->inference_.get());
  builder.RegisterService(server->repository_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<RequestInterceptorFactory>(options.in_flight));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address));
  }
  return server;
}

GrpcServer::~GrpcServer() = default;

void GrpcServer::Wait() { server_->Wait(); }

void GrpcServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  server_->Shutdown(deadline);
}

}  // namespace kiln::server
