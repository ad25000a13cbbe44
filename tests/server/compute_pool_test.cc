// ComputePool: tasks run on its own threads (the same ones every time, so
// each keeps its OpenMP team), at most `workers` at once, in order; what is
// still queued when the pool ends is destroyed unrun.
#include "server/scheduler/compute_pool.h"

#include <pthread.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kiln::server {
namespace {

using std::chrono::milliseconds;

TEST(ComputePoolTest, RunsOnTheSameComputeThreadsInOrder) {
  ComputePool pool(1);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::vector<int> order;
  std::promise<void> last;
  for (int i = 0; i < 5; ++i) {
    pool.Submit([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
      order.push_back(i);
      if (i == 4) last.set_value();
    });
  }
  last.get_future().wait();
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

// A profile or `top -H` of kilnd tells compute threads from gRPC's and the
// others by name; a load's short-lived thread has a name of its own.
TEST(ComputePoolTest, OnStartRunsOnEachComputeThreadBeforeItsTasks) {
  std::mutex mu;
  std::map<std::thread::id, int> started;  // thread -> its index
  std::vector<std::pair<std::thread::id, bool>> ran;  // thread, whether it had started
  {
    ComputePool pool(2, [&](int worker) {
      std::lock_guard<std::mutex> lock(mu);
      started[std::this_thread::get_id()] = worker;
    });
    std::promise<void> both;
    std::shared_future<void> go = both.get_future().share();
    std::atomic<int> left{2};
    for (int i = 0; i < 2; ++i) {
      pool.Submit([&] {
        {
          std::lock_guard<std::mutex> lock(mu);
          ran.emplace_back(std::this_thread::get_id(), started.count(std::this_thread::get_id()) == 1);
        }
        // Both tasks at once, so each worker takes one.
        if (--left == 0) both.set_value();
        go.wait();
      });
    }
    go.wait();  // both running: the pool's end waits for them
  }
  std::set<int> indexes;
  for (const auto& [id, index] : started) indexes.insert(index);
  EXPECT_EQ(indexes, (std::set<int>{0, 1}));
  ASSERT_EQ(ran.size(), 2u);
  for (const auto& [id, had_started] : ran) EXPECT_TRUE(had_started);
  EXPECT_NE(ran[0].first, ran[1].first);
}

// Waits until `pool` has `n` threads waiting for work (a new pool's threads
// take a moment to get there).
void AwaitIdle(const ComputePool& pool, int n) {
  for (int i = 0; i < 10000 && pool.idle() != n; ++i) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_EQ(pool.idle(), n);
}

TEST(ComputePoolTest, PrewakeWakesAnIdleThreadThatThenTakesTheTask) {
  std::atomic<int> prewoken{0};
  std::promise<std::thread::id> prewoke_on;
  ComputePool pool(1, nullptr, [&](int worker) {
    EXPECT_EQ(worker, 0);
    if (prewoken++ == 0) prewoke_on.set_value(std::this_thread::get_id());
  });
  AwaitIdle(pool, 1);
  pool.Prewake();
  const std::thread::id compute = prewoke_on.get_future().get();
  EXPECT_NE(compute, std::this_thread::get_id());
  // Still idle while it watches the queue: the batcher may count on it.
  EXPECT_EQ(pool.idle(), 1);
  std::promise<std::thread::id> ran_on;
  pool.Submit([&] { ran_on.set_value(std::this_thread::get_id()); });
  EXPECT_EQ(ran_on.get_future().get(), compute);
}

TEST(ComputePoolTest, ATaskAfterThePrewakeWatchStillRuns) {
  std::atomic<int> prewoken{0};
  ComputePool pool(1, nullptr, [&](int) { ++prewoken; });
  AwaitIdle(pool, 1);
  pool.Prewake();
  // Past the watch the thread sleeps again; a Submit wakes it as usual.
  std::this_thread::sleep_for(ComputePool::kPrewakeWatch * 5);
  std::promise<void> ran;
  pool.Submit([&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(prewoken.load(), 1);
  // And a second Prewake wakes it again.
  AwaitIdle(pool, 1);
  pool.Prewake();
  for (int i = 0; i < 1000 && prewoken.load() < 2; ++i) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(prewoken.load(), 2);
}

TEST(ComputePoolTest, PrewakeWithNoIdleThreadWakesNobody) {
  std::atomic<int> prewoken{0};
  std::promise<void> release, running;
  std::shared_future<void> go = release.get_future().share();
  {
    ComputePool pool(1, nullptr, [&](int) { ++prewoken; });
    pool.Submit([&] {
      running.set_value();
      go.wait();
    });
    running.get_future().wait();
    EXPECT_EQ(pool.idle(), 0);
    pool.Prewake();
    release.set_value();
  }
  EXPECT_EQ(prewoken.load(), 0);
}

TEST(ComputePoolTest, ThreadsAreNamed) {
  auto name = [] {
    char buffer[16] = {};
    pthread_getname_np(pthread_self(), buffer, sizeof(buffer));
    return std::string(buffer);
  };
  ComputePool pool(1);
  std::promise<std::string> compute;
  pool.Submit([&] { compute.set_value(name()); });
  EXPECT_EQ(compute.get_future().get(), "kiln-compute");
  std::string load;
  RunOnShortLivedThread([&] { load = name(); });
  EXPECT_EQ(load, "kiln-load");
}

TEST(ComputePoolTest, AtMostWorkersAtOnce) {
  std::atomic<int> running{0}, peak{0}, ran{0};
  {
    ComputePool pool(2);
    std::vector<std::promise<void>> done(6);
    for (int i = 0; i < 6; ++i) {
      pool.Submit([&, i] {
        const int now = ++running;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(milliseconds(20));
        --running;
        ++ran;
        done[i].set_value();
      });
    }
    for (auto& d : done) d.get_future().wait();
  }
  EXPECT_EQ(ran.load(), 6);
  EXPECT_EQ(peak.load(), 2);
}

// What a queued task holds is released when the pool ends, so a caller
// waiting on it is answered (InferPipeline answers UNAVAILABLE then).
TEST(ComputePoolTest, QueuedTasksAreDestroyedUnrunWhenThePoolEnds) {
  struct Sentinel {
    explicit Sentinel(std::atomic<int>* d) : destroyed(d) {}
    ~Sentinel() { ++*destroyed; }
    std::atomic<int>* destroyed;
  };
  std::atomic<int> destroyed{0};
  bool ran = false;
  std::promise<void> release;
  std::promise<void> started;
  std::thread releaser;
  {
    ComputePool pool(1);
    std::shared_future<void> released = release.get_future().share();
    pool.Submit([&, released] {
      started.set_value();
      released.wait();
    });
    started.get_future().wait();  // the worker is busy now
    auto sentinel = std::make_shared<Sentinel>(&destroyed);
    pool.Submit([&ran, sentinel] { ran = true; });
    sentinel.reset();
    EXPECT_EQ(destroyed.load(), 0);
    releaser = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(20));
      release.set_value();
    });
  }  // finishes the running task, drops the queued one
  releaser.join();
  EXPECT_FALSE(ran);
  EXPECT_EQ(destroyed.load(), 1);
}

}  // namespace
}  // namespace kiln::server
