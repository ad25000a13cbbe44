#include "engine/runtime/arena_pool.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "engine/common/status_macros.h"
#include "engine/common/tensor_buffer.h"

namespace kiln::runtime {

// Shared with every block, so that a block outliving the pool frees itself.
struct ArenaPool::State {
  mutable std::mutex mu;
  struct Waiting {
    void* p;
    std::chrono::steady_clock::time_point since;  // given back then
  };
  // Block bytes -> block; among blocks of one size the one given back last
  // comes first, so that a run takes the block whose bytes are likeliest
  // still in cache and the others age out (TrimIdle).
  std::multimap<size_t, Waiting> free;
  size_t max_blocks = 0;
  std::optional<uint8_t> fill;
  size_t in_use = 0;
  uint64_t in_use_bytes = 0;
  uint64_t allocations = 0;
  bool closed = false;

  // Frees the smallest free blocks until at most max_blocks are held, in
  // use and free together (or none is free); under mu.
  void TrimLocked() {
    while (!free.empty() && free.size() + in_use > max_blocks) {
      std::free(free.begin()->second.p);
      free.erase(free.begin());
    }
  }

  // Frees the free blocks given back at `before` or earlier; returns how
  // many. Under mu.
  size_t FreeWaitingLocked(std::chrono::steady_clock::time_point before) {
    size_t freed = 0;
    for (auto it = free.begin(); it != free.end();) {
      if (it->second.since <= before) {
        std::free(it->second.p);
        it = free.erase(it);
        ++freed;
      } else {
        ++it;
      }
    }
    return freed;
  }

  void Give(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    --in_use;
    in_use_bytes -= bytes;
    if (closed) {
      std::free(p);
      return;
    }
    free.emplace_hint(free.lower_bound(bytes), bytes,
                      Waiting{p, std::chrono::steady_clock::now()});
    TrimLocked();
  }
};

ArenaPool::ArenaPool(size_t max_blocks) : state_(std::make_shared<State>()) {
  state_->max_blocks = max_blocks;
}

ArenaPool::~ArenaPool() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->closed = true;
  state_->FreeWaitingLocked(std::chrono::steady_clock::time_point::max());
}

ArenaPool::Block::Block(Block&& other) noexcept
    : state_(std::move(other.state_)), data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

ArenaPool::Block& ArenaPool::Block::operator=(Block&& other) noexcept {
  if (this != &other) {
    Reset();
    state_ = std::move(other.state_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

ArenaPool::Block::~Block() { Reset(); }

void ArenaPool::Block::Reset() {
  if (data_ != nullptr && state_ != nullptr) state_->Give(data_, bytes_);
  state_.reset();
  data_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<ArenaPool::Block> ArenaPool::Acquire(size_t bytes, const std::string& what) {
  const size_t want = TensorBufferBytes(bytes);
  Block block;
  std::optional<uint8_t> fill;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    fill = state_->fill;
    auto it = state_->free.lower_bound(want);
    if (it != state_->free.end()) {
      block.bytes_ = it->first;
      block.data_ = static_cast<uint8_t*>(it->second.p);
      state_->free.erase(it);
    } else {
      ++state_->allocations;
    }
    if (block.data_ != nullptr) {
      ++state_->in_use;
      state_->in_use_bytes += block.bytes_;
    }
  }
  if (block.data_ == nullptr) {
    ASSIGN_OR_RETURN(void* p, AllocateTensorBuffer(want, DType::kUInt8,
                                                   Dims{static_cast<int64_t>(bytes)}, what));
    std::memset(p, 0, want);
    block.data_ = static_cast<uint8_t*>(p);
    block.bytes_ = want;
    std::lock_guard<std::mutex> lock(state_->mu);
    ++state_->in_use;
    state_->in_use_bytes += want;
  }
  block.state_ = state_;
  if (fill.has_value()) std::memset(block.data_, *fill, block.bytes_);
  return block;
}

void ArenaPool::set_max_blocks(size_t n) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->max_blocks = n;
  state_->TrimLocked();
}

void ArenaPool::Trim() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->FreeWaitingLocked(std::chrono::steady_clock::time_point::max());
}

size_t ArenaPool::TrimIdle(std::chrono::steady_clock::duration idle) {
  const auto before = std::chrono::steady_clock::now() - idle;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->FreeWaitingLocked(before);
}

void ArenaPool::set_fill_byte(std::optional<uint8_t> byte) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->fill = byte;
}

ArenaPool::Stats ArenaPool::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  Stats s;
  s.free_blocks = state_->free.size();
  for (const auto& [bytes, p] : state_->free) s.free_bytes += bytes;
  s.blocks_in_use = state_->in_use;
  s.in_use_bytes = state_->in_use_bytes;
  s.allocations = state_->allocations;
  return s;
}

ArenaPool& ArenaPool::Global() {
  // Never destroyed: a run may still hold a block while the process exits.
  static ArenaPool* pool = new ArenaPool(4);
  return *pool;
}

}  // namespace kiln::runtime
