#include "engine/runtime/arena_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <utility>
#include <vector>

#include "engine/runtime/executable.h"

namespace kiln::runtime {
namespace {

using ::testing::Each;
using ::testing::Eq;

TEST(ArenaPoolTest, ARunTakesTheSmallestFreeBlockThatFits) {
  ArenaPool pool(4);
  const uint8_t* small;
  const uint8_t* large;
  {
    auto a = pool.Acquire(1000, "a");
    auto b = pool.Acquire(100000, "b");
    ASSERT_TRUE(a.ok() && b.ok());
    small = a->data();
    large = b->data();
    EXPECT_GE(a->bytes(), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 64, 0u);
    // New blocks are zeroed, as Tensor::Allocate's are.
    EXPECT_THAT(std::vector<uint8_t>(b->data(), b->data() + b->bytes()), Each(Eq(0)));
  }
  EXPECT_EQ(pool.stats().free_blocks, 2u);
  EXPECT_EQ(pool.stats().allocations, 2u);
  auto c = pool.Acquire(500, "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->data(), small);
  auto d = pool.Acquire(5000, "d");  // only the large one fits
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->data(), large);
  auto e = pool.Acquire(5000, "e");  // none free: a new one
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(pool.stats().allocations, 3u);
  EXPECT_EQ(pool.stats().blocks_in_use, 3u);
  EXPECT_EQ(pool.stats().free_blocks, 0u);
}

TEST(ArenaPoolTest, HoldsAtMostItsCountOfBlocksTheLargestFirst) {
  ArenaPool pool(2);
  {
    std::vector<ArenaPool::Block> blocks;
    for (size_t bytes : {1 << 10, 1 << 12, 1 << 14}) {
      auto b = pool.Acquire(bytes, "b");
      ASSERT_TRUE(b.ok());
      blocks.push_back(*std::move(b));
    }
  }
  ArenaPool::Stats s = pool.stats();
  EXPECT_EQ(s.free_blocks, 2u);
  EXPECT_EQ(s.free_bytes, static_cast<uint64_t>((1 << 12) + (1 << 14)));
  EXPECT_EQ(s.blocks_in_use, 0u);
  pool.set_max_blocks(1);
  EXPECT_EQ(pool.stats().free_bytes, static_cast<uint64_t>(1 << 14));
  pool.Trim();
  EXPECT_EQ(pool.stats().free_blocks, 0u);
  pool.set_max_blocks(0);  // nothing waits: every block is freed when its run ends
  { auto b = pool.Acquire(64, "b"); }
  EXPECT_EQ(pool.stats().free_blocks, 0u);
}

TEST(ArenaPoolTest, BlocksInUseCountAgainstTheBound) {
  ArenaPool pool(2);
  auto x = pool.Acquire(1 << 10, "x");
  auto y = pool.Acquire(1 << 11, "y");
  auto z = pool.Acquire(1 << 12, "z");  // more runs than the bound: each still gets a block
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  EXPECT_EQ(pool.stats().blocks_in_use, 3u);
  *z = ArenaPool::Block();  // two still in use: z's block is not kept
  EXPECT_EQ(pool.stats().free_blocks, 0u);
  *y = ArenaPool::Block();  // one in use, one waits
  EXPECT_EQ(pool.stats().free_blocks, 1u);
  EXPECT_EQ(pool.stats().free_bytes, static_cast<uint64_t>(1 << 11));
}

// Of two free blocks of one size a run takes the one given back last, so the
// other ages; TrimIdle frees the blocks that waited at least `idle`, and only
// those.
TEST(ArenaPoolTest, ARunTakesTheBlockGivenBackLastAndIdleOnesLeave) {
  ArenaPool pool(4);
  auto a = pool.Acquire(4096, "a");
  auto b = pool.Acquire(4096, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  const uint8_t* first = a->data();
  const uint8_t* last = b->data();
  *a = ArenaPool::Block();  // given back first
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  *b = ArenaPool::Block();
  EXPECT_EQ(pool.stats().free_blocks, 2u);
  {
    auto c = pool.Acquire(4096, "c");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->data(), last);
  }  // back again, first in line again
  EXPECT_EQ(pool.TrimIdle(std::chrono::milliseconds(30)), 1u);  // `first` waited 60 ms
  ArenaPool::Stats s = pool.stats();
  EXPECT_EQ(s.free_blocks, 1u);
  auto d = pool.Acquire(4096, "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->data(), last);
  EXPECT_NE(d->data(), first);
  *d = ArenaPool::Block();
  EXPECT_EQ(pool.TrimIdle(std::chrono::hours(1)), 0u);
  EXPECT_EQ(pool.TrimIdle(std::chrono::seconds(0)), 1u);
  EXPECT_EQ(pool.stats().free_blocks, 0u);
  EXPECT_EQ(pool.stats().allocations, 2u);
}

TEST(ArenaPoolTest, ABlockMayOutliveThePool) {
  auto pool = std::make_unique<ArenaPool>(4);
  auto b = pool->Acquire(4096, "b");
  ASSERT_TRUE(b.ok());
  ArenaPool::Block kept = *std::move(b);
  pool.reset();
  kept.data()[0] = 1;  // still ours; freed when it goes
}

TEST(ArenaPoolTest, TooLargeIsAStatus) {
  ArenaPool pool(4);
  auto b = pool.Acquire(size_t{1} << 62, "the plan's arena");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.stats().blocks_in_use, 0u);
}

TEST(ArenaPoolTest, FillByteMarksEveryBlockHandedOut) {
  ArenaPool pool(4);
  pool.set_fill_byte(0xFF);
  { auto b = pool.Acquire(256, "b"); }
  auto b = pool.Acquire(256, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(std::vector<uint8_t>(b->data(), b->data() + b->bytes()), Each(Eq(0xFF)));
}

// x -> relu -> sigmoid -> tanh on `n` floats.
std::unique_ptr<Executable> Chain(int64_t n) {
  ir::Graph g;
  ir::ValueId v = g.AddInput("x", {});
  for (ir::OpKind k : {ir::OpKind::kRelu, ir::OpKind::kSigmoid, ir::OpKind::kTanh}) {
    v = g.node(g.AddNode(k, {v})).outputs[0];
  }
  g.AddOutput(v, "output0");
  auto exe = Executable::Compile(g, {kernels::TensorInfo{DType::kF32, {n}}}, {});
  EXPECT_TRUE(exe.ok()) << exe.status();
  return exe.ok() ? *std::move(exe) : nullptr;
}

TEST(ArenaPoolTest, PlansShareTheProcessPoolAndAnswerOnEachOthersBlocks) {
  ArenaPool& pool = ArenaPool::Global();
  pool.set_max_blocks(1);
  pool.Trim();
  pool.set_fill_byte(0xFF);  // what another plan may have left
  const int64_t n = 1 << 16;
  std::unique_ptr<Executable> large = Chain(4 * n);
  std::unique_ptr<Executable> small = Chain(n);
  ASSERT_TRUE(large && small);
  ASSERT_GT(large->arena_bytes(), small->arena_bytes());
  const float expected = std::tanh(1.0f / (1.0f + std::exp(-0.5f)));
  auto run = [&](const Executable& exe, int64_t count) {
    Tensor x = Tensor::Zeros(DType::kF32, {count});
    std::fill(x.data<float>(), x.data<float>() + count, 0.5f);
    auto out = exe.Run({x});
    ASSERT_TRUE(out.ok()) << out.status();
    const float* y = (*out)[0].data<float>();
    for (int64_t i = 0; i < count; ++i) ASSERT_NEAR(y[i], expected, 1e-6) << i;
  };
  run(*large, 4 * n);
  const uint64_t allocations = pool.stats().allocations;
  // The small plan runs in the block the large one gave back, and each plan
  // after the other again: no new block, the same answers.
  for (int i = 0; i < 2; ++i) {
    run(*small, n);
    run(*large, 4 * n);
  }
  EXPECT_EQ(pool.stats().allocations, allocations);
  EXPECT_EQ(pool.stats().free_blocks, 1u);
  EXPECT_EQ(pool.stats().blocks_in_use, 0u);
  pool.set_fill_byte(std::nullopt);
}

}  // namespace
}  // namespace kiln::runtime
