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
    // Declared before the pool, so that they outlive it: its end waits for the
    // tasks, which use them to the last (AddressSanitizer found the reverse).
    std::promise<void> both;
    std::shared_future<void> go = both.get_future().share();
    std::atomic<int> left{2};
    ComputePool pool(2, [&](int worker) {
      std::lock_guard<std::mutex> lock(mu);
      started[std::this_thread::get_id()] = worker;
    });
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

// A split team (ComputePoolOptions::split): a request alone runs on the
// team's own thread with all its threads; while two or more wait they run on
// its narrow threads, one thread each, two at once; then it is whole again.
class SplitPoolTest : public ::testing::Test {
 protected:
  struct Run {
    int threads;
    std::thread::id on;
  };

  SplitPoolTest() {
    ComputePoolOptions options;
    options.teams = 1;
    options.team_threads = 2;
    options.split = true;
    options.on_start = [this](int team, int slot) {
      std::lock_guard<std::mutex> lock(mu_);
      EXPECT_EQ(team, 0);
      started_[std::this_thread::get_id()] = slot;
    };
    pool_ = std::make_unique<ComputePool>(std::move(options));
  }

  // A splittable task standing for `demand` requests that records how it
  // ran, then waits for `gate`.
  void SubmitGated(std::shared_future<void> gate, std::promise<void>* done = nullptr,
                   int demand = 1) {
    pool_->SubmitSplittable([this, gate, done](int threads) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        runs_.push_back({threads, std::this_thread::get_id()});
        peak_ = std::max(peak_, ++running_);
      }
      gate.wait();
      {
        std::lock_guard<std::mutex> lock(mu_);
        --running_;
      }
      if (done != nullptr) done->set_value();
    }, demand);
  }

  // Waits until `n` tasks have started.
  void AwaitStarted(size_t n) {
    for (int i = 0; i < 10000; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (runs_.size() >= n) return;
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
    FAIL() << "fewer than " << n << " tasks started";
  }

  int SlotOf(std::thread::id id) {
    std::lock_guard<std::mutex> lock(mu_);
    return started_.at(id);
  }

  std::mutex mu_;
  std::map<std::thread::id, int> started_;
  std::vector<Run> runs_;
  int running_ = 0, peak_ = 0;
  std::unique_ptr<ComputePool> pool_;
};

TEST_F(SplitPoolTest, QueuedRequestsRunOneThreadEachAndALoneOneGetsTheTeam) {
  AwaitIdle(*pool_, 1);
  for (int i = 0; i < 10000; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (started_.size() == 3) break;
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<int> slots;
    for (const auto& [id, slot] : started_) slots.insert(slot);
    EXPECT_EQ(slots, (std::set<int>{-1, 0, 1}));
  }
  // A first request alone: the whole team.
  std::promise<void> open_first;
  std::promise<void> first_done;
  SubmitGated(open_first.get_future().share(), &first_done);
  AwaitStarted(1);
  // Three more queue behind it.
  std::promise<void> open_rest;
  std::shared_future<void> rest = open_rest.get_future().share();
  std::vector<std::promise<void>> done(3);
  for (auto& d : done) SubmitGated(rest, &d);
  open_first.set_value();
  first_done.get_future().wait();
  // Two of the three start, one thread each; the third waits for one of them.
  AwaitStarted(3);
  std::this_thread::sleep_for(milliseconds(20));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_EQ(runs_.size(), 3u);
    EXPECT_EQ(running_, 2);
  }
  open_rest.set_value();
  for (auto& d : done) d.get_future().wait();
  AwaitIdle(*pool_, 1);
  // A request alone again: the whole team once more.
  std::promise<void> open_last;
  open_last.set_value();
  std::promise<void> last_done;
  SubmitGated(open_last.get_future().share(), &last_done);
  last_done.get_future().wait();

  ASSERT_EQ(runs_.size(), 5u);
  EXPECT_EQ(runs_[0].threads, 2);
  EXPECT_EQ(SlotOf(runs_[0].on), -1);
  std::set<int> narrow_slots;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(runs_[i].threads, 1) << i;
    narrow_slots.insert(SlotOf(runs_[i].on));
  }
  EXPECT_EQ(narrow_slots, (std::set<int>{0, 1}));
  EXPECT_EQ(runs_[4].threads, 2);
  EXPECT_EQ(SlotOf(runs_[4].on), -1);
  EXPECT_EQ(peak_, 2);
  EXPECT_EQ(pool_->narrow_runs(), 3u);
  EXPECT_EQ(pool_->splits(), 1u);
}

// A task that needs the whole team (a batch) waits for the narrow runs to
// end and never runs beside them.
TEST_F(SplitPoolTest, AWholeTeamTaskWaitsForTheNarrowRuns) {
  AwaitIdle(*pool_, 1);
  std::promise<void> open_first, first_done;
  SubmitGated(open_first.get_future().share(), &first_done);
  AwaitStarted(1);
  std::promise<void> open_narrow;
  std::shared_future<void> narrow = open_narrow.get_future().share();
  std::vector<std::promise<void>> done(2);
  for (auto& d : done) SubmitGated(narrow, &d);
  std::atomic<int> beside{-1};
  std::promise<void> whole_done;
  pool_->Submit([&] {
    std::lock_guard<std::mutex> lock(mu_);
    beside = running_;
    whole_done.set_value();
  });
  open_first.set_value();
  first_done.get_future().wait();
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(beside.load(), -1);  // not started while the two narrow runs go on
  open_narrow.set_value();
  whole_done.get_future().wait();
  EXPECT_EQ(beside.load(), 0);
  for (auto& d : done) d.get_future().wait();
  EXPECT_EQ(pool_->narrow_runs(), 2u);
}

// With one request queued behind a running one, the team does not split: a
// request alone is faster on all the threads.
TEST_F(SplitPoolTest, OneWaitingRequestDoesNotSplitTheTeam) {
  AwaitIdle(*pool_, 1);
  for (int round = 0; round < 3; ++round) {
    std::promise<void> open_a, a_done, b_done;
    std::promise<void> open_b;
    open_b.set_value();
    SubmitGated(open_a.get_future().share(), &a_done);
    AwaitStarted(2 * round + 1);
    SubmitGated(open_b.get_future().share(), &b_done);
    open_a.set_value();
    a_done.get_future().wait();
    b_done.get_future().wait();
  }
  ASSERT_EQ(runs_.size(), 6u);
  for (const Run& run : runs_) EXPECT_EQ(run.threads, 2);
  EXPECT_EQ(pool_->splits(), 0u);
}

// A task that stands for several requests (a batch task: its model's queue)
// splits the team alone, and the next one runs beside it.
TEST_F(SplitPoolTest, ATaskStandingForSeveralRequestsSplitsTheTeam) {
  AwaitIdle(*pool_, 1);
  std::promise<void> open_first, first_done;
  SubmitGated(open_first.get_future().share(), &first_done);
  AwaitStarted(1);
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  std::vector<std::promise<void>> done(2);
  SubmitGated(gate, &done[0], /*demand=*/5);
  open_first.set_value();
  first_done.get_future().wait();
  AwaitStarted(2);
  SubmitGated(gate, &done[1], /*demand=*/3);
  AwaitStarted(3);
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(running_, 2);
  }
  open.set_value();
  for (auto& d : done) d.get_future().wait();
  ASSERT_EQ(runs_.size(), 3u);
  EXPECT_EQ(runs_[1].threads, 1);
  EXPECT_EQ(runs_[2].threads, 1);
  EXPECT_NE(runs_[1].on, runs_[2].on);
  EXPECT_EQ(pool_->splits(), 1u);
}

// With two teams idle, two requests run on a whole team each; a team splits
// only when more wait than the idle teams take.
TEST(ComputePoolTest, TwoIdleTeamsTakeTwoRequestsWhole) {
  ComputePool pool(ComputePoolOptions{/*teams=*/2, /*team_threads=*/2, /*split=*/true});
  AwaitIdle(pool, 2);
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  std::vector<std::promise<int>> threads(2);
  for (auto& t : threads) {
    pool.SubmitSplittable([&t, gate](int n) {
      t.set_value(n);
      gate.wait();
    });
  }
  for (auto& t : threads) EXPECT_EQ(t.get_future().get(), 2);
  open.set_value();
  EXPECT_EQ(pool.splits(), 0u);
}

// Without split, a splittable task gets the whole team.
TEST(ComputePoolTest, SplittableTasksRunWholeWhenThePoolDoesNotSplit) {
  ComputePool pool(ComputePoolOptions{/*teams=*/1, /*team_threads=*/2});
  std::vector<std::promise<int>> threads(4);
  for (auto& t : threads) pool.SubmitSplittable([&t](int n) { t.set_value(n); });
  for (auto& t : threads) EXPECT_EQ(t.get_future().get(), 2);
  EXPECT_EQ(pool.narrow_runs(), 0u);
}

}  // namespace
}  // namespace kiln::server
