// A graph compiled for one concrete input signature. Whatever the signature
// fixes is resolved at compile time: dtypes and dims, shape arithmetic
// (aten::size and what is computed from it, folded into constants), branches
// whose condition depends on shapes only, kernels chosen and prepared
// (weights prepacked), buffers planned into one arena. What depends on tensor
// values (a branch on x.sum(), a loop, a shape read from data, a libtorch
// fallback op) runs on a dynamic path that prepares per run, caching each
// node's preparation by its operands' types. Run() is thread-safe; each call
// takes its arena's bytes from the process's ArenaPool (arena_pool.h), so
// concurrent requests never share scratch memory and idle plans hold none.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/precision.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"
#include "engine/kernels/kernel.h"
#include "engine/runtime/observer.h"

namespace kiln::runtime {

class ArenaCheck;  // arena_check.h

struct CompileOptions {
  int num_threads = 1;
  // False when `graph` already went through the pass pipeline (a compiled plan
  // read back from the cache): only Prepare and planning run.
  bool run_passes = true;
  // False: Kiln's own kernels only, every value plain (no oneDNN provider,
  // no layouts). Tests compare the two plans; part of the plan cache key.
  bool use_providers = true;
  // bfloat16 operands for the oneDNN convolutions and linear layers
  // (engine/common/precision.h); part of the plan cache key.
  Precision precision = Precision::kFp32;
  // Passes of the pipeline to skip, by name (passes::PipelinePassNames): for
  // bisecting a pass and for measuring what it wins (kiln-bench
  // --disable-pass); part of the plan cache key.
  std::vector<std::string> disabled_passes;
  // Which of a model's graphs this is, for cache keys only: a model with
  // List[Tensor] inputs compiles one graph per list lengths ("lists=2,0").
  std::string graph_variant;
  // Where the kernels keep prepacked weights across processes
  // (kernels/packed_weight_store.h); null: in memory only. Not part of any
  // key: packed bytes are the same wherever they are kept.
  std::shared_ptr<kernels::PackedWeightStore> packed_weights;
};

// A graph input or output at run time: a tensor (scalars are 0-dim tensors,
// see ir::ValueKind), a list of tensors, or None (an absent optional input).
struct RunValue {
  enum class Kind { kTensor, kTensorList, kNone };
  Kind kind = Kind::kTensor;
  Tensor tensor;
  std::vector<Tensor> list;

  static RunValue Of(Tensor t) { return RunValue{Kind::kTensor, std::move(t), {}}; }
  static RunValue List(std::vector<Tensor> l) {
    return RunValue{Kind::kTensorList, Tensor(), std::move(l)};
  }
  static RunValue None() { return RunValue{Kind::kNone, Tensor(), {}}; }
};

// What bounds one run: a deadline, cancellation and memory. The executor
// checks `deadline` and `stop` before every step and on every loop
// iteration, and ends the run with DeadlineExceeded or what `stop` says; the plan's
// arena and everything the dynamic path allocates (data-dependent shapes,
// fallback outputs, the outputs handed back) count against `memory`.
struct RunOptions {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // What set the deadline, for the message ("the request's deadline of 30 s").
  std::string deadline_name = "the deadline";
  // Polled with the deadline: OK to go on, else the status that ends the run
  // (Cancelled: "the client cancelled the request"). May be empty.
  std::function<absl::Status()> stop;
  // Null: no limit.
  std::shared_ptr<MemoryBudget> memory;
  // Sees every step of the run (engine/runtime/observer.h: the profiler).
  // Null: none, and no cost beyond a pointer test per step.
  RunObserver* observer = nullptr;
  // Lent to the kernels of the dynamic path (kernels::EvalContext::services):
  // in a server, the model's libtorch worker (ModelOptions::services). Null: none.
  std::shared_ptr<kernels::KernelServices> services;
  // Model::Infer and RunMatched only: run on the plan compiled for this many
  // threads instead of the model's (CompileOptions::num_threads), compiling
  // it on first use: a server's compute team split into single-thread runs
  // under load (server/scheduler/compute_pool.h). 0: the model's.
  int num_threads = 0;

  // DeadlineExceeded, or what `stop` says, once the run must stop.
  absl::Status Check() const;
};

class Executable {
 public:
  // Compiles `graph` for `inputs` (one per graph input, concrete dtype and
  // dims; `present == false` for an optional input given as None). Fails with
  // InvalidArgument naming the node when an op rejects its operands,
  // Unimplemented when no kernel exists for an op and dtype. Errors inside
  // blocks, or on values known only at run time, surface from Run.
  static absl::StatusOr<std::unique_ptr<Executable>> Compile(
      const ir::Graph& graph, const std::vector<kernels::TensorInfo>& inputs,
      const CompileOptions& options);

  // Runs on `inputs` (graph input order; dtypes and dims must match the
  // signature compiled for; an undefined tensor stands for None) and returns
  // the graph outputs in order. A tensor-list output is InvalidArgument here;
  // RunValues returns it.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs) const;

  // Same, with tensor lists and None among inputs and outputs, bounded by
  // `options`: a plan whose arena does not fit options.memory is
  // ResourceExhausted before anything runs.
  absl::StatusOr<std::vector<RunValue>> RunValues(const std::vector<RunValue>& inputs,
                                                  const RunOptions& options = {}) const;

  // Per graph output: dtype and dims when the compile fixed them; dtype
  // kUnknown when only a run tells (the output of a branch, loop or fallback).
  const std::vector<kernels::TensorInfo>& output_infos() const { return output_infos_; }
  size_t arena_bytes() const { return arena_bytes_; }
  const ir::Graph& graph() const { return graph_; }
  const std::string& signature() const { return signature_; }
  // True when every node runs from the static plan (no branch, loop or
  // fallback left for run time).
  bool is_static() const { return num_dynamic_steps_ == 0; }
  // Steps on the dynamic path (nested ones included) and constants folded at compile time.
  int num_dynamic_steps() const { return num_dynamic_steps_; }
  int num_folded() const { return static_cast<int>(folded_.size()); }
  // Nodes whose kernel refused this signature and that run through libtorch
  // instead (ir/fallback_twin.h): "aten::linear (why the kernel refused)".
  const std::vector<std::string>& libtorch_fallbacks() const { return libtorch_fallbacks_; }

  ~Executable();

 private:
  struct Step;
  struct Program;
  struct Slot;
  struct PrepareCache;
  struct Prepared;
  struct Arena;
  class Compiler;
  friend struct StepInfo;  // reads steps, slots and values for observers
  Executable() = default;
  // Per-run state, without memory; TakeArenaMemory gives it a block of the
  // process's ArenaPool for one run (and points the planned values into it).
  std::unique_ptr<Arena> NewArena() const;
  absl::Status TakeArenaMemory(Arena& arena) const;
  // ResourceExhausted naming the largest planned tensor when the arena does
  // not fit `memory`; InvalidArgument when a planned tensor's size overflows.
  absl::Status CheckPlanFits(const MemoryBudget* memory) const;
  // `check`: the main program's arena checks, when the plan has them.
  absl::Status RunProgram(const Program& program, Arena& arena,
                          const ArenaCheck* check = nullptr) const;
  absl::Status RunDynamicKernel(const Step& step, Arena& arena) const;
  absl::Status RunIf(const Step& step, Arena& arena) const;
  absl::Status RunLoop(const Step& step, Arena& arena) const;
  absl::Status RunBuiltin(const Step& step, Arena& arena) const;
  absl::StatusOr<std::shared_ptr<const Prepared>> PrepareAtRunTime(
      const Step& step, const std::vector<kernels::TensorInfo>& infos,
      const std::string& key) const;

  ir::Graph graph_;  // the compiled (optimized) graph
  CompileOptions options_;
  std::unique_ptr<Program> main_;
  std::vector<Slot> slots_;  // one per value: where its bytes live at run time
  std::deque<Tensor> folded_;  // values computed at compile time
  std::vector<kernels::TensorInfo> output_infos_;
  size_t arena_bytes_ = 0;
  size_t workspace_offset_ = 0;
  int num_dynamic_steps_ = 0;
  std::vector<std::string> libtorch_fallbacks_;
  std::string signature_;
  // Set when the plan was compiled with arena checks on (arena_check.h).
  std::unique_ptr<const ArenaCheck> arena_check_;

  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<Arena>> arena_pool_;
};

}  // namespace kiln::runtime
