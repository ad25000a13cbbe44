#include "server/core/input_buffer_pool.h"

#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::server {
namespace {

TEST(InputBufferPoolTest, ReusesAFreedBlockOfTheSameSize) {
  InputBufferPool pool(4, 1 << 20, 1024);
  const void* first = nullptr;
  {
    absl::StatusOr<Tensor> t = pool.Allocate(DType::kF32, {1, 3, 16, 16}, "x");
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->byte_size(), 3u * 16 * 16 * 4);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % 64, 0u);
    first = t->raw_data();
    std::memset(t->raw_data(), 0x7f, t->byte_size());
  }
  EXPECT_EQ(pool.free_buffers(), 1u);
  absl::StatusOr<Tensor> again = pool.Allocate(DType::kF32, {3, 16, 16}, "x");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->raw_data(), first);
  EXPECT_EQ(pool.free_buffers(), 0u);
  // Another size does not take it.
  absl::StatusOr<Tensor> other = pool.Allocate(DType::kF32, {4, 16, 16}, "x");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->raw_data(), first);
}

TEST(InputBufferPoolTest, CopiesShareTheBlockUntilTheLastGoes) {
  InputBufferPool pool(4, 1 << 20, 1024);
  absl::StatusOr<Tensor> t = pool.Allocate(DType::kUInt8, {4096}, "x");
  ASSERT_TRUE(t.ok());
  Tensor copy = *t;
  t = absl::UnknownError("dropped");
  EXPECT_EQ(pool.free_buffers(), 0u);  // `copy` still holds it
  copy = Tensor();
  EXPECT_EQ(pool.free_buffers(), 1u);
}

TEST(InputBufferPoolTest, BoundedInCountAndBytes) {
  InputBufferPool pool(2, 64 * 1024, 1024);
  {
    std::vector<Tensor> held;
    for (int64_t n : {4096, 8192, 16384, 2048}) {
      absl::StatusOr<Tensor> t = pool.Allocate(DType::kUInt8, {n}, "x");
      ASSERT_TRUE(t.ok());
      held.push_back(*std::move(t));
    }
  }
  EXPECT_LE(pool.free_buffers(), 2u);
  EXPECT_LE(pool.free_bytes(), 64u * 1024);
  // Larger than the pool's bytes, or below its minimum: plain allocations, never kept.
  { ASSERT_TRUE(pool.Allocate(DType::kUInt8, {128 * 1024}, "x").ok()); }
  { ASSERT_TRUE(pool.Allocate(DType::kUInt8, {100}, "x").ok()); }
  EXPECT_LE(pool.free_buffers(), 2u);
  EXPECT_LE(pool.free_bytes(), 64u * 1024);
}

TEST(InputBufferPoolTest, ErrorsAreStatuses) {
  InputBufferPool pool(2, 1 << 20, 1024);
  absl::StatusOr<Tensor> huge = pool.Allocate(DType::kF32, {1ll << 40, 1ll << 40}, "input 'x'");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("input 'x'"), std::string::npos);
  absl::StatusOr<Tensor> negative = pool.Allocate(DType::kF32, {-1, 3}, "x");
  EXPECT_FALSE(negative.ok());
  absl::StatusOr<Tensor> empty = pool.Allocate(DType::kF32, {0, 3}, "x");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->byte_size(), 0u);
}

TEST(InputBufferPoolTest, ATensorMayOutliveThePool) {
  Tensor kept;
  {
    InputBufferPool pool(2, 1 << 20, 1024);
    absl::StatusOr<Tensor> t = pool.Allocate(DType::kUInt8, {4096}, "x");
    ASSERT_TRUE(t.ok());
    kept = *t;
  }
  std::memset(kept.raw_data(), 1, kept.byte_size());
  kept = Tensor();  // frees the block (no pool to return it to)
}

TEST(InputBufferPoolTest, ManyThreads) {
  InputBufferPool pool(4, 1 << 20, 1024);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&pool, i] {
      for (int k = 0; k < 500; ++k) {
        absl::StatusOr<Tensor> t = pool.Allocate(DType::kUInt8, {4096 * (1 + (k + i) % 3)}, "x");
        ASSERT_TRUE(t.ok());
        std::memset(t->raw_data(), i, t->byte_size());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(pool.free_buffers(), 4u);
}

}  // namespace
}  // namespace kiln::server
