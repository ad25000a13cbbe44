// Text form of a graph, one line per node:
//   %out : FP32[1, 64, 112, 112] = Conv(%x, %w, %b) {groups=1, stride=[2, 2]}  # aten::_convolution
// with a node's blocks indented below it:
//   %y : ?[?] = If(%c)
//     then():
//       %a : ?[?] = Relu(%x)
//       -> (%a)
//     else():
//       -> (%x)
// and the same graph as Graphviz text.
#include <cstdlib>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/ir/fallback_twin.h"
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

// The value of an int/float/bool (list) constant: "-1", "[2, 3]", "true".
std::string ScalarValueString(const Tensor& t) {
  std::vector<std::string> items;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (t.dtype()) {
      case DType::kInt64: items.push_back(absl::StrCat(t.data<int64_t>()[i])); break;
      case DType::kF64: items.push_back(absl::StrCat(t.data<double>()[i])); break;
      case DType::kBool: items.push_back(t.data<bool>()[i] ? "true" : "false"); break;
      default: return AttrPrinter{}(t);
    }
  }
  if (t.rank() == 0 && items.size() == 1) return items[0];
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::string Attrs(const Graph& g, const Node& n) {
  if (n.kind == OpKind::kConstant && n.outputs.size() == 1) {
    const Value& v = g.value(n.outputs[0]);
    const Tensor* t = n.attrs.GetTensor("value");
    if (t != nullptr && (IsScalarKind(v.kind) || IsScalarListKind(v.kind))) {
      return absl::StrCat(" {value=", ScalarValueString(*t), "}");
    }
  }
  std::string out = " {";
  bool first = true;
  for (const auto& [name, value] : n.attrs.map()) {
    if (IsFallbackTwinAttr(name)) continue;  // the libtorch twin: noise in a listing
    absl::StrAppend(&out, first ? "" : ", ", name, "=", std::visit(AttrPrinter{}, value));
    first = false;
  }
  return first ? "" : out + "}";
}

const char* BlockLabel(const Node& n, size_t i) {
  if (n.kind == OpKind::kIf) return i == 0 ? "then" : "else";
  if (n.kind == OpKind::kLoop) return "body";
  return "block";
}

void PrintBlock(const Graph& g, BlockId b, int depth, std::ostringstream& os) {
  const std::string indent(2 * depth, ' ');
  for (NodeId id : g.block(b).nodes) {
    const Node& n = g.node(id);
    os << indent;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      os << (i ? ", " : "") << Ref(g, n.outputs[i]) << " : " << ValueTypeString(g.value(n.outputs[i]));
    }
    os << (n.outputs.empty() ? "" : " = ") << OpName(n.kind) << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << Ref(g, n.inputs[i]);
    os << ")" << Attrs(g, n);
    if (!n.source_op.empty()) os << "  # " << n.source_op;
    os << "\n";
    for (size_t i = 0; i < n.blocks.size(); ++i) {
      const Block& sub = g.block(n.blocks[i]);
      os << indent << "  " << BlockLabel(n, i) << "(";
      for (size_t p = 0; p < sub.params.size(); ++p) {
        os << (p ? ", " : "") << Ref(g, sub.params[p]) << " : "
           << ValueTypeString(g.value(sub.params[p]));
      }
      os << "):\n";
      PrintBlock(g, n.blocks[i], depth + 2, os);
      os << indent << "    -> (";
      for (size_t r = 0; r < sub.results.size(); ++r) {
        os << (r ? ", " : "") << Ref(g, sub.results[r]);
      }
      os << ")\n";
    }
  }
}

// Graphviz identifiers and labels: quoted, with quotes and backslashes escaped.
std::string DotQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

void DotBlock(const Graph& g, BlockId b, int depth, std::ostringstream& os) {
  const std::string indent(2 * depth, ' ');
  for (NodeId id : g.block(b).nodes) {
    const Node& n = g.node(id);
    std::string label = OpName(n.kind);
    if (n.kind == OpKind::kConstant) {
      label = absl::StrCat("Constant ", ValueTypeString(g.value(n.outputs[0])));
    } else if (!n.source_op.empty()) {
      absl::StrAppend(&label, "\\n", n.source_op);
    }
    const bool fallback = n.kind == OpKind::kFallback;
    os << indent << "n" << id << " [label=" << DotQuote(label)
       << (n.kind == OpKind::kConstant ? ", shape=note, fontsize=9"
           : fallback                  ? ", style=filled, fillcolor=\"#f4b183\""
                                       : "")
       << "];\n";
    for (size_t i = 0; i < n.blocks.size(); ++i) {
      const Block& sub = g.block(n.blocks[i]);
      os << indent << "subgraph cluster_b" << n.blocks[i] << " {\n"
         << indent << "  label=" << DotQuote(absl::StrCat(OpName(n.kind), " ", BlockLabel(n, i)))
         << "; style=dashed;\n";
      for (ValueId p : sub.params) {
        os << indent << "  v" << p << " [label=" << DotQuote("%" + g.value(p).name)
           << ", shape=ellipse];\n";
      }
      DotBlock(g, n.blocks[i], depth + 1, os);
      os << indent << "  r" << n.blocks[i] << " [label=\"yield\", shape=point];\n";
      os << indent << "}\n";
    }
  }
}

}  // namespace

std::string ValueTypeString(const Value& v) {
  switch (v.kind) {
    case ValueKind::kTensor:
      return v.optional ? v.type.ToString() + "?" : v.type.ToString();
    case ValueKind::kIntList:
    case ValueKind::kFloatList:
    case ValueKind::kBoolList: {
      std::string base = ValueKindName(v.kind);
      base.resize(base.size() - 2);
      if (v.type.dims && v.type.dims->size() == 1 && (*v.type.dims)[0] >= 0) {
        return absl::StrCat(base, "[", (*v.type.dims)[0], "]");
      }
      return base + "[]";
    }
    default:
      return ValueKindName(v.kind);
  }
}

std::string DefaultValueString(const Value& v) {
  if (!v.default_value.has_value() || v.default_value->num_elements() != 1) return "";
  const Tensor& t = *v.default_value;
  switch (t.dtype()) {
    case DType::kBool: return *t.data<bool>() ? "True" : "False";
    case DType::kInt64: return absl::StrCat(*t.data<int64_t>());
    case DType::kF64: {
      const double x = *t.data<double>();
      // The shortest form that reads back the same, with Python's ".0" on whole numbers.
      std::string s = absl::StrFormat("%.17g", x);
      for (int digits = 1; digits < 17; ++digits) {
        std::string shorter = absl::StrFormat("%.*g", digits, x);
        if (std::strtod(shorter.c_str(), nullptr) == x) {
          s = shorter;
          break;
        }
      }
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    default: return "";
  }
}

std::string PrintGraph(const Graph& g) {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    ValueId v = g.inputs()[i];
    os << (i ? ", " : "") << Ref(g, v) << " : " << ValueTypeString(g.value(v));
    if (const std::string d = DefaultValueString(g.value(v)); !d.empty()) os << " = " << d;
  }
  os << ") {\n";
  PrintBlock(g, kMainBlock, 1, os);
  os << "  return (";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    os << (i ? ", " : "") << g.output_names()[i] << "=" << Ref(g, g.outputs()[i]);
  }
  os << ")\n}\n";
  return os.str();
}

std::string PrintGraphviz(const Graph& g) {
  std::ostringstream os;
  os << "digraph kiln {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n";
  for (ValueId v : g.inputs()) {
    os << "  v" << v << " [label="
       << DotQuote(absl::StrCat("%", g.value(v).name, "\\n", ValueTypeString(g.value(v))))
       << ", shape=ellipse];\n";
  }
  DotBlock(g, kMainBlock, 1, os);
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    os << "  out" << i << " [label=" << DotQuote(g.output_names()[i]) << ", shape=ellipse];\n";
  }
  // Where each value comes from, as a dot node id.
  auto source = [&](ValueId v) -> std::string {
    const NodeId p = g.value(v).producer;
    return p == kNoNode ? absl::StrCat("v", v) : absl::StrCat("n", p);
  };
  auto edge_label = [&](ValueId v) {
    return DotQuote(ValueTypeString(g.value(v)));
  };
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      os << "  " << source(v) << " -> n" << id;
      if (g.node(static_cast<NodeId>(id)).kind != OpKind::kConstant) {
        os << " [label=" << edge_label(v) << ", fontsize=8]";
      }
      os << ";\n";
    }
  }
  for (size_t b = 1; b < g.blocks().size(); ++b) {
    for (ValueId v : g.blocks()[b].results) {
      os << "  " << source(v) << " -> r" << b << " [style=dotted];\n";
    }
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    os << "  " << source(g.outputs()[i]) << " -> out" << i << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace kiln::ir
