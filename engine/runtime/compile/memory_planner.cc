// The memory planner (stage 3 of Executable::Compile): every statically
// prepared value gets a slot; the arena's buffers get lifetimes in step
// indices (views share their root's buffer; what the dynamic path reads lives
// to the end of the run), in-place kernels take over their input's buffer at
// its last use, and PlaceBuffers gives the offsets. One workspace region,
// sized for the hungriest kernel, follows the buffers.
#include "engine/runtime/compile/compiler.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/runtime/arena_check.h"

namespace kiln::runtime {

using compile::Buffer;
using internal::AlignUp;

size_t compile::PlaceBuffers(std::vector<Buffer>& buffers) {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t i : order) {
    Buffer& b = buffers[i];
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping live buffers
    for (size_t j : placed) {
      const Buffer& o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) busy.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [start, end] : busy) {
      if (offset + b.bytes <= start) break;
      offset = std::max(offset, AlignUp(end));
    }
    b.offset = offset;
    total = std::max(total, offset + b.bytes);
    placed.push_back(i);
  }
  return AlignUp(total);
}

// A kernel that may write its output over an input
// (KernelDef::output0_may_reuse_input) gets that input's buffer where this
// step is the buffer's last use and the sizes match: the output's own buffer
// is folded into it (and planned empty).
void Executable::Compiler::ReuseInputBuffers(std::vector<int>& buffer_of, std::vector<compile::Buffer>& buffers) const {
  const auto& steps = exe_->main_->steps;
  for (int st = 0; st < static_cast<int>(steps.size()); ++st) {
    const Step& step = steps[st];
    if (step.kind != Step::Kind::kKernel || step.kernel->output0_may_reuse_input < 0) continue;
    const ir::Node& node = g_.node(step.node);
    const size_t in = static_cast<size_t>(step.kernel->output0_may_reuse_input);
    if (in >= node.inputs.size() || node.inputs[in] == ir::kNoValue) continue;
    const ir::ValueId out = node.outputs[0];
    const int from = buffer_of[root_[node.inputs[in]]];
    const int own = root_[out] == out ? buffer_of[out] : -1;
    bool read_elsewhere = false;  // the step reads the same bytes as another operand
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      read_elsewhere |= i != in && node.inputs[i] != ir::kNoValue &&
                        buffer_of[root_[node.inputs[i]]] == from;
    }
    if (from < 0 || own < 0 || read_elsewhere || buffers[from].last != st ||
        buffers[from].bytes != buffers[own].bytes) {
      continue;
    }
    buffers[from].last = buffers[own].last;
    buffers[own].bytes = 0;
    for (int& b : buffer_of) {
      if (b == own) b = from;
    }
  }
}

// Stage 3: lifetimes of root buffers, in main-program step indices.
void Executable::Compiler::Plan() {
  const auto& steps = exe_->main_->steps;
  const int end = static_cast<int>(steps.size());
  std::vector<int> buffer_of(g_.values().size(), -1);
  std::vector<compile::Buffer> buffers;
  std::vector<ir::ValueId> value_of;  // per buffer: the value it was made for
  auto tensor_bytes = [&](ir::ValueId v) {
    return static_cast<size_t>(NumElements(slots_[v].dims)) * DTypeSize(slots_[v].dtype);
  };
  std::vector<ir::ValueId> uses;
  for (int st = 0; st < end; ++st) {
    const Step& step = steps[st];
    const ir::Node& node = g_.node(step.node);
    if (step.kind == Step::Kind::kKernel) {
      for (ir::ValueId v : node.outputs) {
        if (root_[v] != v || slots_[v].kind != Slot::Kind::kArena) continue;
        buffer_of[v] = static_cast<int>(buffers.size());
        buffers.push_back(compile::Buffer{AlignUp(std::max<size_t>(tensor_bytes(v), 1)), st, st});
        value_of.push_back(v);
      }
    }
    uses.clear();
    if (step.kind == Step::Kind::kForward) {
      for (const auto& [to, from] : step.forwards) uses.push_back(from);
    } else {
      CollectUses(step.node, uses);
    }
    // The dynamic path may keep a view of a static buffer (a list element,
    // a branch result, a reshape) past this step: keep it to the end.
    const int last = step.kind == Step::Kind::kKernel ? st : end;
    for (ir::ValueId v : uses) {
      if (buffer_of[root_[v]] < 0) continue;
      Buffer& b = buffers[buffer_of[root_[v]]];
      b.last = std::max(b.last, last);
    }
  }
  for (ir::ValueId v : g_.outputs()) {
    if (buffer_of[root_[v]] >= 0) buffers[buffer_of[root_[v]]].last = end;
  }
  ReuseInputBuffers(buffer_of, buffers);
  // Checked plans (arena_check.h): a red zone after every buffer.
  const bool checked = ArenaChecksOn();
  if (checked) {
    for (compile::Buffer& b : buffers) {
      if (b.bytes > 0) b.bytes += ArenaCheck::kRedZone;
    }
  }
  const size_t buffer_bytes = compile::PlaceBuffers(buffers);
  for (size_t v = 0; v < slots_.size(); ++v) {
    Slot& s = slots_[v];
    if (s.kind == Slot::Kind::kArena) s.offset = buffers[buffer_of[root_[v]]].offset;
  }
  exe_->arena_bytes_ = buffer_bytes + workspace_;
  exe_->workspace_offset_ = buffer_bytes;
  exe_->arena_check_.reset();
  if (checked) {
    std::vector<ArenaCheck::Buffer> checks;
    for (size_t i = 0; i < buffers.size(); ++i) {
      const compile::Buffer& b = buffers[i];
      if (b.bytes == 0) continue;  // folded into an input's buffer (ReuseInputBuffers)
      const ir::ValueId v = value_of[i];
      checks.push_back(ArenaCheck::Buffer{
          b.offset, tensor_bytes(v), b.offset + b.bytes, b.first, b.last,
          absl::StrCat("%", g_.value(v).name, " ", DTypeName(slots_[v].dtype),
                       DimsToString(slots_[v].dims))});
    }
    const size_t workspace_end = buffer_bytes + AlignUp(workspace_) + ArenaCheck::kRedZone;
    exe_->arena_bytes_ = workspace_end;
    exe_->arena_check_ = std::make_unique<const ArenaCheck>(
        std::move(checks), buffer_bytes, workspace_, workspace_end, end);
  }
}

}  // namespace kiln::runtime
