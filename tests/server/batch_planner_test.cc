// The dynamic batcher's rules (server/scheduler/batch_planner.h): which queued
// requests form the next batch and when, and joining and splitting on dim 0.
#include "server/scheduler/batch_planner.h"

#include "server/scheduler/batch_costs.h"

#include <algorithm>
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using std::chrono::microseconds;

const BatchClock::time_point kT0 = BatchClock::time_point() + std::chrono::hours(1);

PlanItem Item(const std::string& key, int64_t rows, int at_us, bool delayed = false) {
  return PlanItem{key, rows, kT0 + microseconds(at_us), delayed};
}

BatchSettings Settings(int64_t max, std::vector<int64_t> preferred, int delay_us) {
  BatchSettings s;
  s.max_batch_size = max;
  s.preferred_batch_size = std::move(preferred);
  s.max_queue_delay = microseconds(delay_us);
  return s;
}

TEST(BatchPlannerTest, EmptyQueueWaitsForever) {
  BatchPlan plan = PlanBatch({}, Settings(8, {}, 100), kT0);
  EXPECT_TRUE(plan.take.empty());
  EXPECT_EQ(plan.wait_until, BatchClock::time_point::max());
}

TEST(BatchPlannerTest, WaitsForTheOldestsDelayThenRunsWhatItHas) {
  std::vector<PlanItem> queue = {Item("a", 1, 0), Item("a", 1, 10)};
  BatchPlan early = PlanBatch(queue, Settings(8, {}, 100), kT0 + microseconds(50));
  EXPECT_TRUE(early.take.empty());
  EXPECT_EQ(early.wait_until, kT0 + microseconds(100));
  BatchPlan due = PlanBatch(queue, Settings(8, {}, 100), kT0 + microseconds(100));
  EXPECT_THAT(due.take, ElementsAre(0, 1));
}

TEST(BatchPlannerTest, ZeroDelayRunsAtOnce) {
  std::vector<PlanItem> queue = {Item("a", 1, 0)};
  EXPECT_THAT(PlanBatch(queue, Settings(8, {}, 0), kT0).take, ElementsAre(0));
}

TEST(BatchPlannerTest, FullBatchRunsAtOnceUpToMaxRows) {
  std::vector<PlanItem> queue = {Item("a", 2, 0), Item("a", 1, 1), Item("a", 1, 2),
                                 Item("a", 1, 3)};
  BatchPlan plan = PlanBatch(queue, Settings(4, {}, 1000000), kT0);
  EXPECT_THAT(plan.take, ElementsAre(0, 1, 2));  // 4 rows; the last waits
  // The next request does not fit: what fits runs now.
  std::vector<PlanItem> big = {Item("a", 3, 0), Item("a", 2, 1)};
  EXPECT_THAT(PlanBatch(big, Settings(4, {}, 1000000), kT0).take, ElementsAre(0));
}

TEST(BatchPlannerTest, LargestPreferredPrefixRunsBeforeTheDelay) {
  std::vector<PlanItem> queue = {Item("a", 1, 0), Item("a", 1, 1), Item("a", 1, 2),
                                 Item("a", 1, 3), Item("a", 1, 4)};
  BatchPlan plan = PlanBatch(queue, Settings(8, {2, 4}, 1000000), kT0);
  EXPECT_THAT(plan.take, ElementsAre(0, 1, 2, 3));
  // Three rows match no preferred size: wait.
  queue.resize(3);
  BatchPlan wait = PlanBatch(queue, Settings(8, {4}, 1000), kT0);
  EXPECT_TRUE(wait.take.empty());
  EXPECT_EQ(wait.wait_until, kT0 + microseconds(1000));
}

TEST(BatchPlannerTest, OnlyTheOldestsSignatureJoins) {
  std::vector<PlanItem> queue = {Item("a", 1, 0), Item("b", 1, 1), Item("a", 1, 2)};
  EXPECT_THAT(PlanBatch(queue, Settings(8, {}, 0), kT0).take, ElementsAre(0, 2));
}

TEST(BatchPlannerTest, DelayedRequestsGoLast) {
  std::vector<PlanItem> queue = {Item("b", 1, 0, /*delayed=*/true), Item("a", 1, 5)};
  EXPECT_THAT(PlanBatch(queue, Settings(8, {}, 0), kT0 + microseconds(5)).take, ElementsAre(1));
  std::vector<PlanItem> only = {Item("b", 1, 0, /*delayed=*/true)};
  EXPECT_THAT(PlanBatch(only, Settings(8, {}, 0), kT0).take, ElementsAre(0));
}

Tensor Rows(std::vector<float> values, int64_t rows) {
  const int64_t cols = static_cast<int64_t>(values.size()) / rows;
  Tensor t = Tensor::Zeros(DType::kF32, {rows, cols});
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

TEST(BatchPlannerTest, ConcatAndSplitRoundTrip) {
  std::vector<runtime::NamedTensor> a = {{"x", Rows({1, 2}, 1)}};
  std::vector<runtime::NamedTensor> b = {{"x", Rows({3, 4, 5, 6}, 2)}};
  EXPECT_EQ(BatchKey(a, {}), BatchKey(b, {}));
  EXPECT_NE(BatchKey(a, {}), BatchKey(a, {"y"}));
  auto joined = ConcatRows({&a, &b}, nullptr);
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->size(), 1u);
  const Tensor& x = (*joined)[0].tensor;
  EXPECT_EQ(x.dims(), (Dims{3, 2}));
  EXPECT_THAT(std::vector<float>(x.data<float>(), x.data<float>() + 6),
              ElementsAre(1, 2, 3, 4, 5, 6));
  auto parts = SplitRows({{"y", x}}, {1, 2});
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0][0].name, "y");
  EXPECT_EQ((*parts)[0][0].tensor.dims(), (Dims{1, 2}));
  EXPECT_EQ((*parts)[1][0].tensor.dims(), (Dims{2, 2}));
  EXPECT_EQ((*parts)[1][0].tensor.data<float>()[3], 6.0f);
}

TEST(BatchPlannerTest, PaddedBatchRepeatsTheLastRowAndSplitsItOff) {
  std::vector<runtime::NamedTensor> a = {{"x", Rows({1, 2}, 1)}};
  std::vector<runtime::NamedTensor> b = {{"x", Rows({3, 4, 5, 6}, 2)}};
  auto joined = ConcatRows({&a, &b}, nullptr, /*padded_rows=*/4);
  ASSERT_TRUE(joined.ok()) << joined.status();
  const Tensor& x = (*joined)[0].tensor;
  EXPECT_EQ(x.dims(), (Dims{4, 2}));
  EXPECT_THAT(std::vector<float>(x.data<float>(), x.data<float>() + 8),
              ElementsAre(1, 2, 3, 4, 5, 6, 5, 6));
  // The batcher asks for the padding as a last part and drops it.
  auto parts = SplitRows({{"y", x}}, {1, 2, 1});
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ((*parts)[1][0].tensor.dims(), (Dims{2, 2}));
  // No padding asked, or less than the rows: the rows as they are.
  auto same = ConcatRows({&a, &b}, nullptr, 2);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)[0].tensor.dims(), (Dims{3, 2}));
}

TEST(BatchPlannerTest, AllowedBatchSizes) {
  using Sizes = std::vector<int64_t>;
  // Absent: powers of two, the preferred sizes and the bound.
  EXPECT_EQ(AllowedBatchSizes(std::nullopt, {}, 64), (Sizes{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(AllowedBatchSizes(std::nullopt, {6, 48}, 50), (Sizes{1, 2, 4, 6, 8, 16, 32, 48, 50}));
  EXPECT_EQ(AllowedBatchSizes(std::nullopt, {}, 1), (Sizes{1}));
  // Configured: those within the bound, and the bound.
  EXPECT_EQ(AllowedBatchSizes(Sizes{8, 1, 4}, {}, 8), (Sizes{1, 4, 8}));
  EXPECT_EQ(AllowedBatchSizes(Sizes{1, 4, 16}, {}, 10), (Sizes{1, 4, 10}));
  // Empty: no padding.
  EXPECT_TRUE(AllowedBatchSizes(Sizes{}, {4}, 8).empty());

  const Sizes allowed{1, 2, 4, 8};
  EXPECT_EQ(PaddedRows(1, allowed), 1);
  EXPECT_EQ(PaddedRows(3, allowed), 4);
  EXPECT_EQ(PaddedRows(8, allowed), 8);
  EXPECT_EQ(PaddedRows(9, allowed), 9);
  EXPECT_EQ(PaddedRows(5, {}), 5);
}

TEST(BatchPlannerTest, SplitRefusesAnOutputWithoutTheBatchDim) {
  auto parts = SplitRows({{"sum", Rows({1, 2}, 1)}}, {1, 2});
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(parts.status().message(), HasSubstr("output 'sum' has shape [1, 2] for a batch of 3"));
}

TEST(BatchPlannerTest, DifferentSignaturesHaveDifferentKeys) {
  std::vector<runtime::NamedTensor> a = {{"x", Rows({1, 2}, 1)}};
  std::vector<runtime::NamedTensor> c = {{"x", Rows({1, 2, 3}, 1)}};
  EXPECT_NE(BatchKey(a, {}), BatchKey(c, {}));
}

}  // namespace
}  // namespace kiln::server

namespace kiln::server {
namespace {

runtime::TensorSpec Spec(const std::string& name, std::vector<ir::DimRange> ranges) {
  runtime::TensorSpec spec;
  spec.name = name;
  spec.dim_ranges = std::move(ranges);
  return spec;
}

TEST(BatchRowsBoundTest, ADeclaredRangeOfDimZeroCapsTheJoinedBatch) {
  std::string why;
  // Dim("batch", max=6) on one input; a range of dim 1 does not count.
  const std::vector<runtime::TensorSpec> inputs = {
      Spec("ids", {{0, 1, 6, "s77"}, {1, 1, 2, "s12"}}), Spec("mask", {})};
  EXPECT_EQ(BatchRowsBound(inputs, 8, &why), 6);
  EXPECT_THAT(why, HasSubstr("input 'ids' declares dim 0 in [1, 6] (s77)"));
  // The config's max_batch_size when it is the smaller, or nothing is declared.
  why.clear();
  EXPECT_EQ(BatchRowsBound(inputs, 4, &why), 4);
  EXPECT_EQ(why, "");
  EXPECT_EQ(BatchRowsBound({Spec("x", {}), Spec("y", {{0, 1, INT64_MAX, ""}})}, 16), 16);
  // The tightest of several.
  EXPECT_EQ(BatchRowsBound({Spec("a", {{0, 1, 12, ""}}), Spec("b", {{0, 2, 5, ""}})}, 64), 5);
}

TEST(BatchRowsBoundTest, PlannerStopsAtTheCap) {
  // Four queued requests of 2 rows under a cap of 6: the first three run, full.
  std::vector<PlanItem> queue = {Item("a", 2, 0), Item("a", 2, 1), Item("a", 2, 2),
                                 Item("a", 2, 3)};
  BatchSettings s = Settings(BatchRowsBound({Spec("x", {{0, 1, 6, ""}})}, 8), {}, 1000);
  BatchPlan plan = PlanBatch(queue, s, kT0 + microseconds(5));
  EXPECT_THAT(plan.take, ElementsAre(0, 1, 2));
}

// The batch size by measured cost (batch_costs.h).
int64_t PowersOfTwo(int64_t r) { return PaddedRows(r, {1, 2, 4, 8}); }

// BatchCosts fed as the batcher feeds it, with clocks that the runs advance
// as if nothing else ran in the process.
class FedCosts : public BatchCosts {
 public:
  // A run of `size` rows from `requests` requests (default: one per row) that took `ns`.
  void Ran(const std::string& key, int64_t size, uint64_t ns, int64_t requests = -1) {
    clock_ns_ += ns;
    Run run;
    run.size = size;
    run.real_rows = size;
    run.requests = requests < 0 ? size : requests;
    run.ns = ns;
    run.process_ns = clock_ns_;
    run.wall_ns = clock_ns_;
    Record(key, run);
  }
  // The process's CPU time (and wall time) the runs so far moved on.
  uint64_t clock_ns() const { return clock_ns_; }

 private:
  uint64_t clock_ns_ = 0;
};

// A single request's run of one row that took `ns`, ending at `process_ns` and `wall_ns`.
BatchCosts::Run Single(uint64_t ns, uint64_t process_ns, uint64_t wall_ns) {
  BatchCosts::Run run;
  run.ns = ns;
  run.process_ns = process_ns;
  run.wall_ns = wall_ns;
  return run;
}

// `times` runs of each size, taking `ms_per_row(size)` ms per padded row.
template <typename F>
void Learn(FedCosts& costs, const std::string& key, std::vector<int64_t> sizes, F ms_per_row,
           int times = BatchCosts::kTrustedAfter) {
  for (int i = 0; i < times; ++i) {
    for (int64_t size : sizes) {
      costs.Ran(key, size, static_cast<uint64_t>(ms_per_row(size) * 1e6 * size));
    }
  }
}

TEST(BatchCostsTest, UnknownSizesRunWholeThenTheLargestUnknownPrefix) {
  FedCosts costs;
  const std::vector<int64_t> eight(8, 1);
  // Nothing known: Triton's batch as planned.
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 8u);
  // 8 known; 4 (the largest smaller size) is learned next, then 2, then 1.
  Learn(costs, "k", {8}, [](int64_t) { return 1.0; });
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 4u);
  Learn(costs, "k", {4}, [](int64_t) { return 1.0; });
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 2u);
  Learn(costs, "k", {2}, [](int64_t) { return 1.0; });
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 1u);
  // One run is not enough to trust a size.
  costs.Ran("k", 1, 1000000);
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 1u);
  // Another signature knows nothing.
  EXPECT_EQ(costs.Take("other", eight, PowersOfTwo), 8u);
  // A single request is always taken.
  EXPECT_EQ(costs.Take("k", {1}, PowersOfTwo), 1u);
}

TEST(BatchCostsTest, WeightBoundModelRunsWholeBatches) {
  FedCosts costs;
  // A run costs about the same at any size (reading the weights): 8 rows for the price of 1.2.
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return (1.0 + 0.03 * size) / size; });
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 8u);
  // Five waiting run as 8 (padded): still cheaper per real row than 4 alone.
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(5, 1), PowersOfTwo), 5u);
  EXPECT_THAT(costs.Describe(), HasSubstr("1: 1.03, 2: "));
}

// What DynamicBatcher::SplitPays weighs: the cheapest trusted size per row,
// per signature (a split team's single-thread runs keep their own key).
TEST(BatchCostsTest, BestNsPerRowIsTheCheapestTrustedSizePerRow) {
  FedCosts costs;
  EXPECT_LT(costs.BestNsPerRow("k"), 0);  // nothing known
  costs.Ran("k", 8, 8000000);             // one run: not trusted yet
  EXPECT_LT(costs.BestNsPerRow("k"), 0);
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 4 ? 0.5 : 1.0; });
  EXPECT_DOUBLE_EQ(costs.BestNsPerRow("k"), 0.5e6);
  EXPECT_LT(costs.BestNsPerRow("threads=1;k"), 0);
}

TEST(BatchCostsTest, AThreadTakesItsShareWhenOthersAreFree) {
  FedCosts costs;
  const std::vector<int64_t> eight(8, 1);
  // Unknown: the whole batch, share or not (Triton's batch first).
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo, /*share=*/4), 8u);
  // Known and weight-bound: the largest batch within the share.
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return 1.0 / size; });
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo, 4), 4u);
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 8u);
  // At least one request, whatever its rows.
  EXPECT_EQ(costs.Take("k", {3, 3}, PowersOfTwo, 2), 1u);
}

TEST(BatchCostsTest, ComputeBoundModelRunsSingles) {
  FedCosts costs;
  EXPECT_FALSE(costs.ChoosesSingles("k"));
  // Rows cost more in a batch than alone (mobilenet_v2 on one thread): 1.0 ms alone, 1.25 at 8.
  Learn(costs, "k", {1, 2, 4}, [](int64_t size) { return 1.0 + 0.25 * (size - 1) / 7.0; });
  EXPECT_TRUE(costs.ChoosesSingles("k"));
  costs.Ran("k", 8, static_cast<uint64_t>(1.25e6 * 8));  // a size learned anew: not yet
  EXPECT_FALSE(costs.ChoosesSingles("k"));
  costs.Ran("k", 8, static_cast<uint64_t>(1.25e6 * 8));
  EXPECT_TRUE(costs.ChoosesSingles("k"));
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 1u);
  // A sweet spot in the middle wins.
  FedCosts middle;
  Learn(middle, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 4 ? 0.5 : 1.0; });
  EXPECT_EQ(middle.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 4u);
  EXPECT_FALSE(middle.ChoosesSingles("k"));
  // Requests of several rows: the prefix's rows count, not the number of requests.
  EXPECT_EQ(middle.Take("k", {2, 2, 2, 2}, PowersOfTwo), 2u);
  // Padding is paid for: 3 requests run as 4 have 3 real rows, 2 run as 2 beat them here.
  FedCosts padded;
  Learn(padded, "k", {1, 2, 4},
        [](int64_t size) { return size == 1 ? 0.8 : size == 2 ? 0.6 : 0.65; });
  EXPECT_EQ(padded.Take("k", std::vector<int64_t>(3, 1), PowersOfTwo), 2u);
}

TEST(BatchCostsTest, ALargerBatchMustWinByAMargin) {
  // 6% fewer ms per row at 8 than alone (mobilenet_v2 at one thread): singles run.
  FedCosts close;
  Learn(close, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 8 ? 6.6 : 7.0; });
  EXPECT_EQ(close.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 1u);
  // A tie runs the smaller batch.
  FedCosts tie;
  Learn(tie, "k", {1, 2, 4, 8}, [](int64_t) { return 1.0; });
  EXPECT_EQ(tie.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 1u);
  // 20% fewer at 4, and 8 no better than 4: 4.
  FedCosts four;
  Learn(four, "k", {1, 2, 4, 8}, [](int64_t size) { return size >= 4 ? 0.8 : 1.0; });
  EXPECT_EQ(four.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 4u);
  // Seven requests padded to 8 still beat four alone by more than the margin.
  Learn(four, "k", {8}, [](int64_t) { return 0.5; }, 4);
  EXPECT_EQ(four.Take("k", std::vector<int64_t>(7, 1), PowersOfTwo), 7u);
}

// Runs `n` batches of `size` rows at `ms_per_row`, or singles when size is 1.
void RunFor(FedCosts& costs, uint64_t n, int64_t size, double ms_per_row) {
  for (uint64_t i = 0; i < n; ++i) {
    costs.Ran("k", size, static_cast<uint64_t>(ms_per_row * 1e6 * static_cast<double>(size)));
  }
}

// Runs what the costs take from a queue of eight single-row requests, each size at
// `ms_per_row(size)`, until a trial begins (at most `limit` runs); returns how many ran. Now and
// then a size not run for a while is taken to be learned again (kForgetAfterNs).
template <typename F>
uint64_t BatchUntilTrial(FedCosts& costs, F ms_per_row, uint64_t limit = 100000) {
  uint64_t n = 0;
  while (n < limit && !costs.OnTrial("k")) {
    const int64_t size = PowersOfTwo(
        static_cast<int64_t>(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo)));
    RunFor(costs, 1, size, ms_per_row(size));
    ++n;
  }
  return n;
}

// How many runs of `run_ms` each it takes for the process's CPU time to move `ns` on.
uint64_t RunsToSpan(uint64_t ns, double run_ms) {
  return static_cast<uint64_t>(std::ceil(static_cast<double>(ns) / (run_ms * 1e6)));
}

// Runs singles of `ms` until the trial under way reaches its verdict (at most `limit` runs);
// returns how many ran.
uint64_t SinglesUntilVerdict(FedCosts& costs, double ms, uint64_t limit = 100000) {
  uint64_t n = 0;
  while (n < limit && costs.OnTrial("k")) {
    RunFor(costs, 1, 1, ms);
    ++n;
  }
  return n;
}

TEST(BatchCostsTest, SinglesWinATrialWhenBatchingMeasuredCheaperOnlyBesideItself) {
  FedCosts costs;
  const std::vector<int64_t> eight(8, 1);
  // Batches of 8 measure 9 ms per row (beside other batches), singles 11 (beside batches):
  // per size, 8 wins.
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 8 ? 9.0 : 11.0; });
  const uint64_t learned = costs.clock_ns() - 11'000'000;  // since the first run ended
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 8u);
  // The trial comes once batching ran for kTrialEveryNs of the process's CPU (the runs above
  // count), in batches of 72 ms.
  auto nine_at_eight = [](int64_t size) { return size == 8 ? 9.0 : 11.0; };
  EXPECT_EQ(BatchUntilTrial(costs, nine_at_eight),
            RunsToSpan(BatchCosts::kTrialEveryNs - learned, 72.0));
  // The trial: only singles now, and beside singles they cost 7.5 ms per row. Not a clear
  // verdict, so the trial lasts a window: kWindowNs of CPU after its first run.
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 1u);
  EXPECT_EQ(SinglesUntilVerdict(costs, 7.5), RunsToSpan(BatchCosts::kWindowNs, 7.5) + 1);
  EXPECT_THAT(costs.Describe(), HasSubstr("singles 7.50 ms per row against 9.00 batched"));
  EXPECT_THAT(costs.Describe(), HasSubstr(": singles"));
  // Singles hold for kTrialEveryNs of CPU (requests may skip the batcher's queue meanwhile:
  // DynamicBatcher::AloneKey), then batching gets one window and another trial.
  EXPECT_TRUE(costs.ChoosesSingles("k"));
  EXPECT_FALSE(costs.ChoosesSingles("other"));
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 1u);
  const uint64_t hold = RunsToSpan(BatchCosts::kTrialEveryNs, 7.5);
  RunFor(costs, hold - 1, 1, 7.5);
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 1u);
  EXPECT_TRUE(costs.ChoosesSingles("k"));
  RunFor(costs, 1, 1, 7.5);
  EXPECT_FALSE(costs.ChoosesSingles("k"));
  EXPECT_GT(costs.Take("k", eight, PowersOfTwo), 1u);
  // One window of batching (at least kWindowMinRuns runs), then on trial again.
  // (The batch sizes, not run for all those singles, are learned again on the way: 8, 4, 2.)
  EXPECT_EQ(BatchUntilTrial(costs, nine_at_eight),
            std::max<uint64_t>(BatchCosts::kWindowMinRuns,
                               RunsToSpan(BatchCosts::kWindowNs, 72.0) + 1));
  SinglesUntilVerdict(costs, 7.5);
  // Singles won twice: they now hold twice as long.
  RunFor(costs, 2 * hold - 1, 1, 7.5);
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 1u);
  RunFor(costs, 1, 1, 7.5);
  EXPECT_GT(costs.Take("k", eight, PowersOfTwo), 1u);
}

// A model whose batch of 8 costs eight singles: a verdict for batching once held for as many
// runs as one for singles, so eight times as long; now each holds the same span of CPU.
TEST(BatchCostsTest, PoliciesHoldForCpuTimeNotRuns) {
  FedCosts costs;
  // Per size, 8 looks cheaper (3 ms per row against 4); beside each other, singles cost the
  // same 3 ms per row as batched rows.
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 8 ? 3.0 : 4.0; });
  const uint64_t start = costs.clock_ns();
  EXPECT_GT(BatchUntilTrial(costs, [](int64_t size) { return size == 8 ? 3.0 : 4.0; }), 0u);
  // Batching held kTrialEveryNs of CPU (less what Learn ran), not 256 runs of 24 ms.
  EXPECT_NEAR(static_cast<double>(costs.clock_ns() - start),
              static_cast<double>(BatchCosts::kTrialEveryNs), 110e6);
  SinglesUntilVerdict(costs, 3.0);
  EXPECT_THAT(costs.Describe(), HasSubstr(": singles"));
  const uint64_t singles_start = costs.clock_ns();
  while (costs.ChoosesSingles("k")) RunFor(costs, 1, 1, 3.0);
  EXPECT_NEAR(static_cast<double>(costs.clock_ns() - singles_start),
              static_cast<double>(BatchCosts::kTrialEveryNs), 3e6);
}

TEST(BatchCostsTest, BatchingThatWinsItsTrialGoesOnAndIsTriedLessOften) {
  FedCosts costs;
  const std::vector<int64_t> eight(8, 1);
  // An MLP: 0.25 ms per row at 8 (2 ms a run), 1.5 alone, beside anything.
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 8 ? 0.25 : 1.5; });
  // Batching holds kTrialEveryNs of CPU from the first run's end (1.5 ms), give or take the
  // last run (at most 6 ms: a size learned again now and then).
  auto mlp = [](int64_t size) { return size == 8 ? 0.25 : 1.5; };
  EXPECT_GT(BatchUntilTrial(costs, mlp), 0u);
  EXPECT_GE(costs.clock_ns() - 1'500'000, BatchCosts::kTrialEveryNs);
  EXPECT_LT(costs.clock_ns() - 1'500'000, BatchCosts::kTrialEveryNs + 6'000'000);
  EXPECT_EQ(costs.Take("k", eight, PowersOfTwo), 1u);  // the trial
  // Singles cost 6x the batched rows (more than kClearFactor): a clear verdict after
  // kWindowMinRuns runs.
  EXPECT_EQ(SinglesUntilVerdict(costs, 1.5), static_cast<uint64_t>(BatchCosts::kWindowMinRuns));
  EXPECT_THAT(costs.Describe(), HasSubstr(": batching"));
  // Batches again, and the next trial comes after twice as much CPU time.
  EXPECT_GT(costs.Take("k", eight, PowersOfTwo), 1u);
  const uint64_t verdict = costs.clock_ns();
  EXPECT_GT(BatchUntilTrial(costs, mlp), 0u);
  EXPECT_GE(costs.clock_ns() - verdict, 2 * BatchCosts::kTrialEveryNs);
  EXPECT_LT(costs.clock_ns() - verdict, 2 * BatchCosts::kTrialEveryNs + 6'000'000);
}

TEST(BatchCostsTest, ATrialOfRequestsOfSeveralRowsEnds) {
  FedCosts costs;
  // Requests of 2 rows each: a single request runs as 2.
  Learn(costs, "k", {2, 4, 8}, [](int64_t size) { return size == 8 ? 1.0 : 2.0; });
  RunFor(costs, RunsToSpan(BatchCosts::kTrialEveryNs, 8.0), 8, 1.0);
  const std::vector<int64_t> pairs(4, 2);
  EXPECT_EQ(costs.Take("k", pairs, PowersOfTwo), 1u);  // the trial
  RunFor(costs, RunsToSpan(BatchCosts::kWindowNs, 4.0) + 1, 2, 2.0);
  EXPECT_THAT(costs.Describe(), HasSubstr(": batching"));
}

TEST(BatchCostsTest, AWindowStartsAgainAfterAPause) {
  FedCosts costs;
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 8 ? 1.0 : 2.0; });
  BatchUntilTrial(costs, [](int64_t size) { return size == 8 ? 1.0 : 2.0; });
  // The trial's first singles, then the model rests for a second while the process works on
  // something else (its CPU clock moves on): what ran meanwhile is not the singles' cost.
  uint64_t cpu = 100'000'000'000;
  uint64_t wall = 100'000'000'000;
  for (int i = 0; i < 10; ++i) {
    cpu += 2'000'000;
    wall += 2'000'000;
    costs.Record("k", Single(2'000'000, cpu, wall));
  }
  cpu += 900'000'000;
  wall += 1'000'000'000;
  for (uint64_t i = 0; i <= RunsToSpan(BatchCosts::kWindowNs, 2.0); ++i) {
    cpu += 2'000'000;
    wall += 2'000'000;
    costs.Record("k", Single(2'000'000, cpu, wall));
  }
  EXPECT_THAT(costs.Describe(), HasSubstr("singles 2.00 ms per row"));
}

TEST(BatchCostsTest, NoTrialWhileOnlySinglesRun) {
  FedCosts costs;
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 1 ? 1.0 : 2.0; });
  RunFor(costs, RunsToSpan(4 * BatchCosts::kTrialEveryNs, 1.0), 1, 1.0);
  EXPECT_THAT(costs.Describe(), Not(HasSubstr("trial")));
}

// A request of several rows run alone is a single: no trial against itself.
TEST(BatchCostsTest, NoTrialWhileRequestsOfSeveralRowsRunAlone) {
  FedCosts costs;
  for (uint64_t i = 0; i < RunsToSpan(4 * BatchCosts::kTrialEveryNs, 2.0); ++i) {
    costs.Ran("k", 2, 2'000'000, 1);
  }
  EXPECT_THAT(costs.Describe(), Not(HasSubstr("trial")));
}

TEST(BatchCostsTest, ASizeNotRunForLongIsLearnedAgain) {
  FedCosts costs;
  Learn(costs, "k", {1, 2, 4, 8}, [](int64_t size) { return size == 1 ? 1.0 : 2.0; });
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 1u);
  // Only singles run for a while: the batch sizes are forgotten, and 8 is tried again.
  // (Forgotten once kForgetAfterNs of CPU went by since they last ran, not before.)
  const uint64_t forget = RunsToSpan(BatchCosts::kForgetAfterNs, 1.0);
  for (uint64_t i = 0; i < forget - 100; ++i) costs.Ran("k", 1, 1000000);
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 1u);
  for (uint64_t i = 0; i <= 100; ++i) costs.Ran("k", 1, 1000000);
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 8u);
  // It is now cheap (the machine was busy before). A size known before is trusted again on
  // one run, so 4 is tried next, then 2; then 8 wins.
  auto now_cheap = [](int64_t size) { return 0.25 / (size == 8 ? 2 : 1); };
  Learn(costs, "k", {8}, now_cheap, 1);
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 4u);
  Learn(costs, "k", {4}, now_cheap, 1);
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 2u);
  Learn(costs, "k", {2}, now_cheap, 1);
  EXPECT_EQ(costs.Take("k", std::vector<int64_t>(8, 1), PowersOfTwo), 8u);
}

}  // namespace
}  // namespace kiln::server
