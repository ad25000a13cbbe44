#include "engine/ir/graph.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ir {
namespace {

// constexpr, so the table is usable from other files' static initialisers.
struct OpInfo {
  OpKind kind;
  const char* name;
  OpArity arity;
};

constexpr OpInfo kOps[] = {
#define OP(name, str, min_in, max_in, outs) {OpKind::k##name, str, {min_in, max_in, outs}},
#include "engine/ir/op_kinds.def"
#undef OP
};

bool TensorsEqual(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() &&
         (a.byte_size() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0);
}

}  // namespace

const std::string& OpName(OpKind kind) {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const OpInfo& op : kOps) v->emplace_back(op.name);
    return v;
  }();
  return (*names)[static_cast<size_t>(kind)];
}

std::optional<OpKind> OpKindFromName(std::string_view name) {
  for (const OpInfo& op : kOps) {
    if (name == op.name) return op.kind;
  }
  return std::nullopt;
}

OpArity GetOpArity(OpKind kind) { return kOps[static_cast<size_t>(kind)].arity; }

const std::vector<OpKind>& AllOpKinds() {
  static const auto* kinds = [] {
    auto* v = new std::vector<OpKind>();
    for (const OpInfo& op : kOps) v->push_back(op.kind);
    return v;
  }();
  return *kinds;
}

bool TensorType::IsComplete() const {
  if (dtype == DType::kUnknown || !dims) return false;
  for (int64_t d : *dims) {
    if (d < 0) return false;
  }
  return true;
}

std::string TensorType::ToString() const {
  std::string dt = dtype == DType::kUnknown ? "?" : std::string(DTypeName(dtype));
  if (!dims) return dt + "[?]";
  return absl::StrCat(dt, DimsToString(*dims));
}

// ---------------------------------------------------------------- Attributes

bool Attributes::GetBool(const std::string& name, bool def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* b = std::get_if<bool>(&it->second)) return *b;
  if (auto* i = std::get_if<int64_t>(&it->second)) return *i != 0;
  return def;
}

int64_t Attributes::GetInt(const std::string& name, int64_t def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* i = std::get_if<int64_t>(&it->second)) return *i;
  if (auto* b = std::get_if<bool>(&it->second)) return *b ? 1 : 0;
  return def;
}

double Attributes::GetFloat(const std::string& name, double def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* f = std::get_if<double>(&it->second)) return *f;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return def;
}

std::string Attributes::GetString(const std::string& name, std::string def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* s = std::get_if<std::string>(&it->second)) return *s;
  return def;
}

std::vector<int64_t> Attributes::GetInts(const std::string& name,
                                         std::vector<int64_t> def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (auto* i = std::get_if<int64_t>(&it->second)) return {*i};
  return def;
}

std::vector<double> Attributes::GetFloats(const std::string& name,
                                          std::vector<double> def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* v = std::get_if<std::vector<double>>(&it->second)) return *v;
  return def;
}

const Tensor* Attributes::GetTensor(const std::string& name) const {
  auto it = map_.find(name);
  if (it == map_.end()) return nullptr;
  return std::get_if<Tensor>(&it->second);
}

bool Attributes::operator==(const Attributes& o) const {
  if (map_.size() != o.map_.size()) return false;
  for (auto a = map_.begin(), b = o.map_.begin(); a != map_.end(); ++a, ++b) {
    if (a->first != b->first || a->second.index() != b->second.index()) return false;
    if (auto* ta = std::get_if<Tensor>(&a->second)) {
      if (!TensorsEqual(*ta, std::get<Tensor>(b->second))) return false;
    } else if (!std::visit(
                   [&](const auto& x) {
                     using T = std::decay_t<decltype(x)>;
                     if constexpr (std::is_same_v<T, Tensor>) {
                       return false;
                     } else {
                       return x == std::get<T>(b->second);
                     }
                   },
                   a->second)) {
      return false;
    }
  }
  return true;
}

// --------------------------------------------------------------------- Graph

ValueId Graph::NewValue(std::string name, TensorType type, NodeId producer) {
  ValueId id = static_cast<ValueId>(values_.size());
  if (name.empty()) name = absl::StrCat(id);
  values_.push_back(Value{std::move(name), std::move(type), producer});
  return id;
}

ValueId Graph::AddInput(std::string name, TensorType type) {
  ValueId id = NewValue(std::move(name), std::move(type), kNoNode);
  inputs_.push_back(id);
  return id;
}

ValueId Graph::AddConstant(Tensor value, std::string name) {
  TensorType type{value.dtype(), value.dims()};
  Attributes attrs;
  attrs.SetTensor("value", std::move(value));
  std::vector<std::string> names;
  if (!name.empty()) names.push_back(std::move(name));
  NodeId n = AddNode(OpKind::kConstant, {}, std::move(attrs), "", std::move(names));
  ValueId out = nodes_[n].outputs[0];
  values_[out].type = std::move(type);
  return out;
}

NodeId Graph::AddNode(OpKind kind, std::vector<ValueId> inputs, Attributes attrs,
                      std::string source_op, std::vector<std::string> output_names) {
  NodeId id = static_cast<NodeId>(nodes_.size());
  Node node{kind, std::move(inputs), {}, std::move(attrs), std::move(source_op)};
  int num_outputs = GetOpArity(kind).num_outputs;
  for (int i = 0; i < num_outputs; ++i) {
    std::string name = i < static_cast<int>(output_names.size()) ? output_names[i] : "";
    node.outputs.push_back(NewValue(std::move(name), TensorType{}, id));
  }
  nodes_.push_back(std::move(node));
  return id;
}

void Graph::AddOutput(ValueId value, std::string name) {
  outputs_.push_back(value);
  output_names_.push_back(std::move(name));
}

const Tensor* Graph::ConstantValue(ValueId id) const {
  if (id < 0 || id >= static_cast<ValueId>(values_.size())) return nullptr;
  NodeId p = values_[id].producer;
  if (p == kNoNode || nodes_[p].kind != OpKind::kConstant) return nullptr;
  return nodes_[p].attrs.GetTensor("value");
}

void Graph::ReplaceAllUses(ValueId from, ValueId to) {
  for (Node& n : nodes_) {
    for (ValueId& v : n.inputs) {
      if (v == from) v = to;
    }
  }
  for (ValueId& v : outputs_) {
    if (v == from) v = to;
  }
}

Graph Graph::Compacted() const {
  // Mark live nodes backwards from the graph outputs.
  std::vector<bool> live_value(values_.size(), false);
  std::vector<bool> live_node(nodes_.size(), false);
  for (ValueId v : outputs_) live_value[v] = true;
  for (int n = static_cast<int>(nodes_.size()) - 1; n >= 0; --n) {
    for (ValueId v : nodes_[n].outputs) {
      if (live_value[v]) live_node[n] = true;
    }
    if (!live_node[n]) continue;
    for (ValueId v : nodes_[n].inputs) {
      if (v != kNoValue) live_value[v] = true;
    }
  }
  Graph out;
  std::vector<ValueId> remap(values_.size(), kNoValue);
  for (ValueId v : inputs_) remap[v] = out.AddInput(values_[v].name, values_[v].type);
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!live_node[n]) continue;
    const Node& node = nodes_[n];
    std::vector<ValueId> ins;
    for (ValueId v : node.inputs) ins.push_back(v == kNoValue ? kNoValue : remap[v]);
    std::vector<std::string> names;
    for (ValueId v : node.outputs) names.push_back(values_[v].name);
    NodeId m = out.AddNode(node.kind, std::move(ins), node.attrs, node.source_op, names);
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      ValueId nv = out.nodes_[m].outputs[i];
      out.values_[nv].type = values_[node.outputs[i]].type;
      remap[node.outputs[i]] = nv;
    }
  }
  for (size_t i = 0; i < outputs_.size(); ++i) out.AddOutput(remap[outputs_[i]], output_names_[i]);
  return out;
}

size_t Graph::ConstantBytes() const {
  size_t bytes = 0;
  for (const Node& n : nodes_) {
    if (n.kind == OpKind::kConstant) bytes += n.attrs.GetTensor("value")->byte_size();
  }
  return bytes;
}

bool StructurallyEqual(const Graph& a, const Graph& b) {
  if (a.inputs() != b.inputs() || a.outputs() != b.outputs() ||
      a.output_names() != b.output_names() || a.nodes().size() != b.nodes().size() ||
      a.values().size() != b.values().size()) {
    return false;
  }
  for (size_t i = 0; i < a.values().size(); ++i) {
    const Value& x = a.values()[i];
    const Value& y = b.values()[i];
    if (x.name != y.name || !(x.type == y.type) || x.producer != y.producer) return false;
  }
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    if (x.kind != y.kind || x.inputs != y.inputs || x.outputs != y.outputs ||
        x.source_op != y.source_op || !(x.attrs == y.attrs)) {
      return false;
    }
  }
  return true;
}

}  // namespace kiln::ir
