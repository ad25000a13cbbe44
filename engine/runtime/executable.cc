// Compiling a graph for one input signature, and running it.
//
// Stages of Compile:
//  1. Passes: the pipeline rewrites a copy of the graph (engine/passes).
//  2. Prepare: the main block is walked in order with what the signature
//     fixes about each value. A node whose operands are all known (dtypes and
//     dims; for int/float/bool operands, their values) is prepared now: its
//     kernel checks its operands and computes its output dtypes and dims
//     (Kiln's shape inference), workspace and private state (prepacked
//     weights). A node whose operands are all constants and whose outputs are
//     small is evaluated now and becomes a constant (shape arithmetic:
//     size -> floor_divide -> view). An If whose condition is known inlines
//     the taken block. Everything else (If on a run-time condition, Loop,
//     nodes inside their blocks, tensor lists, the libtorch fallback and
//     whatever consumes their results) becomes a dynamic step.
//  3. Plan: every statically prepared value gets a slot: the caller's input, a
//     constant, or an offset in one arena. Views (reshape, flatten) share
//     their input's bytes, so a buffer lives until the last use of any value
//     aliasing it; a buffer the dynamic path reads lives to the end of the
//     run. Buffers are placed greedily, largest first, at the lowest offset
//     that does not overlap a buffer alive at the same time (TFLite's
//     greedy-by-size planner). One workspace region, sized for the hungriest
//     kernel, follows the buffers.
// Run binds the caller's inputs and executes the steps in order. Static steps
// write into their planned buffers; dynamic steps prepare with the operands
// they actually got (cached per node by operand types and scalar values),
// allocate their outputs and run; If and Loop run their blocks' steps. A
// graph without dynamic steps runs exactly the static plan.
//
// Stages 2 and 3 are Executable::Compiler, in compile/ (compiler.h says which
// file does what); this file drives them and runs the result.
#include "engine/runtime/executable.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/common/mapped_file.h"
#include "engine/common/status_macros.h"
#include "engine/passes/pass.h"
#include "engine/runtime/arena_check.h"
#include "engine/runtime/compile/compiler.h"
#include "engine/runtime/executable_internal.h"
#include "engine/runtime/layout.h"

namespace kiln::runtime {

using internal::AtNode;

std::string internal::InfoKey(const std::vector<kernels::TensorInfo>& infos) {
  std::string key;
  for (const kernels::TensorInfo& i : infos) {
    if (!i.present) {
      key += "N;";
      continue;
    }
    absl::StrAppend(&key, static_cast<int>(i.dtype), DimsToString(i.dims));
    if (i.constant != nullptr && i.constant->byte_size() <= 256) {
      key += '=';
      key.append(static_cast<const char*>(i.constant->raw_data()), i.constant->byte_size());
    }
    key += ';';
  }
  return key;
}

namespace {

std::string SignatureString(const std::vector<kernels::TensorInfo>& infos) {
  std::string s;
  for (const auto& i : infos) {
    if (!i.present) {
      absl::StrAppend(&s, "None ");
    } else {
      absl::StrAppend(&s, DTypeName(i.dtype), DimsToString(i.dims), " ");
    }
  }
  return s;
}

}  // namespace

Executable::~Executable() = default;

absl::StatusOr<std::unique_ptr<Executable>> Executable::Compile(
    const ir::Graph& source, const std::vector<kernels::TensorInfo>& inputs,
    const CompileOptions& options) {
  std::unique_ptr<Executable> exe(new Executable());
  exe->options_ = options;
  exe->graph_ = source;
  ir::Graph& g = exe->graph_;
  if (inputs.size() != g.inputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", g.inputs().size(),
                                                   " inputs, got ", inputs.size()));
  }
  RETURN_IF_ERROR(ir::VerifyGraph(g));
  if (options.run_passes) {
    passes::PipelineOptions pipeline;
    pipeline.disabled = options.disabled_passes;
    RETURN_IF_ERROR(passes::RunPipeline(g, pipeline));
  }
  kernels::UseThreads(options.num_threads);
  Compiler compiler(exe.get());
  RETURN_IF_ERROR(compiler.Run(inputs));
  exe->signature_ = SignatureString(inputs);
  RETURN_IF_ERROR(exe->CheckPlanFits(nullptr));
  // What the passes and the kernels' prepacking read of mapped weights need
  // not stay resident (engine/common/mapped_file.h); what the plan reads as
  // it runs faults back in from the page cache.
  ReleaseAllResidentPages();
  // The same for the heap: prepacking's temporaries (a reorder's buffer, the
  // batch-norm fold's copy of a weight) are freed by now, but glibc keeps
  // freed blocks resident, and its mmap threshold rises with the first large
  // one freed so that the next ones come from the heap too. Compiling
  // resnet18 for batch 1 and 8 left ~120 MB so in kilnd.
  malloc_trim(0);
  return exe;
}

absl::Status RunOptions::Check() const {
  if (deadline != std::chrono::steady_clock::time_point::max() &&
      std::chrono::steady_clock::now() >= deadline) {
    return absl::DeadlineExceededError(absl::StrCat("ran past ", deadline_name));
  }
  return stop ? stop() : absl::OkStatus();
}

absl::Status Executable::CheckPlanFits(const MemoryBudget* memory) const {
  if (memory != nullptr && arena_bytes_ <= memory->limit()) return absl::OkStatus();
  // The largest planned tensor, to say what does not fit.
  ir::ValueId largest = ir::kNoValue;
  size_t largest_bytes = 0;
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    if (s.kind != Slot::Kind::kArena) continue;
    const ir::Value& value = graph_.value(static_cast<ir::ValueId>(v));
    std::string what = absl::StrCat("%", value.name);
    if (value.producer != ir::kNoNode) {
      absl::StrAppend(&what, ", the output of ", internal::NodeName(graph_, value.producer));
    }
    absl::StatusOr<size_t> bytes = CheckedByteSize(s.dtype, s.dims, what);
    if (!bytes.ok()) return bytes.status();
    if (*bytes >= largest_bytes) {
      largest_bytes = *bytes;
      largest = static_cast<ir::ValueId>(v);
    }
  }
  if (memory == nullptr) return absl::OkStatus();
  std::string detail;
  if (largest != ir::kNoValue) {
    const ir::Value& value = graph_.value(largest);
    detail = absl::StrCat("; its largest tensor is %", value.name, " ",
                          DTypeName(slots_[largest].dtype), DimsToString(slots_[largest].dims),
                          " (", BytesToString(largest_bytes), ")");
    if (value.producer != ir::kNoNode) {
      absl::StrAppend(&detail, ", the output of ", internal::NodeName(graph_, value.producer));
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the plan for inputs ", signature_, "needs ", BytesToString(arena_bytes_),
      ", more than the per-request memory limit of ", BytesToString(memory->limit()), " (",
      memory->limit_name(), ")", detail));
}

std::unique_ptr<Executable::Arena> Executable::NewArena() const {
  auto arena = std::make_unique<Arena>();
  arena->values.resize(slots_.size());
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    if (s.kind == Slot::Kind::kConstant) {
      arena->values[v].tensor =
          Tensor::Wrap(s.dtype, s.dims, const_cast<void*>(s.constant->raw_data()));
    } else if (s.kind == Slot::Kind::kNone) {
      arena->values[v].none = true;
    }
  }
  return arena;
}

absl::Status Executable::TakeArenaMemory(Arena& arena) const {
  ASSIGN_OR_RETURN(arena.block,
                   ArenaPool::Global().Acquire(
                       arena_bytes_, absl::StrCat("the plan's arena for inputs ", signature_)));
  uint8_t* base = arena.block.data();
  if (base == arena.bound) return absl::OkStatus();
  // Another block than last run's: point the planned values into it.
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    if (s.kind != Slot::Kind::kArena) continue;
    // A non-plain value's tensor has its dims in memory order.
    arena.values[v].tensor =
        Tensor::Wrap(s.dtype, layout::PhysicalDims(s.dims, s.layout), base + s.offset);
  }
  arena.bound = base;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Executable::Run(const std::vector<Tensor>& inputs) const {
  std::vector<RunValue> values;
  values.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    values.push_back(t.dtype() == DType::kUnknown ? RunValue::None() : RunValue::Of(t));
  }
  ASSIGN_OR_RETURN(std::vector<RunValue> outs, RunValues(values));
  std::vector<Tensor> result;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].kind == RunValue::Kind::kTensorList) {
      return absl::InvalidArgumentError(
          absl::StrCat("output ", i, " is a tensor list; use RunValues"));
    }
    result.push_back(std::move(outs[i].tensor));  // None: an undefined tensor
  }
  return result;
}

absl::StatusOr<std::vector<RunValue>> Executable::RunValues(
    const std::vector<RunValue>& inputs, const RunOptions& options) const {
  kernels::UseThreads(options_.num_threads);
  const ir::Graph& g = graph_;
  if (inputs.size() != g.inputs().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", g.inputs().size(), " inputs, got ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Slot& s = slots_[g.inputs()[i]];
    const bool none = inputs[i].kind == RunValue::Kind::kNone;
    if (inputs[i].kind == RunValue::Kind::kTensorList) {
      return absl::UnimplementedError(absl::StrCat("input ", i, ": tensor-list inputs are not supported"));
    }
    if (none != (s.kind == Slot::Kind::kNone) ||
        (!none && (inputs[i].tensor.dtype() != s.dtype || inputs[i].tensor.dims() != s.dims))) {
      auto describe = [](bool is_none, DType d, const Dims& dims) {
        return is_none ? std::string("None") : absl::StrCat(DTypeName(d), DimsToString(dims));
      };
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", i, ": compiled for ", describe(s.kind == Slot::Kind::kNone, s.dtype, s.dims),
          ", got ", describe(none, inputs[i].tensor.dtype(), inputs[i].tensor.dims())));
    }
  }

  // The arena counts against the run's memory for as long as it runs.
  if (options.memory != nullptr) {
    RETURN_IF_ERROR(CheckPlanFits(options.memory.get()));
    RETURN_IF_ERROR(options.memory->Reserve(
        arena_bytes_, absl::StrCat("the plan's arena for inputs ", signature_)));
  }
  struct ReleaseArenaBytes {
    const RunOptions& options;
    size_t bytes;
    ~ReleaseArenaBytes() {
      if (options.memory != nullptr) options.memory->Release(bytes);
    }
  } release_arena_bytes{options, arena_bytes_};
  std::unique_ptr<Arena> arena;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!arena_pool_.empty()) {
      arena = std::move(arena_pool_.back());
      arena_pool_.pop_back();
    }
  }
  if (!arena) arena = NewArena();
  RETURN_IF_ERROR(TakeArenaMemory(*arena));
  arena->run = &options;
  // Bind the caller's inputs, and views of them, to their slots.
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    if (s.kind != Slot::Kind::kInput) continue;
    const Tensor& in = inputs[s.input_index].tensor;
    arena->values[v].tensor = Tensor::Wrap(s.dtype, s.dims, const_cast<void*>(in.raw_data()));
  }

  if (arena_check_ != nullptr) arena_check_->Begin(arena->block.data());
  absl::Status status = RunProgram(*main_, *arena, arena_check_.get());
  std::vector<RunValue> outputs;
  for (size_t o = 0; status.ok() && o < g.outputs().size(); ++o) {
    const RtValue& value = arena->values[g.outputs()[o]];
    const std::string what = absl::StrCat("output ", o, " ('", g.output_names()[o], "')");
    if (value.none) {
      outputs.push_back(RunValue::None());
    } else if (value.list != nullptr) {
      std::vector<Tensor> list;
      for (const Tensor& t : *value.list) {
        absl::StatusOr<Tensor> copy = t.TryClone(what, options.memory);
        if (!copy.ok()) {
          status = copy.status();
          break;
        }
        list.push_back(*std::move(copy));
      }
      outputs.push_back(RunValue::List(std::move(list)));
    } else {
      absl::StatusOr<Tensor> copy = value.tensor.TryClone(what, options.memory);
      if (copy.ok()) {
        outputs.push_back(RunValue::Of(*std::move(copy)));
      } else {
        status = copy.status();
      }
    }
  }
  if (num_dynamic_steps_ > 0) {
    // Drop what the dynamic path allocated, so an idle arena holds only its plan.
    for (size_t v = 0; v < slots_.size(); ++v) {
      if (slots_[v].kind == Slot::Kind::kDynamic || slots_[v].kind == Slot::Kind::kUnused) {
        arena->values[v] = RtValue{};
      }
    }
  }
  arena->run = nullptr;
  arena->block = ArenaPool::Block();  // back to the pool for the next run of any plan
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    // Keep a few arenas for concurrent requests; drop the rest.
    if (arena_pool_.size() < 4) arena_pool_.push_back(std::move(arena));
  }
  if (!status.ok()) return status;
  return outputs;
}

absl::Status Executable::RunProgram(const Program& program, Arena& arena,
                                    const ArenaCheck* check) const {
  const ir::Graph& g = graph_;
  std::vector<RtValue>& values = arena.values;
  uint8_t* const base = arena.block.data();
  void* workspace = base + workspace_offset_;
  RunObserver* const observer = arena.run->observer;
  for (size_t index = 0; index < program.steps.size(); ++index) {
    const Step& step = program.steps[index];
    RETURN_IF_ERROR(internal::CheckRun(g, *arena.run, step.node));
    if (check != nullptr) {
      check->BeforeStep(static_cast<int>(index), step.kind == Step::Kind::kKernel, base);
    }
    const ObservedStep observed(observer, this, g, step.node, &step, &arena);
    switch (step.kind) {
      case Step::Kind::kKernel: {
        if (step.kernel->aliases_input0) break;
        const ir::Node& node = g.node(step.node);
        kernels::EvalContext ctx{node, {}, {}, workspace, step.state.get(), options_.num_threads};
        ctx.inputs.reserve(node.inputs.size());
        for (ir::ValueId v : node.inputs) {
          ctx.inputs.push_back(v == ir::kNoValue || values[v].none ? nullptr : &values[v].tensor);
        }
        ctx.outputs.reserve(node.outputs.size());
        for (ir::ValueId v : node.outputs) ctx.outputs.push_back(&values[v].tensor);
        absl::Status s = step.kernel->eval(ctx);
        if (!s.ok()) return AtNode(step.node, s);
        break;
      }
      case Step::Kind::kDynamicKernel:
        RETURN_IF_ERROR(RunDynamicKernel(step, arena));
        break;
      case Step::Kind::kIf:
        RETURN_IF_ERROR(RunIf(step, arena));
        break;
      case Step::Kind::kLoop:
        RETURN_IF_ERROR(RunLoop(step, arena));
        break;
      case Step::Kind::kBuiltin:
        RETURN_IF_ERROR(RunBuiltin(step, arena));
        break;
      case Step::Kind::kForward:
        for (const auto& [to, from] : step.forwards) values[to] = values[from];
        break;
    }
    if (check != nullptr) {
      absl::Status s = check->AfterStep(static_cast<int>(index), base);
      if (!s.ok()) return AtNode(step.node, s);
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
