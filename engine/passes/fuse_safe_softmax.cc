// Fuses the masking that PyTorch's decomposition of _safe_softmax (what
// scaled_dot_product_attention becomes in the core ATen opset, torch >= 2.5)
// writes after a softmax into the softmax itself:
//
//   S = Softmax(X, axis)
//   M = LogicalNot(ReduceAny(LogicalNot(Equal(X, -inf)), axes=[axis], keepdim))
//   Y = Where(M, Fill(like S, 0) | 0, S)
//     ->  Y = Softmax(X, axis, safe=true)
//
// Softmax's `safe` attribute (kernels/safe_softmax.h) zeroes exactly the
// slices whose every element is -inf, which is what the Where does: a slice
// holding a NaN is not all -inf and keeps softmax's NaN either way. Six passes
// over the scores (vit_b_16: 12 of 192 ms) become none. The Where node
// becomes the fused Softmax, keeping its place and output; the rest is left
// to dead-code elimination, so the pattern is fused only when S has no use
// but the Where (and the Fill that copies its shape).
#include <cmath>
#include <vector>

#include "engine/common/element.h"
#include "engine/ir/fallback_twin.h"
#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::OpKind;
using ir::ValueId;

// The node of `kind` producing `v` in `block`, or nullptr.
const Node* Producer(const Graph& g, ValueId v, OpKind kind, ir::BlockId block) {
  if (v == ir::kNoValue) return nullptr;
  const NodeId p = g.value(v).producer;
  if (p == ir::kNoNode) return nullptr;
  const Node& n = g.node(p);
  return n.kind == kind && n.block == block ? &n : nullptr;
}

// Whether `v` is a 0-dim floating-point constant equal to `want` (a number
// that keeps the other operand's dtype in PyTorch's promotion).
bool IsScalarConstant(const Graph& g, ValueId v, double want) {
  const Tensor* t = g.ConstantValue(v);
  if (t == nullptr || t->rank() != 0 || !IsFloatingPoint(t->dtype())) return false;
  const double x = LoadAsDouble(t->raw_data(), t->dtype(), 0);
  return x == want;
}

// Fuses at Where node `id`. Returns whether it did.
bool FuseAt(Graph& g, const std::vector<int>& uses, NodeId id) {
  const Node& where = g.node(id);
  if (where.inputs.size() != 3 || !OnlyAttrs(where, {})) return false;
  const ir::BlockId block = where.block;
  const Node* softmax = Producer(g, where.inputs[2], OpKind::kSoftmax, block);
  if (softmax == nullptr || softmax->inputs.size() != 1 || !OnlyAttrs(*softmax, {"axis"})) {
    return false;
  }
  const ValueId s = where.inputs[2], x = softmax->inputs[0];
  const int64_t axis = softmax->attrs.GetInt("axis", -1);
  // The zeros: Fill(like S, value 0) or a number 0.
  int s_uses = 1;
  if (const Node* fill = Producer(g, where.inputs[1], OpKind::kFill, block)) {
    if (fill->inputs.size() != 1 || fill->inputs[0] != s || !OnlyAttrs(*fill, {"value"}) ||
        fill->attrs.GetFloat("value", 1.0) != 0.0) {
      return false;
    }
    ++s_uses;
  } else if (!IsScalarConstant(g, where.inputs[1], 0.0)) {
    return false;
  }
  if (uses[s] != s_uses) return false;
  // The mask: not(any(not(X == -inf), axis, keepdim)).
  const Node* outer_not = Producer(g, where.inputs[0], OpKind::kLogicalNot, block);
  if (outer_not == nullptr || !OnlyAttrs(*outer_not, {})) return false;
  const Node* any = Producer(g, outer_not->inputs[0], OpKind::kReduceAny, block);
  if (any == nullptr || !OnlyAttrs(*any, {"axes", "keepdim"}) || !any->attrs.GetBool("keepdim") ||
      any->attrs.GetInts("axes") != std::vector<int64_t>{axis}) {
    return false;
  }
  const Node* inner_not = Producer(g, any->inputs[0], OpKind::kLogicalNot, block);
  if (inner_not == nullptr || !OnlyAttrs(*inner_not, {})) return false;
  const Node* eq = Producer(g, inner_not->inputs[0], OpKind::kEqual, block);
  if (eq == nullptr || eq->inputs.size() != 2 || !OnlyAttrs(*eq, {})) return false;
  const double minus_inf = -INFINITY;
  const bool x_first = eq->inputs[0] == x && IsScalarConstant(g, eq->inputs[1], minus_inf);
  const bool x_second = eq->inputs[1] == x && IsScalarConstant(g, eq->inputs[0], minus_inf);
  if (!x_first && !x_second) return false;

  Node& fused = g.mutable_node(id);
  fused.source_op = softmax->source_op;
  fused.kind = OpKind::kSoftmax;
  fused.inputs = {x};
  ir::Attributes attrs;
  attrs.SetInt("axis", axis);
  attrs.SetBool("safe", true);
  fused.attrs = std::move(attrs);
  return true;
}

class FuseSafeSoftmaxPass : public Pass {
 public:
  std::string name() const override { return "fuse_safe_softmax"; }

  absl::StatusOr<bool> Run(Graph& graph) const override {
    // A fusion changes no use count that another pattern reads (each Where
    // has its own Softmax), so one count serves the whole sweep.
    const std::vector<int> uses = CountUses(graph);
    bool changed = false;
    for (size_t i = 0; i < graph.nodes().size(); ++i) {
      if (graph.node(i).kind != OpKind::kWhere) continue;
      changed |= FuseAt(graph, uses, static_cast<NodeId>(i));
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseSafeSoftmaxPass() { return std::make_unique<FuseSafeSoftmaxPass>(); }

}  // namespace kiln::passes
