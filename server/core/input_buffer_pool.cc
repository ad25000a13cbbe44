#include "server/core/input_buffer_pool.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/common/tensor_buffer.h"

namespace kiln::server {

// Shared with every block's deleter, so that a tensor outliving the pool
// frees its block instead of returning it.
struct InputBufferPool::State {
  size_t max_buffers;
  uint64_t max_bytes;
  uint64_t min_bytes;
  mutable std::mutex mu;
  std::multimap<size_t, void*> free;  // block size -> block
  uint64_t free_bytes = 0;
  bool closed = false;

  void* Take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = free.find(bytes);
    if (it == free.end()) return nullptr;
    void* p = it->second;
    free.erase(it);
    free_bytes -= bytes;
    return p;
  }

  void Give(void* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!closed && bytes <= max_bytes) {
        // Full: the largest free blocks go first (the most memory back).
        while (!free.empty() &&
               (free.size() >= max_buffers || free_bytes + bytes > max_bytes)) {
          auto largest = std::prev(free.end());
          std::free(largest->second);
          free_bytes -= largest->first;
          free.erase(largest);
        }
        free.emplace(bytes, p);
        free_bytes += bytes;
        return;
      }
    }
    std::free(p);
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    for (auto& [bytes, p] : free) std::free(p);
    free.clear();
    free_bytes = 0;
  }
};

InputBufferPool::InputBufferPool(size_t max_buffers, uint64_t max_bytes, uint64_t min_bytes)
    : state_(std::make_shared<State>()) {
  state_->max_buffers = max_buffers;
  state_->max_bytes = max_bytes;
  state_->min_bytes = min_bytes;
}

InputBufferPool::~InputBufferPool() { state_->Close(); }

absl::StatusOr<Tensor> InputBufferPool::Allocate(DType dtype, Dims dims,
                                                 const std::string& what) {
  ASSIGN_OR_RETURN(const size_t size, CheckedByteSize(dtype, dims, what));
  if (size < state_->min_bytes || size > state_->max_bytes || state_->max_buffers == 0) {
    return Tensor::Allocate(dtype, std::move(dims), what);
  }
  const size_t bytes = TensorBufferBytes(size);
  void* p = state_->Take(bytes);
  if (p == nullptr) {
    ASSIGN_OR_RETURN(p, AllocateTensorBuffer(bytes, dtype, dims, what));
  }
  std::shared_ptr<void> keep(p, [state = state_, bytes](void* q) { state->Give(q, bytes); });
  return Tensor::Wrap(dtype, std::move(dims), p, std::move(keep));
}

size_t InputBufferPool::free_buffers() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->free.size();
}

uint64_t InputBufferPool::free_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->free_bytes;
}

InputBufferPool& InputBufferPool::ForRequests() {
  // Eight blocks, 64 MiB at most: a few requests' inputs of the usual sizes;
  // below 64 KiB malloc's own free lists serve as well. Never destroyed: a
  // request may still hold a block while the process exits.
  static InputBufferPool* pool = new InputBufferPool(8, 64ull << 20, 64ull << 10);
  return *pool;
}

}  // namespace kiln::server
