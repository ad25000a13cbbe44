// The typed walk of Executable::Compiler (compile/compiler.h): each node of a
// block, in order, prepared with its operands' types (kernel choice, output
// dtypes and dims, workspace, prepacked state), folded when its operands are
// constants, or left to a dynamic step.
#include "engine/runtime/compile/compiler.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/ir/fallback_twin.h"
#include "engine/runtime/layout.h"

namespace kiln::runtime {

using internal::AlignUp;
using internal::AtNode;
using internal::BoolTensor;
using internal::IsScalarValue;
using internal::IsTensorListOp;
using internal::Truth;
using internal::Where;

namespace {

// Outputs up to this many elements are computed at compile time when all
// operands are constants: enough for shape arithmetic, too small to duplicate
// weights.
constexpr int64_t kMaxFoldElements = 4096;

}  // namespace

absl::Status Executable::Compiler::Run(const std::vector<kernels::TensorInfo>& inputs) {
  // Room for a Reorder node and value per value (PlainTwin), so that node
  // and value references held while compiling stay valid.
  g_.Reserve(g_.values().size() + 1, g_.values().size() + 1);
  slots_.assign(g_.values().size(), Slot{});
  uses_.assign(g_.values().size(), 0);
  for (const ir::Node& node : g_.nodes()) {
    for (ir::ValueId v : node.inputs) {
      if (v != ir::kNoValue) ++uses_[v];
    }
  }
  for (const ir::Block& block : g_.blocks()) {
    for (ir::ValueId v : block.results) ++uses_[v];
  }
  for (ir::ValueId v : g_.outputs()) uses_[v] += 2;  // never fused away
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::ValueId v = g_.inputs()[i];
    Slot& s = slots_[v];
    if (!inputs[i].present) {
      if (!g_.value(v).optional) {
        return absl::InvalidArgumentError(
            absl::StrCat("input ", i, " ('", g_.value(v).name, "') is required"));
      }
      s.kind = Slot::Kind::kNone;
      continue;
    }
    s.kind = Slot::Kind::kInput;
    s.input_index = static_cast<int>(i);
    s.dtype = inputs[i].dtype;
    s.dims = inputs[i].dims;
    SetType(v);
  }
  exe_->main_ = std::make_unique<Program>();
  RETURN_IF_ERROR(CompileBlock(ir::kMainBlock, *exe_->main_, /*static_ok=*/true));
  // Graph outputs leave in the plain layout.
  cursor_ = Cursor{ir::kMainBlock, g_.block(ir::kMainBlock).nodes.size()};
  for (size_t i = 0; i < g_.outputs().size(); ++i) {
    const ir::ValueId v = g_.outputs()[i];
    if (slots_[v].layout == ir::Layout::kPlain || slots_[v].kind == Slot::Kind::kDynamic) continue;
    ASSIGN_OR_RETURN(const ir::ValueId plain, PlainTwin(v, *exe_->main_));
    g_.ReplaceOutput(i, plain);
  }
  Plan();
  for (ir::ValueId v : g_.outputs()) {
    const Slot& s = slots_[v];
    kernels::TensorInfo info;
    if (s.kind == Slot::Kind::kNone) {
      info.present = false;
    } else if (s.kind != Slot::Kind::kDynamic) {
      info.dtype = s.dtype;
      info.dims = s.dims;
    }
    exe_->output_infos_.push_back(std::move(info));
  }
  return absl::OkStatus();
}

bool Executable::Compiler::IsStatic(ir::ValueId v) const {
  const Slot::Kind k = slots_[v].kind;
  return k == Slot::Kind::kInput || k == Slot::Kind::kConstant || k == Slot::Kind::kArena ||
         k == Slot::Kind::kNone;
}

void Executable::Compiler::SetType(ir::ValueId v) {
  g_.mutable_value(v).type = ir::TensorType{slots_[v].dtype, slots_[v].dims, slots_[v].layout};
}

void Executable::Compiler::MakeConstant(ir::ValueId v, Tensor value) {
  exe_->folded_.push_back(std::move(value));
  Slot& s = slots_[v];
  s.kind = Slot::Kind::kConstant;
  s.constant = &exe_->folded_.back();
  s.dtype = s.constant->dtype();
  s.dims = s.constant->dims();
  SetType(v);
}

// `to` stands for `from` (the output of an inlined If).
void Executable::Compiler::Alias(ir::ValueId to, ir::ValueId from, Program& program, ir::NodeId node) {
  if (slots_[from].kind == Slot::Kind::kDynamic) {
    slots_[to].kind = Slot::Kind::kDynamic;
    if (program.steps.empty() || program.steps.back().kind != Step::Kind::kForward ||
        program.steps.back().node != node) {
      Step step;
      step.kind = Step::Kind::kForward;
      step.node = node;
      program.steps.push_back(std::move(step));
    }
    program.steps.back().forwards.push_back({to, from});
    return;
  }
  slots_[to] = slots_[from];
  root_[to] = root_[from];
  if (slots_[to].kind != Slot::Kind::kNone) SetType(to);
}

void Executable::Compiler::MarkDynamic(const ir::Node& node) {
  for (ir::ValueId v : node.outputs) slots_[v].kind = Slot::Kind::kDynamic;
}

// Compiles the nodes of block `b` into `program`. With `static_ok`, nodes
// may be prepared now and planned in the arena (the main block and
// branches inlined into it); without, every node is a dynamic step.
absl::Status Executable::Compiler::CompileBlock(ir::BlockId b, Program& program, bool static_ok) {
  const Cursor outer = cursor_;
  absl::Status status = CompileBlockNodes(b, program, static_ok);
  cursor_ = outer;
  return status;
}

absl::Status Executable::Compiler::CompileBlockNodes(ir::BlockId b, Program& program, bool static_ok) {
  for (ir::ValueId p : g_.block(b).params) slots_[p].kind = Slot::Kind::kDynamic;
  // By index: PlainTwin inserts Reorder nodes before the current one.
  for (cursor_ = Cursor{b, 0}; cursor_.index < g_.block(b).nodes.size(); ++cursor_.index) {
    const ir::NodeId id = g_.block(b).nodes[cursor_.index];
    const ir::Node& node = g_.node(id);
    switch (node.kind) {
      case ir::OpKind::kConstant: {
        Slot& s = slots_[node.outputs[0]];
        s.kind = Slot::Kind::kConstant;
        s.constant = node.attrs.GetTensor("value");
        s.dtype = s.constant->dtype();
        s.dims = s.constant->dims();
        continue;
      }
      case ir::OpKind::kNone:
        slots_[node.outputs[0]].kind = Slot::Kind::kNone;
        continue;
      case ir::OpKind::kIsNone: {
        const ir::ValueId in = node.inputs[0];
        if (in == ir::kNoValue || (static_ok && IsStatic(in))) {
          MakeConstant(node.outputs[0],
                       BoolTensor(in == ir::kNoValue || slots_[in].kind == Slot::Kind::kNone));
          continue;
        }
        break;  // a builtin step below
      }
      case ir::OpKind::kIf: {
        const ir::ValueId cond = node.inputs[0];
        if (static_ok && slots_[cond].kind == Slot::Kind::kConstant) {
          absl::StatusOr<bool> taken = Truth(RtValue{*slots_[cond].constant, nullptr, false});
          if (!taken.ok()) return Annotate(taken.status(), Where(g_, id));
          const ir::BlockId block = node.blocks[*taken ? 0 : 1];
          RETURN_IF_ERROR(CompileBlock(block, program, static_ok));
          const std::vector<ir::ValueId> outputs = g_.node(id).outputs;
          const auto& results = g_.block(block).results;
          for (size_t i = 0; i < outputs.size(); ++i) {
            Alias(outputs[i], results[i], program, id);
          }
          continue;
        }
        RETURN_IF_ERROR(UsePlainOperands(id, program));
        Step step;
        step.kind = Step::Kind::kIf;
        step.node = id;
        step.blocks.resize(2);
        RETURN_IF_ERROR(CompileBlock(node.blocks[0], step.blocks[0], false));
        RETURN_IF_ERROR(CompileBlock(node.blocks[1], step.blocks[1], false));
        MarkDynamic(node);
        program.steps.push_back(std::move(step));
        ++exe_->num_dynamic_steps_;
        continue;
      }
      case ir::OpKind::kLoop: {
        RETURN_IF_ERROR(UsePlainOperands(id, program));
        Step step;
        step.kind = Step::Kind::kLoop;
        step.node = id;
        step.blocks.resize(1);
        RETURN_IF_ERROR(CompileBlock(node.blocks[0], step.blocks[0], false));
        MarkDynamic(node);
        program.steps.push_back(std::move(step));
        ++exe_->num_dynamic_steps_;
        continue;
      }
      default:
        break;
    }
    if (node.kind == ir::OpKind::kIsNone || node.kind == ir::OpKind::kRaise ||
        IsTensorListOp(g_, node)) {
      RETURN_IF_ERROR(UsePlainOperands(id, program));
      Step step;
      step.kind = Step::Kind::kBuiltin;
      step.node = id;
      MarkDynamic(node);
      program.steps.push_back(std::move(step));
      ++exe_->num_dynamic_steps_;
      continue;
    }
    RETURN_IF_ERROR(CompileKernelNode(id, program, static_ok));
  }
  return absl::OkStatus();
}

absl::Status Executable::Compiler::CompileKernelNode(ir::NodeId id, Program& program, bool static_ok) {
  const ir::Node& node = g_.node(id);
  bool can_prepare = static_ok;
  for (ir::ValueId v : node.inputs) {
    if (!can_prepare || v == ir::kNoValue) continue;
    if (!IsStatic(v) || g_.value(v).kind == ir::ValueKind::kTensorList ||
        (IsScalarValue(g_.value(v)) && slots_[v].kind != Slot::Kind::kConstant &&
         slots_[v].kind != Slot::Kind::kNone)) {
      can_prepare = false;
    }
  }
  if (!can_prepare) {
    RETURN_IF_ERROR(UsePlainOperands(id, program));
    Step step;
    step.kind = Step::Kind::kDynamicKernel;
    step.node = id;
    step.cache = std::make_shared<PrepareCache>();
    MarkDynamic(g_.node(id));
    program.steps.push_back(std::move(step));
    ++exe_->num_dynamic_steps_;
    return absl::OkStatus();
  }

  // An elementwise node whose result nothing reads: one a fusion replaced
  // (its node stays in the compiled graph, whose ids a cached plan keeps),
  // now compiled again from that graph without the passes.
  if (layout::IsElementwise(node.kind) && node.outputs.size() == 1 && uses_[node.outputs[0]] == 0) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const bool fused, FuseIntoConv(id, program));
  if (fused) return absl::OkStatus();

  // Operand types, in their layouts; an elementwise op on NHWC operands
  // sees their channels-last dims.
  auto operand_infos = [&](bool* all_constant) {
    std::vector<kernels::TensorInfo> infos;
    for (ir::ValueId v : g_.node(id).inputs) {
      kernels::TensorInfo info;
      if (v == ir::kNoValue || slots_[v].kind == Slot::Kind::kNone) {
        info.present = false;
      } else {
        info.dtype = slots_[v].dtype;
        info.dims = slots_[v].dims;
        info.layout = slots_[v].layout;
        info.constant = slots_[v].constant;
        info.scalar = ir::IsScalarKind(g_.value(v).kind);
        *all_constant &= info.constant != nullptr;
      }
      infos.push_back(std::move(info));
    }
    return infos;
  };
  bool all_constant = true;
  std::vector<kernels::TensorInfo> infos = operand_infos(&all_constant);
  bool permuted = PermuteElementwise(g_.node(id), infos);
  kernels::PrepareContext ctx{g_.node(id), std::move(infos), {}, 0, nullptr,
                              exe_->options_.num_threads};
  ctx.allow_layouts = exe_->options_.use_providers && !all_constant;
  ctx.precision = exe_->options_.precision;
  ctx.packed_weights = exe_->options_.packed_weights.get();
  ctx.outputs.resize(node.outputs.size());
  absl::StatusOr<const kernels::KernelDef*> found = kernels::PrepareKernel(ctx);
  if (absl::IsFailedPrecondition(found.status())) {
    // No kernel takes these layouts: give the node plain copies.
    for (ir::ValueId v : std::vector<ir::ValueId>(g_.node(id).inputs)) {
      if (v == ir::kNoValue || slots_[v].layout == ir::Layout::kPlain) continue;
      ASSIGN_OR_RETURN(const ir::ValueId plain, PlainTwin(v, program));
      ReplaceUsesIn(id, v, plain);
    }
    all_constant = true;
    permuted = false;
    ctx.inputs = operand_infos(&all_constant);
    ctx.outputs.assign(g_.node(id).outputs.size(), {});
    found = kernels::PrepareKernel(ctx);
  }
  if (!found.ok() && RunsThroughTwin(id, found.status())) {
    return CompileKernelNode(id, program, static_ok);
  }
  if (absl::IsNotFound(found.status())) {
    return absl::UnimplementedError(absl::StrCat(
        Where(g_, id), found.status().message(),
        node.kind == ir::OpKind::kFallback ? " (this build has no libtorch fallback)" : ""));
  }
  if (!found.ok()) return AtNode(id, found.status());
  const kernels::KernelDef* kernel = *found;
  if (ctx.outputs.size() != node.outputs.size()) {
    return absl::InternalError(absl::StrCat(Where(g_, id), "prepare gave ", ctx.outputs.size(),
                                            " outputs for ", node.outputs.size()));
  }

  if (ctx.dynamic_outputs) {
    // Only a run can tell the output dims: a dynamic step, seeded with this
    // preparation.
    Step step;
    step.kind = Step::Kind::kDynamicKernel;
    step.node = id;
    step.cache = std::make_shared<PrepareCache>();
    auto prepared = std::make_shared<Prepared>();
    prepared->kernel = kernel;
    prepared->outputs = ctx.outputs;
    prepared->workspace_bytes = ctx.workspace_bytes;
    prepared->state = ctx.state;
    prepared->dynamic_outputs = true;
    step.cache->entries.emplace(internal::InfoKey(ctx.inputs), std::move(prepared));
    MarkDynamic(node);
    program.steps.push_back(std::move(step));
    ++exe_->num_dynamic_steps_;
    return absl::OkStatus();
  }

  // Values fixed by the operand types (aten::size).
  bool published = true;
  for (const kernels::TensorInfo& out : ctx.outputs) published &= out.constant != nullptr;
  if (published) {
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      MakeConstant(node.outputs[o], *ctx.outputs[o].constant);
    }
    return absl::OkStatus();
  }

  int64_t out_elements = 0;
  for (const kernels::TensorInfo& out : ctx.outputs) out_elements += NumElements(out.dims);
  if (all_constant && out_elements <= kMaxFoldElements) {
    return Fold(id, *kernel, ctx);
  }

  for (size_t o = 0; o < node.outputs.size(); ++o) {
    Slot& slot = slots_[node.outputs[o]];
    slot.kind = Slot::Kind::kArena;
    slot.dtype = ctx.outputs[o].dtype;
    slot.layout = ctx.outputs[o].layout;
    slot.dims = ctx.outputs[o].dims;
    if (permuted && slot.dims.size() == 4) {
      slot.layout = ir::Layout::kNHWC;
      slot.dims = layout::LogicalDims(slot.dims, slot.layout);
    }
    SetType(node.outputs[o]);
  }
  if (kernel->aliases_input0) {
    const ir::ValueId in_root = root_[node.inputs[0]];
    root_[node.outputs[0]] = in_root;
    // A view of an input or constant lives in the caller's or graph's memory.
    const Slot& src = slots_[in_root];
    if (src.kind != Slot::Kind::kArena) {
      Slot& out = slots_[node.outputs[0]];
      out.kind = src.kind;
      out.input_index = src.input_index;
      out.constant = src.constant;
    }
  }
  workspace_ = std::max(workspace_, AlignUp(ctx.workspace_bytes));
  Step step;
  step.kind = Step::Kind::kKernel;
  step.node = id;
  step.kernel = kernel;
  step.state = std::move(ctx.state);
  program.steps.push_back(std::move(step));
  if (!no_chain_) RETURN_IF_ERROR(FuseIntoChain(id, program).status());
  return absl::OkStatus();
}

// A kernel that refuses a node for this signature ("not this way": no
// kernel for the dtype, an operand it does not take) sends the node to its
// libtorch twin (ir/fallback_twin.h), for this signature only, when the
// build has the fallback; recorded in libtorch_fallbacks().
bool Executable::Compiler::RunsThroughTwin(ir::NodeId id, const absl::Status& refused) {
  const bool data_refusal = absl::IsNotFound(refused) || absl::IsUnimplemented(refused) ||
                            absl::IsInvalidArgument(refused);
  if (!data_refusal || kernels::FindKernel(ir::OpKind::kFallback, DType::kUnknown) == nullptr) {
    return false;
  }
  ir::Node& node = g_.mutable_node(id);
  const std::string op = node.source_op;
  if (!ir::SwapInFallbackTwin(node)) return false;
  exe_->libtorch_fallbacks_.push_back(absl::StrCat(op, " (", refused.message(), ")"));
  return true;
}

// Evaluates a node whose operands are all constants; its outputs become constants.
absl::Status Executable::Compiler::Fold(ir::NodeId id, const kernels::KernelDef& kernel,
                  kernels::PrepareContext& ctx) {
  const ir::Node& node = g_.node(id);
  std::vector<Tensor> outs;
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (kernel.aliases_input0 && o == 0) {
      outs.push_back(slots_[node.inputs[0]].constant->Reshaped(ctx.outputs[0].dims));
    } else {
      outs.push_back(Tensor::Zeros(ctx.outputs[o].dtype, ctx.outputs[o].dims));
    }
  }
  if (!kernel.aliases_input0) {
    Tensor workspace = Tensor::Zeros(DType::kUInt8, {static_cast<int64_t>(
                                                        std::max<size_t>(ctx.workspace_bytes, 1))});
    kernels::EvalContext ectx{node, {}, {}, workspace.raw_data(), ctx.state.get(),
                              exe_->options_.num_threads};
    for (ir::ValueId v : node.inputs) {
      ectx.inputs.push_back(v == ir::kNoValue || slots_[v].kind == Slot::Kind::kNone
                                ? nullptr
                                : slots_[v].constant);
    }
    for (Tensor& t : outs) ectx.outputs.push_back(&t);
    absl::Status s = kernel.eval(ectx);
    if (!s.ok()) return AtNode(id, s);
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) MakeConstant(node.outputs[o], outs[o]);
  return absl::OkStatus();
}

// Every value a node reads, in its blocks too.
void Executable::Compiler::CollectUses(ir::NodeId id, std::vector<ir::ValueId>& uses) const {
  const ir::Node& node = g_.node(id);
  for (ir::ValueId v : node.inputs) {
    if (v != ir::kNoValue) uses.push_back(v);
  }
  for (ir::BlockId b : node.blocks) {
    for (ir::NodeId inner : g_.block(b).nodes) CollectUses(inner, uses);
    for (ir::ValueId r : g_.block(b).results) uses.push_back(r);
  }
}

}  // namespace kiln::runtime
