#include "server/security/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::server {
namespace {

// Open descriptors the sandboxed process may hold: stdio, its answer, and
// what libtorch makes for itself (eventfds, pipes, memfds).
constexpr rlim_t kMaxOpenFiles = 64;

std::string Errno() { return std::strerror(errno); }

// What libtorch's interpreter and CPU kernels (ATen, OpenMP, oneDNN,
// OpenBLAS), glibc's allocator and C++ runtime call once the libraries are
// loaded; measured with strace on imports and runs of the test zoo, plus
// what those libraries call on paths the zoo does not take (thread pools,
// affinity, JIT code buffers). Everything else fails with EPERM.
constexpr const char* kAllowed[] = {
    // memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "membarrier",
    "get_mempolicy",
    // threads and synchronization (clone: threads only, below)
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq", "set_tid_address",
    "gettid", "getpid", "getppid", "sched_yield", "sched_getaffinity",
    "sched_getparam", "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
    "getpriority", "exit", "exit_group", "restart_syscall",
    // time
    "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
    "getrusage", "times", "getcpu",
    // signals (to itself: kill and tgkill below)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "sigaltstack",
    // descriptors already open: stdio, the answer; pipes, eventfds, memfds of its own
    "read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "close", "fstat",
    "newfstatat", "statx", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "poll", "ppoll",
    "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
    "eventfd2", "memfd_create", "ftruncate", "fsync", "fdatasync", "fallocate",
    // identity and limits, read only (prlimit64: reading, below)
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "uname",
    "getrlimit", "sysinfo", "getrandom", "getcwd", "prctl",
};

absl::Status SeccompError(const char* what, int rc) {
  return absl::InternalError(absl::StrCat("seccomp: ", what, ": ", std::strerror(-rc)));
}

// Installs the filter of sandbox.h step 5 on every thread of the process.
absl::Status InstallSeccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (ctx == nullptr) return absl::InternalError("seccomp: cannot create a filter");
  struct Release {
    scmp_filter_ctx ctx;
    ~Release() { seccomp_release(ctx); }
  } release{ctx};
  int rc = 0;
  for (const char* name : kAllowed) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0) return SeccompError(name, rc);
  }
  const scmp_datum_t self = static_cast<scmp_datum_t>(::getpid());
  // clone: a thread of this process (CLONE_THREAD), never a new process.
  rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
  if (rc < 0) return SeccompError("clone", rc);
  // clone3 passes its flags in memory a filter cannot read: ENOSYS makes glibc
  // fall back to clone.
  rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc < 0) return SeccompError("clone3", rc);
  // Signals only to itself (raise(), abort(), a thread pool waking a thread).
  rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, self));
  if (rc < 0) return SeccompError("kill", rc);
  rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, self));
  if (rc < 0) return SeccompError("tgkill", rc);
  // Affinity of itself only: a thread pool pins its threads through their own
  // thread (0); another process of the same uid (the daemon, in a user
  // namespace) is left alone.
  for (scmp_datum_t pid : {scmp_datum_t{0}, self}) {
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sched_setaffinity), 1,
                          SCMP_A0(SCMP_CMP_EQ, pid));
    if (rc < 0) return SeccompError("sched_setaffinity", rc);
  }
  // prlimit64(0, resource, NULL, old): reading its own limits, never setting.
  rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0),
                        SCMP_A2(SCMP_CMP_EQ, 0));
  if (rc < 0) return SeccompError("prlimit64", rc);
  if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0) {
    return SeccompError("cannot synchronize threads", rc);
  }
  if ((rc = seccomp_load(ctx)) < 0) return SeccompError("cannot load the filter", rc);
  return absl::OkStatus();
}

// Drops every capability of every set (effective, permitted, inheritable) of
// the calling thread; setuid() below does it for every thread when root.
void DropCapabilities() {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  ::syscall(SYS_capset, &header, data);
}

}  // namespace

std::string SandboxReport::Summary() const {
  std::string s = absl::StrJoin(applied, ", ");
  if (!unavailable.empty()) absl::StrAppend(&s, "; unavailable: ", absl::StrJoin(unavailable, ", "));
  return s;
}

absl::StatusOr<SandboxReport> EnterSandbox(const SandboxOptions& options) {
  SandboxReport report;
  const bool root = ::geteuid() == 0 && !options.own_user_namespace;

  // 2. An empty root. Root may chroot; so may a process in its own user
  // namespace (made before exec, see import_worker.cc).
  if (!options.empty_root.empty()) {
    ::mkdir(options.empty_root.c_str(), 0555);
    if (::chroot(options.empty_root.c_str()) == 0 && ::chdir("/") == 0) {
      report.applied.push_back("empty root (chroot)");
    } else {
      report.unavailable.push_back(absl::StrCat("chroot (", Errno(), ")"));
    }
  }

  // 3. Credentials: root becomes nobody; glibc applies setres[ug]id to every
  // thread. Failing to leave root is fatal: the rest assumes it.
  if (root) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(options.gid, options.gid, options.gid) != 0 ||
        ::setresuid(options.uid, options.uid, options.uid) != 0) {
      return absl::InternalError(
          absl::StrCat("cannot switch to uid ", options.uid, " gid ", options.gid, ": ", Errno()));
    }
    report.applied.push_back(absl::StrCat("uid/gid ", options.uid, "/", options.gid));
  }
  DropCapabilities();

  // 4. No way back up, nothing to attach to, no core, few files.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return absl::InternalError(absl::StrCat("cannot set no-new-privs: ", Errno()));
  }
  report.applied.push_back("no-new-privs");
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  struct rlimit limit = {0, 0};
  ::setrlimit(RLIMIT_CORE, &limit);
  limit.rlim_cur = limit.rlim_max = kMaxOpenFiles;
  ::setrlimit(RLIMIT_NOFILE, &limit);

  // 5. The filter; it must take.
  if (absl::Status s = InstallSeccomp(); !s.ok()) return s;
  report.applied.push_back("seccomp");
  return report;
}

}  // namespace kiln::server
