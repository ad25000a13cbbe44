// Kiln's graph IR: typed nodes over named, typed values, in nested blocks.
//
// A graph is a main block of nodes in execution order. Control-flow nodes (If,
// Loop) own sub-blocks, TorchScript-style: a block has parameters (values
// defined on entry), nodes, and results (values yielded on exit). A value is
// visible after its definition in its own block and in the blocks nested in
// it. Every node records the op kind, its typed attributes and the name of the
// source op it came from (for example "aten::_convolution"), so a graph can be
// printed, diffed and compared structurally. Weights are Constant nodes holding
// a Tensor attribute. Nothing here knows libtorch or protobuf.
//
// Values are tensors by default; ValueKind names the others (ints, floats,
// bools, lists, None) that TorchScript computes at run time, such as shapes
// from aten::size and loop counters.
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
using BlockId = int32_t;
constexpr ValueId kNoValue = -1;  // an absent optional input
constexpr NodeId kNoNode = -1;    // producer of a graph input or block parameter
constexpr BlockId kMainBlock = 0;

// What a value holds. At run time an int, float or bool is a 0-dim tensor of
// INT64, FP64 or BOOL, and an int/float/bool list a 1-D tensor of that dtype,
// so constants, kernels and the memory planner handle them like any tensor;
// `type` describes that tensor. A tensor list is held by the executor; its
// `type` describes the elements where known. Tuples have no kind: their arity
// is static, so the importer flattens them.
enum class ValueKind : uint8_t {
  kTensor,
  kInt,
  kFloat,
  kBool,
  kIntList,
  kFloatList,
  kBoolList,
  kTensorList,
  kNone,
};

// "Tensor", "int", "float", "bool", "int[]", "float[]", "bool[]", "Tensor[]", "None".
const std::string& ValueKindName(ValueKind kind);
bool IsScalarKind(ValueKind kind);      // int, float, bool
bool IsScalarListKind(ValueKind kind);  // int[], float[], bool[]
// The run-time dtype of a scalar or scalar-list kind (INT64, FP64, BOOL); kUnknown otherwise.
DType ScalarKindDType(ValueKind kind);

// Element type and shape of a value. `dims` is nullopt when even the rank is
// unknown; a dim of -1 is dynamic.
// How a tensor's elements lie in memory. Dims are always logical (NCHW for
// images, as PyTorch gives them); the layout says in which order the buffer
// holds them. Only the compiler assigns non-plain layouts, to values between
// kernels that take them (engine/runtime/layout.h); graph inputs, outputs,
// constants and everything the dynamic path sees are plain.
enum class Layout : uint8_t {
  kPlain,  // row-major in the logical dims
  kNHWC,   // a 4-D [N, C, H, W] tensor stored as [N, H, W, C] (channels last)
};
const char* LayoutName(Layout layout);  // "plain", "nhwc"

struct TensorType {
  DType dtype = DType::kUnknown;
  std::optional<Dims> dims;
  Layout layout = Layout::kPlain;

  bool IsComplete() const;
  // "FP32[1, 3, 224, 224]", "FP32[-1, 3]", "FP32[?]" (unknown rank), "?[?]";
  // a non-plain layout follows: "FP32[1, 64, 56, 56]{nhwc}".
  std::string ToString() const;
  bool operator==(const TensorType& o) const {
    return dtype == o.dtype && dims == o.dims && layout == o.layout;
  }
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
  void Set(const std::string& name, AttrValue v) { map_[name] = std::move(v); }

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

// The bounds a model declares for a dynamic dim of a graph input (torch.export's
// Dim("batch", min=1, max=64)). `symbol` is the exporter's name for the size
// ("s77"); dims sharing one must be equal.
struct DimRange {
  int dim = 0;
  int64_t min = 0;
  int64_t max = INT64_MAX;  // INT64_MAX: unbounded
  std::string symbol;
  bool operator==(const DimRange& o) const {
    return dim == o.dim && min == o.min && max == o.max && symbol == o.symbol;
  }
};

struct Value {
  std::string name;  // source name (debug name or graph input name)
  TensorType type;
  NodeId producer = kNoNode;
  ValueKind kind = ValueKind::kTensor;
  bool optional = false;  // may be None at run time (an Optional[Tensor] argument)
  // A graph input's default: the value of a forward() parameter declared with
  // one (`scale: float = 2.0`), a 0-dim INT64/FP64/BOOL tensor, run when a
  // request leaves the input out.
  std::optional<Tensor> default_value;
  // A graph input's bounded dynamic dims; a request outside them is refused.
  std::vector<DimRange> dim_ranges;
};

struct Node {
  OpKind kind;
  std::vector<ValueId> inputs;  // kNoValue for an absent optional input
  std::vector<ValueId> outputs;
  Attributes attrs;
  std::string source_op;  // e.g. "aten::_convolution"; empty when made by a pass
  BlockId block = kMainBlock;   // the block this node is in
  std::vector<BlockId> blocks;  // sub-blocks: If (then, else), Loop (body)
};

// A sequence of nodes with parameters and results. The main block's results
// are the graph outputs (Graph::outputs()), so its `results` stay empty.
struct Block {
  NodeId owner = kNoNode;        // the If/Loop node owning it; kNoNode for the main block
  std::vector<ValueId> params;   // defined on entry (Loop body: iteration number, carried values)
  std::vector<NodeId> nodes;     // in execution order
  std::vector<ValueId> results;  // yielded on exit (Loop body: continue flag, carried values)
};

// nodes() lists every node, nested ones included, in creation order: a
// control-flow node comes before the nodes of its blocks, so every value is
// defined before any use in that order. For a graph without blocks it is the
// execution order. Passes that move or fuse nodes must keep them in one block
// (Node::block).
class Graph {
 public:
  Graph();

  // Adds a named graph input.
  ValueId AddInput(std::string name, TensorType type, ValueKind kind = ValueKind::kTensor);
  // Adds a Constant node holding `value`; returns its output value. Scalars
  // and scalar lists are 0-dim and 1-D tensors with a scalar `kind`.
  ValueId AddConstant(Tensor value, std::string name = "", ValueKind kind = ValueKind::kTensor);
  // Appends a node to the insertion block; creates its output values (named
  // `output_names` where given, else "%<id>"): the op's fixed output count, or
  // for ops with a variable count (If, Loop, ListUnpack, Fallback) one per
  // output name. Returns the node id.
  NodeId AddNode(OpKind kind, std::vector<ValueId> inputs, Attributes attrs = {},
                 std::string source_op = "", std::vector<std::string> output_names = {});
  // Same, with `num_outputs` outputs, for ops with a variable output count.
  NodeId AddNodeWithOutputs(OpKind kind, std::vector<ValueId> inputs, int num_outputs,
                            Attributes attrs = {}, std::string source_op = "",
                            std::vector<std::string> output_names = {});
  // Marks `value` as a graph output called `name`.
  void AddOutput(ValueId value, std::string name);

  // ---- blocks ----
  // Adds an empty sub-block to `node` (If: then, else; Loop: body).
  BlockId AddBlock(NodeId node);
  // Adds a parameter to `block`.
  ValueId AddBlockParam(BlockId block, std::string name, TensorType type,
                        ValueKind kind = ValueKind::kTensor);
  void SetBlockResults(BlockId block, std::vector<ValueId> results);
  // Where AddNode and AddConstant append (the main block unless set).
  void SetInsertionBlock(BlockId block) { insertion_block_ = block; }
  BlockId insertion_block() const { return insertion_block_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  const Block& block(BlockId id) const { return blocks_[id]; }
  Block& mutable_block(BlockId id) { return blocks_[id]; }
  // True when some node owns a sub-block.
  bool HasControlFlow() const { return blocks_.size() > 1; }

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
  // Makes graph output `i` the value `v` (its name stays).
  void ReplaceOutput(size_t i, ValueId v) { outputs_[i] = v; }
  // Makes room for `nodes` more nodes and `values` more values, so that
  // references to existing ones stay valid while that many are added.
  void Reserve(size_t nodes, size_t values) {
    nodes_.reserve(nodes_.size() + nodes);
    values_.reserve(values_.size() + values);
  }

  // Returns the constant tensor behind `id`, or nullptr when it is not a Constant's output.
  const Tensor* ConstantValue(ValueId id) const;

  // Rewires every use of `from` (node inputs, block results and graph
  // outputs) to `to`.
  void ReplaceAllUses(ValueId from, ValueId to);

  // Replaces the graph's input list (values made by AddInput, in the order
  // a caller passes them); an input left out must have no uses.
  void SetInputs(std::vector<ValueId> inputs) { inputs_ = std::move(inputs); }

  // Returns a copy without nodes whose outputs are unused (graph outputs are
  // used; Raise nodes, and control flow containing them, always are); value
  // ids are renumbered, names, kinds and types kept. With `remap`, sets
  // (*remap)[old id] to the new id, or kNoValue for a dropped value.
  Graph Compacted(std::vector<ValueId>* remap = nullptr) const;

  // Total bytes held by Constant tensors.
  size_t ConstantBytes() const;

 private:
  ValueId NewValue(std::string name, TensorType type, NodeId producer);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<Block> blocks_;
  BlockId insertion_block_ = kMainBlock;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> output_names_;
};

// The printed type of a value: "FP32[1, 3]" for a tensor ("FP32[1, 3]?" when
// optional), "int", "float[]", "int[5]" (a list of known length), "Tensor[]", "None".
std::string ValueTypeString(const Value& value);

// A graph input's default value as Python writes it ("2", "0.5", "True"), or
// "" when it has none.
std::string DefaultValueString(const Value& value);

// Prints `graph` as text: one line per node with outputs and their types, op
// kind, inputs, attributes and source op; sub-blocks indented below their node.
std::string PrintGraph(const Graph& graph);

// Graphviz (dot) text: one box per node, edges along values (labelled with
// their types), sub-blocks as clusters.
std::string PrintGraphviz(const Graph& graph);

// Checks structural invariants: ids in range, every input defined before its
// use and visible in its block, op arities, block shapes of If and Loop, graph
// outputs defined. Returns InvalidArgument naming the node on the first
// violation.
absl::Status VerifyGraph(const Graph& graph);

// Structural equality: same ops, wiring, blocks, attributes (tensor attributes
// compared bytewise), kinds, types and names in the same order.
bool StructurallyEqual(const Graph& a, const Graph& b);

}  // namespace kiln::ir
