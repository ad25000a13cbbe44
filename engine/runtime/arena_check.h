// Arena checks: whether every kernel keeps to the bytes the memory planner
// gave it, for tests.
//
// Why: a plan's tensors share one arena block, placed by lifetime
// (compile/memory_planner.cc), so a kernel that writes past the end of its
// output, or a step that reads a tensor after its planned last use (a lifetime
// the planner got wrong), reads or writes another tensor's bytes. The answer
// is silently different, and only when the planner happened to put a live
// tensor there; neither AddressSanitizer nor Valgrind sees it, as the block is
// one allocation to them.
//
// How: off by default. On in a process that called SetArenaChecks(true), or
// whose environment has KILN_ARENA_CHECKS=1, before it compiled a plan (the
// parity and sweep runners turn it on). The planner then leaves a red zone of
// kRedZone bytes after every buffer and after the workspace. Running such a
// plan, every buffer is filled with 0xFF (NaN as float32, -1 as an integer) as
// the step that writes it starts, and again after its last use; the workspace
// before every kernel step. Red zones hold a byte of their own (kRedBytes) and
// are checked after every step while their buffer lives: a kernel that wrote past its output (or the
// workspace) is an Internal error naming the step and the tensor. A kernel
// that reads its output before writing it, or a step that reads a tensor past
// its last use, reads the fill, and the runners' comparison with libtorch
// fails. The checks cost a few passes over the arena per step: tests only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kiln::runtime {

// Whether plans compiled from now on carry the checks (see above).
void SetArenaChecks(bool on);
bool ArenaChecksOn();

class ArenaCheck {
 public:
  static constexpr size_t kRedZone = 64;
  static constexpr uint8_t kFill = 0xFF;  // a buffer before it is written and after its last use
  // A red zone's byte: buffer i's is kRedBytes[i % 4], the workspace's
  // kWorkspaceRedByte. Read as a float32 (-4e37 and so on) or an int, a red
  // zone a kernel reads past its input shows in its answer; and neighbours
  // differ, so a copy that runs past both its input and its output is caught.
  static constexpr uint8_t kRedBytes[4] = {0xFE, 0xFD, 0xFC, 0xFB};
  static constexpr uint8_t kWorkspaceRedByte = 0xFA;

  // One planned buffer: its bytes at `offset`, its red zone to `end`, alive
  // from step `first` to step `last` (inclusive; past the last step: to the
  // end of the run), `what` names it in an error ("%x float32[1, 8]").
  struct Buffer {
    size_t offset = 0;
    size_t bytes = 0;
    size_t end = 0;
    int first = 0;
    int last = 0;
    std::string what;
    uint8_t red = 0;  // its red zone's byte (set by the constructor)
  };
  ArenaCheck(std::vector<Buffer> buffers, size_t workspace_offset, size_t workspace_bytes,
             size_t workspace_end, int num_steps);

  // Before the run: the workspace's red zone.
  void Begin(uint8_t* base) const;
  // Before step `step`: the buffers it writes filled, their red zones set;
  // the workspace filled when `kernel` (a kernel step, which may use it).
  void BeforeStep(int step, bool kernel, uint8_t* base) const;
  // After step `step`: every live buffer's red zone and the workspace's
  // intact (else Internal naming the buffer, for the caller to place at the
  // step's node), then the buffers it was the last use of filled.
  absl::Status AfterStep(int step, uint8_t* base) const;

 private:
  static bool Intact(const uint8_t* p, size_t n, uint8_t red);

  std::vector<Buffer> buffers_;
  std::vector<std::vector<int>> born_;  // per step: the buffers it writes first
  std::vector<std::vector<int>> dies_;  // per step: the buffers it uses last
  size_t workspace_offset_;
  size_t workspace_bytes_;
  size_t workspace_end_;
};

}  // namespace kiln::runtime
