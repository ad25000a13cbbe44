// ExportCall: one node of a serialized ExportedProgram graph seen as an
// AtenCall. Arguments are the node's NamedArguments ({"name": "stride",
// "arg": {"as_ints": [2, 2]}}); an argument the serializer left out (it
// drops those at their defaults) takes the default the converter passes.
// Internal to engine/importer/export/.
#pragma once

#include <map>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "engine/importer/aten/aten_call.h"
#include "engine/importer/aten/convert_context.h"

namespace kiln::importer {

// The ir value of every named value of the program seen so far: tensors,
// symbolic ints (sym_size results), and the tensor metadata of the graph.
struct ExportValues {
  std::unordered_map<std::string, ir::ValueId> bound;
  const nlohmann::json* tensor_values = nullptr;  // graph.tensor_values
  // The views among them (view_write.h): a view op's result -> the node
  // that took it and the name of the tensor it views; and a tensor -> its
  // views, in the order they were taken.
  struct View {
    const nlohmann::json* node = nullptr;
    int index = 0;
    std::string base;
    int64_t piece = -1;  // which result of a split-like op (IsPieceViewOp); -1: a view op's
  };
  std::unordered_map<std::string, View> view_of;
  std::unordered_map<std::string, std::vector<std::string>> views_of;
};

// Kiln's dtype for the schema's ScalarType enum (torch/_export/serde/schema.py).
absl::StatusOr<DType> DTypeFromExport(int64_t scalar_type);

// The schema's ScalarType and MemoryFormat enums as c10's numbers, which
// libtorch takes for such an argument (the fallback, the verified import's
// reference); nullopt for one libtorch 1.13 has no number for.
std::optional<int64_t> C10ScalarTypeFromExport(int64_t scalar_type);
std::optional<int64_t> C10MemoryFormatFromExport(int64_t memory_format);

// An "as_float" value: a number, or the strings the serializer writes for
// infinities and NaN ("inf", "-inf", "Infinity", "nan"); nullopt otherwise.
std::optional<double> ExportFloat(const nlohmann::json& v);

class ExportCall final : public AtenCall {
 public:
  // `node` is a graph node whose target is "torch.ops.<ns>.<op>.<overload>";
  // `op` and `overload` are parsed from it; `index` numbers it in messages.
  ExportCall(const nlohmann::json& node, int index, std::string op, std::string overload,
             ExportValues& values, ConvertContext& cx);

  std::string_view op() const override { return op_; }
  std::string_view overload() const override { return overload_; }
  std::string Where() const override;
  size_t num_outputs() const override { return output_names_.size(); }
  std::string OutputName(size_t i) const override {
    return i < output_names_.size() ? output_names_[i] : std::string();
  }
  std::optional<size_t> ListLength(size_t i) const override {
    return i < list_lengths_.size() ? list_lengths_[i] : std::nullopt;
  }
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
  bool IsScalar(std::string_view name) const override;
  absl::StatusOr<ir::ValueId> ScalarValue(std::string_view name) override;
  std::optional<Number> ConstNumber(std::string_view name) const override;

 private:
  // The argument's union member ("as_ints") and its value, or nullptr when absent.
  const nlohmann::json* Arg(std::string_view name, std::string* kind) const;
  absl::Status Missing(std::string_view name) const;
  absl::Status WrongKind(std::string_view name, std::string_view expected,
                         std::string_view got) const;
  absl::StatusOr<ir::ValueId> Named(std::string_view arg, const std::string& value);
  absl::StatusOr<ir::ValueId> SymIntValue(std::string_view arg, const nlohmann::json& sym);

  std::map<std::string, const nlohmann::json*, std::less<>> args_;
  std::vector<std::string> output_names_;
  std::vector<std::optional<size_t>> list_lengths_;  // per output: an "as_tensors" length
  int index_;
  std::string op_;
  std::string overload_;
  ExportValues& values_;
  ConvertContext& cx_;
};

}  // namespace kiln::importer
