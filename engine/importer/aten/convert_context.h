// ConvertContext: what converters build the ir graph with, shared by every
// importer front (TorchScript's ImportContext extends it with its bindings).
// Free of libtorch: constants are Kiln tensors, results are ir values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/aten/aten_call.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

class ConvertContext {
 public:
  explicit ConvertContext(ir::Graph* graph) : graph_(graph) {}
  ConvertContext(const ConvertContext&) = delete;
  ConvertContext& operator=(const ConvertContext&) = delete;
  virtual ~ConvertContext() = default;

  ir::Graph& graph() { return *graph_; }
  const ir::Graph& graph() const { return *graph_; }

  // Appends an `op` node for `call` (source_op = the aten op); its output is
  // named after the call's first result plus `suffix` (for decomposition steps).
  ir::ValueId Emit(const AtenCall& call, ir::OpKind op, std::vector<ir::ValueId> inputs,
                   ir::Attributes attrs = {}, std::string_view suffix = "");
  // Same, for an op whose output is of `kind` (a scalar or list).
  ir::ValueId EmitValue(const AtenCall& call, ir::OpKind op, ir::ValueKind kind,
                        std::vector<ir::ValueId> inputs, ir::Attributes attrs = {});
  // A tensor list made of `elements` (the result of chunk, split, unbind): an
  // ir ListConstruct whose elements are recorded, so unpacking, indexing and
  // cat of it need no run-time list.
  ir::ValueId MakeTensorList(const AtenCall& call, std::vector<ir::ValueId> elements);
  // Records the elements of a tensor list made elsewhere.
  void SetListElements(ir::ValueId list, std::vector<ir::ValueId> elements) {
    list_elements_[list] = std::move(elements);
  }
  // The recorded elements of tensor list `list`, or nullptr when it is built at run time.
  const std::vector<ir::ValueId>* ListElements(ir::ValueId list) const;

  // Nested tensors (aten::_nested_tensor_from_mask) are held padded, as
  // [N, T, ...] with their sequences left-aligned; this records, for such a
  // value, its [N, T] BOOL mask of real positions (true below each sequence's
  // length) and its INT64 [N] lengths, which the ops that take nested
  // operands read.
  struct Nested {
    ir::ValueId valid = ir::kNoValue;
    ir::ValueId lengths = ir::kNoValue;
  };
  void SetNested(ir::ValueId padded, Nested nested) { nested_[padded] = nested; }
  // The record of `id`, or nullptr when it is an ordinary tensor.
  const Nested* NestedOf(ir::ValueId id) const {
    auto it = nested_.find(id);
    return it == nested_.end() ? nullptr : &it->second;
  }

  // Fault injection for testing the verified import, never set in production:
  // when KILN_TEST_PERTURB_OP names call.op() ("aten::gelu") and the first of
  // `results` is a tensor, it becomes itself plus 0.5, so Kiln diverges from
  // libtorch exactly there. Both fronts call it after a native translation
  // only (a forced fallback runs libtorch's own op and is not perturbed).
  absl::Status PerturbForTest(const AtenCall& call, std::vector<ir::ValueId>& results);

  // A Kiln tensor as an ir Constant.
  ir::ValueId AddConstant(Tensor value, std::string name);
  // A 0-dim Constant of `dtype` holding `value`.
  absl::StatusOr<ir::ValueId> AddScalarConstant(double value, DType dtype, std::string name);
  // A tensor of `dims` filled with `value`, as a Constant.
  absl::StatusOr<ir::ValueId> AddFilledConstant(const Dims& dims, double value, DType dtype,
                                                std::string name);
  // Constants of a scalar kind: int (INT64), float (FP64), bool; and None.
  ir::ValueId AddInt(int64_t value, std::string name = "");
  ir::ValueId AddFloat(double value, std::string name = "");
  ir::ValueId AddBool(bool value, std::string name = "");
  ir::ValueId AddNone(std::string name = "");
  // A number as a scalar of its own kind (int: INT64, float: FP64, bool: BOOL),
  // which the kernels promote as PyTorch promotes wrapped numbers.
  ir::ValueId AddNumber(const Number& n, std::string name = "");
  // An int[] constant.
  ir::ValueId AddInts(const std::vector<int64_t>& values, std::string name = "");

  // The dtype the graph knows for `id` (kUnknown for most results).
  DType DTypeOf(ir::ValueId id) const { return graph_->value(id).type.dtype; }
  ir::ValueKind KindOf(ir::ValueId id) const { return graph_->value(id).kind; }
  // The constant tensor behind `id`, or nullptr.
  const Tensor* ConstValue(ir::ValueId id) const { return graph_->ConstantValue(id); }

 protected:
  ir::Graph* graph_;
  std::unordered_map<ir::ValueId, std::vector<ir::ValueId>> list_elements_;
  std::unordered_map<ir::ValueId, Nested> nested_;
};

// Fills every element of `t` with `value` (converted to its dtype).
void FillTensor(Tensor& t, double value);

}  // namespace kiln::importer
