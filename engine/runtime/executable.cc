// Compiling a graph for one input signature, and running it.
//
// Stages of Compile:
//  1. Passes: the pipeline rewrites a copy of the graph (engine/passes).
//  2. Prepare: in topological order, each node's kernel checks its operands and
//     computes its output dtype and dims (this is Kiln's shape and dtype
//     inference), workspace size and private state (prepacked weights).
//  3. Plan: every value gets a slot: the caller's input, a constant, or an
//     offset in one arena. Views (reshape, flatten) share their input's bytes,
//     so a buffer lives until the last use of any value aliasing it. Buffers are
//     placed greedily, largest first, at the lowest offset that does not overlap
//     a buffer alive at the same time (TFLite's greedy-by-size planner). One
//     workspace region, sized for the hungriest kernel, follows the buffers.
// Run binds the caller's inputs, executes the steps in order and copies the
// graph outputs out of the arena.
#include "engine/runtime/executable.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/passes/pass.h"

namespace kiln::runtime {

struct Executable::Step {
  ir::NodeId node;
  const kernels::KernelDef* kernel;
  std::shared_ptr<void> state;
};

struct Executable::Slot {
  enum class Kind { kUnused, kInput, kConstant, kArena } kind = Kind::kUnused;
  int input_index = -1;      // kInput
  const Tensor* constant = nullptr;  // kConstant (owned by graph_)
  size_t offset = 0;         // kArena: byte offset of the root buffer
  DType dtype = DType::kUnknown;
  Dims dims;
};

namespace {

constexpr size_t kAlign = 64;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A buffer to place: its size and the steps during which it is alive.
struct Buffer {
  size_t bytes = 0;
  int first = 0;
  int last = 0;
  size_t offset = 0;
};

// Greedy by size: largest first, lowest offset that fits between buffers
// alive at the same time. Returns the total bytes.
size_t PlaceBuffers(std::vector<Buffer>& buffers) {
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

std::string SignatureString(const std::vector<kernels::TensorInfo>& infos) {
  std::string s;
  for (const auto& i : infos) absl::StrAppend(&s, DTypeName(i.dtype), DimsToString(i.dims), " ");
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
  RETURN_IF_ERROR(passes::RunPipeline(g));

  const int num_values = static_cast<int>(g.values().size());
  exe->slots_.assign(num_values, Slot{});
  for (size_t i = 0; i < inputs.size(); ++i) {
    ir::ValueId v = g.inputs()[i];
    Slot& s = exe->slots_[v];
    s.kind = Slot::Kind::kInput;
    s.input_index = static_cast<int>(i);
    s.dtype = inputs[i].dtype;
    s.dims = inputs[i].dims;
    g.mutable_value(v).type = ir::TensorType{s.dtype, s.dims};
  }

  // Stage 2: prepare every node; records each value's root buffer for views.
  std::vector<ir::ValueId> root(num_values);
  for (int v = 0; v < num_values; ++v) root[v] = v;
  size_t workspace = 0;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const ir::Node& node = g.node(static_cast<ir::NodeId>(n));
    if (node.kind == ir::OpKind::kConstant) {
      Slot& s = exe->slots_[node.outputs[0]];
      s.kind = Slot::Kind::kConstant;
      s.constant = node.attrs.GetTensor("value");
      s.dtype = s.constant->dtype();
      s.dims = s.constant->dims();
      continue;
    }
    kernels::PrepareContext ctx{node, {}, {}, 0, nullptr, options.num_threads};
    for (ir::ValueId v : node.inputs) {
      kernels::TensorInfo info;
      if (v == ir::kNoValue) {
        info.present = false;
      } else {
        info.dtype = exe->slots_[v].dtype;
        info.dims = exe->slots_[v].dims;
        info.constant = exe->slots_[v].constant;
      }
      ctx.inputs.push_back(std::move(info));
    }
    DType dtype = ctx.inputs.empty() ? DType::kUnknown : ctx.inputs[0].dtype;
    const kernels::KernelDef* kernel = kernels::FindKernel(node.kind, dtype);
    const std::string where = absl::StrCat("node ", n, " (", ir::OpName(node.kind),
                                           node.source_op.empty() ? "" : ", ", node.source_op,
                                           "): ");
    if (kernel == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat(where, "no kernel for input dtype ", DTypeName(dtype)));
    }
    ctx.outputs.resize(node.outputs.size());
    absl::Status s = kernel->prepare(ctx);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("node ", n, ": ", s.message()));
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      Slot& slot = exe->slots_[node.outputs[o]];
      slot.kind = Slot::Kind::kArena;
      slot.dtype = ctx.outputs[o].dtype;
      slot.dims = ctx.outputs[o].dims;
      g.mutable_value(node.outputs[o]).type = ir::TensorType{slot.dtype, slot.dims};
    }
    if (kernel->aliases_input0) {
      ir::ValueId in_root = root[node.inputs[0]];
      root[node.outputs[0]] = in_root;
      // A view of an input or constant lives in the caller's or graph's memory.
      const Slot& src = exe->slots_[in_root];
      if (src.kind != Slot::Kind::kArena) {
        Slot& out = exe->slots_[node.outputs[0]];
        out.kind = src.kind;
        out.input_index = src.input_index;
        out.constant = src.constant;
      }
    }
    workspace = std::max(workspace, AlignUp(ctx.workspace_bytes));
    exe->steps_.push_back(Step{static_cast<ir::NodeId>(n), kernel, std::move(ctx.state)});
  }

  // Stage 3: lifetimes of root buffers, in step indices.
  std::vector<int> buffer_of(num_values, -1);
  std::vector<Buffer> buffers;
  for (size_t st = 0; st < exe->steps_.size(); ++st) {
    const ir::Node& node = g.node(exe->steps_[st].node);
    for (ir::ValueId v : node.outputs) {
      if (root[v] != v || exe->slots_[v].kind != Slot::Kind::kArena) continue;
      buffer_of[v] = static_cast<int>(buffers.size());
      const size_t bytes =
          static_cast<size_t>(NumElements(exe->slots_[v].dims)) * DTypeSize(exe->slots_[v].dtype);
      buffers.push_back(Buffer{AlignUp(std::max<size_t>(bytes, 1)), static_cast<int>(st),
                               static_cast<int>(st)});
    }
    for (ir::ValueId v : node.inputs) {
      if (v == ir::kNoValue || buffer_of[root[v]] < 0) continue;
      Buffer& b = buffers[buffer_of[root[v]]];
      b.last = std::max(b.last, static_cast<int>(st));
    }
  }
  const int end = static_cast<int>(exe->steps_.size());
  for (ir::ValueId v : g.outputs()) {
    if (buffer_of[root[v]] >= 0) buffers[buffer_of[root[v]]].last = end;
  }
  const size_t buffer_bytes = PlaceBuffers(buffers);
  for (int v = 0; v < num_values; ++v) {
    Slot& s = exe->slots_[v];
    if (s.kind == Slot::Kind::kArena) s.offset = buffers[buffer_of[root[v]]].offset;
  }
  exe->arena_bytes_ = buffer_bytes + workspace;
  exe->workspace_offset_ = buffer_bytes;

  for (ir::ValueId v : g.outputs()) {
    exe->output_infos_.push_back(
        kernels::TensorInfo{exe->slots_[v].dtype, exe->slots_[v].dims, nullptr, true});
  }
  exe->signature_ = SignatureString(inputs);
  return exe;
}

std::unique_ptr<Executable::Arena> Executable::NewArena() const {
  auto arena = std::make_unique<Arena>();
  arena->memory = Tensor::Zeros(DType::kUInt8, Dims{static_cast<int64_t>(arena_bytes_)});
  uint8_t* base = arena->memory.data<uint8_t>();
  arena->views.resize(slots_.size());
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    if (s.kind == Slot::Kind::kArena) {
      arena->views[v] = Tensor::Wrap(s.dtype, s.dims, base + s.offset);
    } else if (s.kind == Slot::Kind::kConstant) {
      arena->views[v] = Tensor::Wrap(s.dtype, s.dims, const_cast<void*>(s.constant->raw_data()));
    }
  }
  return arena;
}

absl::StatusOr<std::vector<Tensor>> Executable::Run(const std::vector<Tensor>& inputs) const {
  const ir::Graph& g = graph_;
  if (inputs.size() != g.inputs().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", g.inputs().size(), " inputs, got ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Slot& s = slots_[g.inputs()[i]];
    if (inputs[i].dtype() != s.dtype || inputs[i].dims() != s.dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", i, ": compiled for ", DTypeName(s.dtype), DimsToString(s.dims), ", got ",
          DTypeName(inputs[i].dtype()), DimsToString(inputs[i].dims())));
    }
  }

  std::unique_ptr<Arena> arena;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!arena_pool_.empty()) {
      arena = std::move(arena_pool_.back());
      arena_pool_.pop_back();
    }
  }
  if (!arena) arena = NewArena();
  std::vector<Tensor>& views = arena->views;
  // Bind the caller's inputs, and views of them, to their slots.
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    if (s.kind != Slot::Kind::kInput) continue;
    const Tensor& in = inputs[s.input_index];
    views[v] = Tensor::Wrap(s.dtype, s.dims, const_cast<void*>(in.raw_data()));
  }
  void* workspace = arena->memory.data<uint8_t>() + workspace_offset_;

  absl::Status status;
  for (const Step& step : steps_) {
    if (step.kernel->aliases_input0) continue;
    const ir::Node& node = g.node(step.node);
    kernels::EvalContext ctx{node, {}, {}, workspace, step.state.get(), options_.num_threads};
    ctx.inputs.reserve(node.inputs.size());
    for (ir::ValueId v : node.inputs) ctx.inputs.push_back(v == ir::kNoValue ? nullptr : &views[v]);
    ctx.outputs.reserve(node.outputs.size());
    for (ir::ValueId v : node.outputs) ctx.outputs.push_back(&views[v]);
    status = step.kernel->eval(ctx);
    if (!status.ok()) {
      status = absl::Status(status.code(), absl::StrCat("node ", step.node, ": ", status.message()));
      break;
    }
  }

  std::vector<Tensor> outputs;
  if (status.ok()) {
    for (ir::ValueId v : g.outputs()) outputs.push_back(views[v].Clone());
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    // Keep a few arenas for concurrent requests; drop the rest.
    if (arena_pool_.size() < 4) arena_pool_.push_back(std::move(arena));
  }
  if (!status.ok()) return status;
  return outputs;
}

}  // namespace kiln::runtime
