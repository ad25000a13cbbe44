// Structural checks on a graph. Blocks are walked recursively with the set of
// values visible at each point: graph inputs and earlier nodes' outputs of
// the enclosing blocks, the block's own parameters, and earlier outputs in the
// block itself.
#include "absl/strings/str_cat.h"
#include "engine/ir/graph.h"

namespace kiln::ir {
namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& g)
      : g_(g),
        num_values_(static_cast<ValueId>(g.values().size())),
        defined_(g.values().size(), false),
        seen_node_(g.nodes().size(), false),
        seen_block_(g.blocks().size(), false) {}

  absl::Status Run() {
    if (g_.blocks().empty() || g_.block(kMainBlock).owner != kNoNode) {
      return absl::InvalidArgumentError("graph has no main block");
    }
    for (ValueId v : g_.inputs()) {
      if (!InRange(v)) return absl::InvalidArgumentError("graph input id out of range");
      if (g_.value(v).producer != kNoNode) {
        return absl::InvalidArgumentError(
            absl::StrCat("graph input %", g_.value(v).name, " has a producer"));
      }
      defined_[v] = true;
    }
    seen_block_[kMainBlock] = true;
    if (absl::Status s = VerifyBlock(kMainBlock); !s.ok()) return s;
    for (size_t n = 0; n < seen_node_.size(); ++n) {
      if (!seen_node_[n]) {
        return absl::InvalidArgumentError(absl::StrCat("node ", n, " (",
                                                       OpName(g_.nodes()[n].kind),
                                                       ") is in no block"));
      }
    }
    for (size_t b = 0; b < seen_block_.size(); ++b) {
      if (!seen_block_[b]) {
        return absl::InvalidArgumentError(absl::StrCat("block ", b, " belongs to no node"));
      }
    }
    if (g_.outputs().size() != g_.output_names().size()) {
      return absl::InvalidArgumentError("graph output names do not match outputs");
    }
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      if (!Visible(g_.outputs()[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("graph output ", g_.output_names()[i], " is not defined"));
      }
    }
    return absl::OkStatus();
  }

 private:
  bool InRange(ValueId v) const { return v >= 0 && v < num_values_; }
  bool Visible(ValueId v) const { return InRange(v) && defined_[v]; }

  // Defines the block's values while it is walked and forgets them after, so
  // nothing defined inside a block is visible outside it.
  absl::Status VerifyBlock(BlockId b) {
    const Block& block = g_.block(b);
    std::vector<ValueId> scope;
    auto define = [&](ValueId v) {
      defined_[v] = true;
      scope.push_back(v);
    };
    absl::Status status = [&]() -> absl::Status {
      for (ValueId p : block.params) {
        if (!InRange(p) || defined_[p] || g_.value(p).producer != kNoNode) {
          return absl::InvalidArgumentError(absl::StrCat("block ", b, ": parameter is malformed"));
        }
        define(p);
      }
      for (NodeId id : block.nodes) {
        if (id < 0 || id >= static_cast<NodeId>(g_.nodes().size()) || seen_node_[id]) {
          return absl::InvalidArgumentError(
              absl::StrCat("block ", b, ": node id ", id, " is out of range or listed twice"));
        }
        seen_node_[id] = true;
        const Node& node = g_.node(id);
        const std::string where = absl::StrCat("node ", id, " (", OpName(node.kind), "): ");
        if (node.block != b) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, "says it is in block ", node.block, ", listed in block ", b));
        }
        if (absl::Status s = VerifyNode(id, where); !s.ok()) return s;
        for (BlockId sub : node.blocks) {
          if (sub <= 0 || sub >= static_cast<BlockId>(g_.blocks().size()) || seen_block_[sub] ||
              g_.block(sub).owner != id) {
            return absl::InvalidArgumentError(absl::StrCat(where, "block ", sub, " is malformed"));
          }
          seen_block_[sub] = true;
          if (absl::Status s = VerifyBlock(sub); !s.ok()) return s;
        }
        for (ValueId v : node.outputs) {
          if (!InRange(v) || defined_[v] || g_.value(v).producer != id) {
            return absl::InvalidArgumentError(absl::StrCat(where, "output value is malformed"));
          }
          define(v);
        }
      }
      for (size_t i = 0; i < block.results.size(); ++i) {
        if (!Visible(block.results[i])) {
          return absl::InvalidArgumentError(
              absl::StrCat("block ", b, " (of node ", block.owner, "): result ", i,
                           " is not defined in the block or around it"));
        }
      }
      return absl::OkStatus();
    }();
    // The main block's values stay visible for the graph outputs.
    if (b != kMainBlock) {
      for (ValueId v : scope) defined_[v] = false;
    }
    return status;
  }

  absl::Status VerifyNode(NodeId id, const std::string& where) {
    const Node& node = g_.node(id);
    const OpArity arity = GetOpArity(node.kind);
    const int ins = static_cast<int>(node.inputs.size());
    if (ins < arity.min_inputs || (arity.max_inputs >= 0 && ins > arity.max_inputs)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "has ", ins, " inputs, expected ", arity.min_inputs, "..",
                       arity.max_inputs < 0 ? std::string("n") : absl::StrCat(arity.max_inputs)));
    }
    if (arity.num_outputs >= 0 && static_cast<int>(node.outputs.size()) != arity.num_outputs) {
      return absl::InvalidArgumentError(absl::StrCat(where, "has ", node.outputs.size(),
                                                     " outputs, expected ", arity.num_outputs));
    }
    for (int i = 0; i < ins; ++i) {
      ValueId v = node.inputs[i];
      if (v == kNoValue) {
        if (i < arity.min_inputs) {
          return absl::InvalidArgumentError(absl::StrCat(where, "required input ", i, " is absent"));
        }
        continue;
      }
      if (!Visible(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "input ", i, " is used before it is defined or outside its block"));
      }
    }
    if (node.kind == OpKind::kConstant && node.attrs.GetTensor("value") == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, "has no tensor 'value'"));
    }
    return VerifyBlockShape(node, where);
  }

  // If: two blocks without parameters, each yielding one value per output.
  // Loop(max_trips, cond, carried...): one body with parameters (iteration,
  // carried...) yielding (cond, carried...); one output per carried value.
  absl::Status VerifyBlockShape(const Node& node, const std::string& where) {
    auto kind_of = [&](size_t i) { return g_.value(node.inputs[i]).kind; };
    if (node.kind == OpKind::kIf) {
      if (node.blocks.size() != 2) {
        return absl::InvalidArgumentError(absl::StrCat(where, "has ", node.blocks.size(),
                                                       " blocks, expected 2"));
      }
      const ValueKind cond = kind_of(0);
      if (cond != ValueKind::kBool && cond != ValueKind::kInt && cond != ValueKind::kFloat &&
          cond != ValueKind::kTensor) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "condition is a ", ValueKindName(cond)));
      }
      for (BlockId b : node.blocks) {
        const Block& block = g_.block(b);
        if (!block.params.empty() || block.results.size() != node.outputs.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, "blocks take no parameters and yield one value per output (",
              node.outputs.size(), "), got ", block.params.size(), " and ", block.results.size()));
        }
      }
      return absl::OkStatus();
    }
    if (node.kind == OpKind::kLoop) {
      const size_t carried = node.inputs.size() - 2;
      if (node.blocks.size() != 1 || node.outputs.size() != carried) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "expected 1 body and ", carried, " outputs, got ",
                         node.blocks.size(), " and ", node.outputs.size()));
      }
      const Block& body = g_.block(node.blocks[0]);
      if (body.params.size() != carried + 1 || body.results.size() != carried + 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "body takes (iteration, ", carried, " carried) and yields (condition, ",
            carried, " carried), got ", body.params.size(), " parameters and ",
            body.results.size(), " results"));
      }
      if (node.inputs[0] != kNoValue && kind_of(0) != ValueKind::kInt) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "trip count is a ", ValueKindName(kind_of(0)), ", expected int"));
      }
      return absl::OkStatus();
    }
    if (!node.blocks.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "has blocks but is no control flow"));
    }
    return absl::OkStatus();
  }

  const Graph& g_;
  const ValueId num_values_;
  std::vector<bool> defined_;
  std::vector<bool> seen_node_;
  std::vector<bool> seen_block_;
};

}  // namespace

absl::Status VerifyGraph(const Graph& graph) { return Verifier(graph).Run(); }

}  // namespace kiln::ir
