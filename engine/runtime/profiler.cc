// Profiler: the RunObserver that times steps (the Profile's own methods,
// which need no engine code, are in profile.cc).
#include <algorithm>

#include "absl/strings/str_join.h"
#include "engine/runtime/profiler.h"

namespace kiln::runtime {

void Profiler::OnStepBegin(const StepInfo&) {
  stack_.emplace_back();
  // Last, so that the bookkeeping above is not timed.
  const Clock::time_point now = Clock::now();
  if (!started_) {
    started_ = true;
    origin_ = now;
  }
  stack_.back().start = now;
}

void Profiler::OnStepEnd(const StepInfo& step) {
  // First, for the same reason.
  const Clock::time_point end = Clock::now();
  if (stack_.empty()) return;  // unbalanced: not from the executor
  const Open open = stack_.back();
  stack_.pop_back();
  const int64_t dur = std::chrono::duration_cast<std::chrono::nanoseconds>(end - open.start).count();
  const int depth = static_cast<int>(stack_.size());
  if (depth > 0) {
    stack_.back().child_ns += dur;
  } else {
    profile_.total_ns += dur;
    end_ns_ = Ns(end);
  }
  auto [it, inserted] = index_.try_emplace(step.node, profile_.nodes.size());
  if (inserted) {
    // Described once, as the node first ran.
    const ir::Node& node = step.Node();
    ProfileNode n;
    n.node = step.node;
    n.op = ir::OpName(node.kind);
    n.source_op = node.source_op;
    n.kernel = step.KernelName();
    n.step = StepKindName(step.Kind());
    n.outputs = absl::StrJoin(step.OutputTypes(), ", ");
    n.depth = depth;
    profile_.nodes.push_back(std::move(n));
  }
  ProfileNode& n = profile_.nodes[it->second];
  n.self_ns += std::max<int64_t>(0, dur - open.child_ns);
  n.total_ns += dur;
  ++n.calls;
  if (profile_.events.size() < Profile::kMaxEvents) {
    profile_.events.push_back(ProfileEvent{step.node, Ns(open.start), dur, depth, 0});
  } else {
    ++profile_.dropped_events;
  }
}

Profile Profiler::Finish() {
  Profile p = std::move(profile_);
  p.runs = started_ ? 1 : 0;
  p.wall_ns = end_ns_;
  // Recorded as they ended (a Loop after its body's steps): by start.
  std::stable_sort(p.events.begin(), p.events.end(),
                   [](const ProfileEvent& a, const ProfileEvent& b) { return a.ts_ns < b.ts_ns; });
  profile_ = Profile{};
  stack_.clear();
  index_.clear();
  started_ = false;
  end_ns_ = 0;
  return p;
}

}  // namespace kiln::runtime
