// Pinning a thread budget's OpenMP team to CPUs, one thread per CPU.
//
// Why: a team's threads spin at the end of each parallel region (libgomp's
// default wait policy), and between requests they sleep. When a request
// wakes them, the kernel may queue a woken member on the CPU its master
// runs on, and the member then waits behind the master's spin, or the master
// behind the member's, until a scheduler tick: measured on a 2-vCPU KVM
// guest with an EEVDF kernel, mobilenet_v2 at 2 threads took 5.5 to 10.8 ms
// per call unpinned and 4.9 to 5.2 ms pinned, and a 0.2 ms model served
// through kilnd's local socket 1.5 to 3.1 ms later than in process unpinned
// and 0.4 ms pinned (docs/performance.md). OpenMP's own OMP_PROC_BIND does
// the same for the process's first team only; a server runs one team per
// compute thread, each on CPUs of its own (PlanTeamCpus).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::kernels {

enum class ThreadPinning {
  kAuto,  // pin teams of 2+ threads when they fill the allowed CPUs exactly
  kOn,    // pin every team, sharing CPUs round-robin when there are too few
  kOff,   // never pin: the kernel's scheduler places every thread
};

absl::StatusOr<ThreadPinning> ParseThreadPinning(std::string_view text);  // auto|on|off
std::string_view ThreadPinningName(ThreadPinning pinning);

// The CPUs this process may run on (its affinity mask, which a container's
// cpuset or taskset narrows), ascending.
std::vector<int> AllowedCpus();

// The CPU time this process's cgroup may use, in whole cores (rounded down,
// at least 1): a container's CPU limit (Kubernetes' resources.limits.cpu,
// `docker run --cpus`), read from cgroup v2's cpu.max of the process's
// cgroup and its ancestors, or cgroup v1's cpu.cfs_quota_us. None: no limit.
std::optional<int> CpuQuotaCores();
// cpu.max's text ("200000 100000": 2 cores; "max 100000": none).
std::optional<int> ParseCpuMax(std::string_view text);

// How many CPUs this process can keep busy: the `allowed` CPUs (AllowedCpus),
// bounded by the CPU quota (CpuQuotaCores), at least 1. kilnd sizes its
// compute threads from it.
int UsableCpus(const std::vector<int>& allowed, std::optional<int> quota_cores);

// The CPUs of each of `teams` teams of `threads` threads: team k takes
// `allowed`'s CPUs from index k * threads on (wrapping round under kOn when
// they do not suffice). An empty list leaves that team unpinned: every team
// under kOff, and under kAuto when a team has one thread (nothing to
// co-locate), when a CPU quota below the allowed CPUs applies (`quota_cores`:
// the process shares those CPUs with others in its time slices, and other
// processes would pin to the same first ones), or when teams * threads is not
// exactly the allowed CPUs: more, and pinned teams would share CPUs, where
// the scheduler does better; fewer, and the process is not sized to own the
// CPUs it may use (a second kilnd on the same machine would pin to the same
// first ones).
std::vector<std::vector<int>> PlanTeamCpus(int teams, int threads, ThreadPinning pinning,
                                           const std::vector<int>& allowed,
                                           std::optional<int> quota_cores = std::nullopt);

// Pins the calling thread's OpenMP team (Kiln's loops, oneDNN, the GEMMs):
// its thread budget becomes cpus.size() threads (UseThreads), and member t of
// that team, the calling thread being member 0, runs on cpus[t] only. Call it
// once, on a thread that keeps its team (a compute thread), before the thread
// runs a model; later regions of the same size reuse the pinned members. An
// empty list does nothing. Fails, pinning nothing further, when the kernel
// refuses a CPU (one outside the affinity mask).
absl::Status PinTeam(const std::vector<int>& cpus);

// Wakes the calling thread's OpenMP team of `num_threads` threads with an
// empty parallel region and returns once every member has woken: they then
// spin (libgomp's default wait policy), so the next region starts at once.
// A compute thread calls it when a request is on its way (ComputePool's
// Prewake), so the members' wake-up overlaps the request's decoding. One
// thread: nothing to do.
void WakeTeam(int num_threads);

}  // namespace kiln::kernels
