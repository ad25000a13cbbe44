// ComputePool: tasks run on its own threads (the same ones every time, so
// each keeps its OpenMP team), at most `workers` at once; a queued task whose
// deadline passes or whose stop check fails is refused and never runs.
#include "server/compute_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

namespace kiln::server {
namespace {

using std::chrono::milliseconds;

ComputePool::Clock::time_point Later(int ms) {
  return ComputePool::Clock::now() + milliseconds(ms);
}

TEST(ComputePoolTest, RunsOnTheSameComputeThreads) {
  ComputePool pool(1);
  std::set<std::thread::id> ids;
  for (int i = 0; i < 5; ++i) {
    uint64_t queue_ns = 1;
    ASSERT_TRUE(pool.Run([&] { ids.insert(std::this_thread::get_id()); }, Later(10000), nullptr,
                         &queue_ns)
                    .ok());
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
}

TEST(ComputePoolTest, AtMostWorkersAtOnce) {
  ComputePool pool(2);
  std::atomic<int> running{0}, peak{0};
  std::vector<std::future<absl::Status>> calls;
  for (int i = 0; i < 6; ++i) {
    calls.push_back(std::async(std::launch::async, [&] {
      return pool.Run(
          [&] {
            const int now = ++running;
            int seen = peak.load();
            while (now > seen && !peak.compare_exchange_weak(seen, now)) {
            }
            std::this_thread::sleep_for(milliseconds(20));
            --running;
          },
          Later(10000), nullptr);
    }));
  }
  for (auto& c : calls) EXPECT_TRUE(c.get().ok());
  EXPECT_EQ(peak.load(), 2);
}

TEST(ComputePoolTest, QueuedPastItsDeadlineNeverRuns) {
  ComputePool pool(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto busy = std::async(std::launch::async, [&] {
    return pool.Run([&] { released.wait(); }, Later(10000), nullptr);
  });
  std::this_thread::sleep_for(milliseconds(20));  // the worker is busy now
  bool ran = false;
  const absl::Status late = pool.Run([&] { ran = true; }, Later(30), nullptr);
  EXPECT_TRUE(absl::IsDeadlineExceeded(late)) << late;
  const absl::Status stopped =
      pool.Run([&] { ran = true; }, Later(10000),
               [] { return absl::CancelledError("the client went away"); });
  EXPECT_TRUE(absl::IsCancelled(stopped)) << stopped;
  release.set_value();
  EXPECT_TRUE(busy.get().ok());
  // The worker skipped both abandoned tasks and serves the next one.
  EXPECT_TRUE(pool.Run([] {}, Later(10000), nullptr).ok());
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace kiln::server
