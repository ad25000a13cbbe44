#include "absl/strings/str_cat.h"
#include "engine/ir/graph.h"

namespace kiln::ir {

absl::Status VerifyGraph(const Graph& g) {
  const ValueId num_values = static_cast<ValueId>(g.values().size());
  std::vector<bool> defined(g.values().size(), false);
  for (ValueId v : g.inputs()) {
    if (v < 0 || v >= num_values) return absl::InvalidArgumentError("graph input id out of range");
    if (g.value(v).producer != kNoNode) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph input %", g.value(v).name, " has a producer"));
    }
    defined[v] = true;
  }
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const Node& node = g.nodes()[n];
    auto where = [&] { return absl::StrCat("node ", n, " (", OpName(node.kind), "): "); };
    const OpArity arity = GetOpArity(node.kind);
    const int ins = static_cast<int>(node.inputs.size());
    if (ins < arity.min_inputs || (arity.max_inputs >= 0 && ins > arity.max_inputs)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), "has ", ins, " inputs, expected ", arity.min_inputs, "..",
                       arity.max_inputs < 0 ? std::string("n") : absl::StrCat(arity.max_inputs)));
    }
    if (static_cast<int>(node.outputs.size()) != arity.num_outputs) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "has ", node.outputs.size(),
                                                     " outputs, expected ", arity.num_outputs));
    }
    for (int i = 0; i < ins; ++i) {
      ValueId v = node.inputs[i];
      if (v == kNoValue) {
        if (i < arity.min_inputs) {
          return absl::InvalidArgumentError(absl::StrCat(where(), "required input ", i, " is absent"));
        }
        continue;
      }
      if (v < 0 || v >= num_values || !defined[v]) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), "input ", i, " is used before it is defined"));
      }
    }
    for (ValueId v : node.outputs) {
      if (v < 0 || v >= num_values || defined[v] || g.value(v).producer != static_cast<NodeId>(n)) {
        return absl::InvalidArgumentError(absl::StrCat(where(), "output value is malformed"));
      }
      defined[v] = true;
    }
    if (node.kind == OpKind::kConstant && node.attrs.GetTensor("value") == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "has no tensor 'value'"));
    }
  }
  if (g.outputs().size() != g.output_names().size()) {
    return absl::InvalidArgumentError("graph output names do not match outputs");
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    ValueId v = g.outputs()[i];
    if (v < 0 || v >= num_values || !defined[v]) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output ", g.output_names()[i], " is not defined"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::ir
