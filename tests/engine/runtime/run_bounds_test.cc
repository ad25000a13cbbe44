// What bounds a run (RunOptions): a deadline and cancellation checked before
// every step and on every loop iteration, and a memory budget that the
// plan's arena and every dynamic allocation count against.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "engine/runtime/executable.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;
using ir::BlockId;
using ir::Graph;
using ir::NodeId;
using ir::OpKind;
using ir::ValueId;
using ir::ValueKind;

ValueId Out(const Graph& g, NodeId n) { return g.node(n).outputs[0]; }

ValueId IntConst(Graph& g, int64_t v) {
  Tensor t = Tensor::Zeros(DType::kInt64, {});
  *t.data<int64_t>() = v;
  return g.AddConstant(t, "", ValueKind::kInt);
}

ValueId True(Graph& g) {
  Tensor t = Tensor::Zeros(DType::kBool, {});
  *t.data<bool>() = true;
  return g.AddConstant(t, "", ValueKind::kBool);
}

// for i in range(trips): s = s + s (or, with `empty_body`, nothing at all).
Graph Loop(int64_t trips, bool empty_body) {
  Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId go = True(g);
  NodeId loop = g.AddNodeWithOutputs(OpKind::kLoop, {IntConst(g, trips), go, x}, 1);
  BlockId body = g.AddBlock(loop);
  g.AddBlockParam(body, "i", {}, ValueKind::kInt);
  ValueId s = g.AddBlockParam(body, "s", {});
  g.SetInsertionBlock(body);
  g.SetBlockResults(body, {go, empty_body ? s : Out(g, g.AddNode(OpKind::kAdd, {s, s}))});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(Out(g, loop), "output0");
  return g;
}

std::unique_ptr<Executable> Compile(const Graph& g, const Tensor& x) {
  auto exe = Executable::Compile(g, {kernels::TensorInfo{x.dtype(), x.dims(), nullptr, true}}, {});
  EXPECT_TRUE(exe.ok()) << exe.status();
  return *std::move(exe);
}

RunOptions WithDeadline(std::chrono::milliseconds in) {
  RunOptions run;
  run.deadline = std::chrono::steady_clock::now() + in;
  run.deadline_name = "the test's deadline";
  return run;
}

TEST(RunBoundsTest, AnEndlessLoopEndsAtTheDeadline) {
  for (bool empty_body : {false, true}) {
    const Tensor x = Tensor::Zeros(DType::kF32, {4});
    auto exe = Compile(Loop(std::numeric_limits<int64_t>::max(), empty_body), x);
    const auto start = std::chrono::steady_clock::now();
    auto out = exe->RunValues({RunValue::Of(x)}, WithDeadline(std::chrono::milliseconds(200)));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    ASSERT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
    EXPECT_THAT(std::string(out.status().message()),
                HasSubstr("ran past the test's deadline (at node "));
  }
}

TEST(RunBoundsTest, CancellationStopsTheRunWithItsReason) {
  const Tensor x = Tensor::Zeros(DType::kF32, {4});
  auto exe = Compile(Loop(std::numeric_limits<int64_t>::max(), false), x);
  RunOptions run;
  int polls = 0;
  run.stop = [&] {
    return ++polls > 1000 ? absl::CancelledError("the test cancelled it") : absl::OkStatus();
  };
  auto out = exe->RunValues({RunValue::Of(x)}, run);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("the test cancelled it (at node "));
}

TEST(RunBoundsTest, APlanPastTheMemoryLimitIsRefusedBeforeItRuns) {
  Graph g;
  ValueId x = g.AddInput("x", {});
  g.AddOutput(Out(g, g.AddNode(OpKind::kAdd, {x, x}, {}, "aten::add")), "output0");
  const Tensor x1m = Tensor::Zeros(DType::kF32, {1 << 20});
  auto exe = Compile(g, x1m);
  RunOptions run;
  run.memory = std::make_shared<MemoryBudget>(1 << 20, "the test's limit");
  auto out = exe->RunValues({RunValue::Of(x1m)}, run);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("the plan for inputs FP32[1048576] needs 4.0 MiB, more than the "
                        "per-request memory limit of 1.0 MiB (the test's limit); its largest "
                        "tensor is %"));
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("FP32[1048576] (4.0 MiB), the output of node "));
  EXPECT_EQ(run.memory->used(), 0u);
  // Within the limit it runs, and every byte counted is given back.
  run.memory = std::make_shared<MemoryBudget>(64 << 20, "the test's limit");
  auto fits = exe->RunValues({RunValue::Of(x1m)}, run);
  ASSERT_TRUE(fits.ok()) << fits.status();
  fits->clear();
  EXPECT_EQ(run.memory->used(), 0u);
}

TEST(RunBoundsTest, DynamicAllocationsCountAgainstTheLimit) {
  // Each iteration's s + s is allocated at run time: 4 MiB, then 4 more
  // while the first is still carried.
  const Tensor x = Tensor::Zeros(DType::kF32, {1 << 20});
  auto exe = Compile(Loop(3, false), x);
  RunOptions run;
  run.memory = std::make_shared<MemoryBudget>(6 << 20, "the test's limit");
  auto out = exe->RunValues({RunValue::Of(x)}, run);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("(Add) needs 4.0 MiB with 4.0 MiB already held, more than the per-request "
                        "memory limit of 6.0 MiB (the test's limit)"));
  EXPECT_EQ(run.memory->used(), 0u);
}

TEST(RunBoundsTest, APlannedShapeWhoseSizeOverflowsDoesNotCompile) {
  Graph g;
  ValueId x = g.AddInput("x", {});
  g.AddOutput(Out(g, g.AddNode(OpKind::kAdd, {x, x})), "output0");
  const int64_t big = int64_t{1} << 40;
  auto exe = Executable::Compile(g, {kernels::TensorInfo{DType::kF32, {big, big}, nullptr, true}}, {});
  ASSERT_EQ(exe.status().code(), absl::StatusCode::kInvalidArgument) << exe.status();
  EXPECT_THAT(std::string(exe.status().message()),
              HasSubstr("shape [1099511627776, 1099511627776] of FP32 is too large (its size "
                        "overflows)"));
}

}  // namespace
}  // namespace kiln::runtime
