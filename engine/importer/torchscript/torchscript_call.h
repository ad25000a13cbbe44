// TorchScriptCall: a torch::jit::Node seen as an AtenCall, so the shared aten
// converters (engine/importer/aten/) translate TorchScript graphs. Argument
// names map to input positions through node->schema(); TorchScript records
// every argument, so the defaults converters pass are used only for inputs a
// node lacks (an older schema with fewer trailing arguments).
#pragma once

#include <string>

#include <torch/csrc/jit/ir/ir.h>

#include "engine/importer/aten/aten_call.h"
#include "engine/importer/torchscript/import_context.h"

namespace kiln::importer {

class TorchScriptCall final : public AtenCall {
 public:
  TorchScriptCall(const torch::jit::Node& node, ImportContext& ctx);

  std::string_view op() const override { return op_; }
  std::string_view overload() const override { return overload_; }
  std::string Where() const override { return ctx_.Where(node_); }
  size_t num_outputs() const override { return node_.outputs().size(); }
  std::string OutputName(size_t i) const override;
  std::optional<size_t> ListLength(size_t i) const override;
  bool Has(std::string_view name) const override;

  absl::StatusOr<ir::ValueId> Tensor(std::string_view name) override;
  absl::StatusOr<std::vector<ir::ValueId>> Tensors(std::string_view name) override;
  absl::StatusOr<std::vector<ir::ValueId>> OptionalTensors(std::string_view name,
                                                           std::vector<bool>* masks) override;
  std::optional<Dims> StaticShape(std::string_view name) const override;

  absl::StatusOr<int64_t> Int(std::string_view name, std::optional<int64_t> def) const override;
  absl::StatusOr<double> Double(std::string_view name, std::optional<double> def) const override;
  absl::StatusOr<bool> Bool(std::string_view name, std::optional<bool> def) const override;
  absl::StatusOr<std::string> String(std::string_view name,
                                     std::optional<std::string> def) const override;
  absl::StatusOr<std::vector<int64_t>> Ints(
      std::string_view name, std::optional<std::vector<int64_t>> def) const override;
  absl::StatusOr<IntsArg> IntsOrValue(std::string_view name) override;
  absl::StatusOr<std::optional<std::vector<double>>> OptionalDoubles(
      std::string_view name) const override;
  absl::StatusOr<std::optional<DType>> ScalarType(std::string_view name) const override;
  absl::StatusOr<std::vector<int64_t>> IntsOrNone(std::string_view name,
                                                  int64_t none) const override;
  absl::StatusOr<std::optional<ir::ValueId>> ListValue(std::string_view name) override;
  absl::StatusOr<std::optional<ir::ValueId>> DTypeSource(std::string_view name) override;
  bool IsScalar(std::string_view name) const override;
  bool IsTensorTyped(std::string_view name) const override;
  absl::StatusOr<ir::ValueId> ScalarValue(std::string_view name) override;
  std::optional<Number> ConstNumber(std::string_view name) const override;

 private:
  // The input position of argument `name`; -1 when the schema has no such
  // argument or the node has fewer inputs.
  int Index(std::string_view name) const;
  absl::Status Missing(std::string_view name) const;

  const torch::jit::Node& node_;
  ImportContext& ctx_;
  const c10::FunctionSchema* schema_;
  std::string op_;
  std::string overload_;
};

}  // namespace kiln::importer
