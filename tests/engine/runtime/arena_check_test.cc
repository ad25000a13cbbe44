// Arena checks (engine/runtime/arena_check.h): red zones after every planned
// buffer and the workspace, buffers filled as they are born and after their
// last use.
#include "engine/runtime/arena_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/runtime/executable.h"

namespace kiln::runtime {
namespace {

using ::testing::Each;
using ::testing::Eq;
using ::testing::HasSubstr;

// Two buffers and a workspace in 448 bytes: %a (40 bytes, steps 0-1), %b
// (64 bytes, step 1 to the end of the run), the workspace (100 bytes).
ArenaCheck TwoBuffers() {
  return ArenaCheck({{0, 40, 128, 0, 1, "%a FP32[10]"}, {128, 64, 256, 1, 2, "%b FP32[16]"}},
                    256, 100, 448, 2);
}

std::vector<uint8_t> Bytes(const std::vector<uint8_t>& block, size_t from, size_t to) {
  return std::vector<uint8_t>(block.begin() + from, block.begin() + to);
}

TEST(ArenaCheckTest, ABufferIsFilledAsItsStepStartsAndAfterItsLastUse) {
  ArenaCheck check = TwoBuffers();
  std::vector<uint8_t> block(448, 0);
  check.Begin(block.data());
  check.BeforeStep(0, /*kernel=*/true, block.data());
  EXPECT_THAT(Bytes(block, 0, 40), Each(Eq(ArenaCheck::kFill)));
  EXPECT_THAT(Bytes(block, 40, 128), Each(Eq(ArenaCheck::kRedBytes[0])));
  EXPECT_THAT(Bytes(block, 128, 256), Each(Eq(0)));  // %b is not born yet
  EXPECT_THAT(Bytes(block, 256, 356), Each(Eq(ArenaCheck::kFill)));
  EXPECT_THAT(Bytes(block, 356, 448), Each(Eq(ArenaCheck::kWorkspaceRedByte)));
  std::fill(block.begin(), block.begin() + 40, 7);  // the kernel writes all of %a
  ASSERT_TRUE(check.AfterStep(0, block.data()).ok());
  EXPECT_THAT(Bytes(block, 0, 40), Each(Eq(7)));  // still alive
  check.BeforeStep(1, /*kernel=*/true, block.data());
  std::fill(block.begin() + 128, block.begin() + 192, 9);
  ASSERT_TRUE(check.AfterStep(1, block.data()).ok());
  EXPECT_THAT(Bytes(block, 0, 40), Each(Eq(ArenaCheck::kFill)));  // step 1 was its last use
  EXPECT_THAT(Bytes(block, 128, 192), Each(Eq(9)));  // an output: alive to the end
}

TEST(ArenaCheckTest, AKernelWritingPastItsOutputIsAnErrorNamingIt) {
  ArenaCheck check = TwoBuffers();
  std::vector<uint8_t> block(448, 0);
  check.Begin(block.data());
  check.BeforeStep(0, true, block.data());
  block[40] = 0;  // one byte past %a's 40
  absl::Status s = check.AfterStep(0, block.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("wrote past the end of %a FP32[10] (40 bytes)"));
  // Past its red zone's last byte too.
  check.BeforeStep(0, true, block.data());
  block[127] = 0;
  EXPECT_FALSE(check.AfterStep(0, block.data()).ok());
  // A copy that ran past its input's end (%a's red zone) and its output's
  // (%b's): neighbours' red zones differ, so the copied bytes do not pass.
  check.BeforeStep(0, true, block.data());
  check.BeforeStep(1, true, block.data());
  std::copy(block.begin() + 40, block.begin() + 48, block.begin() + 192);
  s = check.AfterStep(1, block.data());
  EXPECT_THAT(s.message(), HasSubstr("wrote past the end of %b FP32[16] (64 bytes)"));
}

TEST(ArenaCheckTest, AKernelWritingPastTheWorkspaceIsAnError) {
  ArenaCheck check = TwoBuffers();
  std::vector<uint8_t> block(448, 0);
  check.Begin(block.data());
  check.BeforeStep(0, true, block.data());
  block[355] = 1;  // the workspace's last byte: allowed
  ASSERT_TRUE(check.AfterStep(0, block.data()).ok());
  check.BeforeStep(1, true, block.data());
  block[356] = 1;
  absl::Status s = check.AfterStep(1, block.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("past the end of the workspace (100 bytes)"));
}

// x -> relu -> sigmoid -> tanh on `n` floats.
absl::StatusOr<std::unique_ptr<Executable>> Chain(int64_t n) {
  ir::Graph g;
  ir::ValueId v = g.AddInput("x", {});
  for (ir::OpKind k : {ir::OpKind::kRelu, ir::OpKind::kSigmoid, ir::OpKind::kTanh}) {
    v = g.node(g.AddNode(k, {v})).outputs[0];
  }
  g.AddOutput(v, "output0");
  CompileOptions options;
  options.disabled_passes = {"fuse_elementwise"};
  return Executable::Compile(g, {kernels::TensorInfo{DType::kF32, {n}}}, options);
}

TEST(ArenaCheckTest, ACheckedPlanLeavesRedZonesAndAnswersAsTheUncheckedOne) {
  const int64_t n = 1000;
  SetArenaChecks(false);
  auto plain = Chain(n);
  ASSERT_TRUE(plain.ok()) << plain.status();
  SetArenaChecks(true);
  auto checked = Chain(n);
  SetArenaChecks(false);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_GE((*checked)->arena_bytes(), (*plain)->arena_bytes() + ArenaCheck::kRedZone);
  Tensor x = Tensor::Zeros(DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  auto a = (*plain)->Run({x});
  auto b = (*checked)->Run({x});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (int64_t i = 0; i < n; ++i) {
    const float want = std::tanh(1.0f / (1.0f + std::exp(-std::max(x.data<float>()[i], 0.0f))));
    ASSERT_NEAR((*b)[0].data<float>()[i], want, 1e-6) << i;
    ASSERT_EQ((*b)[0].data<float>()[i], (*a)[0].data<float>()[i]) << i;
  }
}

}  // namespace
}  // namespace kiln::runtime
