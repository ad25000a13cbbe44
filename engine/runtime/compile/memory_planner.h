// The memory planner's placement: buffers with lifetimes (in step indices)
// get offsets in one arena. Compiler::Plan (memory_planner.cc) works out the
// buffers and lifetimes of a program; this is the placement alone, so it can
// be tested by itself.
#pragma once

#include <cstddef>
#include <vector>

namespace kiln::runtime::compile {

// A buffer to place: its size and the steps during which it is alive
// (first..last, inclusive); `offset` is the planner's answer.
struct Buffer {
  size_t bytes = 0;
  int first = 0;
  int last = 0;
  size_t offset = 0;
};

// Greedy by size (TFLite's greedy-by-size planner): largest first, each at
// the lowest 64-byte aligned offset that does not overlap a buffer alive at
// the same time. Fills every buffer's offset; returns the arena's bytes.
size_t PlaceBuffers(std::vector<Buffer>& buffers);

}  // namespace kiln::runtime::compile
