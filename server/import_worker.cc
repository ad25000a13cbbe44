#include "server/import_worker.h"

#include "server/model_import.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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
#include <new>
#include <thread>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/cache/cache_file.h"
#include "engine/cache/file_io.h"
#include "engine/cache/graph_serializer.h"
#include "engine/common/status_macros.h"
#include "server/torch_backend.h"
#include "kiln/v1/graph.pb.h"

namespace kiln::server {
namespace {

using Clock = std::chrono::steady_clock;

// The child's answer file: a cache file with the caller's key and one of
// these kinds (kGraphKind is the compiled-graph cache's kind for graphs).
constexpr char kGraphKind[] = "graph";
constexpr char kErrorKind[] = "import-error";
constexpr char kNotSerializableKind[] = "not-serializable";
constexpr char kNotSerializablePayload[] = "kiln.dev/import/not-serializable";
// How much of the child's stderr to keep for error messages.
constexpr size_t kStderrTail = 2048;

std::string DescribeSignal(int sig) {
  const char* name = ::strsignal(sig);
  return absl::StrCat("signal ", sig, " (", name != nullptr ? name : "?", ")");
}

bool LooksLikeOutOfMemory(absl::string_view text) {
  return absl::StrContains(text, "bad_alloc") || absl::StrContains(text, "can't allocate memory") ||
         absl::StrContains(text, "Cannot allocate memory");
}

// The last line(s) of the child's stderr, for the log and the client.
std::string Tail(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.size() > 400) t = "..." + t.substr(t.size() - 400);
  return t;
}

void WriteAnswer(const std::string& out, const std::string& key, absl::string_view kind,
                 const std::vector<absl::string_view>& payload) {
  absl::Status s = cache::WriteCacheFile(out, kind, key, payload);
  if (!s.ok()) std::fprintf(stderr, "kilnd import worker: %s\n", std::string(s.message()).c_str());
}

void WriteError(const std::string& out, const std::string& key, absl::string_view kind,
                const absl::Status& status) {
  v1::ErrorStatus error;
  error.set_code(static_cast<int>(status.code()));
  error.set_message(std::string(status.message()));
  WriteAnswer(out, key, kind, {error.SerializeAsString()});
}

// Caps the address space at what the process maps now plus `extra` bytes, so
// the limit means "memory the import may use", whatever the libraries map at
// load time.
void LimitAddressSpace(uint64_t extra) {
  uint64_t pages = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> pages;
  const uint64_t now = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  struct rlimit limit;
  limit.rlim_cur = limit.rlim_max = now + extra;
  ::setrlimit(RLIMIT_AS, &limit);
}

void RunTestFault(const char* fault) {
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

}  // namespace

bool IsNotSerializable(const absl::Status& status) {
  return status.GetPayload(kNotSerializablePayload).has_value();
}

int ImportWorkerMain(int argc, char** argv) {
  uint64_t memory_bytes = 0;
  if (argc != 6 || !absl::SimpleAtoi(argv[5], &memory_bytes)) {
    std::fprintf(stderr, "usage: kilnd --import-worker MODEL_FILE OUTPUT_FILE KEY MEMORY_BYTES\n");
    return 2;
  }
  const std::string model_path = argv[2];
  const std::string out = argv[3];
  const std::string key = argv[4];
  absl::StatusOr<std::string> bytes = cache::ReadFileToString(model_path);
  // libtorch is mapped before the limit, which is the import's own memory; a
  // torch.export archive needs none.
  if (!bytes.ok() || ImportNeedsTorch(*bytes)) {
    if (absl::Status loaded = torch::Load(); !loaded.ok()) {
      WriteError(out, key, kErrorKind, loaded);
      return 0;
    }
  }
  LimitAddressSpace(memory_bytes);
  if (const char* fault = std::getenv("KILN_TEST_IMPORT_FAULT")) RunTestFault(fault);

  absl::StatusOr<ir::Graph> graph = absl::UnknownError("not imported");
  try {
    graph = bytes.ok() ? ImportModel(*bytes) : bytes.status();
  } catch (const std::bad_alloc&) {
    graph = absl::ResourceExhaustedError("out of memory");
  }
  if (!graph.ok()) {
    WriteError(out, key, kErrorKind, graph.status());
    return 0;
  }
  absl::StatusOr<cache::SerializedGraph> serialized = cache::SerializeGraph(*graph);
  if (!serialized.ok()) {
    WriteError(out, key, kNotSerializableKind, serialized.status());
    return 0;
  }
  WriteAnswer(out, key, kGraphKind, serialized->Pieces());
  return 0;
}

absl::StatusOr<cache::Payload> ImportInChildProcess(const std::string& worker_binary,
                                                    const std::string& model_path,
                                                    const ImportAnswer& answer,
                                                    const ImportLimits& limits) {
  const std::string& out = answer.path;
  // The answer goes unless it is a graph the cache keeps.
  struct RemoveOnExit {
    const std::string& path;
    bool keep = false;
    ~RemoveOnExit() {
      if (!keep) ::unlink(path.c_str());
    }
  } remove_answer{out};

  // Everything the child needs is prepared before fork(): between fork and
  // exec a multi-threaded parent's child may only make async-signal-safe calls.
  std::vector<std::string> args = {worker_binary, "--import-worker", model_path, out, answer.key,
                                   std::to_string(limits.memory_bytes)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("cannot create a pipe: ", std::strerror(errno)));
  }
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t parent = ::getpid();
  struct rlimit cpu;
  // A backstop should the parent die before its own timer fires.
  cpu.rlim_cur = cpu.rlim_max = static_cast<rlim_t>(limits.timeout_s) + 5;
  struct rlimit no_core = {0, 0};

  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    if (devnull >= 0) ::close(devnull);
    return absl::InternalError(
        absl::StrCat("cannot fork the import worker: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Die with the daemon: an orphaned import must not keep running.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDOUT_FILENO);
    }
    ::dup2(err_pipe[1], STDERR_FILENO);
    // Only 0-2 survive: the daemon's sockets and files are not the child's.
    ::close_range(3, ~0U, 0);
    ::setrlimit(RLIMIT_CPU, &cpu);
    ::setrlimit(RLIMIT_CORE, &no_core);  // a crashing import must not fill the disk
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  if (devnull >= 0) ::close(devnull);

  // Collect stderr until the child closes it, the deadline passes or
  // limits.stop says to stop.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(limits.timeout_s);
  auto stop = [&]() -> absl::Status {
    if (absl::Status s = limits.stop ? limits.stop() : absl::OkStatus(); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("import: ", s.message(), "; the import process was killed"));
    }
    if (Clock::now() < deadline) return absl::OkStatus();
    return absl::DeadlineExceededError(
        absl::StrCat("import: did not finish within the ", limits.timeout_s,
                     " s left of the load's time limit (--load-timeout-s); the import process "
                     "was killed"));
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
  const std::string tail = Tail(stderr_text);
  const std::string said = tail.empty() ? "" : absl::StrCat("; it said: ", tail);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (LooksLikeOutOfMemory(stderr_text) || sig == SIGXCPU || sig == SIGKILL) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the import exceeded its limits (", limits.memory_bytes >> 20,
                       " MiB of memory, --import-memory-mb; ", limits.timeout_s,
                       " s, --load-timeout-s) and was stopped by ", DescribeSignal(sig), said));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("the import process crashed with ", DescribeSignal(sig),
                     " while reading the TorchScript file (the server is unaffected)", said));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("the import process exited with status ",
                                            WIFEXITED(status) ? WEXITSTATUS(status) : -1, said));
  }

  // The answer: a graph, the importer's error, or "not serializable".
  for (const char* kind : {kGraphKind, kErrorKind, kNotSerializableKind}) {
    absl::StatusOr<cache::Payload> payload = cache::ReadCacheFile(out, kind, answer.key);
    if (absl::IsFailedPrecondition(payload.status())) continue;  // another kind
    if (!payload.ok()) {
      return absl::InternalError(absl::StrCat(
          "the import process left no usable answer: ", payload.status().message(), said));
    }
    if (absl::string_view(kind) == kGraphKind) {
      remove_answer.keep = answer.keep;
      return payload;
    }
    v1::ErrorStatus error;
    if (!error.ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
      return absl::InternalError("the import process's error does not parse");
    }
    absl::StatusCode code = static_cast<absl::StatusCode>(error.code());
    if (LooksLikeOutOfMemory(error.message())) code = absl::StatusCode::kResourceExhausted;
    std::string message = error.message();
    if (code == absl::StatusCode::kResourceExhausted) {
      message = absl::StrCat("the import exceeded its memory limit of ", limits.memory_bytes >> 20,
                             " MiB (--import-memory-mb): ", message);
    }
    absl::Status result(code, message);
    if (absl::string_view(kind) == kNotSerializableKind)
      result.SetPayload(kNotSerializablePayload, absl::Cord("1"));
    return result;
  }
  return absl::InternalError("the import process's answer has an unknown kind");
}

}  // namespace kiln::server
