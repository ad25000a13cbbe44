// Kiln's graph IR: a DAG of typed nodes over named, typed values.
//
// Nodes are kept in topological order. Every node records the op kind, its typed
// attributes and the name of the source op it came from (for example
// "aten::_convolution"), so a graph can be printed, diffed and compared
// structurally. Weights are Constant nodes holding a Tensor attribute. Nothing
// here knows libtorch or protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/dtype.h"
#include "engine/common/tensor.h"

namespace kiln::ir {

enum class OpKind : uint16_t {
#define OP(name, str, min_in, max_in, outs) k##name,
#include "engine/ir/op_kinds.def"
#undef OP
};

struct OpArity {
  int min_inputs;
  int max_inputs;  // -1: variadic
  int num_outputs;
};

const std::string& OpName(OpKind kind);  // std::string: see DTypeName
std::optional<OpKind> OpKindFromName(std::string_view name);
OpArity GetOpArity(OpKind kind);
// Every op kind, in declaration order.
const std::vector<OpKind>& AllOpKinds();

using ValueId = int32_t;
using NodeId = int32_t;
constexpr ValueId kNoValue = -1;  // an absent optional input
constexpr NodeId kNoNode = -1;    // producer of a graph input

// Element type and shape of a value. `dims` is nullopt when even the rank is
// unknown; a dim of -1 is dynamic.
struct TensorType {
  DType dtype = DType::kUnknown;
  std::optional<Dims> dims;

  bool IsComplete() const;
  // "FP32[1, 3, 224, 224]", "FP32[-1, 3]", "FP32[?]" (unknown rank), "?[?]".
  std::string ToString() const;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
};

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, Tensor>;

// Named, typed attributes; ordered by name so printing is deterministic.
class Attributes {
 public:
  void SetBool(const std::string& name, bool v) { map_[name] = v; }
  void SetInt(const std::string& name, int64_t v) { map_[name] = v; }
  void SetFloat(const std::string& name, double v) { map_[name] = v; }
  void SetString(const std::string& name, std::string v) { map_[name] = std::move(v); }
  void SetInts(const std::string& name, std::vector<int64_t> v) { map_[name] = std::move(v); }
  void SetFloats(const std::string& name, std::vector<double> v) { map_[name] = std::move(v); }
  void SetTensor(const std::string& name, Tensor v) { map_[name] = std::move(v); }

  bool Has(const std::string& name) const { return map_.count(name) > 0; }
  // The getters return `def` when the attribute is missing or has another type.
  bool GetBool(const std::string& name, bool def = false) const;
  int64_t GetInt(const std::string& name, int64_t def = 0) const;
  double GetFloat(const std::string& name, double def = 0.0) const;
  std::string GetString(const std::string& name, std::string def = "") const;
  std::vector<int64_t> GetInts(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<double> GetFloats(const std::string& name, std::vector<double> def = {}) const;
  // nullptr when missing.
  const Tensor* GetTensor(const std::string& name) const;

  const std::map<std::string, AttrValue>& map() const { return map_; }
  bool operator==(const Attributes& o) const;

 private:
  std::map<std::string, AttrValue> map_;
};

struct Value {
  std::string name;  // source name (debug name or graph input name)
  TensorType type;
  NodeId producer = kNoNode;
};

struct Node {
  OpKind kind;
  std::vector<ValueId> inputs;  // kNoValue for an absent optional input
  std::vector<ValueId> outputs;
  Attributes attrs;
  std::string source_op;  // e.g. "aten::_convolution"; empty when made by a pass
};

class Graph {
 public:
  // Adds a named graph input.
  ValueId AddInput(std::string name, TensorType type);
  // Adds a Constant node holding `value`; returns its output value.
  ValueId AddConstant(Tensor value, std::string name = "");
  // Appends a node; creates `num_outputs` output values (named `output_names`
  // where given, else "%<id>"); returns the node id.
  NodeId AddNode(OpKind kind, std::vector<ValueId> inputs, Attributes attrs = {},
                 std::string source_op = "", std::vector<std::string> output_names = {});
  // Marks `value` as a graph output called `name`.
  void AddOutput(ValueId value, std::string name);

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Value& value(ValueId id) const { return values_[id]; }
  Value& mutable_value(ValueId id) { return values_[id]; }
  const Node& node(NodeId id) const { return nodes_[id]; }
  Node& mutable_node(NodeId id) { return nodes_[id]; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  void set_output_name(size_t i, std::string name) { output_names_[i] = std::move(name); }

  // Returns the constant tensor behind `id`, or nullptr when it is not a Constant's output.
  const Tensor* ConstantValue(ValueId id) const;

  // Rewires every use of `from` (node inputs and graph outputs) to `to`.
  void ReplaceAllUses(ValueId from, ValueId to);

  // Returns a copy without nodes whose outputs are unused (graph outputs are
  // used); value ids are renumbered, names and types kept.
  Graph Compacted() const;

  // Total bytes held by Constant tensors.
  size_t ConstantBytes() const;

 private:
  ValueId NewValue(std::string name, TensorType type, NodeId producer);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> output_names_;
};

// Prints `graph` as text: one line per node with outputs and their types, op
// kind, inputs, attributes and source op.
std::string PrintGraph(const Graph& graph);

// Checks structural invariants: ids in range, every input defined before its
// use, op arities, graph outputs defined. Returns InvalidArgument naming the
// node on the first violation.
absl::Status VerifyGraph(const Graph& graph);

// Structural equality: same ops, wiring, attributes (tensor attributes compared
// bytewise), types and names in the same order.
bool StructurallyEqual(const Graph& a, const Graph& b);

}  // namespace kiln::ir
