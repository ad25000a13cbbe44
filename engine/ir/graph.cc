#include "engine/ir/graph.h"

#include <cstring>
#include <functional>

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
  // The same storage is equal without reading it: a graph read back from its
  // serialized form shares the constants, and reading them all would bring
  // every mapped weight back into memory (engine/common/mapped_file.h).
  return a.dtype() == b.dtype() && a.dims() == b.dims() &&
         (a.byte_size() == 0 || a.raw_data() == b.raw_data() ||
          std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0);
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

const std::string& ValueKindName(ValueKind kind) {
  static const auto* names = new std::vector<std::string>{
      "Tensor", "int", "float", "bool", "int[]", "float[]", "bool[]", "Tensor[]", "None"};
  return (*names)[static_cast<size_t>(kind)];
}

bool IsScalarKind(ValueKind kind) {
  return kind == ValueKind::kInt || kind == ValueKind::kFloat || kind == ValueKind::kBool;
}

bool IsScalarListKind(ValueKind kind) {
  return kind == ValueKind::kIntList || kind == ValueKind::kFloatList ||
         kind == ValueKind::kBoolList;
}

DType ScalarKindDType(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInt:
    case ValueKind::kIntList:
      return DType::kInt64;
    case ValueKind::kFloat:
    case ValueKind::kFloatList:
      return DType::kF64;
    case ValueKind::kBool:
    case ValueKind::kBoolList:
      return DType::kBool;
    default:
      return DType::kUnknown;
  }
}

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

const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kPlain:
      return "plain";
    case Layout::kNHWC:
      return "nhwc";
  }
  return "?";
}

std::string TensorType::ToString() const {
  std::string dt = dtype == DType::kUnknown ? "?" : std::string(DTypeName(dtype));
  if (!dims) return dt + "[?]";
  std::string s = absl::StrCat(dt, DimsToString(*dims));
  if (layout != Layout::kPlain) absl::StrAppend(&s, "{", LayoutName(layout), "}");
  return s;
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

Graph::Graph() { blocks_.push_back(Block{}); }

ValueId Graph::NewValue(std::string name, TensorType type, NodeId producer) {
  ValueId id = static_cast<ValueId>(values_.size());
  if (name.empty()) name = absl::StrCat(id);
  values_.push_back(Value{std::move(name), std::move(type), producer});
  return id;
}

ValueId Graph::AddInput(std::string name, TensorType type, ValueKind kind) {
  ValueId id = NewValue(std::move(name), std::move(type), kNoNode);
  values_[id].kind = kind;
  inputs_.push_back(id);
  return id;
}

ValueId Graph::AddConstant(Tensor value, std::string name, ValueKind kind) {
  TensorType type{value.dtype(), value.dims()};
  Attributes attrs;
  attrs.SetTensor("value", std::move(value));
  std::vector<std::string> names;
  if (!name.empty()) names.push_back(std::move(name));
  NodeId n = AddNode(OpKind::kConstant, {}, std::move(attrs), "", std::move(names));
  ValueId out = nodes_[n].outputs[0];
  values_[out].type = std::move(type);
  values_[out].kind = kind;
  return out;
}

NodeId Graph::AddNode(OpKind kind, std::vector<ValueId> inputs, Attributes attrs,
                      std::string source_op, std::vector<std::string> output_names) {
  int num_outputs = GetOpArity(kind).num_outputs;
  if (num_outputs < 0) num_outputs = static_cast<int>(output_names.size());
  return AddNodeWithOutputs(kind, std::move(inputs), num_outputs, std::move(attrs),
                            std::move(source_op), std::move(output_names));
}

NodeId Graph::AddNodeWithOutputs(OpKind kind, std::vector<ValueId> inputs, int num_outputs,
                                 Attributes attrs, std::string source_op,
                                 std::vector<std::string> output_names) {
  NodeId id = static_cast<NodeId>(nodes_.size());
  Node node{kind, std::move(inputs), {}, std::move(attrs), std::move(source_op)};
  node.block = insertion_block_;
  for (int i = 0; i < num_outputs; ++i) {
    std::string name = i < static_cast<int>(output_names.size()) ? output_names[i] : "";
    node.outputs.push_back(NewValue(std::move(name), TensorType{}, id));
  }
  nodes_.push_back(std::move(node));
  blocks_[insertion_block_].nodes.push_back(id);
  return id;
}

void Graph::AddOutput(ValueId value, std::string name) {
  outputs_.push_back(value);
  output_names_.push_back(std::move(name));
}

BlockId Graph::AddBlock(NodeId node) {
  BlockId id = static_cast<BlockId>(blocks_.size());
  Block block;
  block.owner = node;
  blocks_.push_back(std::move(block));
  nodes_[node].blocks.push_back(id);
  return id;
}

ValueId Graph::AddBlockParam(BlockId block, std::string name, TensorType type, ValueKind kind) {
  ValueId id = NewValue(std::move(name), std::move(type), kNoNode);
  values_[id].kind = kind;
  blocks_[block].params.push_back(id);
  return id;
}

void Graph::SetBlockResults(BlockId block, std::vector<ValueId> results) {
  blocks_[block].results = std::move(results);
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
  for (Block& b : blocks_) {
    for (ValueId& v : b.results) {
      if (v == from) v = to;
    }
  }
  for (ValueId& v : outputs_) {
    if (v == from) v = to;
  }
}

namespace {

// Liveness for Compacted(): a backward walk over each block. A node is live
// when one of its outputs is, when it raises, or when it owns a block with a
// live effect; a live control node makes all its blocks' results live (Loop
// results feed the next iteration, so none can be dropped on its own).
class Liveness {
 public:
  explicit Liveness(const Graph& g)
      : g_(g), live_value_(g.values().size(), false), live_node_(g.nodes().size(), false) {}

  void Run() {
    for (ValueId v : g_.outputs()) live_value_[v] = true;
    Walk(kMainBlock);
  }
  bool node(NodeId n) const { return live_node_[n]; }

 private:
  // Returns whether the block has a live side effect (a Raise).
  bool Walk(BlockId b) {
    const Block& block = g_.block(b);
    for (ValueId v : block.results) live_value_[v] = true;
    bool effect = false;
    for (auto it = block.nodes.rbegin(); it != block.nodes.rend(); ++it) {
      const NodeId n = *it;
      const Node& node = g_.node(n);
      bool live = node.kind == OpKind::kRaise;
      for (ValueId v : node.outputs) live = live || live_value_[v];
      if (!node.blocks.empty()) {
        // Walk the blocks when live, or to find effects that make the node live.
        bool inner_effect = false;
        if (live) {
          for (BlockId sub : node.blocks) inner_effect |= Walk(sub);
        } else if (HasEffect(n)) {
          live = true;
          for (BlockId sub : node.blocks) inner_effect |= Walk(sub);
        }
        effect |= inner_effect;
      }
      if (!live) continue;
      effect |= node.kind == OpKind::kRaise;
      live_node_[n] = true;
      for (ValueId v : node.inputs) {
        if (v != kNoValue) live_value_[v] = true;
      }
    }
    return effect;
  }

  bool HasEffect(NodeId n) const {
    for (BlockId sub : g_.node(n).blocks) {
      for (NodeId inner : g_.block(sub).nodes) {
        if (g_.node(inner).kind == OpKind::kRaise || HasEffect(inner)) return true;
      }
    }
    return false;
  }

  const Graph& g_;
  std::vector<bool> live_value_;
  std::vector<bool> live_node_;
};

}  // namespace

Graph Graph::Compacted(std::vector<ValueId>* remap_out) const {
  Liveness liveness(*this);
  liveness.Run();
  Graph out;
  std::vector<ValueId> remap(values_.size(), kNoValue);
  auto copy_value = [&](ValueId from, ValueId to) {
    out.values_[to].type = values_[from].type;
    out.values_[to].kind = values_[from].kind;
    out.values_[to].optional = values_[from].optional;
    out.values_[to].default_value = values_[from].default_value;
    out.values_[to].dim_ranges = values_[from].dim_ranges;
    remap[from] = to;
  };
  for (ValueId v : inputs_) {
    copy_value(v, out.AddInput(values_[v].name, values_[v].type, values_[v].kind));
  }
  // Copies the live nodes of block `from` into the insertion block of `out`.
  std::function<void(BlockId)> copy_block = [&](BlockId from) {
    for (NodeId n : blocks_[from].nodes) {
      if (!liveness.node(n)) continue;
      const Node& node = nodes_[n];
      std::vector<ValueId> ins;
      for (ValueId v : node.inputs) ins.push_back(v == kNoValue ? kNoValue : remap[v]);
      std::vector<std::string> names;
      for (ValueId v : node.outputs) names.push_back(values_[v].name);
      NodeId m = out.AddNodeWithOutputs(node.kind, std::move(ins),
                                        static_cast<int>(node.outputs.size()), node.attrs,
                                        node.source_op, names);
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        copy_value(node.outputs[i], out.nodes_[m].outputs[i]);
      }
      const BlockId parent = out.insertion_block_;
      for (BlockId sub : node.blocks) {
        BlockId nb = out.AddBlock(m);
        for (ValueId p : blocks_[sub].params) {
          copy_value(p, out.AddBlockParam(nb, values_[p].name, values_[p].type, values_[p].kind));
        }
        out.insertion_block_ = nb;
        copy_block(sub);
        std::vector<ValueId> results;
        for (ValueId r : blocks_[sub].results) results.push_back(remap[r]);
        out.SetBlockResults(nb, std::move(results));
        out.insertion_block_ = parent;
      }
    }
  };
  copy_block(kMainBlock);
  for (size_t i = 0; i < outputs_.size(); ++i) out.AddOutput(remap[outputs_[i]], output_names_[i]);
  if (remap_out != nullptr) *remap_out = std::move(remap);
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
      a.values().size() != b.values().size() || a.blocks().size() != b.blocks().size()) {
    return false;
  }
  for (size_t i = 0; i < a.values().size(); ++i) {
    const Value& x = a.values()[i];
    const Value& y = b.values()[i];
    if (x.name != y.name || !(x.type == y.type) || x.producer != y.producer || x.kind != y.kind ||
        x.optional != y.optional || x.dim_ranges != y.dim_ranges ||
        x.default_value.has_value() != y.default_value.has_value() ||
        (x.default_value && !TensorsEqual(*x.default_value, *y.default_value))) {
      return false;
    }
  }
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    if (x.kind != y.kind || x.inputs != y.inputs || x.outputs != y.outputs ||
        x.source_op != y.source_op || !(x.attrs == y.attrs) || x.block != y.block ||
        x.blocks != y.blocks) {
      return false;
    }
  }
  for (size_t i = 0; i < a.blocks().size(); ++i) {
    const Block& x = a.blocks()[i];
    const Block& y = b.blocks()[i];
    if (x.owner != y.owner || x.params != y.params || x.nodes != y.nodes ||
        x.results != y.results) {
      return false;
    }
  }
  return true;
}

}  // namespace kiln::ir
