#include "engine/runtime/arena_check.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kiln::runtime {
namespace {

std::atomic<int>& ChecksSetting() {
  // -1: not decided yet (the environment decides on first use).
  static std::atomic<int> setting{-1};
  return setting;
}

}  // namespace

void SetArenaChecks(bool on) { ChecksSetting().store(on ? 1 : 0); }

bool ArenaChecksOn() {
  int on = ChecksSetting().load();
  if (on < 0) {
    const char* env = std::getenv("KILN_ARENA_CHECKS");
    on = env != nullptr && std::strcmp(env, "1") == 0 ? 1 : 0;
    int expected = -1;
    if (!ChecksSetting().compare_exchange_strong(expected, on)) on = expected;
  }
  return on == 1;
}

ArenaCheck::ArenaCheck(std::vector<Buffer> buffers, size_t workspace_offset,
                       size_t workspace_bytes, size_t workspace_end, int num_steps)
    : buffers_(std::move(buffers)),
      born_(static_cast<size_t>(num_steps)),
      dies_(static_cast<size_t>(num_steps)),
      workspace_offset_(workspace_offset),
      workspace_bytes_(workspace_bytes),
      workspace_end_(workspace_end) {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    Buffer& b = buffers_[i];
    b.red = kRedBytes[i % 4];
    if (b.first >= 0 && b.first < num_steps) born_[b.first].push_back(static_cast<int>(i));
    if (b.last >= 0 && b.last < num_steps) dies_[b.last].push_back(static_cast<int>(i));
  }
}

bool ArenaCheck::Intact(const uint8_t* p, size_t n, uint8_t red) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != red) return false;
  }
  return true;
}

void ArenaCheck::Begin(uint8_t* base) const {
  const size_t ws_end = workspace_offset_ + workspace_bytes_;
  std::memset(base + ws_end, kWorkspaceRedByte, workspace_end_ - ws_end);
}

void ArenaCheck::BeforeStep(int step, bool kernel, uint8_t* base) const {
  if (step < 0 || static_cast<size_t>(step) >= born_.size()) return;
  for (int i : born_[step]) {
    const Buffer& b = buffers_[i];
    std::memset(base + b.offset, kFill, b.bytes);
    std::memset(base + b.offset + b.bytes, b.red, b.end - b.offset - b.bytes);
  }
  if (kernel) std::memset(base + workspace_offset_, kFill, workspace_bytes_);
}

absl::Status ArenaCheck::AfterStep(int step, uint8_t* base) const {
  if (step < 0 || static_cast<size_t>(step) >= born_.size()) return absl::OkStatus();
  for (const Buffer& b : buffers_) {
    if (b.first > step || b.last < step) continue;
    if (!Intact(base + b.offset + b.bytes, b.end - b.offset - b.bytes, b.red)) {
      return absl::InternalError(absl::StrCat(
          "arena check: wrote past the end of ", b.what, " (", b.bytes,
          " bytes): the kernel writes more than its output's planned size"));
    }
  }
  const size_t ws_end = workspace_offset_ + workspace_bytes_;
  if (!Intact(base + ws_end, workspace_end_ - ws_end, kWorkspaceRedByte)) {
    return absl::InternalError(absl::StrCat("arena check: wrote past the end of the workspace (",
                                            workspace_bytes_,
                                            " bytes): the kernel uses more than it asked for"));
  }
  for (int i : dies_[step]) {
    const Buffer& b = buffers_[i];
    std::memset(base + b.offset, kFill, b.bytes);
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
