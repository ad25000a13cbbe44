#include "engine/kernels/thread_binding.h"

#include <omp.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/kernels/kernel.h"

namespace kiln::kernels {

absl::StatusOr<ThreadPinning> ParseThreadPinning(std::string_view text) {
  if (text == "auto") return ThreadPinning::kAuto;
  if (text == "on") return ThreadPinning::kOn;
  if (text == "off") return ThreadPinning::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("thread pinning must be auto, on or off, not \"", std::string(text), "\""));
}

std::string_view ThreadPinningName(ThreadPinning pinning) {
  switch (pinning) {
    case ThreadPinning::kAuto:
      return "auto";
    case ThreadPinning::kOn:
      return "on";
    case ThreadPinning::kOff:
      return "off";
  }
  return "?";
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<std::vector<int>> PlanTeamCpus(int teams, int threads, ThreadPinning pinning,
                                           const std::vector<int>& allowed) {
  std::vector<std::vector<int>> plan(teams > 0 ? teams : 0);
  if (pinning == ThreadPinning::kOff || allowed.empty() || threads < 1) return plan;
  if (pinning == ThreadPinning::kAuto &&
      (threads < 2 || static_cast<int64_t>(teams) * threads != static_cast<int64_t>(allowed.size())))
    return plan;
  size_t next = 0;
  for (auto& team : plan)
    for (int t = 0; t < threads; ++t) team.push_back(allowed[next++ % allowed.size()]);
  return plan;
}

absl::Status PinTeam(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::OkStatus();
  const int n = static_cast<int>(cpus.size());
  UseThreads(n);
  std::atomic<int> failed_cpu{-1}, failed_errno{0};
  // One region of the team's size: libgomp keeps the same pool thread as
  // member t of every later region of this size from this thread.
#pragma omp parallel num_threads(n)
  {
    const int t = omp_get_thread_num();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[t], &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
      failed_errno = errno;
      failed_cpu = cpus[t];
    }
  }
  if (failed_cpu >= 0)
    return absl::InternalError(absl::StrCat("cannot pin a thread to CPU ", failed_cpu.load(), ": ",
                                            std::strerror(failed_errno.load())));
  return absl::OkStatus();
}

void WakeTeam(int num_threads) {
  if (num_threads < 2) return;
  UseThreads(num_threads);
#pragma omp parallel num_threads(num_threads)
  {
    // Nothing: the region's start wakes the members, its end waits for them.
  }
}

}  // namespace kiln::kernels
