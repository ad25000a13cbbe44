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
#include "engine/runtime/executable.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/common/mapped_file.h"
#include "engine/common/status_macros.h"
#include "engine/ir/fallback_twin.h"
#include "engine/passes/pass.h"
#include "engine/runtime/executable_internal.h"
#include "engine/runtime/layout.h"

namespace kiln::runtime {

using internal::AlignUp;
using internal::AtNode;
using internal::BoolTensor;
using internal::IsScalarValue;
using internal::IsTensorListOp;
using internal::Truth;
using internal::Where;

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

// Outputs up to this many elements are computed at compile time when all
// operands are constants: enough for shape arithmetic, too small to duplicate
// weights.
constexpr int64_t kMaxFoldElements = 4096;


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

// ------------------------------------------------------------------ compile

class Executable::Compiler {
 public:
  explicit Compiler(Executable* exe)
      : exe_(exe), g_(exe->graph_), slots_(exe->slots_), root_(g_.values().size()) {
    for (size_t v = 0; v < root_.size(); ++v) root_[v] = static_cast<ir::ValueId>(v);
  }

  absl::Status Run(const std::vector<kernels::TensorInfo>& inputs) {
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

 private:
  bool IsStatic(ir::ValueId v) const {
    const Slot::Kind k = slots_[v].kind;
    return k == Slot::Kind::kInput || k == Slot::Kind::kConstant || k == Slot::Kind::kArena ||
           k == Slot::Kind::kNone;
  }

  void SetType(ir::ValueId v) {
    g_.mutable_value(v).type = ir::TensorType{slots_[v].dtype, slots_[v].dims, slots_[v].layout};
  }

  // ---- layouts (engine/runtime/layout.h) ----

  // Where CompileBlock is: PlainTwin inserts its Reorder node at `index` of
  // `block`, before the node being compiled.
  struct Cursor {
    ir::BlockId block = ir::kMainBlock;
    size_t index = 0;
  };

  // A plain copy of `v` (a non-plain static value), made by a Reorder node
  // inserted at the cursor and compiled into `program`; one per value and block.
  absl::StatusOr<ir::ValueId> PlainTwin(ir::ValueId v, Program& program) {
    const auto key = std::make_pair(v, cursor_.block);
    if (auto it = twins_.find(key); it != twins_.end()) return it->second;
    ir::Attributes attrs;
    attrs.SetString("to", ir::LayoutName(ir::Layout::kPlain));
    const ir::BlockId saved = g_.insertion_block();
    g_.SetInsertionBlock(cursor_.block);
    const ir::NodeId r = g_.AddNode(ir::OpKind::kReorder, {v}, std::move(attrs), "",
                                    {absl::StrCat(g_.value(v).name, ".plain")});
    g_.SetInsertionBlock(saved);
    std::vector<ir::NodeId>& nodes = g_.mutable_block(cursor_.block).nodes;
    nodes.pop_back();
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(cursor_.index), r);
    ++cursor_.index;
    slots_.resize(g_.values().size());
    for (size_t i = root_.size(); i < g_.values().size(); ++i) {
      root_.push_back(static_cast<ir::ValueId>(i));
    }
    RETURN_IF_ERROR(CompileKernelNode(r, program, /*static_ok=*/true));
    const ir::ValueId plain = g_.node(r).outputs[0];
    twins_.emplace(key, plain);
    return plain;
  }

  // Rewires the uses of non-plain values by node `id` (and the nodes and
  // results of its blocks) to plain twins: for steps that run dynamically.
  absl::Status UsePlainOperands(ir::NodeId id, Program& program) {
    std::vector<ir::ValueId> uses;
    CollectUses(id, uses);
    for (ir::ValueId v : uses) {
      if (slots_[v].layout == ir::Layout::kPlain || !IsStatic(v)) continue;
      ASSIGN_OR_RETURN(const ir::ValueId plain, PlainTwin(v, program));
      ReplaceUsesIn(id, v, plain);
    }
    return absl::OkStatus();
  }

  void ReplaceUsesIn(ir::NodeId id, ir::ValueId from, ir::ValueId to) {
    for (ir::ValueId& v : g_.mutable_node(id).inputs) {
      if (v == from) v = to;
    }
    const std::vector<ir::BlockId> blocks = g_.node(id).blocks;
    for (ir::BlockId b : blocks) {
      for (ir::NodeId inner : g_.block(b).nodes) ReplaceUsesIn(inner, from, to);
      for (ir::ValueId& r : g_.mutable_block(b).results) {
        if (r == from) r = to;
      }
    }
  }

  // ---- typed fusion into the convolution just compiled ----
  //
  // A residual Add of the convolution's output and a value of the same type
  // (dtype, dims, layout) computed before it, and a Relu/Clip after that,
  // become part of the convolution's epilogue (conv_epilogue.h; oneDNN: a
  // binary add and an eltwise post-op): the output is written once instead of
  // three times. This needs the operands' types, so it runs here rather than
  // as a graph pass. Only with the passes (a plan read back from the cache is
  // fused already), when the Conv is the step just before (nothing between
  // reads its output) and its output has this one use. The arithmetic is the
  // unfused ops': the residual is added to the rounded affine result, then
  // clamped. Returns whether `id` was fused (and so needs no step).
  absl::StatusOr<bool> FuseIntoConv(ir::NodeId id, Program& program) {
    if (!exe_->options_.run_passes || program.steps.empty() ||
        program.steps.back().kind != Step::Kind::kKernel) {
      return false;
    }
    const ir::Node& node = g_.node(id);
    const ir::NodeId conv_id = program.steps.back().node;
    const ir::Node& conv = g_.node(conv_id);
    if (conv.kind != ir::OpKind::kConv || conv.attrs.Has("post_min") ||
        conv.attrs.Has("post_act")) {
      return false;
    }
    const ir::ValueId y = conv.outputs[0];
    if (uses_[y] != 1 || slots_[y].kind != Slot::Kind::kArena) return false;
    ir::ValueId residual = ir::kNoValue;
    std::optional<std::pair<double, double>> bounds;
    if (node.kind == ir::OpKind::kAdd) {
      if (node.inputs.size() != 2 || conv.inputs.size() > 3) return false;
      residual = node.inputs[0] == y ? node.inputs[1] : node.inputs[0];
      if ((node.inputs[0] != y && node.inputs[1] != y) || residual == y) return false;
      const Slot& r = slots_[residual];
      if ((r.kind != Slot::Kind::kArena && r.kind != Slot::Kind::kInput) ||
          r.dtype != slots_[y].dtype || r.dims != slots_[y].dims || r.layout != slots_[y].layout ||
          ir::IsScalarKind(g_.value(residual).kind)) {
        return false;
      }
    } else {
      bounds = passes::ClampBounds(node);
      if (!bounds || node.inputs[0] != y) return false;
    }
    ir::Node& fused = g_.mutable_node(conv_id);
    if (residual != ir::kNoValue) {
      fused.inputs.resize(3, ir::kNoValue);
      fused.inputs.push_back(residual);
    } else {
      fused.attrs.SetFloat("post_min", bounds->first);
      fused.attrs.SetFloat("post_max", bounds->second);
    }
    program.steps.pop_back();
    slots_[y] = Slot{};
    RETURN_IF_ERROR(CompileKernelNode(conv_id, program, /*static_ok=*/true));
    const ir::ValueId out = g_.node(id).outputs[0];
    uses_[y] = uses_[out];
    g_.ReplaceAllUses(out, y);
    return true;
  }

  // An elementwise node whose tensor operands are all NHWC or single
  // elements runs on the channels-last bytes: rewrites `infos` to the
  // physical dims. False when some operand does not permute that way.
  static bool PermuteElementwise(const ir::Node& node,
                                 std::vector<kernels::TensorInfo>& infos) {
    if (!layout::IsElementwise(node.kind)) return false;
    bool any = false;
    for (const kernels::TensorInfo& i : infos) {
      if (!i.present) continue;
      if (i.layout == ir::Layout::kNHWC) {
        any = true;
      } else if (NumElements(i.dims) != 1 || i.dims.size() > 4) {
        return false;  // (a rank-5 element would make the output 5-D in physical order)
      }
    }
    if (!any) return false;
    for (kernels::TensorInfo& i : infos) {
      if (i.present && i.layout == ir::Layout::kNHWC) {
        i.dims = layout::PhysicalDims(i.dims, i.layout);
        i.layout = ir::Layout::kPlain;
      }
    }
    return true;
  }

  void MakeConstant(ir::ValueId v, Tensor value) {
    exe_->folded_.push_back(std::move(value));
    Slot& s = slots_[v];
    s.kind = Slot::Kind::kConstant;
    s.constant = &exe_->folded_.back();
    s.dtype = s.constant->dtype();
    s.dims = s.constant->dims();
    SetType(v);
  }

  // `to` stands for `from` (the output of an inlined If).
  void Alias(ir::ValueId to, ir::ValueId from, Program& program, ir::NodeId node) {
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

  void MarkDynamic(const ir::Node& node) {
    for (ir::ValueId v : node.outputs) slots_[v].kind = Slot::Kind::kDynamic;
  }

  // Compiles the nodes of block `b` into `program`. With `static_ok`, nodes
  // may be prepared now and planned in the arena (the main block and
  // branches inlined into it); without, every node is a dynamic step.
  absl::Status CompileBlock(ir::BlockId b, Program& program, bool static_ok) {
    const Cursor outer = cursor_;
    absl::Status status = CompileBlockNodes(b, program, static_ok);
    cursor_ = outer;
    return status;
  }

  absl::Status CompileBlockNodes(ir::BlockId b, Program& program, bool static_ok) {
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

  absl::Status CompileKernelNode(ir::NodeId id, Program& program, bool static_ok) {
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
    return absl::OkStatus();
  }

  // A kernel that refuses a node for this signature ("not this way": no
  // kernel for the dtype, an operand it does not take) sends the node to its
  // libtorch twin (ir/fallback_twin.h), for this signature only, when the
  // build has the fallback; recorded in libtorch_fallbacks().
  bool RunsThroughTwin(ir::NodeId id, const absl::Status& refused) {
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
  absl::Status Fold(ir::NodeId id, const kernels::KernelDef& kernel,
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
  void CollectUses(ir::NodeId id, std::vector<ir::ValueId>& uses) const {
    const ir::Node& node = g_.node(id);
    for (ir::ValueId v : node.inputs) {
      if (v != ir::kNoValue) uses.push_back(v);
    }
    for (ir::BlockId b : node.blocks) {
      for (ir::NodeId inner : g_.block(b).nodes) CollectUses(inner, uses);
      for (ir::ValueId r : g_.block(b).results) uses.push_back(r);
    }
  }

  // A kernel that may write its output over an input
  // (KernelDef::output0_may_reuse_input) gets that input's buffer where this
  // step is the buffer's last use and the sizes match: the output's own buffer
  // is folded into it (and planned empty).
  void ReuseInputBuffers(std::vector<int>& buffer_of, std::vector<Buffer>& buffers) const {
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
  void Plan() {
    const auto& steps = exe_->main_->steps;
    const int end = static_cast<int>(steps.size());
    std::vector<int> buffer_of(g_.values().size(), -1);
    std::vector<Buffer> buffers;
    std::vector<ir::ValueId> uses;
    for (int st = 0; st < end; ++st) {
      const Step& step = steps[st];
      const ir::Node& node = g_.node(step.node);
      if (step.kind == Step::Kind::kKernel) {
        for (ir::ValueId v : node.outputs) {
          if (root_[v] != v || slots_[v].kind != Slot::Kind::kArena) continue;
          buffer_of[v] = static_cast<int>(buffers.size());
          const size_t bytes =
              static_cast<size_t>(NumElements(slots_[v].dims)) * DTypeSize(slots_[v].dtype);
          buffers.push_back(Buffer{AlignUp(std::max<size_t>(bytes, 1)), st, st});
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
    const size_t buffer_bytes = PlaceBuffers(buffers);
    for (size_t v = 0; v < slots_.size(); ++v) {
      Slot& s = slots_[v];
      if (s.kind == Slot::Kind::kArena) s.offset = buffers[buffer_of[root_[v]]].offset;
    }
    exe_->arena_bytes_ = buffer_bytes + workspace_;
    exe_->workspace_offset_ = buffer_bytes;
  }

 private:
  Executable* exe_;
  ir::Graph& g_;
  std::vector<Slot>& slots_;
  std::vector<ir::ValueId> root_;
  size_t workspace_ = 0;
  Cursor cursor_;
  std::vector<int> uses_;  // per value: node inputs, block results, graph outputs (2)
  std::map<std::pair<ir::ValueId, ir::BlockId>, ir::ValueId> twins_;
};

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
  if (options.run_passes) RETURN_IF_ERROR(passes::RunPipeline(g));
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

absl::StatusOr<std::unique_ptr<Executable::Arena>> Executable::NewArena() const {
  auto arena = std::make_unique<Arena>();
  ASSIGN_OR_RETURN(arena->memory,
                   Tensor::Allocate(DType::kUInt8, Dims{static_cast<int64_t>(arena_bytes_)},
                                    absl::StrCat("the plan's arena for inputs ", signature_)));
  uint8_t* base = arena->memory.data<uint8_t>();
  arena->values.resize(slots_.size());
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    if (s.kind == Slot::Kind::kArena) {
      // A non-plain value's tensor has its dims in memory order.
      arena->values[v].tensor =
          Tensor::Wrap(s.dtype, layout::PhysicalDims(s.dims, s.layout), base + s.offset);
    } else if (s.kind == Slot::Kind::kConstant) {
      arena->values[v].tensor =
          Tensor::Wrap(s.dtype, s.dims, const_cast<void*>(s.constant->raw_data()));
    } else if (s.kind == Slot::Kind::kNone) {
      arena->values[v].none = true;
    }
  }
  return arena;
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
  if (!arena) {
    ASSIGN_OR_RETURN(arena, NewArena());
  }
  arena->run = &options;
  // Bind the caller's inputs, and views of them, to their slots.
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    if (s.kind != Slot::Kind::kInput) continue;
    const Tensor& in = inputs[s.input_index].tensor;
    arena->values[v].tensor = Tensor::Wrap(s.dtype, s.dims, const_cast<void*>(in.raw_data()));
  }

  absl::Status status = RunProgram(*main_, *arena);
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
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    // Keep a few arenas for concurrent requests; drop the rest.
    if (arena_pool_.size() < 4) arena_pool_.push_back(std::move(arena));
  }
  if (!status.ok()) return status;
  return outputs;
}

absl::Status Executable::RunProgram(const Program& program, Arena& arena) const {
  const ir::Graph& g = graph_;
  std::vector<RtValue>& values = arena.values;
  void* workspace = arena.memory.data<uint8_t>() + workspace_offset_;
  RunObserver* const observer = arena.run->observer;
  for (const Step& step : program.steps) {
    RETURN_IF_ERROR(internal::CheckRun(g, *arena.run, step.node));
    const ObservedStep observed(observer, this, g, step.node, &step, &arena);
    switch (step.kind) {
      case Step::Kind::kKernel: {
        if (step.kernel->aliases_input0) continue;
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
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
