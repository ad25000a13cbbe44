// Fuses scaled dot-product attention, as models write it out, into one
// ScaledDotProductAttention node (op_kinds.def):
//
//   [Permute] q ------------------[Div|Mul s]--+
//   [Permute] k -- Permute(-2, -1) ------------+- MatMul -[Div|Mul s]-[Add mask]- Softmax(-1) -+
//   [Permute] v -----------------------------------------------------------------------------+- MatMul -[Permute]
//
// The scale s divides or multiplies the scores or, before the product, the
// query (torch 1.13's multi_head_attention_forward, vit_b_16); without one the
// node gets scale 1. The transpositions of q, k, v (the heads split off with
// .transpose(1, 2)) and of the result (the heads merged back) become
// attributes that the fused kernel reads as strides, so none of them is
// copied. The node's kernels (engine/kernels/attention.cc and the oneDNN one)
// compute exactly what the ops did, for every shape the ops take: the fusion
// never changes what a graph accepts.
//
// A link is fused only when the producer's output has that one consumer and is
// not a graph output (the verified import's bisection exposes intermediates),
// all in one block, and only ops without other attributes (a MatMul marked to
// accumulate in float64 stays as it is). The last node of the chain becomes
// the fused node, so it keeps its place and its output value; the rest is left
// to dead-code elimination. A ScaledDotProductAttention the importer made
// (aten::scaled_dot_product_attention) gets its transpositions absorbed the
// same way.
#include <optional>
#include <string>
#include <vector>

#include "engine/ir/fallback_twin.h"
#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::OpKind;
using ir::ValueId;

class Matcher {
 public:
  explicit Matcher(const Graph& graph) : g_(graph), uses_(CountUses(graph)) {}

  // The node of `kind` producing `v` in `block`, or nullptr; with `sole`, only
  // when `v` has no other use.
  const Node* Producer(ValueId v, OpKind kind, ir::BlockId block, bool sole) const {
    if (v == ir::kNoValue) return nullptr;
    const NodeId p = g_.value(v).producer;
    if (p == ir::kNoNode) return nullptr;
    const Node& n = g_.node(p);
    if (n.kind != kind || n.block != block || (sole && uses_[v] != 1)) return nullptr;
    return &n;
  }

  // A transposition's [dim0, dim1] when `v` is made by one (Permute with dim0
  // and dim1 only), else nullopt.
  std::optional<std::vector<int64_t>> Transposition(ValueId v, ir::BlockId block,
                                                    const Node** node = nullptr) const {
    const Node* p = Producer(v, OpKind::kPermute, block, /*sole=*/false);
    if (p == nullptr || !p->attrs.Has("dim0") || !p->attrs.Has("dim1") ||
        !OnlyAttrs(*p, {"dim0", "dim1"})) {
      return std::nullopt;
    }
    if (node != nullptr) *node = p;
    return std::vector<int64_t>{p->attrs.GetInt("dim0"), p->attrs.GetInt("dim1")};
  }

  // A scaling of `v` by a Div or Mul: (what is scaled, the scale, the op).
  struct Scaling {
    ValueId x = ir::kNoValue, scale = ir::kNoValue;
    const char* op = "mul";
  };
  std::optional<Scaling> Scaled(ValueId v, ir::BlockId block, bool sole) const {
    for (OpKind kind : {OpKind::kDiv, OpKind::kMul}) {
      const Node* p = Producer(v, kind, block, sole);
      if (p == nullptr || p->inputs.size() != 2 || !OnlyAttrs(*p, {})) continue;
      if (kind == OpKind::kDiv) return Scaling{p->inputs[0], p->inputs[1], "div"};
      // A product: the scale is the operand that is a number (or, failing
      // that, the second).
      const bool first_is_number = ir::IsScalarKind(g_.value(p->inputs[0]).kind);
      return first_is_number ? Scaling{p->inputs[1], p->inputs[0], "mul"}
                             : Scaling{p->inputs[0], p->inputs[1], "mul"};
    }
    return std::nullopt;
  }

  int uses(ValueId v) const { return uses_[v]; }

  // Every node that reads `v` (for the one consumer of a sole use).
  NodeId SoleConsumer(ValueId v) const {
    if (uses_[v] != 1) return ir::kNoNode;
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      for (ValueId in : g_.nodes()[i].inputs) {
        if (in == v) return static_cast<NodeId>(i);
      }
    }
    return ir::kNoNode;
  }

 private:
  const Graph& g_;
  std::vector<int> uses_;
};

// Reads the transpositions that make q, k and v (inputs[0..2]) in place:
// each becomes attribute q_perm / k_perm / v_perm and the operand its input.
// Returns whether any did.
bool StripTranspositions(const Matcher& m, ir::BlockId block, std::vector<ValueId>& inputs,
                         ir::Attributes& attrs) {
  bool stripped = false;
  const char* names[] = {"q_perm", "k_perm", "v_perm"};
  for (int i = 0; i < 3; ++i) {
    const Node* p = nullptr;
    if (std::optional<std::vector<int64_t>> t = m.Transposition(inputs[i], block, &p)) {
      attrs.SetInts(names[i], *t);
      inputs[i] = p->inputs[0];
      stripped = true;
    }
  }
  return stripped;
}

// The transposition that is the only consumer of `out`, as attribute
// out_perm: returns that node (which becomes the fused one), or kNoNode.
NodeId AbsorbOutTransposition(const Graph& graph, const Matcher& m, ValueId out,
                              ir::BlockId block, ir::Attributes& attrs) {
  const NodeId consumer = m.SoleConsumer(out);
  if (consumer == ir::kNoNode || graph.node(consumer).kind != OpKind::kPermute) return ir::kNoNode;
  const Node* p = nullptr;
  std::optional<std::vector<int64_t>> t = m.Transposition(graph.node(consumer).outputs[0], block, &p);
  if (!t || p != &graph.node(consumer)) return ir::kNoNode;
  attrs.SetInts("out_perm", *t);
  return consumer;
}

// Makes node `target` the fused node, keeping its place and its output value.
void Rewrite(Graph& graph, NodeId target, std::vector<ValueId> inputs, ir::Attributes attrs,
             std::string source_op) {
  Node& fused = graph.mutable_node(target);
  fused.kind = OpKind::kScaledDotProductAttention;
  fused.inputs = std::move(inputs);
  fused.attrs = std::move(attrs);
  fused.source_op = std::move(source_op);
}

// Fuses the attention ending in MatMul `id`, if it is one. Returns whether it fused.
bool FuseAt(Graph& graph, const Matcher& m, NodeId id) {
  const Node& out_mm = graph.node(id);
  if (out_mm.inputs.size() != 2 || !OnlyAttrs(out_mm, {})) return false;
  const ir::BlockId block = out_mm.block;
  const Node* softmax = m.Producer(out_mm.inputs[0], OpKind::kSoftmax, block, true);
  if (softmax == nullptr || softmax->attrs.GetInt("axis", 0) != -1 ||
      !OnlyAttrs(*softmax, {"axis", "safe"})) {
    return false;
  }
  const bool safe = softmax->attrs.GetBool("safe", false);
  ValueId x = softmax->inputs[0];
  // [Add mask]
  ValueId mask = ir::kNoValue;
  if (const Node* add = m.Producer(x, OpKind::kAdd, block, true);
      add != nullptr && add->inputs.size() == 2 && OnlyAttrs(*add, {})) {
    // The scores side is the one that continues the chain.
    auto continues = [&](ValueId v) {
      return m.Producer(v, OpKind::kMatMul, block, true) != nullptr ||
             m.Scaled(v, block, true).has_value();
    };
    if (continues(add->inputs[0])) {
      x = add->inputs[0];
      mask = add->inputs[1];
    } else if (continues(add->inputs[1])) {
      x = add->inputs[1];
      mask = add->inputs[0];
    } else {
      return false;
    }
  }
  // [Div|Mul s] on the scores
  ir::Attributes attrs;
  if (safe) attrs.SetBool("safe", true);
  ValueId scale = ir::kNoValue;
  if (std::optional<Matcher::Scaling> s = m.Scaled(x, block, true)) {
    x = s->x;
    scale = s->scale;
    attrs.SetString("scale_op", s->op);
  }
  const Node* scores = m.Producer(x, OpKind::kMatMul, block, true);
  if (scores == nullptr || scores->inputs.size() != 2 || !OnlyAttrs(*scores, {})) return false;
  ValueId q = scores->inputs[0];
  const std::optional<std::vector<int64_t>> kt = m.Transposition(scores->inputs[1], block);
  if (!kt || !((kt->at(0) == -2 && kt->at(1) == -1) || (kt->at(0) == -1 && kt->at(1) == -2))) {
    return false;
  }
  ValueId k = graph.node(graph.value(scores->inputs[1]).producer).inputs[0];
  // [Div|Mul s] on the query
  if (scale == ir::kNoValue) {
    if (std::optional<Matcher::Scaling> s = m.Scaled(q, block, false)) {
      q = s->x;
      scale = s->scale;
      attrs.SetString("scale_op", s->op);
      attrs.SetString("scale_on", "query");
    } else {
      attrs.SetFloat("scale", 1.0);
    }
  }
  std::vector<ValueId> inputs = {q, k, out_mm.inputs[1], mask, scale};
  // Transposed operands are read in place; the node that becomes the fused
  // one is the MatMul, or the transposition of its result.
  StripTranspositions(m, block, inputs, attrs);
  const NodeId out = AbsorbOutTransposition(graph, m, out_mm.outputs[0], block, attrs);
  while (inputs.size() > 3 && inputs.back() == ir::kNoValue) inputs.pop_back();
  Rewrite(graph, out != ir::kNoNode ? out : id, std::move(inputs), std::move(attrs), "");
  return true;
}

// A ScaledDotProductAttention the importer made (aten's) reads the
// transpositions of its operands and of its result as strides too.
bool AbsorbTranspositions(Graph& graph, const Matcher& m, NodeId id) {
  const Node& node = graph.node(id);
  if (node.attrs.Has("q_perm") || node.attrs.Has("k_perm") || node.attrs.Has("v_perm") ||
      node.attrs.Has("out_perm")) {
    return false;
  }
  ir::Attributes attrs = node.attrs;
  std::vector<ValueId> inputs = node.inputs;
  const bool stripped = StripTranspositions(m, node.block, inputs, attrs);
  const NodeId out = AbsorbOutTransposition(graph, m, node.outputs[0], node.block, attrs);
  if (!stripped && out == ir::kNoNode) return false;
  Rewrite(graph, out != ir::kNoNode ? out : id, std::move(inputs), std::move(attrs),
          node.source_op);
  return true;
}

class FuseAttentionPass : public Pass {
 public:
  std::string name() const override { return "fuse_attention"; }

  absl::StatusOr<bool> Run(Graph& graph) const override {
    bool changed = false;
    // One fusion per scan: the use counts change with each.
    for (bool again = true; again;) {
      again = false;
      const Matcher m(graph);
      for (size_t i = 0; i < graph.nodes().size(); ++i) {
        const OpKind kind = graph.node(i).kind;
        if (kind != OpKind::kMatMul && kind != OpKind::kScaledDotProductAttention) continue;
        if (m.uses(graph.node(i).outputs[0]) == 0) continue;  // dead already
        const NodeId id = static_cast<NodeId>(i);
        if (kind == OpKind::kMatMul ? FuseAt(graph, m, id) : AbsorbTranspositions(graph, m, id)) {
          changed = again = true;
          break;
        }
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseAttentionPass() { return std::make_unique<FuseAttentionPass>(); }

}  // namespace kiln::passes
