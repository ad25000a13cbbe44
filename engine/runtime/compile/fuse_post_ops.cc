// Post-op fusion in Executable::Compiler (compile/compiler.h): a residual Add
// or a clamp (Relu, Clip) right after a convolution becomes part of its
// epilogue (conv_epilogue.h; oneDNN's binary and eltwise post-ops).
#include "engine/runtime/compile/compiler.h"

#include <optional>
#include <utility>

#include "engine/common/status_macros.h"
#include "engine/passes/pass.h"

namespace kiln::runtime {

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
absl::StatusOr<bool> Executable::Compiler::FuseIntoConv(ir::NodeId id, Program& program) {
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

}  // namespace kiln::runtime
