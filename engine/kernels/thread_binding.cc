#include "engine/kernels/thread_binding.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>

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

std::optional<int> ParseCpuMax(std::string_view text) {
  const std::string s(text);
  long long quota = 0, period = 0;
  if (std::sscanf(s.c_str(), "%lld %lld", &quota, &period) != 2 || quota <= 0 || period <= 0)
    return std::nullopt;  // "max PERIOD", or nothing readable
  return static_cast<int>(std::max<long long>(1, quota / period));
}

namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text;
  std::getline(in, text);
  return text;
}

std::optional<int> Min(std::optional<int> a, std::optional<int> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

}  // namespace

std::optional<int> CpuQuotaCores() {
  // The limit may sit on the process's cgroup or any ancestor; the tightest
  // wins. In a container with its own cgroup namespace the path is "/".
  auto walk = [](std::string path, const std::function<std::optional<int>(const std::string&)>& at) {
    std::optional<int> cores;
    for (;;) {
      cores = Min(cores, at(path == "/" ? std::string() : path));
      if (path.empty() || path == "/") return cores;
      path = path.substr(0, path.rfind('/'));
    }
  };
  std::optional<int> cores;
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    // ID:CONTROLLERS:PATH; ID 0 is cgroup v2's unified hierarchy.
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (id == "0") {
      cores = Min(cores, walk(path, [](const std::string& dir) {
                    auto text = ReadSmallFile("/sys/fs/cgroup" + dir + "/cpu.max");
                    return text ? ParseCpuMax(*text) : std::nullopt;
                  }));
      continue;
    }
    if (("," + controllers + ",").find(",cpu,") == std::string::npos) continue;
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
      cores = Min(cores, walk(path, [mount](const std::string& dir) -> std::optional<int> {
                    auto quota = ReadSmallFile(mount + dir + "/cpu.cfs_quota_us");
                    auto period = ReadSmallFile(mount + dir + "/cpu.cfs_period_us");
                    if (!quota || !period) return std::nullopt;
                    return ParseCpuMax(*quota + " " + *period);
                  }));
    }
  }
  return cores;
}

int UsableCpus(const std::vector<int>& allowed, std::optional<int> quota_cores) {
  int cpus = std::max(1, static_cast<int>(allowed.size()));
  if (quota_cores) cpus = std::min(cpus, *quota_cores);
  return cpus;
}

std::vector<std::vector<int>> PlanTeamCpus(int teams, int threads, ThreadPinning pinning,
                                           const std::vector<int>& allowed,
                                           std::optional<int> quota_cores) {
  std::vector<std::vector<int>> plan(teams > 0 ? teams : 0);
  if (pinning == ThreadPinning::kOff || allowed.empty() || threads < 1) return plan;
  if (pinning == ThreadPinning::kAuto &&
      (threads < 2 || (quota_cores && *quota_cores < static_cast<int>(allowed.size())) ||
       static_cast<int64_t>(teams) * threads != static_cast<int64_t>(allowed.size())))
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
