// Resolves the uses of tensor lists whose elements are known when the graph
// compiles: a ListConstruct of tensors, which is what a List[Tensor] input
// becomes once a request gives its length (runtime::ExpandListInputs). The
// importer already does this for lists a model builds from known tensors;
// without this pass a list input kept everything after it on the dynamic path.
//
//   a kernel op taking the list      takes its elements in its place (what the
//                                    dynamic path does when it runs: cat(xs))
//   ListLen(list)                    a constant int
//   ListGetItem(list, constant k)    element k
//   ListUnpack(list)                 the elements
//
// Other uses (a loop's ListGetItem at a run-time index, ListAppend, which
// makes a new list) are left as they are. A list that leaves its block (a
// block result, a graph output), feeds an If or a Loop, or a Fallback node
// (which rebuilds the list libtorch's schema wants) is left alone entirely.
#include <algorithm>

#include "engine/kernels/kernel.h"
#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

struct Use {
  ir::NodeId node;
  size_t operand;
};

// Whether `kind` runs through a kernel that gets tensor-list operands spread
// into their elements (not the executor's own ops, not the fallback).
bool IsKernelOp(ir::OpKind kind) {
  return !kernels::IsNonTensorOp(kind) && kind != ir::OpKind::kConstant;
}

// A constant int at the top of the main block, so it is defined before every use.
ir::ValueId IntConstantAtTop(ir::Graph& g, int64_t value) {
  Tensor t = Tensor::Zeros(DType::kInt64, {});
  *t.data<int64_t>() = value;
  g.SetInsertionBlock(ir::kMainBlock);
  const ir::ValueId id = g.AddConstant(std::move(t), "", ir::ValueKind::kInt);
  std::vector<ir::NodeId>& nodes = g.mutable_block(ir::kMainBlock).nodes;
  nodes.insert(nodes.begin(), nodes.back());
  nodes.pop_back();
  return id;
}

class ResolveListsPass : public Pass {
 public:
  std::string name() const override { return "resolve_lists"; }

  absl::StatusOr<bool> Run(ir::Graph& graph) const override {
    // Values that leave their block: block results and graph outputs.
    std::vector<bool> escapes(graph.values().size(), false);
    for (const ir::Block& b : graph.blocks()) {
      for (ir::ValueId v : b.results) escapes[v] = true;
    }
    for (ir::ValueId v : graph.outputs()) escapes[v] = true;
    std::vector<std::vector<Use>> uses(graph.values().size());
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      const ir::Node& node = graph.nodes()[n];
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        if (node.inputs[k] != ir::kNoValue) {
          uses[node.inputs[k]].push_back({static_cast<ir::NodeId>(n), k});
        }
      }
    }

    bool changed = false;
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      const ir::Node& construct = graph.nodes()[n];
      if (construct.kind != ir::OpKind::kListConstruct) continue;
      const ir::ValueId list = construct.outputs[0];
      if (graph.value(list).kind != ir::ValueKind::kTensorList || escapes[list]) continue;
      const std::vector<ir::ValueId> elements = construct.inputs;
      const bool leaves = std::any_of(uses[list].begin(), uses[list].end(), [&](const Use& u) {
        const ir::OpKind kind = graph.node(u.node).kind;
        return kind == ir::OpKind::kIf || kind == ir::OpKind::kLoop ||
               kind == ir::OpKind::kFallback;
      });
      if (leaves) continue;
      // Kernel uses last, highest operand first: splicing shifts later operands.
      std::vector<Use> list_uses = uses[list];
      std::sort(list_uses.begin(), list_uses.end(), [](const Use& a, const Use& b) {
        return a.node != b.node ? a.node < b.node : a.operand > b.operand;
      });
      for (const Use& u : list_uses) {
        ir::Node& node = graph.mutable_node(u.node);
        if (IsKernelOp(node.kind)) {
          // An empty list stays a list: the op (cat of nothing) fails only if it runs.
          if (elements.empty()) continue;
          node.inputs.erase(node.inputs.begin() + static_cast<std::ptrdiff_t>(u.operand));
          node.inputs.insert(node.inputs.begin() + static_cast<std::ptrdiff_t>(u.operand),
                             elements.begin(), elements.end());
          changed = true;
        } else if (node.kind == ir::OpKind::kListLen && !escapes[node.outputs[0]]) {
          const ir::ValueId out = node.outputs[0];
          graph.ReplaceAllUses(out, IntConstantAtTop(graph, static_cast<int64_t>(elements.size())));
          changed = true;
        } else if (node.kind == ir::OpKind::kListGetItem && !escapes[node.outputs[0]]) {
          const Tensor* index = graph.ConstantValue(node.inputs[1]);
          if (index == nullptr || index->num_elements() != 1 || index->dtype() != DType::kInt64) {
            continue;  // a run-time index (a loop over the list)
          }
          int64_t k = *index->data<int64_t>();
          const int64_t size = static_cast<int64_t>(elements.size());
          if (k < 0) k += size;
          if (k < 0 || k >= size) continue;  // out of range: the run reports it
          graph.ReplaceAllUses(node.outputs[0], elements[static_cast<size_t>(k)]);
          changed = true;
        } else if (node.kind == ir::OpKind::kListUnpack &&
                   node.outputs.size() == elements.size()) {
          const std::vector<ir::ValueId> outs = node.outputs;
          bool escaping = false;
          for (ir::ValueId o : outs) escaping = escaping || escapes[o];
          if (escaping) continue;
          for (size_t i = 0; i < outs.size(); ++i) graph.ReplaceAllUses(outs[i], elements[i]);
          changed = true;
        }
      }
    }
    if (changed) graph = graph.Compacted();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeResolveListsPass() { return std::make_unique<ResolveListsPass>(); }

}  // namespace kiln::passes
