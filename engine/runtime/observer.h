// Run observers: how a profiler (engine/runtime/profiler.h) sees a run step by
// step. Executable::RunValues calls OnStepBegin and OnStepEnd around every step
// it runs, static and dynamic alike: a kernel, a dynamic kernel (prepared per
// run), an If and a Loop (whose blocks' steps are observed in between, once per
// iteration), a builtin (tensor lists, None) and a forward. Steps nest only
// through If and Loop. A failed step still ends (OnStepEnd), then the run
// stops. The calls come from the thread running the request, one step at a
// time; an observer serves one run at a time.
//
// With no observer (RunOptions::observer null) the executor pays one pointer
// test per step and builds nothing.
#pragma once

#include <string>
#include <vector>

#include "engine/ir/graph.h"

namespace kiln::kernels {
struct KernelDef;
}

namespace kiln::runtime {

class Executable;

enum class StepKind : uint8_t { kKernel, kDynamicKernel, kIf, kLoop, kBuiltin, kForward };
// "static", "dynamic", "if", "loop", "builtin", "forward".
const char* StepKindName(StepKind kind);

// One step of a run, as an observer sees it. Valid during the call only.
struct StepInfo {
  const Executable* executable;
  const ir::Graph* graph;  // the compiled graph (executable->graph())
  ir::NodeId node;
  const void* step;   // the executor's own
  const void* arena;  // the run's values

  const ir::Node& Node() const { return graph->node(node); }
  StepKind Kind() const;
  // The kernel that runs (ran) the step: its name ("onednn.conv") or, for
  // Kiln's own kernels, the op's ("Conv"). A dynamic step's kernel is known
  // once it ran (its preparation depends on the operands); If, Loop, builtins
  // and forwards have none: "".
  std::string KernelName() const;
  // The step's outputs as this run holds them: dtype, dims and layout
  // ("FP32[1, 64, 56, 56]{nhwc}" printed); a tensor list is "list[3]" and
  // None "None". Meaningful in OnStepEnd; builds strings, so call it sparingly.
  std::vector<std::string> OutputTypes() const;
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void OnStepBegin(const StepInfo& step) = 0;
  virtual void OnStepEnd(const StepInfo& step) = 0;
};

// Calls OnStepBegin when made and OnStepEnd when it goes out of scope (also on
// an early return), when `observer` is not null; otherwise does nothing.
class ObservedStep {
 public:
  ObservedStep(RunObserver* observer, const Executable* executable, const ir::Graph& graph,
               ir::NodeId node, const void* step, const void* arena)
      : observer_(observer) {
    if (observer_ == nullptr) return;
    info_ = StepInfo{executable, &graph, node, step, arena};
    observer_->OnStepBegin(info_);
  }
  ~ObservedStep() {
    if (observer_ != nullptr) observer_->OnStepEnd(info_);
  }
  ObservedStep(const ObservedStep&) = delete;
  ObservedStep& operator=(const ObservedStep&) = delete;

 private:
  RunObserver* observer_;
  StepInfo info_;
};

}  // namespace kiln::runtime
