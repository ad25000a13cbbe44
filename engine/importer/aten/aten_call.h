// AtenCall: one call of an ATen operator as a converter sees it, whatever the
// source format. Arguments are read by their schema name ("input", "bias",
// "stride"), never by position: a torch.export graph leaves out the arguments
// that were at their defaults, so every reader takes the schema's default for
// an argument that is absent. Two fronts implement it:
//   torchscript/torchscript_call.cc  names to positions through node->schema()
//   export/export_call.cc            the ExportedProgram node's named arguments
// This header and everything under aten/ is free of libtorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/common/dtype.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

// An int-list argument: its values when the import can tell them, else the ir
// int[] value computed at run time (a shape made of sym_size results). A
// converter passes such a value as an extra input whose kernel reads it in
// Prepare (see Reshape); the executor folds it when shapes are static.
struct IntsArg {
  std::optional<std::vector<int64_t>> values;
  ir::ValueId value = ir::kNoValue;
};

// A number argument as written: its kind matters (int + int stays int).
struct Number {
  enum Kind { kInt, kFloat, kBool } kind = kInt;
  int64_t i = 0;
  double f = 0.0;
  bool b = false;
  double ToDouble() const { return kind == kFloat ? f : kind == kInt ? static_cast<double>(i) : b; }
  bool IsIntegral() const { return kind != kFloat; }  // int or bool
};

class AtenCall {
 public:
  virtual ~AtenCall() = default;

  // "aten::conv2d" (namespace and name, no overload).
  virtual std::string_view op() const = 0;
  // The overload: "Tensor", "Scalar", "dim", ... ("" or "default" for the base one).
  virtual std::string_view overload() const = 0;
  // "node 12 (aten::conv2d): ", the prefix of every message about this call.
  virtual std::string Where() const = 0;
  // The number of results the op returns, and the source name of result `i`
  // (ir values made for it are named after it).
  virtual size_t num_outputs() const = 0;
  virtual std::string OutputName(size_t i) const = 0;
  // How many tensors result `i` holds when it is a tensor list of a length the
  // front can tell (export lists each element of an "as_tensors" output;
  // TorchScript, when every use of the list is a ListUnpack); nullopt otherwise.
  // A split into pieces of a size needs it: the count depends on the input's
  // shape, which an import may not know.
  virtual std::optional<size_t> ListLength(size_t i) const = 0;

  // Whether the argument is given and is not None.
  virtual bool Has(std::string_view name) const = 0;

  // ---- tensors ----

  // The ir value of tensor argument `name` (a constant tensor becomes an ir
  // Constant once). InvalidArgument when it is absent or not a tensor;
  // Unimplemented when it comes from something Kiln does not translate.
  virtual absl::StatusOr<ir::ValueId> Tensor(std::string_view name) = 0;
  // Same, but ir::kNoValue when the argument is absent or None.
  absl::StatusOr<ir::ValueId> OptionalTensor(std::string_view name) {
    if (!Has(name)) return ir::kNoValue;
    return Tensor(name);
  }
  // The elements of a Tensor[] argument (cat, stack).
  virtual absl::StatusOr<std::vector<ir::ValueId>> Tensors(std::string_view name) = 0;
  // The elements of a Tensor?[] argument (index's indices), ir::kNoValue for
  // a None element. `masks` (may be null) gets, per element, whether it is a
  // boolean mask as far as the front can tell (a BOOL tensor, or one made by
  // a comparison or logical op): such an index selects a number of elements
  // that depends on the data. Unimplemented when the list is not literal.
  virtual absl::StatusOr<std::vector<ir::ValueId>> OptionalTensors(std::string_view name,
                                                                   std::vector<bool>* masks) = 0;
  // The static sizes of tensor argument `name` when the front knows them all
  // (a constant's, or export's tensor metadata without symbols); nullopt otherwise.
  virtual std::optional<Dims> StaticShape(std::string_view name) const = 0;

  // ---- numbers, lists, strings (constants) ----

  // An int argument; `def` when absent (nullopt: the argument is required).
  virtual absl::StatusOr<int64_t> Int(std::string_view name,
                                      std::optional<int64_t> def = std::nullopt) const = 0;
  // A number argument (int, float or bool constant).
  virtual absl::StatusOr<double> Double(std::string_view name,
                                        std::optional<double> def = std::nullopt) const = 0;
  virtual absl::StatusOr<bool> Bool(std::string_view name,
                                    std::optional<bool> def = std::nullopt) const = 0;
  virtual absl::StatusOr<std::string> String(
      std::string_view name, std::optional<std::string> def = std::nullopt) const = 0;
  // A constant int list (a single int is a list of one).
  virtual absl::StatusOr<std::vector<int64_t>> Ints(
      std::string_view name, std::optional<std::vector<int64_t>> def = std::nullopt) const = 0;
  // An int list whose elements may be known only at run time.
  virtual absl::StatusOr<IntsArg> IntsOrValue(std::string_view name) = 0;
  // A float list argument (scale_factors=...); nullopt when absent or None.
  // Unimplemented when the list is computed at run time.
  virtual absl::StatusOr<std::optional<std::vector<double>>> OptionalDoubles(
      std::string_view name) const = 0;
  // A ScalarType argument (dtype=...); nullopt when absent or None.
  virtual absl::StatusOr<std::optional<DType>> ScalarType(std::string_view name) const = 0;
  // An int list whose entries may be None (a scripted List[Optional[int]], as
  // adaptive pools take: None keeps that input size): None entries read as
  // `none`. A front whose lists never hold None reads it as Ints.
  virtual absl::StatusOr<std::vector<int64_t>> IntsOrNone(std::string_view name,
                                                          int64_t none) const {
    return Ints(name);
  }

  // The tensor whose dtype ScalarType argument `name` names when that dtype
  // is read at run time (dtype=x.dtype in a TorchScript graph); nullopt when
  // the argument is a constant, absent or None (read it with ScalarType).
  virtual absl::StatusOr<std::optional<ir::ValueId>> DTypeSource(std::string_view name) {
    return std::optional<ir::ValueId>();
  }

  // ---- lists as values ----

  // The ir value of list argument `name` taken whole: an int, float or bool
  // list (add.t concatenates two, slice.t slices one) or a tensor list, whose
  // elements are recorded when it is literal and which is otherwise built at
  // run time (appended to in a loop; cat and stack then take it whole).
  // nullopt when the argument is not a list or the front has no list values
  // (a torch.export graph lists a Tensor[] argument's elements, read with
  // Tensors, and has no list overloads).
  virtual absl::StatusOr<std::optional<ir::ValueId>> ListValue(std::string_view name) {
    return std::optional<ir::ValueId>();
  }

  // ---- scalars that may be run-time values ----

  // Whether argument `name` is a number (int, float or bool, constant or run
  // time) rather than a tensor with data.
  virtual bool IsScalar(std::string_view name) const = 0;
  // Whether argument `name` is typed as a tensor by the source, a 0-dim
  // constant tensor included (what tracing records for a Python number, which
  // IsScalar counts as a number): floor_divide promotes such an operand as a
  // tensor. A front without that distinction answers !IsScalar.
  virtual bool IsTensorTyped(std::string_view name) const { return !IsScalar(name); }
  // The ir value of number argument `name` (an int, float or bool scalar kind).
  virtual absl::StatusOr<ir::ValueId> ScalarValue(std::string_view name) = 0;
  // The constant number behind argument `name` (an int, float or bool, or a
  // 0-dim constant tensor standing for one); nullopt otherwise.
  virtual std::optional<Number> ConstNumber(std::string_view name) const = 0;

  // ---- messages ----
  absl::Status Unimplemented(std::string_view what) const {
    return absl::UnimplementedError(Where() + std::string(what));
  }
  absl::Status InvalidArgument(std::string_view what) const {
    return absl::InvalidArgumentError(Where() + std::string(what));
  }
};

}  // namespace kiln::importer
