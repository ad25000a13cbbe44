// The dynamic path of an Executable (see executable.cc): nodes prepared per
// run for the operands they actually get, with the preparation cached per
// node; If and Loop running their blocks; None, IsNone, Raise and tensor
// lists, which the executor holds itself.
#include <algorithm>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/executable_internal.h"

namespace kiln::runtime {

using internal::AlignUp;
using internal::AtNode;
using internal::BoolTensor;
using internal::IntOf;
using internal::IntTensor;
using internal::IsScalarValue;
using internal::Truth;
using internal::Where;

namespace {

// "output 0 of node 3 (Fill, aten::zeros)": a dynamic step's output in messages.
std::string OutputName(const ir::Graph& g, ir::NodeId n, size_t o) {
  return absl::StrCat("output ", o, " (%", g.value(g.node(n).outputs[o]).name, ") of ",
                      internal::NodeName(g, n));
}

// The pieces of `x` along `axis` that torch.split (split_size > 0), torch.chunk
// (chunks > 0) or torch.unbind (neither) returns, as copies.
absl::StatusOr<std::vector<Tensor>> SplitPieces(const Tensor& x, int64_t axis, int64_t split_size,
                                                int64_t chunks) {
  const int64_t rank = x.rank();
  if (rank == 0) return absl::InvalidArgumentError("cannot split a 0-dim tensor");
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim ", axis, " out of range for a tensor of rank ", rank));
  }
  if (axis < 0) axis += rank;
  const int64_t size = x.dim(axis);
  // (start, length) of each piece, as libtorch 1.13 computes them.
  std::vector<std::pair<int64_t, int64_t>> pieces;
  const bool unbind = split_size <= 0 && chunks <= 0;
  if (unbind) {
    for (int64_t i = 0; i < size; ++i) pieces.push_back({i, 1});
  } else {
    if (chunks > 0) {
      split_size = (size + chunks - 1) / chunks;
      if (split_size == 0 && size == 0) {  // chunk of an empty dim: `chunks` empty pieces
        for (int64_t i = 0; i < chunks; ++i) pieces.push_back({0, 0});
      }
    }
    if (pieces.empty()) {
      if (split_size == 0 && size != 0) {
        return absl::InvalidArgumentError("split_size can only be 0 if the dimension size is 0");
      }
      const int64_t n =
          split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t start = i * split_size;
        pieces.push_back({start, std::min(split_size, size - start)});
      }
    }
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(d);
  const size_t element = DTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  std::vector<Tensor> out;
  for (const auto& [start, length] : pieces) {
    Dims dims = x.dims();
    if (unbind) {
      dims.erase(dims.begin() + axis);
    } else {
      dims[axis] = length;
    }
    Tensor piece = Tensor::Zeros(x.dtype(), dims);
    const size_t row = static_cast<size_t>(length * inner) * element;
    auto* dst = static_cast<uint8_t*>(piece.raw_data());
    for (int64_t o = 0; o < outer && row > 0; ++o) {
      std::memcpy(dst + o * row, src + (static_cast<size_t>((o * size + start) * inner)) * element,
                  row);
    }
    out.push_back(std::move(piece));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Executable::Prepared>> Executable::PrepareAtRunTime(
    const Step& step, const std::vector<kernels::TensorInfo>& infos,
    const std::string& key) const {
  {
    std::lock_guard<std::mutex> lock(step.cache->mu);
    auto it = step.cache->entries.find(key);
    if (it != step.cache->entries.end()) return it->second;
  }
  const ir::Node& node = graph_.node(step.node);
  kernels::PrepareContext ctx{node, infos, {}, 0, nullptr, options_.num_threads};
  auto prepared = std::make_shared<Prepared>();
  ctx.outputs.resize(node.outputs.size());
  absl::StatusOr<const kernels::KernelDef*> found = kernels::PrepareKernel(ctx);
  if (absl::IsNotFound(found.status())) {
    return absl::UnimplementedError(absl::StrCat(
        Where(graph_, step.node), found.status().message(),
        node.kind == ir::OpKind::kFallback ? " (this build has no libtorch fallback)" : ""));
  }
  if (!found.ok()) return AtNode(step.node, found.status());
  prepared->kernel = *found;
  if (ctx.outputs.size() != node.outputs.size()) {
    return absl::InternalError(absl::StrCat(Where(graph_, step.node), "prepare gave ",
                                            ctx.outputs.size(), " outputs for ",
                                            node.outputs.size()));
  }
  // Run-time scalar operands were lent for the call only; nothing may keep them.
  for (kernels::TensorInfo& out : ctx.outputs) {
    for (const kernels::TensorInfo& in : infos) {
      if (out.constant != nullptr && out.constant == in.constant) {
        return absl::InternalError(
            absl::StrCat(Where(graph_, step.node), "prepare published an operand as output"));
      }
    }
  }
  prepared->outputs = std::move(ctx.outputs);
  prepared->workspace_bytes = ctx.workspace_bytes;
  prepared->state = std::move(ctx.state);
  prepared->dynamic_outputs = ctx.dynamic_outputs;
  std::lock_guard<std::mutex> lock(step.cache->mu);
  if (step.cache->entries.size() < PrepareCache::kMaxEntries) {
    step.cache->entries.emplace(key, prepared);
  }
  return std::shared_ptr<const Prepared>(std::move(prepared));
}

absl::Status Executable::RunDynamicKernel(const Step& step, Arena& arena) const {
  const ir::Graph& g = graph_;
  const ir::Node& node = g.node(step.node);
  std::vector<RtValue>& values = arena.values;
  // Operands, with tensor lists spread into their elements (cat of a list
  // built in a loop).
  std::vector<const Tensor*> ins;
  std::vector<kernels::TensorInfo> infos;
  for (ir::ValueId v : node.inputs) {
    if (v == ir::kNoValue || values[v].none) {
      ins.push_back(nullptr);
      infos.push_back(kernels::TensorInfo{DType::kUnknown, {}, nullptr, false});
      continue;
    }
    if (g.value(v).kind == ir::ValueKind::kTensorList) {
      if (values[v].list == nullptr) {
        return absl::InternalError(absl::StrCat(Where(g, step.node), "tensor list is unset"));
      }
      for (const Tensor& t : *values[v].list) {
        ins.push_back(&t);
        infos.push_back(kernels::TensorInfo{t.dtype(), t.dims(), nullptr, true});
      }
      continue;
    }
    const Tensor& t = values[v].tensor;
    if (t.dtype() == DType::kUnknown) {
      return absl::InternalError(absl::StrCat(Where(g, step.node), "operand %", g.value(v).name,
                                              " has no value"));
    }
    const Slot& s = slots_[v];
    const Tensor* constant = s.kind == Slot::Kind::kConstant ? s.constant
                             : IsScalarValue(g.value(v))     ? &t
                                                             : nullptr;
    ins.push_back(&t);
    infos.push_back(kernels::TensorInfo{t.dtype(), t.dims(), constant, true});
    infos.back().scalar = ir::IsScalarKind(g.value(v).kind);
  }
  const std::string key = internal::InfoKey(infos);
  ASSIGN_OR_RETURN(std::shared_ptr<const Prepared> prepared, PrepareAtRunTime(step, infos, key));
  arena.dynamic_kernel = prepared->kernel;

  bool all_published = !prepared->dynamic_outputs;
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    RtValue& out = values[node.outputs[o]];
    out = RtValue{};
    const kernels::TensorInfo& info = prepared->outputs[o];
    if (info.constant != nullptr) {
      out.tensor = *info.constant;
    } else {
      all_published = false;
      if (prepared->dynamic_outputs) continue;
      if (prepared->kernel->aliases_input0 && o == 0) {
        out.tensor = ins[0]->Reshaped(info.dims);
      } else {
        ASSIGN_OR_RETURN(out.tensor, Tensor::Allocate(info.dtype, info.dims,
                                                      OutputName(g, step.node, o),
                                                      arena.run->memory));
      }
    }
  }
  if (all_published || prepared->kernel->aliases_input0) return absl::OkStatus();

  void* workspace = nullptr;
  if (prepared->workspace_bytes > 0) {
    if (arena.dynamic_workspace.byte_size() < prepared->workspace_bytes) {
      arena.dynamic_workspace = Tensor();
      ASSIGN_OR_RETURN(arena.dynamic_workspace,
                       Tensor::Allocate(DType::kUInt8,
                                        {static_cast<int64_t>(AlignUp(prepared->workspace_bytes))},
                                        absl::StrCat(Where(g, step.node), "workspace"),
                                        arena.run->memory));
    }
    workspace = arena.dynamic_workspace.raw_data();
  }
  kernels::EvalContext ctx{node, std::move(ins), {}, workspace, prepared->state.get(),
                           options_.num_threads};
  for (ir::ValueId v : node.outputs) ctx.outputs.push_back(&values[v].tensor);
  const RunOptions& run = *arena.run;
  const std::function<absl::Status()> check = [&run] { return run.Check(); };
  ctx.check = &check;
  ctx.services = run.services.get();
  absl::Status s = prepared->kernel->eval(ctx);
  if (!s.ok()) return AtNode(step.node, s);
  if (prepared->dynamic_outputs) {
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      Tensor& out = values[node.outputs[o]].tensor;
      if (out.dtype() == DType::kUnknown) {
        return absl::InternalError(
            absl::StrCat(Where(g, step.node), "output ", o, " was not produced"));
      }
      // The kernel allocated it (the libtorch fallback, a data-dependent
      // shape): counted now, for as long as the tensor lives.
      if (arena.run->memory != nullptr) {
        const std::shared_ptr<MemoryBudget>& memory = arena.run->memory;
        const size_t bytes = out.byte_size();
        RETURN_IF_ERROR(memory->Reserve(bytes, OutputName(g, step.node, o)));
        auto held = std::make_shared<Tensor>(out);
        out = Tensor::Wrap(out.dtype(), out.dims(), held->raw_data(),
                           std::shared_ptr<void>(held.get(), [held, memory, bytes](void*) {
                             memory->Release(bytes);
                           }));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Executable::RunIf(const Step& step, Arena& arena) const {
  const ir::Node& node = graph_.node(step.node);
  std::vector<RtValue>& values = arena.values;
  absl::StatusOr<bool> cond = Truth(values[node.inputs[0]]);
  if (!cond.ok()) return absl::InvalidArgumentError(absl::StrCat(Where(graph_, step.node),
                                                                 cond.status().message()));
  const int taken = *cond ? 0 : 1;
  RETURN_IF_ERROR(RunProgram(step.blocks[taken], arena));
  const auto& results = graph_.block(node.blocks[taken]).results;
  for (size_t i = 0; i < node.outputs.size(); ++i) values[node.outputs[i]] = values[results[i]];
  return absl::OkStatus();
}

absl::Status Executable::RunLoop(const Step& step, Arena& arena) const {
  const ir::Node& node = graph_.node(step.node);
  const ir::Block& body = graph_.block(node.blocks[0]);
  std::vector<RtValue>& values = arena.values;
  auto fail = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(Where(graph_, step.node), s.message()));
  };
  absl::StatusOr<int64_t> trips = IntOf(values[node.inputs[0]], "the trip count");
  if (!trips.ok()) return fail(trips.status());
  absl::StatusOr<bool> cond = Truth(values[node.inputs[1]]);
  if (!cond.ok()) return fail(cond.status());
  std::vector<RtValue> carried;
  for (size_t i = 2; i < node.inputs.size(); ++i) carried.push_back(values[node.inputs[i]]);
  for (int64_t i = 0; *cond && i < *trips; ++i) {
    RETURN_IF_ERROR(internal::CheckRun(graph_, *arena.run, step.node));
    values[body.params[0]] = RtValue{IntTensor(i), nullptr, false};
    for (size_t k = 0; k < carried.size(); ++k) values[body.params[k + 1]] = carried[k];
    RETURN_IF_ERROR(RunProgram(step.blocks[0], arena));
    cond = Truth(values[body.results[0]]);
    if (!cond.ok()) return fail(cond.status());
    for (size_t k = 0; k < carried.size(); ++k) carried[k] = values[body.results[k + 1]];
  }
  for (size_t k = 0; k < carried.size(); ++k) values[node.outputs[k]] = carried[k];
  return absl::OkStatus();
}

absl::Status Executable::RunBuiltin(const Step& step, Arena& arena) const {
  const ir::Graph& g = graph_;
  const ir::Node& node = g.node(step.node);
  std::vector<RtValue>& values = arena.values;
  const std::string where = Where(g, step.node);
  auto list_of = [&](ir::ValueId v) -> absl::StatusOr<const std::vector<Tensor>*> {
    if (values[v].list == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, "%", g.value(v).name,
                                                     " is not a tensor list"));
    }
    return values[v].list.get();
  };
  switch (node.kind) {
    case ir::OpKind::kRaise:
      return absl::InvalidArgumentError(
          absl::StrCat("the model raised an exception: ", node.attrs.GetString("message", "")));
    case ir::OpKind::kIsNone: {
      const RtValue& in = values[node.inputs[0]];
      values[node.outputs[0]] = RtValue{BoolTensor(in.none), nullptr, false};
      return absl::OkStatus();
    }
    case ir::OpKind::kListConstruct: {
      auto list = std::make_shared<std::vector<Tensor>>();
      for (ir::ValueId v : node.inputs) {
        if (v == ir::kNoValue || values[v].none) {
          return absl::InvalidArgumentError(absl::StrCat(where, "a tensor list element is None"));
        }
        list->push_back(values[v].tensor);
      }
      values[node.outputs[0]] = RtValue{Tensor(), std::move(list), false};
      return absl::OkStatus();
    }
    case ir::OpKind::kListUnpack: {
      ASSIGN_OR_RETURN(const std::vector<Tensor>* list, list_of(node.inputs[0]));
      if (list->size() != node.outputs.size()) {
        return absl::InvalidArgumentError(absl::StrCat(where, "cannot unpack a list of ",
                                                       list->size(), " into ",
                                                       node.outputs.size(), " values"));
      }
      for (size_t i = 0; i < list->size(); ++i) {
        values[node.outputs[i]] = RtValue{(*list)[i], nullptr, false};
      }
      return absl::OkStatus();
    }
    case ir::OpKind::kListGetItem: {
      ASSIGN_OR_RETURN(const std::vector<Tensor>* list, list_of(node.inputs[0]));
      absl::StatusOr<int64_t> index = IntOf(values[node.inputs[1]], "a list index");
      if (!index.ok()) return absl::InvalidArgumentError(absl::StrCat(where, index.status().message()));
      const int64_t n = static_cast<int64_t>(list->size());
      const int64_t i = *index < 0 ? *index + n : *index;
      if (i < 0 || i >= n) {
        return absl::InvalidArgumentError(absl::StrCat(where, "list index ", *index,
                                                       " out of range for a list of ", n));
      }
      values[node.outputs[0]] = RtValue{(*list)[i], nullptr, false};
      return absl::OkStatus();
    }
    case ir::OpKind::kListLen: {
      ASSIGN_OR_RETURN(const std::vector<Tensor>* list, list_of(node.inputs[0]));
      values[node.outputs[0]] =
          RtValue{IntTensor(static_cast<int64_t>(list->size())), nullptr, false};
      return absl::OkStatus();
    }
    case ir::OpKind::kListAppend: {
      ASSIGN_OR_RETURN(const std::vector<Tensor>* list, list_of(node.inputs[0]));
      const RtValue& element = values[node.inputs[1]];
      if (element.none || element.list != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(where, "can only append a tensor"));
      }
      auto longer = std::make_shared<std::vector<Tensor>>(*list);
      longer->push_back(element.tensor);
      values[node.outputs[0]] = RtValue{Tensor(), std::move(longer), false};
      return absl::OkStatus();
    }
    case ir::OpKind::kSplitList: {
      const RtValue& in = values[node.inputs[0]];
      if (in.none || in.list != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(where, "can only split a tensor"));
      }
      absl::StatusOr<std::vector<Tensor>> pieces =
          SplitPieces(in.tensor, node.attrs.GetInt("axis", 0), node.attrs.GetInt("split_size", 0),
                      node.attrs.GetInt("chunks", 0));
      if (!pieces.ok()) return absl::InvalidArgumentError(absl::StrCat(where, pieces.status().message()));
      values[node.outputs[0]] =
          RtValue{Tensor(), std::make_shared<std::vector<Tensor>>(*std::move(pieces)), false};
      return absl::OkStatus();
    }
    default:
      return absl::InternalError(absl::StrCat(where, "is not a builtin"));
  }
}

}  // namespace kiln::runtime
