// kilnd: the Kiln inference daemon. Parses flags, sets up threading and
// logging, runs kiln::server::Server until SIGINT/SIGTERM, then drains.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "server/app/config_file.h"
#include "server/torch/import_worker.h"
#include "server/app/logging.h"
#include "server/app/server.h"


namespace {

// Exit statuses, also listed in --help.
constexpr int kExitStartFailed = 1;
constexpr int kExitUsage = 2;

constexpr char kFooter[] = R"(Settings may also come from --config FILE, YAML or JSON, keys named like the flags:
  port: 8001
  http-port: 8000
  metrics-port: 8002
  model-repository: /models
  threads: 4
An unknown key is an error. A flag on the command line wins over the file.

Signals: SIGTERM or SIGINT stops accepting requests, lets in-flight ones finish
(up to --shutdown-grace-s), cancels what still runs then and exits 0; a run
that does not stop after its cancellation makes it exit 1 one second later. A
second signal exits at once.

Exit status: 0 stopped cleanly (drained), 1 could not start (address in use,
repository not writable) or stopped by a second signal or by the watchdog above, 2 bad
flags or config file.)";

const char* SignalName(char sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

// A flag that takes 'on' or 'off' into `value` (its default already there).
void AddOnOff(CLI::App& app, const std::string& name, std::string* value, const std::string& help) {
  app.add_option(name, *value, help)->check(CLI::IsMember({"on", "off"}))->capture_default_str();
}

int g_signal_pipe[2] = {-1, -1};

// Async-signal-safe: only write(2).
extern "C" void OnShutdownSignal(int sig) {
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}

}  // namespace

int main(int argc, char** argv) {
  // The isolated import child for files that need no libtorch (.pt2,
  // server/torch/import_worker.h): no flags, no server. Everything that needs
  // libtorch runs in kiln-torch-worker instead.
  if (argc > 1 && std::string(argv[1]) == "--import-worker") {
    return kiln::server::ImportWorkerMain(argc, argv);
  }

  kiln::server::ServerOptions options;
  std::string log_level = "info";
  std::string log_format = "text";
  int shutdown_grace_s = 25;
  CLI::App app{
      "kilnd: Kiln inference server (KServe v2 / Open Inference Protocol over gRPC and HTTP/REST)"};
  app.footer(kFooter);
  app.set_config("--config", "",
                 "YAML or JSON file of settings: flag names without '--' as keys (e.g. "
                 "'port: 8001'); flags on the command line win over it");
  app.config_formatter(std::make_shared<kiln::server::ConfigFileFormat>(&app));
  app.add_option("--host", options.host, "Address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  app.add_option("--port,--grpc-port", options.port,
                 "gRPC port to listen on (0: pick a free port; --grpc-port is Triton's name)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  options.http_port = 8000;  // Triton's default; the library's is off
  app.add_option("--http-port", options.http_port,
                 "HTTP/REST port to listen on, the same protocol as gRPC (KServe v2 REST; 0: pick "
                 "a free port; a negative value: no HTTP endpoint)")
      ->check(CLI::Validator(
          [](std::string& value) {
            int port = 0;
            if (!CLI::detail::lexical_cast(value, port)) return std::string("not a port number");
            return port <= 65535 ? std::string()
                                 : std::string("a port is at most 65535 (negative: no HTTP)");
          },
          "PORT (negative: off)"))
      ->capture_default_str();
  options.metrics_port = 8002;  // Triton's default; the library's is off
  app.add_option("--metrics-port", options.metrics_port,
                 "Port of GET /metrics, Prometheus's text format with Triton's metric names (0: "
                 "pick a free port; a negative value: no metrics endpoint)")
      ->check(CLI::Validator(
          [](std::string& value) {
            int port = 0;
            if (!CLI::detail::lexical_cast(value, port)) return std::string("not a port number");
            return port <= 65535 ? std::string()
                                 : std::string("a port is at most 65535 (negative: no metrics)");
          },
          "PORT (negative: off)"))
      ->capture_default_str();
  app.add_option("--local-socket", options.local_socket,
                 "Also serve ModelInfer on this Unix socket path (mode 0600), Kiln's local "
                 "protocol for clients on this machine: less per-request work than gRPC "
                 "(the client's --local-socket). Empty: none");
  app.add_option("--http-thread-count", options.http_threads,
                 "HTTP connections served at once (each kept-alive connection holds a thread "
                 "while it is open)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--model-repository", options.model_repository,
                 "Model repository directory (REPO/NAME/VERSION/model.pt), created if missing")
      ->capture_default_str();
  app.add_option("--cache-dir", options.cache_dir,
                 "Compiled-graph cache directory (imported graphs and plans; shareable by "
                 "replicas). Empty: no disk cache");
  app.add_option("--cache-bytes", options.cache_bytes,
                 "Memory bound of the compiled-plan cache (LRU), in bytes")
      ->capture_default_str();
  app.add_option("--cache-disk-bytes", options.cache_disk_bytes,
                 "Bound on the bytes of the --cache-dir entries (graphs, plans, prepacked "
                 "weights): past it the least recently used go. 0: no bound")
      ->capture_default_str();
  std::string isolation = "process";
  app.add_option("--import-isolation", isolation,
                 "How the children that run libtorch (kiln-torch-worker: imports, the verified "
                 "import's runs, fallback ops) are isolated: 'process' (memory and time limits, "
                 "and the sandbox unless --import-sandbox off) or 'none' (limits only, no "
                 "sandbox); kilnd itself never runs libtorch")
      ->check(CLI::IsMember({"process", "none"}))
      ->capture_default_str();
  std::string import_sandbox = "on";
  AddOnOff(app, "--import-sandbox", &import_sandbox,
           "'on': the import child runs in a sandbox (no files, no network, no new "
           "processes, an unprivileged uid when kilnd is root; see README, Security model); "
           "'off': only its memory and time limits");
  std::string verify_on_first_use = "on";
  AddOnOff(app, "--verify-on-first-use", &verify_on_first_use,
           "'on': a request whose signature the load could not verify also runs through "
           "libtorch in the sandboxed worker and is compared (once per signature; a model's "
           "config may turn it off with \"verify\": {\"on_first_use\": false}); 'off': never");
  uint64_t import_memory_mb = options.import_memory_bytes >> 20;
  app.add_option("--import-memory-mb", import_memory_mb,
                 "Memory an import child may use beyond its start-up mappings, in MiB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--load-timeout-s,--import-timeout-s", options.load_timeout_s,
                 "Wall-clock limit of one load (import, verified import), and of its wait for "
                 "the load before it, in seconds; the import child is killed after it "
                 "(--import-timeout-s is the old name)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--request-timeout-s", options.request_timeout_s,
                 "Wall-clock limit of one request, in seconds (a client's earlier deadline wins); "
                 "past it the request ends with DEADLINE_EXCEEDED")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  uint64_t max_request_memory_mb = options.max_request_memory_bytes >> 20;
  app.add_option("--max-request-memory-mb", max_request_memory_mb,
                 "Memory one request may allocate (its plan and what it allocates while it runs), "
                 "in MiB; more is RESOURCE_EXHAUSTED. Default: half of the physical memory")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", options.threads,
                 "Intra-op threads per request (OpenBLAS and Kiln's kernels)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--concurrent-inferences", options.concurrent_inferences,
                 "Requests that compute at once, each on a compute thread of its own with "
                 "--threads threads; more wait in a queue (their deadline counting). "
                 "Default (0): as many as the CPUs kilnd may use hold, CPUs / --threads")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  std::string split_teams = "on";
  AddOnOff(app, "--split-teams", &split_teams,
           "'on': while two or more requests wait, a compute thread's --threads CPUs run "
           "them one thread each instead of one at a time on all of them (more requests/s "
           "under load; a request alone still gets every thread); 'off': never");
  std::string pin_threads(kiln::kernels::ThreadPinningName(options.pin_threads));
  app.add_option("--pin-threads", pin_threads,
                 "Pin each compute thread's team of --threads threads to CPUs of its own: auto "
                 "(when --threads > 1 and the teams fill the CPUs kilnd may use exactly, with no "
                 "lower CPU limit), on (always), off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--max-upload-bytes", options.max_upload_bytes,
                 "Largest model file accepted by an upload, in bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-partial-uploads", options.uploads.max_partial_uploads,
                 "Chunked uploads that may be kept (to resume) or in progress at once; one more is "
                 "RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-partial-upload-bytes", options.uploads.max_partial_bytes,
                 "Bytes the kept and running chunked uploads may declare together; more is "
                 "RESOURCE_EXHAUSTED")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  int64_t partial_upload_ttl_s = options.uploads.ttl.count();
  app.add_option("--partial-upload-ttl-s", partial_upload_ttl_s,
                 "A kept chunked upload nobody has written to for this many seconds is removed "
                 "(at start-up and by a periodic sweep)")
      ->check(CLI::Range(int64_t{1}, int64_t{365} * 86400))
      ->capture_default_str();
  app.add_option("--shutdown-grace-s", shutdown_grace_s,
                 "On SIGTERM/SIGINT, how long in-flight requests may take to finish before they "
                 "are cancelled, in seconds (keep it below Kubernetes' "
                 "terminationGracePeriodSeconds, 30 by default)")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  app.add_option("--tls-cert", options.tls.cert,
                 "Server certificate chain (PEM): TLS on the gRPC and HTTP ports (needs --tls-key)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", options.tls.key, "Private key of --tls-cert (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-client-ca", options.tls.client_ca,
                 "CA certificates (PEM) that client certificates must chain to: mutual TLS, a "
                 "client without such a certificate is refused")
      ->check(CLI::ExistingFile);
  app.add_option("--auth-tokens", options.auth_tokens_file,
                 "File of bearer tokens, one 'ROLE TOKEN' per line (ROLE: infer or admin; '#' "
                 "comments). Clients then send 'authorization: Bearer TOKEN'; health and "
                 "readiness stay open. Without it every client may call everything")
      ->check(CLI::ExistingFile);
  app.add_option("--log-level", log_level, "Least severe events logged: trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--log-format", log_format,
                 "'text' (TIME LEVEL message) or 'json' (one JSON object per line: time, level, "
                 "logger, msg); either way one line per event, on stderr")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message
    return kExitUsage;
  }
  options.import_memory_bytes = import_memory_mb << 20;
  options.uploads.ttl = std::chrono::seconds(partial_upload_ttl_s);
  // 'none' is the worker without its sandbox: libtorch still never runs in kilnd.
  options.import_sandbox = import_sandbox == "on" && isolation == "process";
  options.verify_on_first_use = verify_on_first_use == "on";
  options.split_teams = split_teams == "on";
  options.max_request_memory_bytes = max_request_memory_mb << 20;
  options.pin_threads = *kiln::kernels::ParseThreadPinning(pin_threads);  // CLI checked it
  {
    // libtorch runs in kiln-torch-worker, found beside this binary (a build
    // or deployment without libtorch has none: what needs it then fails
    // with FAILED_PRECONDITION, and the rest serves).
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    options.torch_worker =
        (ec ? std::filesystem::path(kiln::server::kTorchWorkerFile)
            : self.parent_path() / kiln::server::kTorchWorkerFile)
            .string();
    // /proc/self/exe, resolved in the child, is this very binary even if the
    // file was replaced on disk since start-up.
    options.import_worker = "/proc/self/exe";
  }

  // Logs go to stderr: stdout carries only the "listening" line tests parse.
  if (absl::Status s = kiln::server::SetUpLogging(log_level, log_format); !s.ok()) {
    std::fprintf(stderr, "kilnd: %s\n", std::string(s.message()).c_str());
    return kExitUsage;
  }

  // Debian's Abseil is built with absl::Mutex's deadlock detection on, which
  // gRPC's locks then pay on every acquisition (a graph lookup under a global
  // lock: a profile of kilnd under load showed it; 150 against 47 ns for a
  // nested pair here). It finds lock-order bugs in code under test, not in a
  // server in production.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // SIGINT/SIGTERM only write to a pipe; a thread reading it shuts the server
  // down. (Blocking the signals and sigwait()ing is not enough: OpenBLAS and
  // libtorch start threads before main() that would not inherit the mask.)
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    std::perror("kilnd: pipe2");
    return kExitStartFailed;
  }
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  absl::StatusOr<std::unique_ptr<kiln::server::Server>> server =
      kiln::server::Server::Start(options);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", std::string(server.status().message()));
    return kExitStartFailed;
  }
  // The gRPC line first: scripts read the first "listening on" line.
  std::printf("kilnd listening on %s\n", (*server)->address().c_str());
  if (!(*server)->local_socket().empty()) {
    std::printf("kilnd local socket listening on %s\n", (*server)->local_socket().c_str());
  }
  if ((*server)->http_port() >= 0) {
    std::printf("kilnd HTTP listening on %s\n", (*server)->http_address().c_str());
  }
  if ((*server)->metrics_port() >= 0) {
    std::printf("kilnd metrics listening on %s\n", (*server)->metrics_address().c_str());
  }
  std::fflush(stdout);

  std::thread signal_thread([&] {
    char sig = 0;
    while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    spdlog::info("received {}: refusing new requests, draining {} in flight (up to {} s)",
                 SignalName(sig), (*server)->in_flight(), shutdown_grace_s);
    // A second signal means "now": whoever sends it has given up waiting.
    std::thread([] {
      char again = 0;
      while (::read(g_signal_pipe[0], &again, 1) < 0 && errno == EINTR) {
      }
      spdlog::warn("received {} again: exiting without waiting for in-flight requests",
                   SignalName(again));
      std::_Exit(kExitStartFailed);
    }).detach();
    // Runs are cancelled when the grace period ends (worker children are
    // killed); should one still not stop, a watchdog ends the process a
    // second later whatever still runs.
    std::thread([shutdown_grace_s] {
      std::this_thread::sleep_for(std::chrono::seconds(shutdown_grace_s) +
                                  std::chrono::seconds(1));
      spdlog::error("still running {} s after the signal: exiting without draining",
                    shutdown_grace_s + 1);
      std::_Exit(kExitStartFailed);
    }).detach();
    const auto start = std::chrono::steady_clock::now();
    (*server)->Shutdown(std::chrono::seconds(shutdown_grace_s));
    spdlog::info("drained in {} ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - start)
                                         .count());
  });
  (*server)->Wait();
  signal_thread.join();
  spdlog::info("stopped");
  return 0;
}
