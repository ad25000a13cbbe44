// State shared by the aten converters while one torch::jit::Graph is translated
// into a Kiln ir::Graph: which ir value stands for each torch value, typed access
// to constant (non-tensor) arguments, and helpers that add ir nodes tagged with
// the aten op they came from. Internal to engine/importer/ (includes libtorch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/csrc/jit/ir/ir.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/importer/torchscript_importer.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

class ImportContext {
 public:
  explicit ImportContext(ir::Graph* graph) : graph_(graph) {}
  ImportContext(const ImportContext&) = delete;
  ImportContext& operator=(const ImportContext&) = delete;

  ir::Graph& graph() { return *graph_; }

  // Records that `value` is computed by ir value `id` (rebinding is allowed: an
  // in-place op rebinds its mutated input to its result).
  void Bind(const torch::jit::Value* value, ir::ValueId id) { bound_[value] = id; }
  // Makes `value` stand for `target` (prim::TupleUnpack of a TupleConstruct).
  void Alias(const torch::jit::Value* value, const torch::jit::Value* target) {
    aliases_[value] = target;
  }
  // Numbers the torch nodes so messages can say "node 12 (aten::conv2d): ...".
  void SetNodeIndex(const torch::jit::Node* node, int index) { node_index_[node] = index; }

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
  // constants). A list with run-time elements (aten::size) is Unimplemented.
  absl::StatusOr<std::vector<int64_t>> ConstInts(const torch::jit::Node& node, size_t i) const;
  // The constant tensor behind input `i`, or nullopt when it is not a constant tensor.
  std::optional<at::Tensor> ConstTensor(const torch::jit::Node& node, size_t i) const;
  // The tensor elements of a prim::ListConstruct input (aten::cat).
  absl::StatusOr<std::vector<ir::ValueId>> TensorListInput(const torch::jit::Node& node, size_t i);

  // ---- building the ir graph ----

  // Appends an `op` node for `src` (source_op = the aten kind); its output is
  // named after src's first output plus `suffix` (for decomposition steps).
  ir::ValueId Emit(const torch::jit::Node& src, ir::OpKind op, std::vector<ir::ValueId> inputs,
                   ir::Attributes attrs = {}, absl::string_view suffix = "");
  // Copies `tensor` (made contiguous; dtype kept) into an ir Constant.
  absl::StatusOr<ir::ValueId> AddTensorConstant(const at::Tensor& tensor, std::string name);
  // A 0-dim Constant of `dtype` holding `value`.
  absl::StatusOr<ir::ValueId> AddScalarConstant(double value, DType dtype, std::string name);
  // The dtype the graph knows for `id` (kUnknown for graph inputs and most results).
  DType DTypeOf(ir::ValueId id) const { return graph_->value(id).type.dtype; }

 private:
  const torch::jit::Value* Resolve(const torch::jit::Value* value) const;

  ir::Graph* graph_;
  std::unordered_map<const torch::jit::Value*, ir::ValueId> bound_;
  std::unordered_map<const torch::jit::Value*, const torch::jit::Value*> aliases_;
  std::unordered_map<const torch::jit::Node*, int> node_index_;
};

// Kiln's dtype for a libtorch scalar type; Unimplemented for complex, quantized
// and other types Kiln has no dtype for. The only place the two are mapped.
absl::StatusOr<DType> DTypeFromTorch(c10::ScalarType type);

// Translates an already frozen, inlined and cleaned graph. When `has_self`,
// graph input 0 (the module) is dropped. Inputs are named by
// options.input_names, else after their debug names without the ".N" suffix.
// Checks every op kind against the aten table first and fails once with
// Unimplemented listing all unsupported kinds. libtorch exceptions thrown while
// translating become InvalidArgument.
absl::StatusOr<ir::Graph> ImportTorchGraph(const torch::jit::Graph& graph,
                                           const ImportOptions& options, bool has_self = false);

}  // namespace kiln::importer
