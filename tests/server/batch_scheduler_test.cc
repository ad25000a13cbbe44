// The dynamic batcher driven by its scheduler (server/scheduler/
// batch_scheduler.h) on a real compute pool and a real model, without a
// front end: batched answers equal each request's own result, preserve_ordering
// answers in arrival order, a full queue is UNAVAILABLE at once, a queue
// timeout is DEADLINE_EXCEEDED, and requests waiting for their batch hold no
// thread each.
#include "server/scheduler/batch_scheduler.h"

#include <dirent.h>
#include <time.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/ir/graph.h"
#include "engine/runtime/model.h"
#include "engine/runtime/observer.h"
#include "server/core/model_config.h"
#include "server/scheduler/compute_pool.h"
#include "server/scheduler/dynamic_batcher.h"

namespace kiln::server {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

// forward(self, x): relu(x) * x, row-wise; x is FP32 [-1, -1].
std::shared_ptr<const runtime::Model> RowWiseModel() {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::NodeId relu = g.AddNode(ir::OpKind::kRelu, {x}, {}, "aten::relu");
  ir::NodeId mul = g.AddNode(ir::OpKind::kMul, {g.node(relu).outputs[0], x}, {}, "aten::mul");
  g.AddOutput(g.node(mul).outputs[0], "output0");
  runtime::ModelOptions options;
  runtime::TensorSpec spec;
  spec.name = "x";
  spec.dtype = DType::kF32;
  spec.dims = Dims{-1, -1};
  options.inputs = {spec};
  auto model = runtime::Model::Create(std::move(g), std::move(options));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::shared_ptr<const runtime::Model>(*std::move(model)) : nullptr;
}

ModelConfig Batching(int64_t max_batch_size, DynamicBatching dynamic) {
  ModelConfig config;
  config.max_batch_size = max_batch_size;
  config.dynamic_batching = std::move(dynamic);
  return config;
}

// `rows` x `cols`, values from `seed` (negative and positive).
std::vector<runtime::NamedTensor> Input(int64_t rows, int64_t cols, float seed) {
  Tensor t = Tensor::Zeros(DType::kF32, {rows, cols});
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data<float>()[i] = seed + 0.25f * static_cast<float>(i) - 1.0f;
  }
  return {{"x", std::move(t)}};
}

int ThreadCount() {
  int n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

// The results of queued requests, as they arrive.
class Answers {
 public:
  DynamicBatcher::Done For(int tag) {
    return [this, tag](DynamicBatcher::Result result) {
      std::lock_guard<std::mutex> lock(mu_);
      order_.push_back(tag);
      results_[tag] = std::move(result);
      changed_.notify_all();
    };
  }
  // Waits (at most 20 s) until `n` answers came.
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(20), [&] { return order_.size() >= n; });
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_.size();
  }
  std::vector<int> order() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }
  DynamicBatcher::Result& result(int tag) {
    std::lock_guard<std::mutex> lock(mu_);
    return results_[tag];
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<int> order_;
  std::map<int, DynamicBatcher::Result> results_;
};

// Holds a run at its first step until released.
class Gate : public runtime::RunObserver {
 public:
  void OnStepBegin(const runtime::StepInfo&) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait_for(lock, std::chrono::seconds(20), [&] { return open_; });
  }
  void OnStepEnd(const runtime::StepInfo&) override {}
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(20), [&] { return entered_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool open_ = false;
};

void ExpectEqualTensors(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dims(), b.dims());
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    ASSERT_FLOAT_EQ(a.data<float>()[i], b.data<float>()[i]) << "element " << i;
  }
}

TEST(BatchSchedulerTest, BatchedAnswersEqualEachRequestAlone) {
  std::shared_ptr<const runtime::Model> model = RowWiseModel();
  ASSERT_NE(model, nullptr);
  DynamicBatching dynamic;
  dynamic.preferred_batch_size = {5};
  dynamic.max_queue_delay_us = 10'000'000;  // the preferred size, not the delay, starts it
  auto batcher = DynamicBatcher::Create(Batching(8, dynamic), model);
  ASSERT_TRUE(batcher->queues()) << batcher->Describe();
  ComputePool pool(2);
  Answers answers;
  {
    BatchScheduler scheduler(&pool);
    // Three requests of one row and one of two: five rows.
    const std::vector<int64_t> rows = {1, 1, 2, 1};
    for (int i = 0; i < 4; ++i) {
      scheduler.Enqueue(batcher, Input(rows[i], 6, static_cast<float>(i)), {}, {},
                        answers.For(i));
    }
    ASSERT_TRUE(answers.WaitFor(4));
    for (int i = 0; i < 4; ++i) {
      DynamicBatcher::Result& got = answers.result(i);
      ASSERT_TRUE(got.outputs.ok()) << got.outputs.status();
      EXPECT_EQ(got.batch_rows, 5);
      EXPECT_EQ(got.executions, i == 0 ? 1u : 0u);  // one execution for the batch
      auto alone = model->Infer(Input(rows[i], 6, static_cast<float>(i)), {}, {});
      ASSERT_TRUE(alone.ok()) << alone.status();
      ASSERT_EQ(got.outputs->size(), 1u);
      ExpectEqualTensors((*got.outputs)[0].tensor, (*alone)[0].tensor);
    }
  }
  EXPECT_THAT(batcher->Describe(), HasSubstr("on (max_batch_size 8"));
}

// A slow request (held at its first step) and a quick one behind it, of
// another signature, run at once on the two compute threads; the quick one
// ends first. `ordered`: preserve_ordering.
std::vector<int> AnswerOrder(bool ordered) {
  std::shared_ptr<const runtime::Model> model = RowWiseModel();
  DynamicBatching dynamic;
  dynamic.preserve_ordering = ordered;
  auto batcher = DynamicBatcher::Create(Batching(4, dynamic), model);
  ComputePool pool(2);
  BatchScheduler scheduler(&pool);
  Answers answers;
  Gate gate;
  runtime::RunOptions slow;
  slow.observer = &gate;
  scheduler.Enqueue(batcher, Input(1, 4, 0), {}, slow, answers.For(0));
  EXPECT_TRUE(gate.WaitEntered());
  scheduler.Enqueue(batcher, Input(1, 8, 1), {}, {}, answers.For(1));
  if (ordered) {
    // The quick one has run, and waits for the slow one's answer.
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_EQ(answers.count(), 0u);
  } else {
    EXPECT_TRUE(answers.WaitFor(1));
  }
  gate.Open();
  EXPECT_TRUE(answers.WaitFor(2));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(answers.result(i).outputs.ok());
  return answers.order();
}

TEST(BatchSchedulerTest, PreserveOrderingAnswersInArrivalOrder) {
  EXPECT_EQ(AnswerOrder(/*ordered=*/false), (std::vector<int>{1, 0}));  // the test can tell
  EXPECT_EQ(AnswerOrder(/*ordered=*/true), (std::vector<int>{0, 1}));
}

TEST(BatchSchedulerTest, AFullQueueIsUnavailableAtOnce) {
  DynamicBatching dynamic;
  dynamic.max_queue_delay_us = 300'000;
  dynamic.default_queue_policy.max_queue_size = 1;
  auto batcher = DynamicBatcher::Create(Batching(4, dynamic), RowWiseModel());
  ComputePool pool(1);
  BatchScheduler scheduler(&pool);
  Answers answers;
  scheduler.Enqueue(batcher, Input(1, 4, 0), {}, {}, answers.For(0));
  scheduler.Enqueue(batcher, Input(1, 4, 1), {}, {}, answers.For(1));
  // Refused before Enqueue returned.
  ASSERT_EQ(answers.order(), std::vector<int>{1});
  EXPECT_EQ(answers.result(1).outputs.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(answers.result(1).outputs.status().message(),
              HasSubstr("queue is full: 1 requests wait (max_queue_size 1)"));
  // The queued one runs when its delay is over.
  ASSERT_TRUE(answers.WaitFor(2));
  EXPECT_TRUE(answers.result(0).outputs.ok()) << answers.result(0).outputs.status();
}

TEST(BatchSchedulerTest, AQueueTimeoutIsDeadlineExceeded) {
  DynamicBatching dynamic;
  dynamic.max_queue_delay_us = 10'000'000;
  dynamic.default_queue_policy.default_timeout_us = 100'000;
  auto batcher = DynamicBatcher::Create(Batching(4, dynamic), RowWiseModel());
  ComputePool pool(1);
  BatchScheduler scheduler(&pool);
  Answers answers;
  const auto start = std::chrono::steady_clock::now();
  scheduler.Enqueue(batcher, Input(1, 4, 0), {}, {}, answers.For(0));
  ASSERT_TRUE(answers.WaitFor(1));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const absl::Status& status = answers.result(0).outputs.status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("default_timeout_microseconds"));

  // The request's own deadline ends its wait as well.
  runtime::RunOptions run;
  run.deadline = std::chrono::steady_clock::now() + milliseconds(50);
  run.deadline_name = "the request's deadline";
  scheduler.Enqueue(batcher, Input(1, 4, 0), {}, run, answers.For(1));
  ASSERT_TRUE(answers.WaitFor(2));
  EXPECT_EQ(answers.result(1).outputs.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(answers.result(1).outputs.status().message(),
              HasSubstr("while waiting in the model's batch queue"));
}

TEST(BatchSchedulerTest, WaitingRequestsHoldNoThreadEach) {
  constexpr int kRequests = 64;
  DynamicBatching dynamic;
  dynamic.max_queue_delay_us = 20'000'000;  // only a full batch runs
  auto batcher = DynamicBatcher::Create(Batching(kRequests, dynamic), RowWiseModel());
  ComputePool pool(2);
  Answers answers;
  BatchScheduler scheduler(&pool);
  const int before = ThreadCount();
  ASSERT_GT(before, 0);
  for (int i = 0; i < kRequests - 1; ++i) {
    scheduler.Enqueue(batcher, Input(1, 4, static_cast<float>(i)), {}, {}, answers.For(i));
  }
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(answers.count(), 0u);
  // 63 requests wait; the scheduler's one thread is all they added.
  EXPECT_LE(ThreadCount(), before + 1);
  scheduler.Enqueue(batcher, Input(1, 4, kRequests - 1), {}, {}, answers.For(kRequests - 1));
  ASSERT_TRUE(answers.WaitFor(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(answers.result(i).outputs.ok()) << answers.result(i).outputs.status();
    EXPECT_EQ(answers.result(i).batch_rows, kRequests);
  }
  EXPECT_LE(ThreadCount(), before + 1);
}

// The scheduler's thread sleeps through arrivals that a task already waiting
// in the pool will take, and through tasks that leave nothing queued. A
// flood of requests with no deadline and no cancellation (so no periodic
// poll would rescue one left behind) from several threads is answered in
// full: none is lost between a task taking its batch and the next arrival.
TEST(BatchSchedulerTest, AFloodOfRequestsIsAnsweredInFull) {
  constexpr int kThreads = 8;
  constexpr int kEach = 300;
  DynamicBatching dynamic;
  dynamic.max_queue_delay_us = 0;
  auto batcher = DynamicBatcher::Create(Batching(4, dynamic), RowWiseModel());
  ComputePool pool(2);
  Answers answers;
  {
    BatchScheduler scheduler(&pool);
    std::vector<std::thread> clients;
    for (int c = 0; c < kThreads; ++c) {
      clients.emplace_back([&, c] {
        for (int i = 0; i < kEach; ++i) {
          const int tag = c * kEach + i;
          scheduler.Enqueue(batcher, Input(1, 4, static_cast<float>(tag % 7)), {}, {},
                            answers.For(tag));
          if (i % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      });
    }
    for (std::thread& t : clients) t.join();
    ASSERT_TRUE(answers.WaitFor(kThreads * kEach)) << answers.count() << " answered";
  }
  for (int tag = 0; tag < kThreads * kEach; ++tag) {
    ASSERT_TRUE(answers.result(tag).outputs.ok()) << answers.result(tag).outputs.status();
  }
}

TEST(BatchSchedulerTest, StoppingAnswersQueuedRequestsUnavailable) {
  DynamicBatching dynamic;
  dynamic.max_queue_delay_us = 20'000'000;
  auto batcher = DynamicBatcher::Create(Batching(4, dynamic), RowWiseModel());
  ComputePool pool(1);
  Answers answers;
  {
    BatchScheduler scheduler(&pool);
    scheduler.Enqueue(batcher, Input(1, 4, 0), {}, {}, answers.For(0));
  }
  ASSERT_EQ(answers.count(), 1u);
  EXPECT_EQ(answers.result(0).outputs.status().code(), absl::StatusCode::kUnavailable);
}

// Sleeps at each step of a run for a time of its rows (dim 0 of the step's
// output, "FP32[rows, cols]"): a stand-in for a model's cost.
class RowCost : public runtime::RunObserver {
 public:
  explicit RowCost(std::function<int(int64_t rows)> us) : us_(std::move(us)) {}
  void OnStepBegin(const runtime::StepInfo&) override {}
  void OnStepEnd(const runtime::StepInfo& step) override {
    const std::vector<std::string> types = step.OutputTypes();
    if (types.empty()) return;
    const size_t open = types[0].find('[');
    if (open == std::string::npos) return;
    const int64_t rows = std::stoll(types[0].substr(open + 1));
    // Spent on the CPU, as a kernel would: the batcher weighs sizes by the
    // compute thread's CPU time.
    const auto cpu = [] {
      timespec t{};
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return static_cast<int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
    };
    for (const int64_t until = cpu() + us_(rows); cpu() < until;) {
    }
  }

 private:
  std::function<int(int64_t)> us_;
};

// `clients` closed-loop clients of one row each send `requests` requests in
// all; returns the rows of the batch each of the last `last` ran in.
std::vector<int64_t> ClosedLoopBatchRows(const std::shared_ptr<DynamicBatcher>& batcher,
                                         RowCost* cost, int clients, int requests, int last) {
  ComputePool pool(2);
  BatchScheduler scheduler(&pool);
  std::mutex mu;
  std::vector<int64_t> rows;
  std::atomic<int> sent{0};
  std::vector<std::thread> threads;
  runtime::RunOptions run;
  run.observer = cost;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      while (sent.fetch_add(1) < requests) {
        std::promise<DynamicBatcher::Result> answer;
        std::future<DynamicBatcher::Result> result = answer.get_future();
        scheduler.Enqueue(batcher, Input(1, 4, static_cast<float>(c)), {}, run,
                          [&answer](DynamicBatcher::Result r) { answer.set_value(std::move(r)); });
        DynamicBatcher::Result got = result.get();
        EXPECT_TRUE(got.outputs.ok()) << got.outputs.status();
        std::lock_guard<std::mutex> lock(mu);
        rows.push_back(got.batch_rows);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return std::vector<int64_t>(rows.end() - std::min<size_t>(rows.size(), last), rows.end());
}

TEST(BatchSchedulerTest, ComputeBoundModelEndsUpRunningSingles) {
  // A row costs more in a batch than alone: 2.5 ms alone, 6 ms in a batch of 8, a step.
  RowCost cost([](int64_t rows) { return static_cast<int>(2000 * rows * (1 + rows / 4.0)); });
  auto batcher = DynamicBatcher::Create(Batching(8, {}), RowWiseModel());
  std::vector<int64_t> last = ClosedLoopBatchRows(batcher, &cost, 8, 200, 40);
  // Once 8, 4, 2 and 1 were each tried, single requests win (rows run as one each).
  EXPECT_EQ(std::count(last.begin(), last.end(), 1), static_cast<std::ptrdiff_t>(last.size()))
      << ::testing::PrintToString(last) << " " << batcher->Describe();
  EXPECT_THAT(batcher->Describe(), HasSubstr("batch size by measured cost: ms per row at 1: "));
}

// On a compute team that splits while requests wait (compute_pool.h), a
// batcher's tasks run one thread each: every answer is still its own.
TEST(BatchSchedulerTest, BatchesOnASplitTeamAnswerEveryRequest) {
  ComputePool pool(ComputePoolOptions{/*teams=*/1, /*team_threads=*/2, /*split=*/true});
  auto batcher = DynamicBatcher::Create(Batching(4, {}), RowWiseModel());
  RowCost cost([](int64_t rows) { return static_cast<int>(300 * rows); });
  runtime::RunOptions run;
  run.observer = &cost;
  {
    BatchScheduler scheduler(&pool);
    constexpr int kClients = 6, kEach = 20;
    std::vector<std::thread> clients;
    std::atomic<int> wrong{0};
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        for (int i = 0; i < kEach; ++i) {
          std::promise<DynamicBatcher::Result> answer;
          std::future<DynamicBatcher::Result> result = answer.get_future();
          const float v = static_cast<float>(c * 100 + i);
          scheduler.Enqueue(batcher, Input(1, 4, v), {}, run,
                            [&answer](DynamicBatcher::Result r) { answer.set_value(std::move(r)); });
          DynamicBatcher::Result got = result.get();
          // Element 0 of Input(1, 4, v) is v - 1; relu(x) * x of it:
          const float x0 = v - 1.0f;
          const float want = x0 > 0 ? x0 * x0 : 0.0f;
          if (!got.outputs.ok() || (*got.outputs)[0].tensor.data<float>()[0] != want) {
            ++wrong;
          }
        }
      });
    }
    for (std::thread& t : clients) t.join();
    EXPECT_EQ(wrong.load(), 0);
  }
  EXPECT_GT(pool.narrow_runs(), 0u) << batcher->Describe();
}

// A request skips the batcher's queue only once the measured costs choose
// singles for its signature, and never where the config needs the queue.
TEST(BatchSchedulerTest, ARequestSkipsTheQueueOnlyWhenSinglesWinAndTheConfigAllows) {
  auto fresh = DynamicBatcher::Create(Batching(8, {}), RowWiseModel());
  EXPECT_FALSE(fresh->AloneKey(Input(1, 4, 0), {}, 0).has_value());  // nothing measured
  // A compute-bound model in closed loop: its costs end up choosing singles.
  RowCost cost([](int64_t rows) { return static_cast<int>(400 * rows * (1 + rows / 2.0)); });
  auto batcher = DynamicBatcher::Create(Batching(8, {}), RowWiseModel());
  ClosedLoopBatchRows(batcher, &cost, 8, 200, 1);
  const std::optional<std::string> key = batcher->AloneKey(Input(1, 4, 0), {}, 0);
  ASSERT_TRUE(key.has_value()) << batcher->Describe();
  // Not while a split team's single-thread costs are unknown.
  EXPECT_FALSE(batcher->AloneKey(Input(1, 4, 0), {}, 2).has_value());
  // Another signature knows nothing yet.
  EXPECT_FALSE(batcher->AloneKey(Input(1, 6, 0), {}, 0).has_value());
  // Configs that need the queue never skip it.
  DynamicBatching ordered;
  ordered.preserve_ordering = true;
  DynamicBatching bounded;
  bounded.default_queue_policy.max_queue_size = 64;
  for (const DynamicBatching& dynamic : {ordered, bounded}) {
    auto strict = DynamicBatcher::Create(Batching(8, dynamic), RowWiseModel());
    ClosedLoopBatchRows(strict, &cost, 8, 200, 1);
    EXPECT_FALSE(strict->AloneKey(Input(1, 4, 0), {}, 0).has_value()) << strict->Describe();
  }
}

// A batcher whose whole-team runs cost 1000 + 50 * rows us (a batch of 8:
// 175 a row; a single 1050), learned in closed loop, and whose single-thread
// runs cost `narrow_us_per_row` a row at any size: singles, measured at 1
// row and, with `with_pairs`, at 2 rows too (each thrice).
std::shared_ptr<DynamicBatcher> BatcherWithWholeAndSingleThreadCosts(int narrow_us_per_row,
                                                                      bool with_pairs) {
  RowCost whole([](int64_t rows) { return static_cast<int>(1000 + 50 * rows); });
  auto batcher = DynamicBatcher::Create(Batching(8, {}), RowWiseModel());
  ClosedLoopBatchRows(batcher, &whole, 8, 200, 1);
  RowCost narrow([narrow_us_per_row](int64_t rows) {
    return static_cast<int>(narrow_us_per_row * rows);
  });
  runtime::RunOptions one_thread;
  one_thread.observer = &narrow;
  one_thread.num_threads = 1;
  const std::optional<std::string> key = batcher->AloneKey(Input(1, 4, 0), {}, 0, 1, true);
  EXPECT_TRUE(key.has_value());
  for (int i = 0; key.has_value() && i < 3; ++i) {
    EXPECT_TRUE(batcher->InferAlone(*key, 1, Input(1, 4, 0), {}, one_thread).ok());
    if (!with_pairs) continue;
    DynamicBatcher::Done done = [](DynamicBatcher::Result r) { EXPECT_TRUE(r.outputs.ok()); };
    DynamicBatcher::Done done2 = done;
    EXPECT_TRUE(batcher->Enqueue(Input(1, 4, 1), {}, one_thread, &done).ok());
    EXPECT_TRUE(batcher->Enqueue(Input(1, 4, 2), {}, one_thread, &done2).ok());
    while (batcher->HasQueued()) batcher->RunNext(1, [] {}, 1);
  }
  return batcher;
}

// With a team that may split, a request skips the queue when single-thread
// runs choose singles and the whole team's batches, though cheaper than the
// whole team's singles, do not beat two single-thread runs side by side (a
// BERT-shaped encoder); it stays in the queue when they do (a weight-bound model).
TEST(BatchSchedulerTest, ASplitTeamsRequestSkipsTheQueueUnlessWholeTeamBatchesWin) {
  for (const bool narrow_cheap : {true, false}) {
    SCOPED_TRACE(narrow_cheap ? "single-thread runs cheap" : "single-thread runs dear");
    // Single-thread runs cost the same per row at any size (150 or 1000 us a
    // row): singles.
    auto batcher = BatcherWithWholeAndSingleThreadCosts(narrow_cheap ? 150 : 1000, true);
    // The whole team's batches beat its singles.
    EXPECT_FALSE(batcher->AloneKey(Input(1, 4, 0), {}, 0).has_value()) << batcher->Describe();
    // Two single-thread runs side by side serve 2 / 150 rows per us against the
    // whole team's 1 / 175: skip the queue. At 1000 us a row they serve less.
    EXPECT_EQ(batcher->AloneKey(Input(1, 4, 0), {}, 2).has_value(), narrow_cheap)
        << batcher->Describe();
    // A team that may not split runs whole-team batches: they win.
    EXPECT_FALSE(batcher->AloneKey(Input(1, 4, 0), {}, 0).has_value());
  }
}

// A queued batch runs on the whole team only when the whole team's cost of
// that batch, at the rows that wait now, beats single-thread runs side by
// side: a batch of 8 may where a batch of 2 does not.
TEST(BatchSchedulerTest, ASplitIsWeighedAtTheBatchThatWaits) {
  // Whole team: 8 rows cost 1400 us (175 a row), 2 rows 1100 (550 a row). One
  // thread: 500 us a row, so two side by side serve a row per 250 us.
  auto batcher = BatcherWithWholeAndSingleThreadCosts(500, false);
  std::vector<DynamicBatcher::Done> dones(8, [](DynamicBatcher::Result) {});
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(batcher->Enqueue(Input(1, 4, 1), {}, {}, &dones[i]).ok());
  EXPECT_TRUE(batcher->SplitPays(2)) << batcher->Describe();  // 2 rows: 550 against 250
  for (int i = 2; i < 8; ++i) ASSERT_TRUE(batcher->Enqueue(Input(1, 4, 1), {}, {}, &dones[i]).ok());
  EXPECT_FALSE(batcher->SplitPays(2)) << batcher->Describe();  // 8 rows: 175 against 250
  while (batcher->HasQueued()) batcher->RunNext(2, [] {});
}

TEST(BatchSchedulerTest, OnAnIdleServerARequestOfOneRowRunsAtOnceWhateverTheCosts) {
  // Nothing measured, so the costs choose nothing: only an idle server lets
  // the request go around the queue, as the batch of one it would run as.
  auto batcher = DynamicBatcher::Create(Batching(8, {}), RowWiseModel());
  EXPECT_TRUE(batcher->MayRunAtOnce());
  const std::optional<std::string> key = batcher->AloneKey(Input(1, 4, 0), {}, 2, 1, true);
  ASSERT_TRUE(key.has_value()) << batcher->Describe();
  EXPECT_EQ(*key, batcher->AloneKey(Input(1, 4, 3), {}, 2, 1, true).value_or(""));
  EXPECT_FALSE(batcher->AloneKey(Input(1, 4, 0), {}, 2, 1, false).has_value());  // busy
  EXPECT_FALSE(batcher->AloneKey(Input(2, 4, 0), {}, 2, 2, true).has_value());   // two rows
  // A run of it is counted as a single's, as the batcher counts a batch of one.
  auto out = batcher->InferAlone(*key, 1, Input(1, 4, 0), {}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  // Something queued: it goes behind that.
  DynamicBatcher::Done done = [](DynamicBatcher::Result) {};
  ASSERT_TRUE(batcher->Enqueue(Input(1, 4, 1), {}, {}, &done).ok());
  EXPECT_FALSE(batcher->MayRunAtOnce());
  EXPECT_FALSE(batcher->AloneKey(Input(1, 4, 0), {}, 2, 1, true).has_value());
  // A queue delay asks requests to wait for others; preserve_ordering keeps
  // them behind a batch still running.
  DynamicBatching delayed;
  delayed.max_queue_delay_us = 100;
  DynamicBatching ordered;
  ordered.preserve_ordering = true;
  for (const DynamicBatching& dynamic : {delayed, ordered}) {
    auto strict = DynamicBatcher::Create(Batching(8, dynamic), RowWiseModel());
    EXPECT_FALSE(strict->MayRunAtOnce());
    EXPECT_FALSE(strict->AloneKey(Input(1, 4, 0), {}, 2, 1, true).has_value());
  }
}

TEST(BatchSchedulerTest, WeightBoundModelKeepsBatching) {
  // A run costs the same at any size: 3 ms a step.
  RowCost cost([](int64_t) { return 3000; });
  auto batcher = DynamicBatcher::Create(Batching(8, {}), RowWiseModel());
  std::vector<int64_t> last = ClosedLoopBatchRows(batcher, &cost, 8, 160, 40);
  int64_t in_batches = std::count_if(last.begin(), last.end(), [](int64_t r) { return r >= 2; });
  EXPECT_GE(in_batches, 30) << ::testing::PrintToString(last) << " " << batcher->Describe();
}

// Three rounds of: one request held at its first step on the only compute
// thread, 8 more queued behind it, then released. Returns the rows the 8 ran
// in, per round.
std::vector<int64_t> HeldRounds(bool adaptive) {
  DynamicBatching dynamic;
  dynamic.adaptive_batch_size = adaptive;
  auto batcher = DynamicBatcher::Create(Batching(8, dynamic), RowWiseModel());
  ComputePool pool(1);
  BatchScheduler scheduler(&pool);
  std::vector<int64_t> rows;
  for (int round = 0; round < 3; ++round) {
    Gate gate;
    runtime::RunOptions held;
    held.observer = &gate;
    Answers answers;
    scheduler.Enqueue(batcher, Input(1, 4, 0), {}, held, answers.For(0));
    EXPECT_TRUE(gate.WaitEntered());
    for (int i = 1; i <= 8; ++i) scheduler.Enqueue(batcher, Input(1, 4, 1), {}, {}, answers.For(i));
    gate.Open();
    EXPECT_TRUE(answers.WaitFor(9));
    rows.push_back(answers.result(1).batch_rows);
  }
  EXPECT_EQ(batcher->Describe().find("measured cost") != std::string::npos, adaptive);
  return rows;
}

TEST(BatchSchedulerTest, AdaptiveBatchSizeTriesSmallerBatchesAndOffRunsTheWholeBatch) {
  // On: 8 runs whole until it is known (two runs), then 4 is tried.
  EXPECT_EQ(HeldRounds(/*adaptive=*/true), (std::vector<int64_t>{8, 8, 4}));
  // Off: Triton's batch, whole, every time.
  EXPECT_EQ(HeldRounds(/*adaptive=*/false), (std::vector<int64_t>{8, 8, 8}));
}

}  // namespace
}  // namespace kiln::server
