// Buffers for decoded request inputs, kept for the next request.
//
// A batch-1 image is 602 KB. malloc serves a block that large from fresh pages
// (its mmap threshold), so every request paid for faulting in and zeroing
// 147 pages before copying its input, then gave them back: about 0.12 ms of
// kilnd's request thread on each resnet18 call (docs/performance.md, "kilnd
// next to Kiln in process"). This pool keeps a few such blocks, bounded in
// count and bytes, and hands one out uninitialized for the decoder to fill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "engine/common/tensor.h"

namespace kiln::server {

class InputBufferPool {
 public:
  // Keeps at most `max_buffers` free blocks of at most `max_bytes` in all;
  // blocks below `min_bytes` are left to malloc (it keeps those warm itself).
  InputBufferPool(size_t max_buffers, uint64_t max_bytes, uint64_t min_bytes);
  ~InputBufferPool();
  InputBufferPool(const InputBufferPool&) = delete;
  InputBufferPool& operator=(const InputBufferPool&) = delete;

  // A tensor of `dtype` and `dims` whose bytes are NOT initialized: the caller
  // writes every one. Its block comes back to the pool when the last copy of
  // the tensor goes (or is freed, when the pool is full or gone). Errors as
  // Tensor::Allocate (a shape too large, no memory).
  absl::StatusOr<Tensor> Allocate(DType dtype, Dims dims, const std::string& what);

  // Free blocks held now, and their bytes (tests, statistics).
  size_t free_buffers() const;
  uint64_t free_bytes() const;

  // The process's pool for request inputs.
  static InputBufferPool& ForRequests();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace kiln::server
