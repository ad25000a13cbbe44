// Text form of a graph, one line per node:
//   %out : FP32[1, 64, 112, 112] = Conv(%x, %w, %b) {groups=1, stride=[2, 2]}  # aten::_convolution
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/ir/graph.h"

namespace kiln::ir {
namespace {

struct AttrPrinter {
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(int64_t v) const { return absl::StrCat(v); }
  std::string operator()(double v) const { return absl::StrCat(v); }
  std::string operator()(const std::string& v) const { return absl::StrCat("\"", v, "\""); }
  std::string operator()(const std::vector<int64_t>& v) const {
    return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
  }
  std::string operator()(const std::vector<double>& v) const {
    return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
  }
  std::string operator()(const Tensor& t) const {
    return absl::StrCat("tensor<", DTypeName(t.dtype()), DimsToString(t.dims()), ">");
  }
};

std::string Ref(const Graph& g, ValueId v) {
  return v == kNoValue ? "None" : absl::StrCat("%", g.value(v).name);
}

}  // namespace

std::string PrintGraph(const Graph& g) {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    ValueId v = g.inputs()[i];
    os << (i ? ", " : "") << Ref(g, v) << " : " << g.value(v).type.ToString();
  }
  os << ") {\n";
  for (const Node& n : g.nodes()) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      os << (i ? ", " : "") << Ref(g, n.outputs[i]) << " : "
         << g.value(n.outputs[i]).type.ToString();
    }
    os << " = " << OpName(n.kind) << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << Ref(g, n.inputs[i]);
    os << ")";
    if (!n.attrs.map().empty()) {
      os << " {";
      bool first = true;
      for (const auto& [name, value] : n.attrs.map()) {
        os << (first ? "" : ", ") << name << "=" << std::visit(AttrPrinter{}, value);
        first = false;
      }
      os << "}";
    }
    if (!n.source_op.empty()) os << "  # " << n.source_op;
    os << "\n";
  }
  os << "  return (";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    os << (i ? ", " : "") << g.output_names()[i] << "=" << Ref(g, g.outputs()[i]);
  }
  os << ")\n}\n";
  return os.str();
}

}  // namespace kiln::ir
