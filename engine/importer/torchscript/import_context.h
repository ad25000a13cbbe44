// State shared by the aten converters while one torch::jit::Graph is translated
// into a Kiln ir::Graph: which ir value stands for each torch value, typed access
// to constant (non-tensor) arguments, and helpers that add ir nodes tagged with
// the aten op they came from. Internal to engine/importer/ (includes libtorch).
//
// Bindings are scoped: a value rebound inside a block (an in-place op, a list
// append) gets its outer binding back when the block ends; the translator
// threads such values through the If or Loop explicitly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <torch/csrc/jit/ir/ir.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/importer/aten/convert_context.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

// Which ir value each top-level torch node's outputs became (for verified
// import: Kiln's intermediate values are compared with libtorch's).
struct ImportTrace {
  struct Entry {
    const torch::jit::Node* node;
    int index;  // the node's number in error messages
    std::vector<std::pair<const torch::jit::Value*, ir::ValueId>> outputs;  // tensor outputs
  };
  std::vector<Entry> nodes;
};

class ImportContext : public ConvertContext {
 public:
  explicit ImportContext(ir::Graph* graph) : ConvertContext(graph) {}
  using ConvertContext::Emit;
  using ConvertContext::EmitValue;
  using ConvertContext::MakeTensorList;

  // Records that `value` is computed by ir value `id` (rebinding is allowed: an
  // in-place op rebinds its mutated input to its result).
  void Bind(const torch::jit::Value* value, ir::ValueId id);
  // Makes `value` stand for `target` (prim::TupleUnpack of a TupleConstruct).
  void Alias(const torch::jit::Value* value, const torch::jit::Value* target) {
    aliases_[value] = target;
  }
  // The ir value `value` is bound to, following aliases; nullopt when unbound.
  std::optional<ir::ValueId> Bound(const torch::jit::Value* value) const;
  // Numbers the torch nodes so messages can say "node 12 (aten::conv2d): ...".
  void SetNodeIndex(const torch::jit::Node* node, int index) { node_index_[node] = index; }
  int NodeIndex(const torch::jit::Node* node) const;

  // Marks `value` as changed by a mutation (an in-place op, a list append):
  // reads of it no longer see its literal constant or list elements.
  void MarkMutated(const torch::jit::Value* value) { mutated_.insert(Resolve(value)); }
  // Bindings made between PushScope and PopScope are undone by PopScope.
  void PushScope() { undo_.emplace_back(); }
  void PopScope();

  // "node 12 (aten::conv2d): ".
  std::string Where(const torch::jit::Node& node) const;
  absl::Status Unimplemented(const torch::jit::Node& node, absl::string_view what) const;
  absl::Status InvalidArgument(const torch::jit::Node& node, absl::string_view what) const;

  // ---- tensor operands ----

  // The ir value of tensor input `i` of `node`: a bound value, or an ir Constant
  // made (once) from a prim::Constant tensor. Fails naming the node when the
  // input is not a tensor or comes from an op Kiln does not translate.
  absl::StatusOr<ir::ValueId> Input(const torch::jit::Node& node, size_t i);
  // Same, but kNoValue when the input is the constant None.
  absl::StatusOr<ir::ValueId> OptionalInput(const torch::jit::Node& node, size_t i);
  // The ir value for any torch value (used for graph outputs); `user` names the
  // consumer in error messages.
  absl::StatusOr<ir::ValueId> ValueFor(const torch::jit::Value* value, absl::string_view user);

  // ---- any value: tensors, scalars, lists, None ----

  // The ir value for `value` whatever it holds. Constants become Constant
  // nodes (ints, floats and bools as scalars of that kind), a literal list a
  // ListConstruct (of scalars, or of tensors with its elements recorded), the
  // constant None a None node.
  absl::StatusOr<ir::ValueId> AnyValue(const torch::jit::Value* value, absl::string_view user);
  // Scalar operand `i` (an int, float or bool, or a 0-dim tensor standing for
  // one, as tracing records them): its ir value.
  absl::StatusOr<ir::ValueId> ScalarInput(const torch::jit::Node& node, size_t i);
  // True when input `i` is an int/float/bool value or a tensor bound to one
  // (prim::NumToTensor), i.e. not a tensor with data.
  bool IsScalarLike(const torch::jit::Node& node, size_t i) const;

  // An int-list argument: its values when the import can tell them, else the
  // ir int[] value computed at run time (shapes from aten::size). Converters
  // pass such a value as an extra input whose kernel reads it in Prepare
  // (see Reshape), which the executor folds when the shapes are static.
  absl::StatusOr<IntsArg> IntsInput(const torch::jit::Node& node, size_t i);

  // A tensor list made of `elements` (a converter's result for an op that
  // returns Tensor[], such as chunk): an ir ListConstruct whose elements are
  // recorded, so ListUnpack, indexing and cat of it need no run-time list.
  ir::ValueId MakeTensorList(const torch::jit::Node& src, std::vector<ir::ValueId> elements);

  // ---- constant (non-tensor) arguments ----

  // The constant behind `value` (following aliases), or nullopt.
  std::optional<c10::IValue> ConstantOf(const torch::jit::Value* value) const;
  bool IsNone(const torch::jit::Node& node, size_t i) const;
  absl::StatusOr<int64_t> ConstInt(const torch::jit::Node& node, size_t i) const;
  // Accepts an int or float constant.
  absl::StatusOr<double> ConstDouble(const torch::jit::Node& node, size_t i) const;
  absl::StatusOr<bool> ConstBool(const torch::jit::Node& node, size_t i) const;
  absl::StatusOr<std::string> ConstString(const torch::jit::Node& node, size_t i) const;
  // An int list (a constant list, a single int, or a prim::ListConstruct of
  // constants). A list with run-time elements (aten::size) is Unimplemented;
  // IntsInput accepts those.
  absl::StatusOr<std::vector<int64_t>> ConstInts(const torch::jit::Node& node, size_t i) const;
  // The constant tensor behind input `i`, or nullopt when it is not a constant tensor.
  std::optional<at::Tensor> ConstTensor(const torch::jit::Node& node, size_t i) const;
  // The tensor elements of list input `i` (aten::cat): a literal list's
  // elements (also of a list a converter made with MakeTensorList).
  // Unimplemented for a list built at run time (appended to in a loop), so
  // the op falls back to libtorch.
  absl::StatusOr<std::vector<ir::ValueId>> TensorListInput(const torch::jit::Node& node, size_t i);

  // ---- building the ir graph ----

  // Appends an `op` node for `src` (source_op = the aten kind); its output is
  // named after src's first output plus `suffix` (for decomposition steps).
  ir::ValueId Emit(const torch::jit::Node& src, ir::OpKind op, std::vector<ir::ValueId> inputs,
                   ir::Attributes attrs = {}, absl::string_view suffix = "");
  // Same, for an op whose output is of `kind` (a scalar or list).
  ir::ValueId EmitValue(const torch::jit::Node& src, ir::OpKind op, ir::ValueKind kind,
                        std::vector<ir::ValueId> inputs, ir::Attributes attrs = {});
  // Copies `tensor` (made contiguous; dtype kept) into an ir Constant.
  absl::StatusOr<ir::ValueId> AddTensorConstant(const at::Tensor& tensor, std::string name);

 private:
  const torch::jit::Value* Resolve(const torch::jit::Value* value) const;
  absl::StatusOr<ir::ValueId> ScalarConstant(const c10::IValue& c, const std::string& name,
                                             absl::string_view user);

  std::unordered_map<const torch::jit::Value*, ir::ValueId> bound_;
  std::unordered_map<const torch::jit::Value*, const torch::jit::Value*> aliases_;
  std::unordered_map<const torch::jit::Node*, int> node_index_;
  std::unordered_set<const torch::jit::Value*> mutated_;
  // Per open scope: the previous binding of every value first bound in it.
  std::vector<std::unordered_map<const torch::jit::Value*, std::optional<ir::ValueId>>> undo_;
};

// Kiln's dtype for a libtorch scalar type; Unimplemented for complex, quantized
// and other types Kiln has no dtype for. With TorchFromDType, the only place
// the two are mapped.
absl::StatusOr<DType> DTypeFromTorch(c10::ScalarType type);

// libtorch's scalar type for a Kiln dtype (the fallback and the verified
// import hand Kiln tensors to libtorch); InvalidArgument for kUnknown.
absl::StatusOr<c10::ScalarType> TorchFromDType(DType dtype);

// An int, float or bool IValue as the 0-dim INT64, FP64 or BOOL tensor Kiln
// carries run-time scalars in (a parameter's default, a fallback op's scalar
// result); nullopt for any other IValue.
std::optional<Tensor> ScalarTensor(const c10::IValue& v);

// The ir kind of a TorchScript type (Tensor, int, List[int], Optional[Tensor],
// ...), with `optional` set for Optional[T]; nullopt for types Kiln has no
// kind for (strings, dicts, objects, tuples).
std::optional<ir::ValueKind> KindOfType(const c10::TypePtr& type, bool* optional = nullptr);

// Translates an already frozen, inlined and cleaned graph. When `has_self`,
// graph input 0 (the module) is dropped. Inputs are named by
// options.input_names, else after their debug names without the ".N" suffix.
// Ops without a native translation become Fallback nodes, unless
// options.strict, which fails once with Unimplemented listing every
// unsupported op. libtorch exceptions thrown while translating become
// InvalidArgument. With `trace`, records which ir value each top-level torch
// node's tensor outputs became.
absl::StatusOr<ir::Graph> ImportTorchGraph(const torch::jit::Graph& graph,
                                           const ImportOptions& options, bool has_self = false,
                                           ImportTrace* trace = nullptr);

}  // namespace kiln::importer
