#include "server/app/server.h"

#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/arena_check.h"
#include "engine/runtime/arena_pool.h"
#include "server/core/inference_core.h"
#include "server/core/model_registry.h"
#include "server/core/model_repository.h"
#include "server/core/repository_core.h"
#include "server/core/thread_name.h"
#include "server/core/upload_store.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_server.h"
#include "server/http/kserve_routes.h"
#include "server/local/local_server.h"
#include "server/metrics/server_metrics.h"
#include "server/scheduler/compute_pool.h"
#include "server/security/access_policy.h"
#include "server/security/tls.h"

namespace kiln::server {
namespace {

// gRPC's default 4 MiB receive limit would reject any real model upload; a
// 200 MB TorchScript file plus framing must fit, and so must the configured
// upload limit (the handler enforces that limit with a clear message).
constexpr int64_t kMinMessageBytes = int64_t{1} << 30;
constexpr int64_t kMessageOverheadBytes = int64_t{16} << 20;

// An arena block no run has taken for this long is freed (the sweeper looks
// every few seconds to a minute): a burst's extra blocks leave after it, the
// blocks steady traffic reuses stay.
constexpr std::chrono::seconds kArenaIdle{30};

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

// Whether `host` only accepts connections from this machine.
bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", options.port, " is out of range"));
  }
  if (options.http_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP port ", options.http_port, " is out of range"));
  }
  if (options.metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", options.metrics_port, " is out of range"));
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 1, got ", options.threads));
  }

  if (options.load_timeout_s < 1 || options.request_timeout_s < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("load and request timeouts must be >= 1 s, got ", options.load_timeout_s,
                     " and ", options.request_timeout_s));
  }
  if (options.max_request_memory_bytes == 0) {
    return absl::InvalidArgumentError("the per-request memory limit must be positive");
  }

  // Credentials first: a bad token file or certificate stops start-up before
  // any model is loaded.
  if (options.tls.enabled()) RETURN_IF_ERROR(security::ValidateTlsFiles(options.tls));
  std::unique_ptr<security::Authenticator> auth;
  if (options.auth_tokens_file.empty()) {
    auth = std::make_unique<security::Authenticator>();
  } else {
    ASSIGN_OR_RETURN(auth, security::Authenticator::FromFile(options.auth_tokens_file));
  }

  std::unique_ptr<Server> server(new Server());
  server->host_ = options.host;
  server->auth_ = std::move(auth);
  RunLimits limits;
  limits.request_timeout_s = options.request_timeout_s;
  limits.load_timeout_s = options.load_timeout_s;
  limits.max_request_memory_bytes = options.max_request_memory_bytes;
  server->stopping_ = limits.stopping;
  ASSIGN_OR_RETURN(server->repository_, ModelRepository::Open(options.model_repository));
  cache::CacheOptions cache_options;
  cache_options.dir = options.cache_dir;
  cache_options.memory_bytes = options.cache_bytes;
  cache_options.disk_bytes = options.cache_disk_bytes;
  // The compute threads, planned first: a load pins its team as the first one does.
  ComputeOptions compute;
  {
    const std::vector<int> allowed = kernels::AllowedCpus();
    const std::optional<int> quota = kernels::CpuQuotaCores();
    // As many requests as the usable CPUs (the affinity mask, within a
    // container's CPU limit) hold at --threads threads each.
    compute.threads = options.concurrent_inferences > 0
                          ? options.concurrent_inferences
                          : std::max(1, kernels::UsableCpus(allowed, quota) /
                                            std::max(1, options.threads));
    compute.team_threads = options.threads;
    compute.split_teams = options.split_teams;
    compute.team_cpus = kernels::PlanTeamCpus(compute.threads, options.threads,
                                              options.pin_threads, allowed, quota);
    std::string pinned;
    for (const auto& team : compute.team_cpus)
      if (!team.empty()) absl::StrAppend(&pinned, pinned.empty() ? "" : " | ", absl::StrJoin(team, ","));
    spdlog::info("compute: {} thread(s) x {} intra-op thread(s){}; {} CPU(s) allowed, CPU limit {}; "
                 "--pin-threads {}: {}",
                 compute.threads, options.threads,
                 options.split_teams && options.threads > 1
                     ? absl::StrCat(", split into ", options.threads,
                                    " single-thread runs each while requests wait")
                     : std::string(),
                 allowed.size(),
                 quota ? absl::StrCat(*quota, " core(s)") : std::string("none"),
                 std::string(kernels::ThreadPinningName(options.pin_threads)),
                 pinned.empty() ? std::string("not pinned") : "CPUs " + pinned);
  }
  RegistryOptions registry_options;
  if (!compute.team_cpus.empty()) registry_options.load_team_cpus = compute.team_cpus.front();
  ASSIGN_OR_RETURN(registry_options.cache, cache::CompiledGraphCache::Create(cache_options));
  registry_options.compile.num_threads = options.threads;
  registry_options.split_teams = compute.split_teams;
  registry_options.torch_worker = options.torch_worker;
  registry_options.import_worker = options.import_worker;
  registry_options.import_limits.memory_bytes = options.import_memory_bytes;
  registry_options.import_limits.timeout_s = options.load_timeout_s;
  registry_options.import_limits.sandbox = options.import_sandbox;
  if (options.import_sandbox && !options.torch_worker.empty()) {
    // The sandboxed child's root: empty and read-only, on the repository's
    // file system (kilnd may write there, so it can make the directory).
    const std::string root = server->repository_->StagingDir() + "/.sandbox-root";
    ::mkdir(root.c_str(), 0555);
    registry_options.import_limits.sandbox_root = root;
  }
  registry_options.limits = limits;
  registry_options.verify_on_first_use = options.verify_on_first_use;
  spdlog::info("imports run {}",
               options.torch_worker.empty()
                   ? std::string("in this process")
                   : absl::StrCat("in a child process (limits: ", options.import_memory_bytes >> 20,
                                  " MiB, ", options.load_timeout_s, " s; ",
                                  options.import_sandbox ? "sandboxed" : "not sandboxed", ")"));
  spdlog::info("limits: {} per request, requests {} s, loads {} s",
               BytesToString(options.max_request_memory_bytes), options.request_timeout_s,
               options.load_timeout_s);
  server->registry_ =
      std::make_unique<ModelRegistry>(server->repository_.get(), std::move(registry_options));
  // Load before listening, so ServerReady is true from the first request on.
  server->registry_->LoadAll();

  InferenceCoreOptions core_options;
  core_options.max_upload_bytes = options.max_upload_bytes;
  core_options.limits = limits;
  core_options.compute = std::move(compute);
  server->inference_core_ = std::make_unique<InferenceCore>(server->registry_.get(), core_options);
  if (options.uploads.max_partial_uploads < 1 || options.uploads.max_partial_bytes == 0 ||
      options.uploads.ttl.count() < 1) {
    return absl::InvalidArgumentError(
        "the partial-upload limits (count, bytes, TTL) must be positive");
  }
  server->uploads_ =
      std::make_unique<UploadStore>(server->repository_->StagingDir(), options.uploads);
  // Uploads abandoned while the server was down expire now.
  server->uploads_->SweepExpired();
  server->repository_core_ = std::make_unique<RepositoryCore>(
      server->registry_.get(), server->uploads_.get(), options.max_upload_bytes);

  const int64_t wanted = std::max<int64_t>(
      kMinMessageBytes,
      static_cast<int64_t>(std::min<uint64_t>(options.max_upload_bytes, INT_MAX)) +
          kMessageOverheadBytes);
  const int max_message = static_cast<int>(std::min<int64_t>(wanted, INT_MAX));

  GrpcServerOptions grpc_options;
  grpc_options.address = JoinHostPort(options.host, options.port);
  grpc_options.max_message_bytes = max_message;
  grpc_options.in_flight = server->in_flight_.get();
  grpc_options.tls = options.tls;
  ASSIGN_OR_RETURN(server->grpc_server_,
                   GrpcServer::Start(grpc_options, server->inference_core_.get(),
                                     server->repository_core_.get(), server->auth_.get()));
  server->port_ = server->grpc_server_->port();
  spdlog::info("serving on {} (threads={}, max upload {} bytes)", server->address(),
               options.threads, options.max_upload_bytes);
  if (options.http_port >= 0) {
    // The same services over HTTP/REST, with the same message bound.
    http::HttpServerOptions http_options;
    http_options.host = options.host;
    http_options.port = options.http_port;
    http_options.threads = options.http_threads;
    http_options.max_body_bytes = static_cast<uint64_t>(max_message);
    http_options.in_flight = server->in_flight_.get();
    http_options.tls = options.tls;
    std::vector<http::Route> routes =
        http::KserveRoutes(server->inference_core_.get(), server->auth_.get());
    ASSIGN_OR_RETURN(server->http_server_,
                     http::HttpServer::Start(http_options, std::move(routes)));
    server->http_port_ = server->http_server_->port();
    spdlog::info("serving HTTP/REST on {} ({} threads)", server->http_address(),
                 options.http_threads);
  }
  if (!options.local_socket.empty()) {
    LocalServerOptions local_options;
    local_options.path = options.local_socket;
    local_options.max_message_bytes = static_cast<uint32_t>(max_message);
    local_options.in_flight = server->in_flight_.get();
    ASSIGN_OR_RETURN(server->local_server_,
                     LocalServer::Start(local_options, server->inference_core_.get(),
                                        server->auth_.get()));
    spdlog::info("serving ModelInfer on local socket {}", options.local_socket);
  }
  if (options.metrics_port >= 0) {
    // Scrapes read the statistics the requests already record; two threads
    // are plenty for a scraper or two.
    http::HttpServerOptions metrics_options;
    metrics_options.host = options.host;
    metrics_options.port = options.metrics_port;
    metrics_options.threads = 2;
    metrics_options.max_body_bytes = 4096;
    const ModelRegistry* registry = server->registry_.get();
    const InferenceCore* inference = server->inference_core_.get();
    std::vector<http::Route> routes;
    routes.push_back({"GET", "/metrics", [registry, inference](const http::HttpRequest&) {
                        http::HttpResponse response;
                        const ComputeTotals compute = inference->compute_totals();
                        response.body = ScrapeMetrics(*registry, &compute);
                        response.content_type = kMetricsContentType;
                        return response;
                      }});
    ASSIGN_OR_RETURN(server->metrics_server_,
                     http::HttpServer::Start(metrics_options, std::move(routes)));
    server->metrics_port_ = server->metrics_server_->port();
    spdlog::info("serving Prometheus metrics on http://{}/metrics", server->metrics_address());
  }
  spdlog::info("TLS: {}; authentication: {}",
               !options.tls.enabled() ? std::string("off")
               : options.tls.mutual()
                   ? absl::StrCat("on, client certificates required (", options.tls.client_ca, ")")
                   : std::string("on"),
               server->auth_->enabled() ? "bearer tokens" : "off");
  if (!IsLoopback(options.host)) {
    if (!server->auth_->enabled()) {
      spdlog::warn("listening on {} without authentication (--auth-tokens): anyone who reaches "
                   "the ports may infer, upload, unload and delete models",
                   options.host);
    } else if (!options.tls.enabled()) {
      spdlog::warn("listening on {} with bearer tokens but without TLS (--tls-cert, --tls-key): "
                   "tokens travel in clear text unless a proxy in front terminates TLS",
                   options.host);
    }
  }
  if (runtime::ArenaChecksOn()) {
    spdlog::warn("KILN_ARENA_CHECKS=1: every plan is checked step by step as it runs (slower; "
                 "for tests: engine/runtime/arena_check.h)");
  }
  spdlog::info("partial uploads: at most {}, {} declared together, expired after {} s idle",
               options.uploads.max_partial_uploads,
               BytesToString(options.uploads.max_partial_bytes), options.uploads.ttl.count());
  server->StartSweeper();
  return server;
}

Server::~Server() {
  Shutdown(std::chrono::milliseconds(0));
  StopSweeper();
}

void Server::StartSweeper() {
  const auto interval = std::clamp<std::chrono::seconds>(
      uploads_->limits().ttl / 4, std::chrono::seconds(1), std::chrono::seconds(60));
  sweeper_ = std::thread([this, interval] {
    NameThisThread("kiln-sweeper");
    std::unique_lock<std::mutex> lock(sweeper_mu_);
    while (!sweeper_cv_.wait_for(lock, interval, [this] { return sweeper_stop_; })) {
      lock.unlock();
      uploads_->SweepExpired();
      // Arena blocks a burst needed and nothing has run in since.
      const size_t freed = runtime::ArenaPool::Global().TrimIdle(kArenaIdle);
      if (freed > 0) spdlog::debug("freed {} arena blocks idle for {} s", freed, kArenaIdle.count());
      lock.lock();
    }
  });
}

void Server::StopSweeper() {
  {
    std::lock_guard<std::mutex> lock(sweeper_mu_);
    sweeper_stop_ = true;
  }
  sweeper_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

std::string Server::address() const { return JoinHostPort(host_, port_); }

std::string Server::metrics_address() const {
  return metrics_port_ < 0 ? std::string() : JoinHostPort(host_, metrics_port_);
}

std::string Server::local_socket() const {
  return local_server_ == nullptr ? std::string() : local_server_->path();
}

std::string Server::http_address() const {
  return http_port_ < 0 ? std::string() : JoinHostPort(host_, http_port_);
}

void Server::Wait() {
  if (grpc_server_ != nullptr) grpc_server_->Wait();
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  if (grpc_server_ == nullptr || shut_down_.exchange(true)) return;
  StopSweeper();
  // Once the grace period has passed, what still runs is cancelled (the
  // executor stops at its next step, an import child is killed), so the
  // handlers gRPC's Shutdown waits for return soon after. gRPC's own
  // cancellation of the calls comes a little later, as a backstop.
  constexpr auto kBackstop = std::chrono::milliseconds(500);
  std::mutex mu;
  std::condition_variable cv;
  bool drained = false;
  std::thread canceller([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, grace, [&] { return drained; })) {
      if (const int n = in_flight(); n > 0) {
        spdlog::warn("grace period over: cancelling {} request(s) still running", n);
      }
      stopping_->store(true);
    }
  });
  // HTTP stops accepting at once and drains beside gRPC; its requests are
  // cancelled by the same `stopping_` flag when the grace period ends.
  std::thread http_stop([this] {
    if (http_server_ != nullptr) http_server_->Stop();
    if (metrics_server_ != nullptr) metrics_server_->Stop();
    if (local_server_ != nullptr) local_server_->Stop();
  });
  grpc_server_->Shutdown(std::chrono::system_clock::now() + grace + kBackstop);
  http_stop.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    drained = true;
  }
  cv.notify_all();
  canceller.join();
}

}  // namespace kiln::server
