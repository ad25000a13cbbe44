#include "server/torch/fallback_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kiln/v1/torch_worker.pb.h"
#include "server/torch/fallback_protocol.h"
#include "server/torch/torch_reference_codec.h"

namespace kiln::server {
namespace {

using Clock = std::chrono::steady_clock;
namespace fp = fallback_protocol;

// How long a new worker may take to load libtorch and enter its sandbox when
// the run calling it has no deadline of its own.
constexpr auto kStartTimeout = std::chrono::seconds(120);
// How often a wait looks at the run's check.
constexpr int kPollMs = 20;
// The arena's first size; it grows to what the calls need.
constexpr uint64_t kInitialArena = 1 << 20;
constexpr size_t kStderrTail = 2048;

// Workers are forked from one thread that lives as long as kilnd: the child's
// PR_SET_PDEATHSIG fires when the thread that forked it exits, and the
// threads that run requests come and go.
absl::StatusOr<WorkerProcess> StartOnLauncherThread(const WorkerLaunch& launch) {
  struct Launcher {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;
    Launcher() {
      std::thread([this] {
        while (true) {
          std::function<void()> job;
          {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [this] { return !jobs.empty(); });
            job = std::move(jobs.front());
            jobs.pop_front();
          }
          job();
        }
      }).detach();
    }
  };
  static Launcher* launcher = new Launcher();  // never destroyed: its thread never ends
  std::packaged_task<absl::StatusOr<WorkerProcess>()> task(
      [&launch] { return StartWorkerProcess(launch, "libtorch fallback"); });
  std::future<absl::StatusOr<WorkerProcess>> result = task.get_future();
  {
    std::lock_guard<std::mutex> lock(launcher->mu);
    launcher->jobs.emplace_back([&task] { task(); });
  }
  launcher->cv.notify_one();
  return result.get();
}

std::string ErrnoText() { return std::strerror(errno); }

absl::Status Check(const kernels::EvalContext& ctx) {
  return ctx.check != nullptr ? (*ctx.check)() : absl::OkStatus();
}

}  // namespace

FallbackWorker::FallbackWorker(FallbackWorkerOptions options) : options_(std::move(options)) {}

FallbackWorker::~FallbackWorker() {
  std::lock_guard<std::timed_mutex> lock(mu_);
  StopLocked();
}

int FallbackWorker::pid() const {
  std::lock_guard<std::timed_mutex> lock(mu_);
  return pid_;
}

void FallbackWorker::StopLocked() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  for (int* fd : {&socket_, &stderr_, &memfd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
  arena_ = nullptr;
  arena_bytes_ = 0;
  sent_ops_.clear();
  stderr_tail_.clear();
  stderr_line_.clear();
}

void FallbackWorker::DrainStderrLocked() {
  if (stderr_ < 0) return;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(stderr_, buf, sizeof(buf));
    if (n == 0) {  // EOF: the worker is exiting; poll() must not see it again
      ::close(stderr_);
      stderr_ = -1;
    }
    if (n <= 0) return;  // EAGAIN: nothing more now
    stderr_tail_.append(buf, static_cast<size_t>(n));
    if (stderr_tail_.size() > 2 * kStderrTail) {
      stderr_tail_.erase(0, stderr_tail_.size() - kStderrTail);
    }
    // What the worker logs (libtorch's warnings, one per line) joins kilnd's log.
    stderr_line_.append(buf, static_cast<size_t>(n));
    size_t end;
    while ((end = stderr_line_.find('\n')) != std::string::npos) {
      if (end > 0) {
        spdlog::warn("{} (libtorch fallback worker): {}", options_.label,
                     stderr_line_.substr(0, end));
      }
      stderr_line_.erase(0, end + 1);
    }
    if (stderr_line_.size() > kStderrTail) stderr_line_.clear();
  }
}

absl::Status FallbackWorker::DeathLocked(const std::string& op_name) {
  int status = 0;
  bool reaped = false;
  if (pid_ > 0) {
    // The socket closed or broke: the worker is exiting; give it a moment to
    // finish, then make sure.
    const Clock::time_point until = Clock::now() + std::chrono::seconds(2);
    while (!(reaped = ::waitpid(pid_, &status, WNOHANG) == pid_) && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!reaped) {
      ::kill(pid_, SIGKILL);
      reaped = ::waitpid(pid_, &status, 0) == pid_;
    }
  }
  DrainStderrLocked();
  std::string tail = stderr_tail_;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  if (tail.size() > 400) tail = "..." + tail.substr(tail.size() - 400);
  const std::string said = tail.empty() ? "" : absl::StrCat("; it said: ", tail);
  const int pid = pid_;
  pid_ = -1;  // reaped (or beyond reach): StopLocked must not wait for it again
  StopLocked();
  const std::string after = "; kilnd is unaffected and the next request starts a new worker";
  spdlog::warn("{}: the libtorch fallback's worker (pid {}) ended running {}: {}", options_.label,
               pid, op_name,
               !reaped                ? std::string("not reaped")
               : WIFSIGNALED(status) ? DescribeSignal(WTERMSIG(status))
                                     : absl::StrCat("exit status ", WEXITSTATUS(status)));
  if (reaped && WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (LooksLikeOutOfMemory(said) || sig == SIGKILL) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the libtorch fallback's worker (pid ", pid, ") running ", op_name,
          " exceeded its memory limit of ", options_.limits.memory_bytes >> 20,
          " MiB (--import-memory-mb) and was stopped by ", DescribeSignal(sig), said, after));
    }
    return absl::InternalError(absl::StrCat("the libtorch fallback's worker (pid ", pid,
                                            ") crashed with ", DescribeSignal(sig),
                                            " running ", op_name, said, after));
  }
  return absl::InternalError(absl::StrCat(
      "the libtorch fallback's worker (pid ", pid, ") exited",
      reaped && WIFEXITED(status) ? absl::StrCat(" with status ", WEXITSTATUS(status)) : "",
      " running ", op_name, said, after));
}

absl::Status FallbackWorker::MapArenaLocked(uint64_t bytes, bool grow) {
  if (bytes > options_.limits.memory_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the libtorch fallback's operands and results need ", bytes >> 20,
        " MiB of shared memory, past the worker's memory limit of ",
        options_.limits.memory_bytes >> 20, " MiB (--import-memory-mb)"));
  }
  if (grow && ::ftruncate(memfd_, static_cast<off_t>(bytes)) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot grow the libtorch fallback's shared memory to ", bytes, " bytes: ",
                     ErrnoText()));
  }
  struct stat st;
  if (::fstat(memfd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes) {
    return absl::InternalError("the libtorch fallback's shared memory is smaller than announced");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot map the libtorch fallback's shared memory (", bytes, " bytes): ", ErrnoText()));
  }
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
  arena_ = static_cast<char*>(p);
  arena_bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status FallbackWorker::WriteLocked(const std::string& message) {
  if (!fp::WriteMessage(socket_, message, /*from_kilnd=*/true)) {
    return absl::UnavailableError(absl::StrCat("the socket broke: ", ErrnoText()));
  }
  return absl::OkStatus();
}

absl::Status FallbackWorker::ReadLocked(kernels::EvalContext& ctx, const std::string& op_name,
                                        std::string* reply) {
  std::string buffer;
  uint64_t want = 4;
  bool have_size = false;
  const Clock::time_point start = Clock::now();
  while (true) {
    if (absl::Status s = Check(ctx); !s.ok()) {
      spdlog::warn("{}: stopping the libtorch fallback's worker (pid {}) running {}: {}",
                   options_.label, pid_, op_name, std::string(s.message()));
      StopLocked();  // the op cannot be interrupted: the worker goes
      return absl::Status(
          s.code(), absl::StrCat(s.message(), " (in the libtorch fallback's worker, running ",
                                 op_name, "; the worker was stopped)"));
    }
    if (pid_ < 0) return absl::InternalError("no worker");
    // Only the start has a bound of its own: a run without a deadline waits
    // for as long as the op takes.
    if (ctx.check == nullptr && sent_ops_.empty() && Clock::now() - start > kStartTimeout) {
      StopLocked();
      return absl::DeadlineExceededError(
          absl::StrCat("the libtorch fallback's worker did not start within ",
                       std::chrono::duration_cast<std::chrono::seconds>(kStartTimeout).count(),
                       " s"));
    }
    struct pollfd fds[2] = {{socket_, POLLIN, 0}, {stderr_, POLLIN, 0}};
    const int ready = ::poll(fds, 2, kPollMs);
    if (ready < 0 && errno != EINTR) return DeathLocked(op_name);
    if (ready <= 0) continue;
    if (fds[1].revents != 0) DrainStderrLocked();
    if (fds[0].revents == 0) continue;
    char chunk[1 << 16];
    const size_t room = std::min<uint64_t>(sizeof(chunk), want - buffer.size());
    const ssize_t n = ::read(socket_, chunk, room);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return DeathLocked(op_name);
    buffer.append(chunk, static_cast<size_t>(n));
    if (buffer.size() < want) continue;
    if (!have_size) {
      const uint32_t size = fp::DecodeSize(reinterpret_cast<const unsigned char*>(buffer.data()));
      if (size > fp::kMaxMessage) {
        StopLocked();
        return absl::InternalError("the libtorch fallback's worker sent a message too large");
      }
      have_size = true;
      buffer.clear();
      want = size;
      if (want > 0) continue;
    }
    *reply = std::move(buffer);
    // The worker logged what it had to before it answered.
    DrainStderrLocked();
    return absl::OkStatus();
  }
}

absl::Status FallbackWorker::StartLocked(kernels::EvalContext& ctx) {
  const std::string op_name = ctx.node.source_op;
  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::InternalError(absl::StrCat("cannot create a socket pair: ", ErrnoText()));
  }
  memfd_ = ::memfd_create("kiln-fallback-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  std::string failed;
  if (memfd_ < 0) {
    failed = absl::StrCat("cannot create shared memory: ", ErrnoText());
  } else if (::fcntl(memfd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    // Sealed against shrinking, by anyone: the worker runs the model's code
    // and holds the same memory; shrunk under kilnd's mapping, the next read
    // of a lost page would be SIGBUS in the daemon. Both sides only grow it.
    failed = absl::StrCat("cannot seal the shared memory: ", ErrnoText());
    ::close(memfd_);
    memfd_ = -1;
  }
  if (!failed.empty()) {
    ::close(sockets[0]);
    ::close(sockets[1]);
    return absl::InternalError(failed);
  }
  if (absl::Status s = MapArenaLocked(kInitialArena, /*grow=*/true); !s.ok()) {
    ::close(sockets[0]);
    ::close(sockets[1]);
    StopLocked();
    return s;
  }
  WorkerLaunch launch;
  launch.args = {options_.binary,
                 "--fallback-worker",
                 std::to_string(options_.limits.memory_bytes),
                 options_.limits.sandbox ? options_.limits.sandbox_root : "off",
                 "--",
                 std::to_string(std::max(1, options_.num_threads))};
  launch.namespaces_arg = 4;
  launch.fds = {sockets[1], memfd_};
  launch.sandbox = options_.limits.sandbox;
  absl::StatusOr<WorkerProcess> child = StartOnLauncherThread(launch);
  ::close(sockets[1]);
  if (!child.ok()) {
    ::close(sockets[0]);
    StopLocked();
    return child.status();
  }
  pid_ = child->pid;
  socket_ = sockets[0];
  stderr_ = child->stderr_fd;
  ::fcntl(stderr_, F_SETFL, ::fcntl(stderr_, F_GETFL) | O_NONBLOCK);
  std::string text;
  RETURN_IF_ERROR(ReadLocked(ctx, op_name, &text));
  v1::FallbackReady ready;
  if (!ready.ParseFromString(text)) {
    StopLocked();
    return absl::InternalError("the libtorch fallback's worker said what does not parse");
  }
  if (ready.error().code() != 0) {
    StopLocked();
    return absl::Status(static_cast<absl::StatusCode>(ready.error().code()),
                        absl::StrCat("the libtorch fallback's worker could not start: ",
                                     ready.error().message()));
  }
  spdlog::info("{}: libtorch fallback worker started (pid {}; sandbox: {})", options_.label, pid_,
               ready.sandbox().empty() ? std::string("off") : ready.sandbox());
  return absl::OkStatus();
}

absl::Status FallbackWorker::CallLocked(uint64_t op_id, const v1::Node& op,
                                        kernels::EvalContext& ctx) {
  const std::string& op_name = ctx.node.source_op;
  // The operands, one after the other from offset 0.
  v1::FallbackCall call;
  call.set_op_id(op_id);
  if (sent_ops_.count(op_id) == 0) *call.mutable_op() = op;
  uint64_t end = 0;
  for (const Tensor* t : ctx.inputs) {
    v1::ArenaTensor* a = call.add_inputs();
    if (t == nullptr) {
      a->set_absent(true);
      continue;
    }
    a->set_dtype(DTypeName(t->dtype()));
    for (int64_t d : t->dims()) a->add_dims(d);
    a->set_offset(end);
    end = fp::AlignUp(end + t->byte_size());
  }
  if (end > arena_bytes_) {
    RETURN_IF_ERROR(MapArenaLocked(std::max<uint64_t>(end, 2 * arena_bytes_), /*grow=*/true));
  }
  for (int i = 0; i < call.inputs_size(); ++i) {
    const Tensor* t = ctx.inputs[i];
    if (t != nullptr && t->byte_size() > 0) {
      std::memcpy(arena_ + call.inputs(i).offset(), t->raw_data(), t->byte_size());
    }
  }
  call.set_arena_bytes(arena_bytes_);
  call.set_free_offset(end);
  if (!WriteLocked(call.SerializeAsString()).ok()) return DeathLocked(op_name);
  sent_ops_.insert(op_id);

  std::string text;
  RETURN_IF_ERROR(ReadLocked(ctx, op_name, &text));
  v1::FallbackReply reply;
  if (!reply.ParseFromString(text)) {
    StopLocked();
    return absl::InternalError("the libtorch fallback's worker answered what does not parse");
  }
  if (reply.arena_bytes() > arena_bytes_) {
    if (absl::Status s = MapArenaLocked(reply.arena_bytes(), /*grow=*/false); !s.ok()) {
      StopLocked();
      return s;
    }
  }
  if (reply.error().code() != 0) {
    const auto code = static_cast<absl::StatusCode>(reply.error().code());
    if (code == absl::StatusCode::kResourceExhausted) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the libtorch fallback's worker exceeded its memory limit of ",
          options_.limits.memory_bytes >> 20, " MiB (--import-memory-mb) running ", op_name,
          ": ", reply.error().message()));
    }
    return absl::Status(code, reply.error().message());
  }
  if (reply.outputs_size() > static_cast<int>(ctx.outputs.size())) {
    return absl::InternalError(absl::StrCat("the libtorch fallback's worker gave ",
                                            reply.outputs_size(), " results for ",
                                            ctx.outputs.size()));
  }
  for (int o = 0; o < reply.outputs_size(); ++o) {
    const v1::ArenaTensor& a = reply.outputs(o);
    if (a.dtype().empty()) continue;  // not produced: the executor says so
    ASSIGN_OR_RETURN(WireTensorType type, WireTensorTypeFromProto(a.dtype(), a.dims()));
    const std::string what = absl::StrCat(op_name, " result ", o);
    ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(type.dtype, type.dims, what));
    const uint64_t bytes = out.byte_size();
    if (a.offset() > arena_bytes_ || bytes > arena_bytes_ - a.offset()) {
      return absl::InternalError(absl::StrCat(what, " lies outside the shared memory"));
    }
    if (bytes > 0) std::memcpy(out.raw_data(), arena_ + a.offset(), bytes);
    *ctx.outputs[o] = std::move(out);
  }
  return absl::OkStatus();
}

absl::Status FallbackWorker::Run(uint64_t op_id, const v1::Node& op, kernels::EvalContext& ctx) {
  // Another request's op may hold the worker for long: wait for it within
  // this run's own bounds.
  std::unique_lock<std::timed_mutex> lock(mu_, std::defer_lock);
  while (!lock.try_lock_for(std::chrono::milliseconds(kPollMs))) {
    if (absl::Status s = Check(ctx); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat(s.message(), " (waiting for the libtorch fallback's worker "
                                                    "to run ", ctx.node.source_op, ")"));
    }
  }
  if (pid_ > 0) {
    // Gone while idle (killed from outside, say): this call starts a new one.
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      spdlog::warn("{}: the libtorch fallback's worker (pid {}) ended while idle ({}); starting "
                   "a new one", options_.label, pid_,
                   WIFSIGNALED(status) ? DescribeSignal(WTERMSIG(status))
                                       : absl::StrCat("exit status ", WEXITSTATUS(status)));
      pid_ = -1;
      StopLocked();
    }
  }
  if (pid_ < 0) RETURN_IF_ERROR(StartLocked(ctx));
  return CallLocked(op_id, op, ctx);
}

}  // namespace kiln::server
