// Thread pinning (engine/kernels/thread_binding.h): which CPUs each team gets,
// and that a pinned team's members stay on their CPUs in later regions, the
// ones a model's kernels run in.
#include "engine/kernels/thread_binding.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <thread>
#include <vector>

namespace kiln::kernels {
namespace {

using Plan = std::vector<std::vector<int>>;

TEST(ThreadBindingTest, ParsesTheThreeModes) {
  EXPECT_EQ(*ParseThreadPinning("auto"), ThreadPinning::kAuto);
  EXPECT_EQ(*ParseThreadPinning("on"), ThreadPinning::kOn);
  EXPECT_EQ(*ParseThreadPinning("off"), ThreadPinning::kOff);
  auto bad = ParseThreadPinning("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auto, on or off"), std::string::npos);
  for (auto mode : {ThreadPinning::kAuto, ThreadPinning::kOn, ThreadPinning::kOff})
    EXPECT_EQ(*ParseThreadPinning(ThreadPinningName(mode)), mode);
}

TEST(ThreadBindingTest, AutoGivesEachTeamCpusOfItsOwn) {
  const std::vector<int> cpus = {0, 1, 2, 3, 6, 7};  // a cpuset with a hole
  EXPECT_EQ(PlanTeamCpus(3, 2, ThreadPinning::kAuto, cpus), (Plan{{0, 1}, {2, 3}, {6, 7}}));
  EXPECT_EQ(PlanTeamCpus(2, 3, ThreadPinning::kAuto, cpus), (Plan{{0, 1, 2}, {3, 6, 7}}));
  EXPECT_EQ(PlanTeamCpus(1, 2, ThreadPinning::kAuto, {0, 1}), (Plan{{0, 1}}));
}

TEST(ThreadBindingTest, AutoLeavesSingleThreadsAndOversubscribedTeamsUnpinned) {
  // One thread: no team to keep apart.
  EXPECT_EQ(PlanTeamCpus(2, 1, ThreadPinning::kAuto, {0, 1}), (Plan{{}, {}}));
  // Teams that would share CPUs: the scheduler places them.
  EXPECT_EQ(PlanTeamCpus(2, 2, ThreadPinning::kAuto, {0, 1}), (Plan{{}, {}}));
  EXPECT_EQ(PlanTeamCpus(1, 4, ThreadPinning::kAuto, {0, 1}), (Plan{{}}));
  // Teams that leave CPUs over: a second process could pin to the same ones.
  EXPECT_EQ(PlanTeamCpus(1, 2, ThreadPinning::kAuto, {0, 1, 2, 3}), (Plan{{}}));
  EXPECT_EQ(PlanTeamCpus(1, 2, ThreadPinning::kOn, {0, 1, 2, 3}), (Plan{{0, 1}}));
  EXPECT_EQ(PlanTeamCpus(2, 2, ThreadPinning::kOff, {0, 1, 2, 3}), (Plan{{}, {}}));
  EXPECT_EQ(PlanTeamCpus(1, 2, ThreadPinning::kAuto, {}), (Plan{{}}));
}

TEST(ThreadBindingTest, AutoLeavesTeamsUnpinnedUnderACpuLimitBelowTheAllowedCpus) {
  // A container limited to 2 cores of a 4-CPU machine's time.
  EXPECT_EQ(PlanTeamCpus(2, 2, ThreadPinning::kAuto, {0, 1, 2, 3}, 2), (Plan{{}, {}}));
  EXPECT_EQ(PlanTeamCpus(2, 2, ThreadPinning::kAuto, {0, 1, 2, 3}, 4), (Plan{{0, 1}, {2, 3}}));
  EXPECT_EQ(PlanTeamCpus(1, 2, ThreadPinning::kOn, {0, 1, 2, 3}, 2), (Plan{{0, 1}}));
}

TEST(ThreadBindingTest, ReadsCgroupCpuLimits) {
  EXPECT_EQ(ParseCpuMax("200000 100000"), 2);
  EXPECT_EQ(ParseCpuMax("150000 100000"), 1);  // whole cores, rounded down
  EXPECT_EQ(ParseCpuMax("50000 100000"), 1);   // at least one
  EXPECT_EQ(ParseCpuMax("max 100000"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("-1 100000"), std::nullopt);  // cgroup v1's "no limit"
  EXPECT_EQ(ParseCpuMax(""), std::nullopt);
  EXPECT_EQ(UsableCpus({0, 1, 2, 3}, 2), 2);
  EXPECT_EQ(UsableCpus({0, 1}, std::nullopt), 2);
  EXPECT_EQ(UsableCpus({}, std::nullopt), 1);
  // This process's own: whatever it is, within 1 and the allowed CPUs.
  const int usable = UsableCpus(AllowedCpus(), CpuQuotaCores());
  EXPECT_GE(usable, 1);
  EXPECT_LE(usable, static_cast<int>(AllowedCpus().size()));
}

TEST(ThreadBindingTest, OnPinsEvenWhenTeamsShareCpus) {
  EXPECT_EQ(PlanTeamCpus(2, 2, ThreadPinning::kOn, {0, 1, 2}), (Plan{{0, 1}, {2, 0}}));
  EXPECT_EQ(PlanTeamCpus(2, 1, ThreadPinning::kOn, {4, 5}), (Plan{{4}, {5}}));
}

// The CPU each member of a region of `n` threads may run on (-1: more than one).
std::vector<int> MemberCpus(int n) {
  std::vector<int> where(n, -2);
#pragma omp parallel num_threads(n)
  {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    int only = -1;
    if (CPU_COUNT(&set) == 1)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) only = c;
    where[omp_get_thread_num()] = only;
  }
  return where;
}

TEST(ThreadBindingTest, PinnedTeamKeepsItsCpusInLaterRegions) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const int n = allowed.size() >= 2 ? 2 : 1;
  const std::vector<int> cpus(allowed.end() - n, allowed.end());  // the last ones, not CPU 0
  // On a thread of its own, as a compute thread: its team dies with it.
  std::thread([&] {
    ASSERT_TRUE(PinTeam(cpus).ok());
    for (int round = 0; round < 3; ++round) EXPECT_EQ(MemberCpus(n), cpus) << round;
  }).join();
  // The test's own thread was not touched.
  EXPECT_EQ(AllowedCpus(), allowed);
}

TEST(ThreadBindingTest, ACpuOutsideTheMaskFailsWithItsNumber) {
  std::thread([] {
    const absl::Status pinned = PinTeam({CPU_SETSIZE - 1});
    ASSERT_FALSE(pinned.ok());
    EXPECT_NE(pinned.message().find(std::to_string(CPU_SETSIZE - 1)), std::string::npos)
        << pinned.message();
  }).join();
  EXPECT_TRUE(PinTeam({}).ok());
}

}  // namespace
}  // namespace kiln::kernels
