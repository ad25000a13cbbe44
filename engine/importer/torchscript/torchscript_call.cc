// TorchScriptCall: schema argument names to node input positions.
#include "engine/importer/torchscript/torchscript_call.h"

#include <set>

#include <torch/csrc/jit/runtime/operator.h>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace kiln::importer {

TorchScriptCall::TorchScriptCall(const torch::jit::Node& node, ImportContext& ctx)
    : node_(node), ctx_(ctx), schema_(node.maybeSchema()), op_(node.kind().toQualString()) {
  if (schema_ == nullptr) {
    // A node whose argument types match no overload exactly (an int where a
    // Scalar is declared, None for a memory_format): names by the first
    // overload of the same arity, as positions were read before.
    for (const std::shared_ptr<torch::jit::Operator>& op :
         torch::jit::getAllOperatorsFor(node.kind())) {
      if (op->schema().arguments().size() == node.inputs().size()) {
        schema_ = &op->schema();
        break;
      }
    }
  }
  if (schema_ != nullptr) overload_ = schema_->overload_name();
}

std::string TorchScriptCall::OutputName(size_t i) const {
  return i < node_.outputs().size() ? node_.outputs()[i]->debugName() : std::string();
}

std::optional<size_t> TorchScriptCall::ListLength(size_t i) const {
  if (i >= node_.outputs().size()) return std::nullopt;
  // Every use unpacks the list into the same number of values (q, k, v = x.chunk(3)).
  std::optional<size_t> n;
  for (const torch::jit::Use& use : node_.outputs()[i]->uses()) {
    if (use.user->kind() != c10::prim::ListUnpack) return std::nullopt;
    const size_t k = use.user->outputs().size();
    if (n.has_value() && *n != k) return std::nullopt;
    n = k;
  }
  return n;
}

int TorchScriptCall::Index(std::string_view name) const {
  if (schema_ == nullptr) return -1;
  c10::optional<int> i = schema_->argumentIndexWithName(c10::string_view(name.data(), name.size()));
  if (!i.has_value() || *i >= static_cast<int>(node_.inputs().size())) return -1;
  return *i;
}

absl::Status TorchScriptCall::Missing(std::string_view name) const {
  if (schema_ == nullptr) return ctx_.Unimplemented(node_, "has no schema to read arguments by");
  return ctx_.InvalidArgument(node_, absl::StrCat("argument '", std::string(name), "' is missing"));
}

bool TorchScriptCall::Has(std::string_view name) const {
  const int i = Index(name);
  return i >= 0 && !ctx_.IsNone(node_, i);
}

absl::StatusOr<ir::ValueId> TorchScriptCall::Tensor(std::string_view name) {
  const int i = Index(name);
  if (i < 0) return Missing(name);
  return ctx_.Input(node_, i);
}

absl::StatusOr<std::vector<ir::ValueId>> TorchScriptCall::Tensors(std::string_view name) {
  const int i = Index(name);
  if (i < 0) return Missing(name);
  return ctx_.TensorListInput(node_, i);
}

absl::StatusOr<std::vector<ir::ValueId>> TorchScriptCall::OptionalTensors(
    std::string_view name, std::vector<bool>* masks) {
  const int i = Index(name);
  if (i < 0) return Missing(name);
  const torch::jit::Node* producer = node_.inputs()[i]->node();
  if (producer->kind() != c10::prim::ListConstruct) {
    return ctx_.Unimplemented(node_, absl::StrCat("argument '", std::string(name),
                                                  "' is not a literal list"));
  }
  // Masks are recognised by what makes them (a kernel refuses BOOL indices
  // too, but only when the model is compiled).
  static const auto* const kMaskMakers = new std::set<std::string>{
      "aten::gt", "aten::lt", "aten::ge", "aten::le", "aten::eq", "aten::ne",
      "aten::logical_and", "aten::logical_or", "aten::logical_xor", "aten::logical_not",
      "aten::__and__", "aten::__or__", "aten::__xor__", "aten::bitwise_not", "aten::isnan"};
  std::vector<ir::ValueId> elements;
  if (masks != nullptr) masks->clear();
  for (const torch::jit::Value* v : producer->inputs()) {
    std::optional<c10::IValue> c = ctx_.ConstantOf(v);
    if (c && c->isNone()) {
      elements.push_back(ir::kNoValue);
      if (masks != nullptr) masks->push_back(false);
      continue;
    }
    if (masks != nullptr) {
      masks->push_back(kMaskMakers->count(v->node()->kind().toQualString()) > 0 ||
                       (c && c->isTensor() && c->toTensor().scalar_type() == c10::kBool));
    }
    ASSIGN_OR_RETURN(ir::ValueId id, ctx_.ValueFor(v, ctx_.Where(node_)));
    elements.push_back(id);
  }
  return elements;
}

std::optional<Dims> TorchScriptCall::StaticShape(std::string_view name) const {
  const int i = Index(name);
  if (i < 0) return std::nullopt;
  if (std::optional<at::Tensor> t = ctx_.ConstTensor(node_, i)) {
    return Dims(t->sizes().begin(), t->sizes().end());
  }
  return std::nullopt;
}

absl::StatusOr<int64_t> TorchScriptCall::Int(std::string_view name,
                                             std::optional<int64_t> def) const {
  const int i = Index(name);
  if (i < 0 || (def.has_value() && ctx_.IsNone(node_, i))) {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  return ctx_.ConstInt(node_, i);
}

absl::StatusOr<double> TorchScriptCall::Double(std::string_view name,
                                               std::optional<double> def) const {
  const int i = Index(name);
  if (i < 0 || (def.has_value() && ctx_.IsNone(node_, i))) {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  return ctx_.ConstDouble(node_, i);
}

absl::StatusOr<bool> TorchScriptCall::Bool(std::string_view name, std::optional<bool> def) const {
  const int i = Index(name);
  if (i < 0 || (def.has_value() && ctx_.IsNone(node_, i))) {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  return ctx_.ConstBool(node_, i);
}

absl::StatusOr<std::string> TorchScriptCall::String(std::string_view name,
                                                    std::optional<std::string> def) const {
  const int i = Index(name);
  if (i < 0 || (def.has_value() && ctx_.IsNone(node_, i))) {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  return ctx_.ConstString(node_, i);
}

absl::StatusOr<std::vector<int64_t>> TorchScriptCall::Ints(
    std::string_view name, std::optional<std::vector<int64_t>> def) const {
  const int i = Index(name);
  if (i < 0 || (def.has_value() && ctx_.IsNone(node_, i))) {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  return ctx_.ConstInts(node_, i);
}

absl::StatusOr<IntsArg> TorchScriptCall::IntsOrValue(std::string_view name) {
  const int i = Index(name);
  if (i < 0) return Missing(name);
  return ctx_.IntsInput(node_, i);
}

absl::StatusOr<std::optional<std::vector<double>>> TorchScriptCall::OptionalDoubles(
    std::string_view name) const {
  const int i = Index(name);
  if (i < 0 || ctx_.IsNone(node_, i)) return std::optional<std::vector<double>>();
  std::optional<c10::IValue> c = ctx_.ConstantOf(node_.inputs()[i]);
  // Scripted F.interpolate builds its scale list in a loop.
  if (!c || !c->isDoubleList()) {
    return ctx_.Unimplemented(node_, absl::StrCat("argument '", std::string(name),
                                                  "' is computed at run time"));
  }
  return std::optional<std::vector<double>>(c->toDoubleVector());
}

absl::StatusOr<std::optional<DType>> TorchScriptCall::ScalarType(std::string_view name) const {
  const int i = Index(name);
  if (i < 0 || ctx_.IsNone(node_, i)) return std::optional<DType>();
  ASSIGN_OR_RETURN(int64_t type, ctx_.ConstInt(node_, i));
  ASSIGN_OR_RETURN(DType dtype, DTypeFromTorch(static_cast<c10::ScalarType>(type)));
  return std::optional<DType>(dtype);
}

absl::StatusOr<std::vector<int64_t>> TorchScriptCall::IntsOrNone(std::string_view name,
                                                                 int64_t none) const {
  const int i = Index(name);
  if (i < 0) return Missing(name);
  std::optional<c10::IValue> c = ctx_.ConstantOf(node_.inputs()[i]);
  if (!c || !c->isList()) return ctx_.ConstInts(node_, i);
  std::vector<int64_t> values;
  for (const c10::IValue& v : c->toListRef()) {
    if (!v.isNone() && !v.isInt()) {
      return ctx_.InvalidArgument(node_, absl::StrCat("argument '", std::string(name),
                                                      "' is not a list of ints or None"));
    }
    values.push_back(v.isNone() ? none : v.toInt());
  }
  return values;
}

absl::StatusOr<std::optional<ir::ValueId>> TorchScriptCall::ListValue(std::string_view name) {
  const int i = Index(name);
  if (i < 0 || node_.inputs()[i]->type()->kind() != c10::TypeKind::ListType) {
    return std::optional<ir::ValueId>();
  }
  ASSIGN_OR_RETURN(ir::ValueId list, ctx_.AnyValue(node_.inputs()[i], ctx_.Where(node_)));
  return std::optional<ir::ValueId>(list);
}

absl::StatusOr<std::optional<ir::ValueId>> TorchScriptCall::DTypeSource(std::string_view name) {
  const int i = Index(name);
  if (i < 0) return std::optional<ir::ValueId>();
  const torch::jit::Node* producer = node_.inputs()[i]->node();
  if (producer->kind() != c10::prim::dtype) return std::optional<ir::ValueId>();
  ASSIGN_OR_RETURN(ir::ValueId like, ctx_.Input(*producer, 0));
  return std::optional<ir::ValueId>(like);
}

bool TorchScriptCall::IsScalar(std::string_view name) const {
  const int i = Index(name);
  return i >= 0 && ctx_.IsScalarLike(node_, i);
}

bool TorchScriptCall::IsTensorTyped(std::string_view name) const {
  const int i = Index(name);
  if (i < 0) return false;
  const torch::jit::Value* v = node_.inputs()[i];
  return v->type()->kind() == c10::TypeKind::TensorType &&
         v->node()->kind() != c10::prim::NumToTensor;
}

absl::StatusOr<ir::ValueId> TorchScriptCall::ScalarValue(std::string_view name) {
  const int i = Index(name);
  if (i < 0) return Missing(name);
  return ctx_.ScalarInput(node_, i);
}

std::optional<Number> TorchScriptCall::ConstNumber(std::string_view name) const {
  // The tracer records Python numbers as 0-dim tensor constants, and libtorch's
  // interpreter promotes every 0-dim constant of a (frozen) graph as a Python
  // number, so Kiln does the same.
  const int i = Index(name);
  if (i < 0) return std::nullopt;
  std::optional<c10::IValue> c = ctx_.ConstantOf(node_.inputs()[i]);
  if (!c) return std::nullopt;
  c10::Scalar s;
  if (c->isDouble() || c->isInt() || c->isBool()) {
    s = c->toScalar();
  } else if (c->isTensor() && c->toTensor().dim() == 0) {
    s = c->toTensor().item();
  } else {
    return std::nullopt;
  }
  Number n;
  if (s.isBoolean()) {
    n.kind = Number::kBool;
    n.b = s.toBool();
  } else if (s.isIntegral(/*includeBool=*/false)) {
    n.kind = Number::kInt;
    n.i = s.toLong();
  } else {
    n.kind = Number::kFloat;
    n.f = s.toDouble();
  }
  return n;
}

}  // namespace kiln::importer
