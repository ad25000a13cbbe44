// The Kiln server as a library: opens the model repository and the
// compiled-graph cache, loads the models, and serves GRPCInferenceService and
// Kiln's ModelRepositoryService on HOST:PORT (server/grpc/grpc_server.h), and
// the same protocol over HTTP/REST on HOST:HTTP_PORT (server/http/) and
// Prometheus metrics on HOST:METRICS_PORT (server/metrics/) when asked, all
// over one core (server/core/inference_core.h). kilnd's main() is flag parsing
// around this class; tests run it in-process on 127.0.0.1:0.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "engine/kernels/thread_binding.h"
#include "server/core/run_limits.h"
#include "server/security/tls.h"
#include "server/core/upload_store.h"

namespace kiln::server {

class GrpcServer;
class LocalServer;
class InferenceCore;
class ModelRegistry;
class ModelRepository;
class RepositoryCore;
namespace http {
class HttpServer;
}  // namespace http
namespace security {
class Authenticator;
}  // namespace security

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8001;  // 0: let the OS pick a free port
  // The HTTP/REST endpoint (server/http/): 0 picks a free port, a negative
  // value serves no HTTP (the library's default; kilnd's is 8000).
  int http_port = -1;
  int http_threads = 8;  // connections served at once over HTTP
  // GET /metrics, Prometheus's text format (server/metrics/server_metrics.h):
  // 0 picks a free port, a negative value serves none (the library's
  // default; kilnd's is 8002, Triton's).
  int metrics_port = -1;
  // ModelInfer over a Unix domain socket at this path (server/local/), for
  // clients on this machine; empty: none.
  std::string local_socket;
  std::string model_repository = "./var/models";
  // Compiled-graph cache: disk directory (empty: none) and memory bound.
  std::string cache_dir;
  uint64_t cache_bytes = 1ull << 30;
  uint64_t cache_disk_bytes = 0;  // 0: no bound
  int threads = 1;  // intra-op threads per request
  // Requests computing at once (compute threads, compute_pool.h); 0: as many
  // as the usable CPUs (the affinity mask, within a container's CPU limit)
  // hold requests of `threads` threads.
  int concurrent_inferences = 0;
  // Whether each compute thread pins its team of `threads` threads to CPUs of
  // its own (engine/kernels/thread_binding.h; --pin-threads).
  kernels::ThreadPinning pin_threads = kernels::ThreadPinning::kAuto;
  // While two or more requests wait, a compute thread's team of `threads`
  // runs them one thread each (compute_pool.h; --split-teams).
  bool split_teams = true;
  uint64_t max_upload_bytes = 512ull << 20;
  // Bounds on the uploads kept to resume (--max-partial-uploads,
  // --max-partial-upload-bytes, --partial-upload-ttl-s).
  UploadLimits uploads;
  // kiln-torch-worker, the program that runs libtorch for the server in
  // child processes: TorchScript imports, the verified import's reference
  // runs, fallback ops (kilnd passes the one beside it); empty runs all of
  // that in the server's own process (servers of tests and tools).
  std::string torch_worker;
  // The program that imports a file needing no libtorch (a torch.export
  // archive) in the same sandboxed child (kilnd passes itself, run with
  // --import-worker); empty: torch_worker does.
  std::string import_worker;
  uint64_t import_memory_bytes = 8ull << 30;
  // Run the import child in the sandbox of server/security/sandbox.h (--import-sandbox).
  bool import_sandbox = true;
  // Verify a signature the load could not on its first request, for models
  // whose config does not turn it off (--verify-on-first-use).
  bool verify_on_first_use = true;
  // Wall-clock limit of one load: import (the child is killed after it),
  // verified import, contract.
  int load_timeout_s = 600;
  // Wall-clock limit of one request (a client's earlier deadline wins).
  int request_timeout_s = 300;
  // Memory one request may allocate: its plan's arena and what the dynamic
  // path allocates; also bounds the verified import's sample runs.
  uint64_t max_request_memory_bytes = DefaultMaxRequestMemoryBytes();
  // TLS on both ports (--tls-cert, --tls-key, --tls-client-ca); off when empty.
  security::TlsFiles tls;
  // Bearer tokens and their roles (--auth-tokens; server/security/tokens.h);
  // empty: no authentication.
  std::string auth_tokens_file;
};

class Server {
 public:
  // Opens (creating) the repository, loads every model in it (failures are
  // logged, not fatal), then starts listening. Fails with InvalidArgument for
  // bad options (a malformed token file, TLS files that do not make a
  // certificate and its key), Unavailable when the address cannot be bound, Internal when
  // the repository cannot be created.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);

  ~Server();

  // The bound port (the chosen one when options.port was 0).
  int port() const { return port_; }
  // "HOST:PORT", with IPv6 hosts bracketed.
  std::string address() const;
  // The HTTP port (the chosen one when options.http_port was 0); -1: no HTTP.
  int http_port() const { return http_port_; }
  // "HOST:HTTP_PORT", as address(); empty without HTTP.
  std::string http_address() const;

  // The metrics port (the chosen one when options.metrics_port was 0); -1: none.
  int metrics_port() const { return metrics_port_; }
  // "HOST:METRICS_PORT", as address(); empty without metrics.
  std::string metrics_address() const;

  // The local socket's path; empty without one.
  std::string local_socket() const;

  // RPCs being handled now (every service, health checks included).
  int in_flight() const { return in_flight_->load(); }

  // Blocks until Shutdown() has completed.
  void Wait();

  // Stops accepting requests and waits up to `grace` for in-flight ones;
  // then cancels what still runs (requests, loads) and waits for it to end.
  // Idempotent; safe to call from another thread than Wait()'s.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::seconds(5));

 private:
  Server() = default;

  // Removes abandoned uploads every few seconds to a minute (a quarter of
  // their TTL), and frees arena blocks idle for 30 s, until StopSweeper().
  void StartSweeper();
  void StopSweeper();

  std::string host_;
  int port_ = 0;
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<ModelRegistry> registry_;
  std::unique_ptr<security::Authenticator> auth_;
  std::unique_ptr<UploadStore> uploads_;
  // What both front ends call (server/core/inference_core.h, repository_core.h).
  std::unique_ptr<InferenceCore> inference_core_;
  std::unique_ptr<RepositoryCore> repository_core_;
  // RPCs and requests in flight, counted by each front end; heap-held so that
  // its address is stable for them.
  std::unique_ptr<std::atomic<int>> in_flight_ = std::make_unique<std::atomic<int>>(0);
  // Set at the end of Shutdown's grace period: RunLimits::stopping.
  std::shared_ptr<std::atomic<bool>> stopping_;
  std::atomic<bool> shut_down_{false};  // Shutdown has been called
  std::unique_ptr<GrpcServer> grpc_server_;
  int http_port_ = -1;
  std::unique_ptr<http::HttpServer> http_server_;
  int metrics_port_ = -1;
  std::unique_ptr<http::HttpServer> metrics_server_;
  std::unique_ptr<LocalServer> local_server_;
  std::thread sweeper_;
  std::mutex sweeper_mu_;
  std::condition_variable sweeper_cv_;
  bool sweeper_stop_ = false;
};

}  // namespace kiln::server
