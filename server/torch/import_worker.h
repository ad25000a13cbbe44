// Imports TorchScript files in a short-lived child process, so a hostile or
// broken file that crashes, hangs or exhausts memory inside libtorch takes
// down only the child, and the file's code runs sandboxed. The verified
// import's libtorch run (the uploaded program run on the samples) happens in
// the same kind of child, under the same limits: kilnd never runs the
// uploaded program itself. kilnd starts the worker program that links
// libtorch, kiln-torch-worker (server/torch/worker/worker_main.cc), or, for a
// file that needs no libtorch (a torch.export archive), itself in a hidden mode:
//   kiln-torch-worker|kilnd --import-worker MODEL_FILE KEY MEMORY_BYTES
//                           SANDBOX_ROOT|off NAMESPACES JOB
// (fork + exec, so the child starts clean instead of inheriting the daemon's
// threads). Between fork and exec, while it is still single-threaded, the
// child enters new namespaces where the kernel lets it (server/security/sandbox.h
// step 1; NAMESPACES tells the worker which took; JOB is "-" for an import,
// "force-fallback:OPS" for one with ops forced onto the fallback, or
// "reference:REQUEST_FILE" for a reference run). The worker loads libtorch,
// limits its own address space (RLIMIT_AS) to what it uses then plus
// MEMORY_BYTES, reads the model file, enters the sandbox (sandbox.h: empty
// root, unprivileged uid, no new privileges, seccomp), and only then imports.
// It writes the serialized graph (or the importer's error) as a checksummed
// cache file (engine/cache) with the given key to descriptor 3, a file the
// daemon created (the worker can open none); given the compiled-graph
// cache's own path and key for the file, the imported graph lands in the
// cache without being written twice. The daemon enforces the time limit with
// SIGKILL, reads the answer, and turns a crash or a limit into a clear error
// for the client.
//
// Test-only hook: with KILN_TEST_IMPORT_FAULT=crash|hang|oom|escape in its
// environment, the worker segfaults, sleeps forever, allocates until its
// memory limit stops it, or tries to leave the sandbox (read /etc/passwd,
// write files, open sockets, exec, fork, signal or trace its parent, mount,
// chroot, setuid; KILN_TEST_ESCAPE_FILE names one more file to try to
// create) and fails the import with what each attempt got, instead of
// importing; KILN_TEST_REFERENCE_FAULT does the same in a reference run
// (the verified import's libtorch run) instead of running the program.
// Tests use them to check the daemon's handling of each failure and that
// the sandbox holds; they have no other use.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/cache/cache_file.h"
#include "server/torch/import_limits.h"

namespace kiln::server {

// The worker program's file name, looked for beside kilnd.
inline constexpr char kTorchWorkerFile[] = "kiln-torch-worker";

// The sandbox layers the last sandboxed import reported ("" before one ran).
std::string LastSandboxSummary();

// Where the child writes its answer: a cache file at `path` with `key`. On
// success it stays there when `keep` (it is the cache's entry); otherwise it
// is removed once read.
struct ImportAnswer {
  std::string path;
  std::string key;
  bool keep = false;
};

// Imports `model_path` by running `worker_binary --import-worker ...`; returns
// the serialized graph (cache::SerializeGraph's format), read into an aligned
// buffer that cache::ParseGraph can leave the weights in. Fails with the
// importer's own error (InvalidArgument, Unimplemented), with InvalidArgument
// when the child crashes, with ResourceExhausted when it exceeds the memory
// limit, DeadlineExceeded when it exceeds the time limit, Internal when the
// sandbox could not be set up, and with
// limits.stop's status when that says to stop. When the graph imported but cannot be serialized,
// the status is Unimplemented and IsNotSerializable() is true: the caller may
// import in process instead.
// `force_fallback` as importer::ImportOptions::force_fallback.
absl::StatusOr<cache::Payload> ImportInChildProcess(
    const std::string& worker_binary, const std::string& model_path, const ImportAnswer& answer,
    const ImportLimits& limits, const std::vector<std::string>& force_fallback = {});

// The verified import's libtorch half (engine/verify/verify.h,
// TorchReference) for the TorchScript file `model_path`, in the same
// sandboxed child: it reads the serialized v1::ReferenceRequest at
// `request_path` before it enters the sandbox, and answers a
// v1::ReferenceAnswer (the payload returned). Fails as ImportInChildProcess,
// its messages naming "the verified import's libtorch run".
absl::StatusOr<cache::Payload> ReferenceInChildProcess(const std::string& worker_binary,
                                                       const std::string& model_path,
                                                       const std::string& request_path,
                                                       const ImportAnswer& answer,
                                                       const ImportLimits& limits);

bool IsNotSerializable(const absl::Status& status);

// ----------------------------------------------------------------------------
// What the import child and the libtorch fallback's worker
// (server/torch/fallback_worker.h) share.

// A worker child started as the import child is: fork + exec of `args`
// (args[0] the program: kiln-torch-worker, or kilnd itself), in its own process group, killed when
// the thread that started it exits (PR_SET_PDEATHSIG), no core files, stdin
// and stdout on /dev/null, stderr on a pipe, `fds` as descriptors 3, 4, ...
// (at most 16) and nothing else open; with `sandbox`, in new network (and,
// not as root, user and mount) namespaces where the kernel allows it. The
// child writes which took over args[namespaces_arg] before exec: 'n'
// network, 'u' user (pass "--").
struct WorkerLaunch {
  std::vector<std::string> args;
  size_t namespaces_arg = 0;
  std::vector<int> fds;
  bool sandbox = true;
  int cpu_limit_s = 0;  // RLIMIT_CPU; 0: none
};

struct WorkerProcess {
  int pid = -1;
  int stderr_fd = -1;  // the read end of its stderr; the caller closes it
};

// FailedPrecondition ("libtorch is needed ...") when args[0] cannot be run
// (a kilnd without kiln-torch-worker); Internal when the pipe or the fork
// fails; `what` names the worker.
absl::StatusOr<WorkerProcess> StartWorkerProcess(const WorkerLaunch& launch,
                                                 const std::string& what);

// In the worker, once it holds what it needs: enters the sandbox of
// server/security/sandbox.h, chrooted into `sandbox_root`, with `namespaces` as the
// launch reported them. Returns the layers that took, for the log
// ("network namespace, empty root (chroot), ..., seccomp (entered in 0.4 ms)").
absl::StatusOr<std::string> EnterWorkerSandbox(const std::string& sandbox_root,
                                               absl::string_view namespaces);

// Caps the address space at what the process maps now plus `extra` bytes, so
// the limit means "memory the worker may use", whatever libtorch maps at load.
void LimitAddressSpace(uint64_t extra);

// Whether a message or a worker's stderr says an allocation failed.
bool LooksLikeOutOfMemory(absl::string_view text);

// "signal 11 (Segmentation fault)".
std::string DescribeSignal(int sig);

// Test-only faults (KILN_TEST_*_FAULT): "crash", "hang" and "oom" do what they
// say (anything else returns); the escape probe tries every way out of the
// sandbox and returns "what: refused (errno text)" or "what: ALLOWED" per
// attempt, joined by "; ". Given the descriptor of memory the worker shares
// with kilnd, it also tries to shrink that.
void RunCrashHangOrOomFault(const char* fault);
std::string SandboxEscapeProbe(int shared_with_kilnd = -1);

// The --import-worker mode of kiln-torch-worker and kilnd; argv as above.
// Returns the exit status.
int ImportWorkerMain(int argc, char** argv);

}  // namespace kiln::server
