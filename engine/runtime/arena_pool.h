// Memory for compiled plans' arenas, shared by every plan in the process.
//
// A plan's arena (its planned activations and kernel scratch,
// Executable::arena_bytes) is needed only while the plan runs. Each plan used
// to keep up to four arenas of its own between runs, so a server holding plans
// for several batch sizes and thread counts (a batcher's sizes, a compute
// team's whole and single-thread plans) kept every one of their arenas
// resident at once: mobilenet_v2 with batch sizes 1-8 at two thread counts
// held about 120 MB more than the runs in flight ever used. Here a run takes
// the smallest free block that holds its arena and gives it back when it
// ends. The pool holds at most max_blocks blocks, in use and free together: a
// block given back beyond that is freed, the smallest first (a larger block
// serves any smaller arena), so after a few runs the blocks are the largest
// arenas' and every run finds one. kilnd sets max_blocks to the runs it may
// have in flight at once: resident arena memory then follows those runs, not
// the number of plans. More runs at once than max_blocks still each get a
// block; the extra ones are freed when they end.
//
// A block comes back holding whatever its last run left: a plan writes every
// value before reading it (the memory planner already reuses bytes between
// values of one run), and a new block is zeroed as Tensor::Allocate's are.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::runtime {

class ArenaPool {
 public:
  // Holds at most `max_blocks` blocks, in use and free (0: none waits, every
  // run allocates its own).
  explicit ArenaPool(size_t max_blocks);
  ~ArenaPool();
  ArenaPool(const ArenaPool&) = delete;
  ArenaPool& operator=(const ArenaPool&) = delete;

  struct State;

  // Bytes for one run; back to the pool (or freed) when destroyed.
  class Block {
   public:
    Block() = default;
    Block(Block&& other) noexcept;
    Block& operator=(Block&& other) noexcept;
    ~Block();
    uint8_t* data() const { return data_; }
    size_t bytes() const { return bytes_; }

   private:
    friend class ArenaPool;
    void Reset();
    std::shared_ptr<State> state_;
    uint8_t* data_ = nullptr;
    size_t bytes_ = 0;
  };

  // A block of at least `bytes` (64-byte aligned): the smallest free one
  // that fits, else a new zeroed one. ResourceExhausted naming `what` when
  // the memory is not there.
  absl::StatusOr<Block> Acquire(size_t bytes, const std::string& what);

  // Holds at most `n` blocks from now on (free ones beyond it go now, the
  // smallest first).
  void set_max_blocks(size_t n);
  // Frees every block waiting (a server calls it when it unloads a model).
  void Trim();
  // Frees the blocks that have waited `idle` or longer since their last run
  // ended; returns how many. A server calls it now and then, so that the
  // blocks a burst needed leave once the burst is over, while the ones that
  // steady traffic reuses stay (a run takes the block of its size given back
  // last, so the others age).
  size_t TrimIdle(std::chrono::steady_clock::duration idle);

  // Tests: every block handed out is first filled with `byte` (0xFF reads as
  // NaN in float32), so that a plan reading bytes it never wrote shows up as
  // a wrong answer instead of passing on a zeroed block. nullopt: off.
  void set_fill_byte(std::optional<uint8_t> byte);

  struct Stats {
    size_t free_blocks = 0;
    uint64_t free_bytes = 0;
    size_t blocks_in_use = 0;
    uint64_t in_use_bytes = 0;
    uint64_t allocations = 0;  // blocks ever allocated (a run that found none free)
  };
  Stats stats() const;

  // The process's pool, which every Executable runs from. Four blocks unless
  // a server sets its own count (kilnd: one per run it may have in flight).
  static ArenaPool& Global();

 private:
  std::shared_ptr<State> state_;
};

}  // namespace kiln::runtime
