// The walls around a process that runs untrusted TorchScript through
// libtorch: today the import child (server/torch/import_worker.h). A model is
// untrusted code: libtorch's interpreter runs what the file says, and a bug in
// it, or an op with side effects on the host (aten::from_file), must not reach
// the daemon, its files, the network or other processes.
//
// EnterSandbox() is called by the process on itself, after it has loaded
// libtorch and read its input (the model file) and opened its output (the
// answer file, kept as an open descriptor), and before it touches the
// untrusted bytes. In order:
//   1. namespaces: a new network namespace (no interface but a loopback that
//      is down) and mount namespace, where the kernel allows it: as root with
//      CAP_SYS_ADMIN, or as any user through a new user namespace;
//   2. file system: chroot into an empty, read-only directory, where allowed
//      (root, or a user namespace): no path the process names leads anywhere;
//   3. credentials: as root, switch to an unprivileged uid/gid (65534,
//      "nobody") with no supplementary groups; capabilities are dropped;
//   4. no new privileges (PR_SET_NO_NEW_PRIVS), not dumpable, no core files,
//      a bound on open files;
//   5. a seccomp filter (libseccomp) that allows the system calls libtorch's
//      interpreter and kernels make (memory, threads, futexes, reading and
//      writing descriptors already open, time, signals to itself) and
//      refuses everything else with EPERM: opening any file, sockets of any
//      family, exec, fork (clone is allowed only for threads), ptrace,
//      mount, chroot, namespaces, setuid, signals to other processes, BPF,
//      kernel modules, keyrings, raising limits.
// Steps 1-3 depend on the kernel and the privileges kilnd runs with; the
// report says which ones took. Step 5 must take: without it the process must
// not go on (the caller refuses the import).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::server {

struct SandboxOptions {
  // An empty directory to chroot into (created 0555 if missing; must be on a
  // file system the process can reach now).
  std::string empty_root;
  // Where root switches to.
  unsigned uid = 65534;
  unsigned gid = 65534;
  // The process is root only inside a user namespace of its own (made for
  // it before exec, mapping its root to the daemon's unprivileged uid): it
  // keeps that uid and drops its capabilities.
  bool own_user_namespace = false;
};

struct SandboxReport {
  std::vector<std::string> applied;      // e.g. "seccomp", "network namespace"
  std::vector<std::string> unavailable;  // e.g. "network namespace (Operation not permitted)"
  // "seccomp, no-new-privs, ...; unavailable: ..."
  std::string Summary() const;
};

// Enters the sandbox, irreversibly, for the calling process (single-threaded
// or not: seccomp is synchronized over every thread). Fails with Internal,
// leaving the process in an unspecified part of the sandbox, when the
// seccomp filter cannot be installed or the credentials cannot be dropped.
absl::StatusOr<SandboxReport> EnterSandbox(const SandboxOptions& options);

}  // namespace kiln::server
