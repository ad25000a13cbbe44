// The memory planner's placement (engine/runtime/compile/memory_planner.h):
// buffers alive at the same step never overlap, buffers whose lifetimes are
// disjoint share bytes, offsets are 64-byte aligned, and the arena is as
// small as greedy-by-size makes it on known cases.
#include "engine/runtime/compile/memory_planner.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln::runtime::compile {
namespace {

bool Overlap(const Buffer& a, const Buffer& b) {
  const bool live_together = a.first <= b.last && b.first <= a.last;
  const bool bytes_together = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
  return live_together && bytes_together && a.bytes > 0 && b.bytes > 0;
}

TEST(MemoryPlannerTest, DisjointLifetimesShareBytes) {
  // A chain a -> b -> c: a dies when b is made, so c can take a's bytes.
  std::vector<Buffer> buffers = {{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}};
  EXPECT_EQ(PlaceBuffers(buffers), 2048u);
  EXPECT_EQ(buffers[0].offset, buffers[2].offset);
  EXPECT_NE(buffers[0].offset, buffers[1].offset);
}

TEST(MemoryPlannerTest, LargestFirstAndAligned) {
  std::vector<Buffer> buffers = {{100, 0, 0}, {5000, 0, 0}, {1, 0, 0}};
  const size_t total = PlaceBuffers(buffers);
  EXPECT_EQ(buffers[1].offset, 0u);  // the largest goes first, at 0
  for (const Buffer& b : buffers) EXPECT_EQ(b.offset % 64, 0u);
  EXPECT_EQ(total % 64, 0u);
  EXPECT_GE(total, 5101u);
  EXPECT_LE(total, 5000u + 128 + 64 + 64);
}

TEST(MemoryPlannerTest, GapBetweenLiveBuffersIsReused) {
  // Two long-lived buffers with room between them once a short one has died.
  std::vector<Buffer> buffers = {{4096, 0, 10}, {1024, 0, 1}, {4096, 0, 10}, {1024, 5, 6}};
  PlaceBuffers(buffers);
  EXPECT_EQ(buffers[3].offset, buffers[1].offset);
}

TEST(MemoryPlannerTest, RandomProgramsNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Buffer> buffers(1 + rng() % 40);
    for (Buffer& b : buffers) {
      b.first = static_cast<int>(rng() % 50);
      b.last = b.first + static_cast<int>(rng() % 20);
      b.bytes = 64 * (1 + rng() % 64) - (rng() % 2 ? 0 : 13);
    }
    const size_t total = PlaceBuffers(buffers);
    size_t peak = 0;  // the sum of the live bytes at the busiest step: a lower bound
    for (int st = 0; st < 70; ++st) {
      size_t live = 0;
      for (const Buffer& b : buffers) live += (b.first <= st && st <= b.last) ? b.bytes : 0;
      peak = std::max(peak, live);
    }
    EXPECT_GE(total, peak);
    for (size_t i = 0; i < buffers.size(); ++i) {
      EXPECT_LE(buffers[i].offset + buffers[i].bytes, total);
      for (size_t j = i + 1; j < buffers.size(); ++j) {
        EXPECT_FALSE(Overlap(buffers[i], buffers[j])) << "trial " << trial << ": " << i << ", " << j;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::runtime::compile
