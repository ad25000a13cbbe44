#include "server/torch/import_worker.h"

#include "server/torch/model_import.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/cache/cache_file.h"
#include "engine/cache/file_io.h"
#include "engine/cache/graph_serializer.h"
#include "engine/common/mapped_file.h"
#include "engine/common/status_macros.h"
#include "server/security/sandbox.h"
#include "server/torch/torch_reference_codec.h"
#include "server/torch/torch_backend.h"
#include "kiln/v1/graph.pb.h"

namespace kiln::server {
namespace {

using Clock = std::chrono::steady_clock;

// The child's answer file: a cache file with the caller's key and one of
// these kinds (kGraphKind is the compiled-graph cache's kind for graphs).
constexpr char kGraphKind[] = "graph";
constexpr char kErrorKind[] = "import-error";
constexpr char kNotSerializableKind[] = "not-serializable";
// The answer of a reference run: a v1::ReferenceAnswer.
constexpr char kReferenceKind[] = "reference";
constexpr char kNotSerializablePayload[] = "kiln.dev/import/not-serializable";
// How much of the child's stderr to keep for error messages.
constexpr size_t kStderrTail = 2048;

// The last line(s) of the child's stderr, for the log and the client.
std::string Tail(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.size() > 400) t = "..." + t.substr(t.size() - 400);
  return t;
}

// The worker's answer goes to this descriptor: a file the daemon created.
constexpr int kAnswerFd = 3;
// The stderr line that carries the sandbox's report to the daemon.
constexpr char kSandboxLine[] = "kiln-sandbox: ";

void WriteAnswer(const std::string& key, absl::string_view kind,
                 const std::vector<absl::string_view>& payload) {
  absl::Status s = cache::WriteCacheFileTo(kAnswerFd, kind, key, payload);
  if (!s.ok()) std::fprintf(stderr, "kilnd import worker: %s\n", std::string(s.message()).c_str());
}

void WriteError(const std::string& key, absl::string_view kind, const absl::Status& status) {
  v1::ErrorStatus error;
  error.set_code(static_cast<int>(status.code()));
  error.set_message(std::string(status.message()));
  WriteAnswer(key, kind, {error.SerializeAsString()});
}

std::mutex g_sandbox_mu;
std::string g_sandbox_summary;  // guarded by g_sandbox_mu

// One attempt of the escape probe: "what: refused (errno text)" or
// "what: ALLOWED".
std::string Attempt(absl::string_view what, bool succeeded) {
  return succeeded ? absl::StrCat(what, ": ALLOWED")
                   : absl::StrCat(what, ": refused (", std::strerror(errno), ")");
}

void RunTestFault(const char* fault, const std::string& key, bool sandboxed) {
  if (std::strcmp(fault, "escape") == 0) {
    // Unsandboxed, some attempts (mount, ptrace) would succeed and harm the host.
    WriteError(key, kErrorKind,
               absl::PermissionDeniedError(sandboxed ? "sandbox probe: " + SandboxEscapeProbe()
                                                     : std::string("sandbox probe: not run, the "
                                                                   "sandbox is off")));
    std::exit(0);
  }
  RunCrashHangOrOomFault(fault);
}

}  // namespace

std::string DescribeSignal(int sig) {
  const char* name = ::strsignal(sig);
  return absl::StrCat("signal ", sig, " (", name != nullptr ? name : "?", ")");
}

bool LooksLikeOutOfMemory(absl::string_view text) {
  return absl::StrContains(text, "bad_alloc") || absl::StrContains(text, "can't allocate memory") ||
         absl::StrContains(text, "Cannot allocate memory");
}

void LimitAddressSpace(uint64_t extra) {
  uint64_t pages = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> pages;
  const uint64_t now = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  struct rlimit limit;
  limit.rlim_cur = limit.rlim_max = now + extra;
  ::setrlimit(RLIMIT_AS, &limit);
}

// Tries what a hostile model's native code would try from inside the
// sandbox; returns one line per attempt.
std::string SandboxEscapeProbe(int shared_with_kilnd) {
  std::vector<std::string> lines;
  int fd = ::open("/etc/passwd", O_RDONLY | O_CLOEXEC);
  char byte;
  lines.push_back(Attempt("read /etc/passwd", fd >= 0 && ::read(fd, &byte, 1) == 1));
  std::vector<std::string> targets = {"/tmp/kiln-sandbox-escape", "kiln-sandbox-escape"};
  if (const char* extra = std::getenv("KILN_TEST_ESCAPE_FILE")) targets.push_back(extra);
  for (const std::string& path : targets) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    lines.push_back(Attempt(absl::StrCat("create ", path), fd >= 0));
  }
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  lines.push_back(Attempt("open a TCP socket", fd >= 0));
  if (fd >= 0) {
    struct sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(80);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lines.push_back(Attempt("connect to 127.0.0.1:80",
                            ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0));
  }
  lines.push_back(Attempt("open a Unix socket", ::socket(AF_UNIX, SOCK_STREAM, 0) >= 0));
  char* const sh_argv[] = {const_cast<char*>("/bin/sh"), nullptr};
  lines.push_back(Attempt("exec /bin/sh", ::execv("/bin/sh", sh_argv) == 0));
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  lines.push_back(Attempt("fork", child > 0));
  lines.push_back(Attempt("signal the daemon", ::kill(::getppid(), 0) == 0));
  lines.push_back(Attempt("signal its process group", ::kill(0, 0) == 0));
  lines.push_back(Attempt("trace the daemon", ::ptrace(PTRACE_ATTACH, ::getppid(), 0, 0) == 0));
  lines.push_back(Attempt("mount a tmpfs", ::mount("none", "/", "tmpfs", 0, nullptr) == 0));
  lines.push_back(Attempt("chroot", ::chroot("/") == 0));
  lines.push_back(Attempt("become root", ::setuid(0) == 0 && ::getuid() == 0));
  lines.push_back(Attempt("unshare a user namespace", ::unshare(CLONE_NEWUSER) == 0));
  struct rlimit more = {RLIM_INFINITY, RLIM_INFINITY};
  lines.push_back(Attempt("lift its memory limit", ::setrlimit(RLIMIT_AS, &more) == 0));
  if (shared_with_kilnd >= 0) {
    lines.push_back(Attempt("shrink the memory it shares with the daemon",
                            ::ftruncate(shared_with_kilnd, 0) == 0));
  }
  return absl::StrJoin(lines, "; ");
}

void RunCrashHangOrOomFault(const char* fault) {
  if (std::strcmp(fault, "crash") == 0) {
    ::raise(SIGSEGV);
  } else if (std::strcmp(fault, "hang") == 0) {
    while (true) ::pause();
  } else if (std::strcmp(fault, "oom") == 0) {
    // Grows until the address-space limit makes an allocation fail; the
    // uncaught bad_alloc aborts, as an exception escaping libtorch would.
    std::vector<std::vector<char>> hog;
    while (true) hog.emplace_back(64 << 20, 1);
  }
}

absl::StatusOr<std::string> EnterWorkerSandbox(const std::string& sandbox_root,
                                               absl::string_view namespaces) {
  SandboxOptions options;
  options.empty_root = sandbox_root;
  options.own_user_namespace = absl::StrContains(namespaces, 'u');
  const Clock::time_point sandbox_start = Clock::now();
  ASSIGN_OR_RETURN(SandboxReport report, EnterSandbox(options));
  if (absl::StrContains(namespaces, 'n')) {
    report.applied.insert(report.applied.begin(), "network namespace");
  } else {
    report.unavailable.push_back("network namespace");
  }
  if (absl::StrContains(namespaces, 'u')) {
    report.applied.insert(report.applied.begin(), "user namespace");
  }
  const double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - sandbox_start).count();
  return absl::StrCat(report.Summary(), " (entered in ", absl::StrFormat("%.2f", ms), " ms)");
}

absl::StatusOr<WorkerProcess> StartWorkerProcess(const WorkerLaunch& launch,
                                                 const std::string& what) {
  // A build or deployment without libtorch has no kiln-torch-worker: what
  // needs libtorch fails here, clearly, rather than as an exec in the child.
  if (::access(launch.args[0].c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "libtorch is needed for the ", what, " but its worker program '", launch.args[0],
        "' cannot be run (", std::strerror(errno), "): kilnd was built or deployed without ",
        kTorchWorkerFile, " beside it; models whose graphs are in the compiled-graph cache "
        "still serve, without the libtorch fallback"));
  }
  // Everything the child needs is prepared before fork(): between fork and
  // exec a multi-threaded parent's child may only make async-signal-safe calls.
  std::vector<std::string> args = launch.args;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* namespaces = argv[launch.namespaces_arg];
  const bool root = ::geteuid() == 0;
  // A user namespace maps the child's root to the daemon's own ids.
  const std::string uid_map = absl::StrCat("0 ", ::geteuid(), " 1\n");
  const std::string gid_map = absl::StrCat("0 ", ::getegid(), " 1\n");
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("cannot create a pipe: ", std::strerror(errno)));
  }
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t parent = ::getpid();
  struct rlimit cpu;
  cpu.rlim_cur = cpu.rlim_max = static_cast<rlim_t>(launch.cpu_limit_s);
  struct rlimit no_core = {0, 0};
  const std::vector<int> fds = launch.fds;
  const int num_fds = static_cast<int>(fds.size());

  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    if (devnull >= 0) ::close(devnull);
    return absl::InternalError(
        absl::StrCat("cannot fork the ", what, " worker: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Die with the daemon (the thread that forks must outlive the child: see
    // the callers): an orphaned worker must not keep running.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDOUT_FILENO);
    }
    ::dup2(err_pipe[1], STDERR_FILENO);
    // launch.fds on 3, 4, ...: first out of the way (a source may sit where
    // another goes), then into place (dup2 clears close-on-exec).
    int moved[16];
    for (int k = 0; k < num_fds && k < 16; ++k) moved[k] = ::fcntl(fds[k], F_DUPFD_CLOEXEC, 64);
    for (int k = 0; k < num_fds && k < 16; ++k) ::dup2(moved[k], kAnswerFd + k);
    // Only these survive: the daemon's sockets and files are not the child's.
    ::close_range(kAnswerFd + num_fds, ~0U, 0);
    if (launch.cpu_limit_s > 0) ::setrlimit(RLIMIT_CPU, &cpu);
    ::setrlimit(RLIMIT_CORE, &no_core);  // a crashing worker must not fill the disk
    // Its own process group: a signal to "its group" never reaches the daemon.
    ::setpgid(0, 0);
    if (launch.sandbox) {
      // Namespaces need a single-threaded process: now, not after exec
      // (libraries start threads when they load). Best effort: a container
      // may forbid them; seccomp refuses sockets either way.
      if (root) {
        if (::unshare(CLONE_NEWNET) == 0) namespaces[0] = 'n';
      } else if (::unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) == 0) {
        namespaces[0] = 'n';
        // open/write/close only: async-signal-safe.
        auto write_file = [](const char* path, const char* text, size_t n) {
          const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
          const bool ok = fd >= 0 && ::write(fd, text, n) == static_cast<ssize_t>(n);
          if (fd >= 0) ::close(fd);
          return ok;
        };
        if (write_file("/proc/self/setgroups", "deny", 4) &&
            write_file("/proc/self/uid_map", uid_map.data(), uid_map.size()) &&
            write_file("/proc/self/gid_map", gid_map.data(), gid_map.size())) {
          namespaces[1] = 'u';
        }
      }
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  if (devnull >= 0) ::close(devnull);
  return WorkerProcess{pid, err_pipe[0]};
}

bool IsNotSerializable(const absl::Status& status) {
  return status.GetPayload(kNotSerializablePayload).has_value();
}

std::string LastSandboxSummary() {
  std::lock_guard<std::mutex> lock(g_sandbox_mu);
  return g_sandbox_summary;
}

int ImportWorkerMain(int argc, char** argv) {
  uint64_t memory_bytes = 0;
  if (argc != 8 || !absl::SimpleAtoi(argv[4], &memory_bytes)) {
    std::fprintf(stderr,
                 "usage: kiln-torch-worker --import-worker MODEL_FILE KEY MEMORY_BYTES "
                 "SANDBOX_ROOT|off NAMESPACES JOB (the answer goes to descriptor 3)\n");
    return 2;
  }
  // JOB: "-" imports; "force-fallback:OPS" imports with OPS (comma-separated)
  // forced onto the fallback; "reference:FILE" runs the v1::ReferenceRequest
  // in FILE (read before the sandbox).
  absl::string_view job = argv[7];
  importer::ImportOptions import_options;
  std::optional<v1::ReferenceRequest> reference;
  if (absl::ConsumePrefix(&job, "force-fallback:")) {
    std::vector<std::string> ops = absl::StrSplit(job, ',', absl::SkipEmpty());
    import_options.force_fallback = std::move(ops);
  } else if (absl::ConsumePrefix(&job, "reference:")) {
    absl::StatusOr<std::string> text = cache::ReadFileToString(std::string(job));
    reference.emplace();
    if (!text.ok() || !reference->ParseFromString(*text)) {
      WriteError(argv[3], kErrorKind,
                 absl::InternalError("the reference run's request does not read"));
      return 0;
    }
  }
  const std::string model_path = argv[2];
  const std::string key = argv[3];
  const std::string sandbox_root = argv[5];
  const absl::string_view namespaces = argv[6];
  // libtorch is mapped before the limit, which is the import's own memory; a
  // torch.export archive needs none (told by the file's content).
  bool needs_torch = true;
  {
    // Mapped: telling the format reads only the zip directory.
    absl::StatusOr<std::shared_ptr<const MappedFile>> peek = MappedFile::Open(model_path);
    needs_torch = !peek.ok() || (*peek)->size() == 0 ||
                  ImportNeedsTorch(std::string_view((*peek)->data(), (*peek)->size()));
  }
  if (needs_torch) {
    if (absl::Status loaded = torch::Load(); !loaded.ok()) {
      WriteError(key, kErrorKind, loaded);
      return 0;
    }
  }
  LimitAddressSpace(memory_bytes);
  // The file is mapped (read-only) rather than read where it can be: a .pt2
  // archive's aligned weights then become constants that view the mapping
  // instead of copies (ImportExportedProgram), which halves the import's
  // memory. The repository replaces files only by rename, never in place, so
  // the mapped bytes cannot change under the import. Where the file does not
  // map, it is read as before.
  std::shared_ptr<const void> owner;
  std::string_view bytes;
  absl::StatusOr<std::string> read = absl::UnknownError("not read");
  if (absl::StatusOr<std::shared_ptr<const MappedFile>> mapped = MappedFile::Open(model_path);
      mapped.ok() && (*mapped)->size() > 0) {
    bytes = std::string_view((*mapped)->data(), (*mapped)->size());
    owner = *std::move(mapped);
  } else {
    try {
      read = cache::ReadFileToString(model_path);
    } catch (const std::bad_alloc&) {
      read = absl::ResourceExhaustedError("out of memory");
    }
    if (!read.ok()) {
      WriteError(key, kErrorKind, read.status());
      return 0;
    }
    bytes = *read;
  }
  // From here on the process holds what it needs (libtorch, the file's
  // bytes, its answer descriptor) and may open nothing more.
  if (sandbox_root != "off") {
    absl::StatusOr<std::string> summary = EnterWorkerSandbox(sandbox_root, namespaces);
    if (!summary.ok()) {
      WriteError(key, kErrorKind,
                 absl::InternalError(absl::StrCat(
                     "the import sandbox could not be set up: ", summary.status().message(),
                     " (kilnd --import-sandbox off imports without it)")));
      return 0;
    }
    std::fprintf(stderr, "%s%s\n", kSandboxLine, summary->c_str());
    std::fflush(stderr);
  }
  if (const char* fault = std::getenv(reference.has_value() ? "KILN_TEST_REFERENCE_FAULT"
                                                            : "KILN_TEST_IMPORT_FAULT")) {
    RunTestFault(fault, key, sandbox_root != "off");
  }

  if (reference.has_value()) {
    absl::StatusOr<verify::ReferenceRequest> request = ReferenceRequestFromProto(*reference);
    absl::StatusOr<verify::ReferenceResult> result = absl::UnknownError("not run");
    try {
      result = request.ok() ? torch::RunReference(bytes, *request)
                            : absl::StatusOr<verify::ReferenceResult>(request.status());
    } catch (const std::bad_alloc&) {
      result = absl::ResourceExhaustedError("out of memory");
    }
    absl::StatusOr<v1::ReferenceAnswer> answer = absl::UnknownError("not run");
    if (result.ok()) {
      answer = ReferenceResultToProto(*result);
    } else {
      answer = result.status();
    }
    if (!answer.ok()) {
      WriteError(key, kErrorKind, answer.status());
      return 0;
    }
    WriteAnswer(key, kReferenceKind, {answer->SerializeAsString()});
    return 0;
  }
  absl::StatusOr<ir::Graph> graph = absl::UnknownError("not imported");
  try {
    graph = ImportModel(bytes, owner, import_options);
  } catch (const std::bad_alloc&) {
    graph = absl::ResourceExhaustedError("out of memory");
  }
  if (!graph.ok()) {
    WriteError(key, kErrorKind, graph.status());
    return 0;
  }
  absl::StatusOr<cache::SerializedGraph> serialized = cache::SerializeGraph(*graph);
  if (!serialized.ok()) {
    WriteError(key, kNotSerializableKind, serialized.status());
    return 0;
  }
  WriteAnswer(key, kGraphKind, serialized->Pieces());
  return 0;
}

namespace {

// Runs the worker on `model_path` for `job` (ImportWorkerMain's JOB).
// `what` names the job in messages ("import").
absl::StatusOr<cache::Payload> RunWorker(const std::string& worker_binary,
                                         const std::string& model_path, const std::string& job,
                                         const ImportAnswer& answer, const ImportLimits& limits,
                                         const std::string& what) {
  const std::string& out = answer.path;
  // The answer goes unless it is a graph the cache keeps.
  struct RemoveOnExit {
    const std::string& path;
    bool keep = false;
    ~RemoveOnExit() {
      if (!keep) ::unlink(path.c_str());
    }
  } remove_answer{out};

  // The answer file: created here, written by the child through descriptor 3
  // (a sandboxed child may open nothing).
  const int answer_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (answer_fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create the ", what, "'s answer file '", out, "': ", std::strerror(errno)));
  }
  struct CloseAnswer {
    int fd;
    ~CloseAnswer() { ::close(fd); }
  } close_answer{answer_fd};

  // The last argument but one is written by the child before exec: which
  // namespaces it entered ('n' network, 'u' user).
  WorkerLaunch launch;
  launch.args = {worker_binary,
                 "--import-worker",
                 model_path,
                 answer.key,
                 std::to_string(limits.memory_bytes),
                 limits.sandbox ? limits.sandbox_root : "off",
                 "--",
                 job};
  launch.namespaces_arg = 6;
  launch.fds = {answer_fd};  // the answer on 3
  launch.sandbox = limits.sandbox;
  // A backstop should the parent die before its own timer fires.
  launch.cpu_limit_s = limits.timeout_s + 5;
  ASSIGN_OR_RETURN(WorkerProcess child, StartWorkerProcess(launch, what));
  const pid_t pid = child.pid;
  int err_pipe[2] = {child.stderr_fd, -1};

  // Collect stderr until the child closes it, the deadline passes or
  // limits.stop says to stop.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(limits.timeout_s);
  auto stop = [&]() -> absl::Status {
    if (absl::Status s = limits.stop ? limits.stop() : absl::OkStatus(); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat(what, ": ", s.message(), "; the ", what,
                                       " process was killed"));
    }
    if (Clock::now() < deadline) return absl::OkStatus();
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": did not finish within the ", limits.timeout_s,
                     " s left of the load's time limit (--load-timeout-s); the ", what,
                     " process was killed"));
  };
  std::string stderr_text;
  absl::Status stopped;
  char buf[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    stopped = stop();
    if (!stopped.ok()) break;
    struct pollfd pfd = {err_pipe[0], POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(err_pipe[0], buf, sizeof(buf));
    if (n <= 0) break;  // EOF: the child exited (or closed stderr)
    stderr_text.append(buf, static_cast<size_t>(n));
    if (stderr_text.size() > 2 * kStderrTail)
      stderr_text.erase(0, stderr_text.size() - kStderrTail);
  }
  ::close(err_pipe[0]);
  int status = 0;
  // stderr closed: the child is exiting; wait for it, still bounded by the deadline.
  while (stopped.ok() && ::waitpid(pid, &status, WNOHANG) == 0) {
    stopped = stop();
    if (stopped.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!stopped.ok()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return stopped;
  }
  // The sandbox's report: logged once at info level, then at debug.
  if (const size_t at = stderr_text.find(kSandboxLine); at != std::string::npos) {
    const size_t begin = at + strlen(kSandboxLine);
    const size_t end = stderr_text.find('\n', begin);
    const std::string summary = stderr_text.substr(begin, end == std::string::npos ? end : end - begin);
    // The layers without the timing: logged at info when they change.
    const std::string layers = summary.substr(0, summary.rfind(" (entered in "));
    std::lock_guard<std::mutex> lock(g_sandbox_mu);
    spdlog::log(layers == g_sandbox_summary ? spdlog::level::debug : spdlog::level::info,
                "import sandbox: {}", summary);
    g_sandbox_summary = layers;
    stderr_text.erase(at, (end == std::string::npos ? stderr_text.size() : end + 1) - at);
  }
  const std::string tail = Tail(stderr_text);
  const std::string said = tail.empty() ? "" : absl::StrCat("; it said: ", tail);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (LooksLikeOutOfMemory(stderr_text) || sig == SIGXCPU || sig == SIGKILL) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the ", what, " exceeded its limits (", limits.memory_bytes >> 20,
                       " MiB of memory, --import-memory-mb; ", limits.timeout_s,
                       " s, --load-timeout-s) and was stopped by ", DescribeSignal(sig), said));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("the ", what, " process crashed with ", DescribeSignal(sig),
                     what == "import" ? " while reading the TorchScript file"
                                      : " while running the TorchScript program",
                     " (the server is unaffected)", said));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("the ", what, " process exited with status ",
                                            WIFEXITED(status) ? WEXITSTATUS(status) : -1, said));
  }

  // The answer: a graph, the importer's error, or "not serializable".
  for (const char* kind : {kGraphKind, kReferenceKind, kErrorKind, kNotSerializableKind}) {
    absl::StatusOr<cache::Payload> payload = cache::ReadCacheFile(out, kind, answer.key);
    if (absl::IsFailedPrecondition(payload.status())) continue;  // another kind
    if (!payload.ok()) {
      return absl::InternalError(absl::StrCat(
          "the ", what, " process left no usable answer: ", payload.status().message(), said));
    }
    if (absl::string_view(kind) == kGraphKind || absl::string_view(kind) == kReferenceKind) {
      remove_answer.keep = answer.keep;
      return payload;
    }
    v1::ErrorStatus error;
    if (!error.ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
      return absl::InternalError(absl::StrCat("the ", what, " process's error does not parse"));
    }
    absl::StatusCode code = static_cast<absl::StatusCode>(error.code());
    if (LooksLikeOutOfMemory(error.message())) code = absl::StatusCode::kResourceExhausted;
    std::string message = error.message();
    if (code == absl::StatusCode::kResourceExhausted) {
      message = absl::StrCat("the ", what, " exceeded its memory limit of ", limits.memory_bytes >> 20,
                             " MiB (--import-memory-mb): ", message);
    }
    absl::Status result(code, message);
    if (absl::string_view(kind) == kNotSerializableKind)
      result.SetPayload(kNotSerializablePayload, absl::Cord("1"));
    return result;
  }
  return absl::InternalError(absl::StrCat("the ", what, " process's answer has an unknown kind"));
}

}  // namespace

absl::StatusOr<cache::Payload> ImportInChildProcess(const std::string& worker_binary,
                                                    const std::string& model_path,
                                                    const ImportAnswer& answer,
                                                    const ImportLimits& limits,
                                                    const std::vector<std::string>& force_fallback) {
  const std::string job =
      force_fallback.empty() ? "-" : "force-fallback:" + absl::StrJoin(force_fallback, ",");
  return RunWorker(worker_binary, model_path, job, answer, limits, "import");
}

absl::StatusOr<cache::Payload> ReferenceInChildProcess(const std::string& worker_binary,
                                                       const std::string& model_path,
                                                       const std::string& request_path,
                                                       const ImportAnswer& answer,
                                                       const ImportLimits& limits) {
  return RunWorker(worker_binary, model_path, "reference:" + request_path, answer, limits,
                   "verified import's libtorch run");
}

}  // namespace kiln::server
