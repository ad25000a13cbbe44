// ImportContext: bindings from torch values to ir values, typed access to
// constant arguments, and the helpers converters build ir nodes with.
#include "engine/importer/torchscript/import_context.h"

#include <cstring>

#include <torch/csrc/jit/ir/constants.h>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace kiln::importer {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool IsTensorType(const Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

// "argument 3 ('stride')", or "argument 3" when the node has no schema.
std::string ArgName(const Node& node, size_t i) {
  if (const c10::FunctionSchema* schema = node.maybeSchema()) {
    if (i < schema->arguments().size()) {
      return absl::StrCat("argument ", i, " ('", schema->arguments()[i].name(), "')");
    }
  }
  return absl::StrCat("argument ", i);
}

absl::Status NotConstant(const ImportContext& ctx, const Node& node, size_t i) {
  if (i >= node.inputs().size()) {
    return ctx.InvalidArgument(node, absl::StrCat(ArgName(node, i), " is missing"));
  }
  return ctx.Unimplemented(
      node, absl::StrCat(ArgName(node, i), " is computed at run time (by ",
                         node.inputs()[i]->node()->kind().toQualString(),
                         "); only constant arguments are supported"));
}

absl::Status WrongType(const ImportContext& ctx, const Node& node, size_t i,
                       absl::string_view expected, const c10::IValue& got) {
  return ctx.InvalidArgument(
      node, absl::StrCat(ArgName(node, i), " must be ", expected, ", got ", got.tagKind()));
}

}  // namespace

// ------------------------------------------------------------ bindings

void ImportContext::Bind(const Value* value, ir::ValueId id) {
  if (!undo_.empty()) {
    auto& undo = undo_.back();
    if (undo.count(value) == 0) {
      auto it = bound_.find(value);
      undo.emplace(value, it == bound_.end() ? std::nullopt : std::optional<ir::ValueId>(it->second));
    }
  }
  bound_[value] = id;
}

void ImportContext::PopScope() {
  for (const auto& [value, previous] : undo_.back()) {
    if (previous.has_value()) {
      bound_[value] = *previous;
    } else {
      bound_.erase(value);
    }
  }
  undo_.pop_back();
}

const Value* ImportContext::Resolve(const Value* value) const {
  while (bound_.count(value) == 0) {
    auto it = aliases_.find(value);
    if (it == aliases_.end()) break;
    value = it->second;
  }
  return value;
}

std::optional<ir::ValueId> ImportContext::Bound(const Value* value) const {
  auto it = bound_.find(Resolve(value));
  if (it == bound_.end()) return std::nullopt;
  return it->second;
}

int ImportContext::NodeIndex(const Node* node) const {
  auto it = node_index_.find(node);
  return it == node_index_.end() ? -1 : it->second;
}

std::string ImportContext::Where(const Node& node) const {
  const int index = NodeIndex(&node);
  return absl::StrCat("node ", index < 0 ? std::string("?") : absl::StrCat(index), " (",
                      node.kind().toQualString(), "): ");
}

absl::Status ImportContext::Unimplemented(const Node& node, absl::string_view what) const {
  return absl::UnimplementedError(absl::StrCat(Where(node), what));
}

absl::Status ImportContext::InvalidArgument(const Node& node, absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(node), what));
}

// ------------------------------------------------------------ tensor operands

absl::StatusOr<ir::ValueId> ImportContext::ValueFor(const Value* value, absl::string_view user) {
  const Value* v = Resolve(value);
  if (auto it = bound_.find(v); it != bound_.end()) return it->second;
  const Node* producer = v->node();
  if (producer->kind() == c10::prim::Constant) {
    c10::optional<c10::IValue> constant = torch::jit::toIValue(v);
    if (constant && constant->isTensor()) {
      ASSIGN_OR_RETURN(ir::ValueId id, AddTensorConstant(constant->toTensor(), v->debugName()));
      Bind(v, id);
      return id;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        user, "expected a tensor, got the constant ",
        constant ? constant->tagKind() : std::string("?"), " %", v->debugName()));
  }
  return absl::UnimplementedError(absl::StrCat(
      user, "%", v->debugName(), " comes from ", producer->kind().toQualString(),
      ", which Kiln does not import"));
}

absl::StatusOr<ir::ValueId> ImportContext::Input(const Node& node, size_t i) {
  if (i >= node.inputs().size()) {
    return InvalidArgument(node, absl::StrCat("expected at least ", i + 1, " inputs, got ",
                                              node.inputs().size()));
  }
  return ValueFor(node.inputs()[i], absl::StrCat(Where(node), ArgName(node, i), ": "));
}

absl::StatusOr<ir::ValueId> ImportContext::OptionalInput(const Node& node, size_t i) {
  if (IsNone(node, i)) return ir::kNoValue;
  return Input(node, i);
}

// ------------------------------------------------------------ any value

absl::StatusOr<ir::ValueId> ImportContext::ScalarConstant(const c10::IValue& c,
                                                          const std::string& name,
                                                          absl::string_view user) {
  if (c.isInt()) return AddInt(c.toInt(), name);
  if (c.isDouble()) return AddFloat(c.toDouble(), name);
  if (c.isBool()) return AddBool(c.toBool(), name);
  if (c.isNone()) return AddNone(name);
  if (c.isTensor()) return AddTensorConstant(c.toTensor(), name);
  auto list = [&](ir::ValueKind kind, DType dtype, const std::vector<double>& values) {
    Tensor t = Tensor::Zeros(dtype, {static_cast<int64_t>(values.size())});
    for (size_t k = 0; k < values.size(); ++k) {
      if (dtype == DType::kF64) t.data<double>()[k] = values[k];
      if (dtype == DType::kBool) t.data<bool>()[k] = values[k] != 0;
    }
    return graph_->AddConstant(std::move(t), name, kind);
  };
  if (c.isIntList()) {
    const std::vector<int64_t> ints = c.toIntVector();
    Tensor t = Tensor::Zeros(DType::kInt64, {static_cast<int64_t>(ints.size())});
    if (!ints.empty()) std::memcpy(t.raw_data(), ints.data(), ints.size() * sizeof(int64_t));
    return graph_->AddConstant(std::move(t), name, ir::ValueKind::kIntList);
  }
  if (c.isDoubleList()) {
    const std::vector<double> v = c.toDoubleVector();
    return list(ir::ValueKind::kFloatList, DType::kF64, v);
  }
  if (c.isBoolList()) {
    std::vector<double> v;
    for (bool b : c.toBoolList()) v.push_back(b ? 1 : 0);
    return list(ir::ValueKind::kBoolList, DType::kBool, v);
  }
  if (c.isTensorList()) {
    std::vector<ir::ValueId> elements;
    for (const at::Tensor& t : c.toTensorVector()) {
      ASSIGN_OR_RETURN(ir::ValueId id,
                       AddTensorConstant(t, absl::StrCat(name, ".", elements.size())));
      elements.push_back(id);
    }
    ir::NodeId n = graph_->AddNode(ir::OpKind::kListConstruct, elements, {}, "prim::Constant",
                                   {name});
    ir::ValueId id = graph_->node(n).outputs[0];
    graph_->mutable_value(id).kind = ir::ValueKind::kTensorList;
    list_elements_[id] = std::move(elements);
    return id;
  }
  return absl::UnimplementedError(
      absl::StrCat(user, "constant %", name, " is a ", c.tagKind(), ", which Kiln cannot hold"));
}

absl::StatusOr<ir::ValueId> ImportContext::AnyValue(const Value* value, absl::string_view user) {
  const Value* v = Resolve(value);
  if (auto it = bound_.find(v); it != bound_.end()) return it->second;
  const Node* producer = v->node();
  if (producer->kind() == c10::prim::Constant) {
    c10::optional<c10::IValue> constant = torch::jit::toIValue(v);
    if (!constant) return absl::InternalError(absl::StrCat(user, "unreadable constant"));
    ASSIGN_OR_RETURN(ir::ValueId id, ScalarConstant(*constant, v->debugName(), user));
    Bind(v, id);
    return id;
  }
  if (producer->kind() == c10::prim::ListConstruct) {
    std::optional<ir::ValueKind> kind = KindOfType(v->type());
    if (!kind.has_value()) {
      return absl::UnimplementedError(absl::StrCat(user, "list %", v->debugName(), " of type ",
                                                   v->type()->repr_str(),
                                                   " is not supported"));
    }
    std::vector<ir::ValueId> elements;
    for (const Value* element : producer->inputs()) {
      ASSIGN_OR_RETURN(ir::ValueId id, AnyValue(element, user));
      elements.push_back(id);
    }
    ir::NodeId n = graph_->AddNode(ir::OpKind::kListConstruct, elements, {},
                                   "prim::ListConstruct", {v->debugName()});
    ir::ValueId id = graph_->node(n).outputs[0];
    graph_->mutable_value(id).kind = *kind;
    if (*kind == ir::ValueKind::kTensorList) list_elements_[id] = std::move(elements);
    Bind(v, id);
    return id;
  }
  return absl::UnimplementedError(absl::StrCat(
      user, "%", v->debugName(), " comes from ", producer->kind().toQualString(),
      ", which Kiln does not import"));
}

bool ImportContext::IsScalarLike(const Node& node, size_t i) const {
  if (i >= node.inputs().size()) return false;
  const Value* v = node.inputs()[i];
  if (!IsTensorType(v)) {
    std::optional<ir::ValueKind> kind = KindOfType(v->type());
    return kind.has_value() && ir::IsScalarKind(*kind);
  }
  if (std::optional<ir::ValueId> id = Bound(v)) return ir::IsScalarKind(KindOf(*id));
  std::optional<c10::IValue> c = ConstantOf(v);
  return c && c->isTensor() && c->toTensor().dim() == 0;
}

absl::StatusOr<ir::ValueId> ImportContext::ScalarInput(const Node& node, size_t i) {
  if (i >= node.inputs().size()) {
    return InvalidArgument(node, absl::StrCat(ArgName(node, i), " is missing"));
  }
  const Value* v = node.inputs()[i];
  const std::string user = absl::StrCat(Where(node), ArgName(node, i), ": ");
  if (std::optional<c10::IValue> c = ConstantOf(v); c && c->isTensor()) {
    // A 0-dim constant tensor standing for a number (tracing records these).
    const at::Tensor& t = c->toTensor();
    if (t.dim() != 0) return InvalidArgument(node, absl::StrCat(ArgName(node, i), " is not a scalar"));
    if (t.is_floating_point()) return AddFloat(t.item<double>(), v->debugName());
    if (t.scalar_type() == c10::ScalarType::Bool) return AddBool(t.item<bool>(), v->debugName());
    return AddInt(t.item<int64_t>(), v->debugName());
  }
  return AnyValue(v, user);
}

absl::StatusOr<IntsArg> ImportContext::IntsInput(const Node& node, size_t i) {
  IntsArg arg;
  if (i >= node.inputs().size()) return NotConstant(*this, node, i);
  const Value* v = Resolve(node.inputs()[i]);
  // A literal list of constants; anything else (a list with run-time
  // elements, one appended to, one computed by an op) is an ir value.
  if (mutated_.count(v) == 0) {
    absl::StatusOr<std::vector<int64_t>> ints = ConstInts(node, i);
    if (ints.ok()) {
      arg.values = *std::move(ints);
      return arg;
    }
    if (!absl::IsUnimplemented(ints.status())) return ints.status();
  }
  ASSIGN_OR_RETURN(arg.value, AnyValue(v, absl::StrCat(Where(node), ArgName(node, i), ": ")));
  const ir::ValueKind kind = KindOf(arg.value);
  if (kind == ir::ValueKind::kInt) {
    // A single int where an int[] is expected.
    arg.value = EmitValue(node, ir::OpKind::kListConstruct, ir::ValueKind::kIntList, {arg.value});
  } else if (kind != ir::ValueKind::kIntList) {
    return InvalidArgument(node, absl::StrCat(ArgName(node, i), " must be an int list, got ",
                                              ir::ValueKindName(kind)));
  }
  return arg;
}

ir::ValueId ImportContext::MakeTensorList(const Node& src, std::vector<ir::ValueId> elements) {
  ir::ValueId id = EmitValue(src, ir::OpKind::kListConstruct, ir::ValueKind::kTensorList, elements);
  list_elements_[id] = std::move(elements);
  return id;
}

// ------------------------------------------------------------ constant arguments

std::optional<c10::IValue> ImportContext::ConstantOf(const Value* value) const {
  const Value* v = Resolve(value);
  if (mutated_.count(v) > 0) return std::nullopt;  // no longer the literal
  c10::optional<c10::IValue> constant = torch::jit::toIValue(v);
  if (!constant) return std::nullopt;
  return *constant;
}

bool ImportContext::IsNone(const Node& node, size_t i) const {
  if (i >= node.inputs().size()) return true;  // absent trailing optional
  std::optional<c10::IValue> c = ConstantOf(node.inputs()[i]);
  return c && c->isNone();
}

absl::StatusOr<int64_t> ImportContext::ConstInt(const Node& node, size_t i) const {
  std::optional<c10::IValue> c =
      i < node.inputs().size() ? ConstantOf(node.inputs()[i]) : std::nullopt;
  if (!c) return NotConstant(*this, node, i);
  if (c->isInt()) return c->toInt();
  if (c->isBool()) return c->toBool() ? 1 : 0;
  return WrongType(*this, node, i, "an int", *c);
}

absl::StatusOr<double> ImportContext::ConstDouble(const Node& node, size_t i) const {
  std::optional<c10::IValue> c =
      i < node.inputs().size() ? ConstantOf(node.inputs()[i]) : std::nullopt;
  if (!c) return NotConstant(*this, node, i);
  if (c->isDouble()) return c->toDouble();
  if (c->isInt()) return static_cast<double>(c->toInt());
  if (c->isBool()) return c->toBool() ? 1.0 : 0.0;
  if (c->isTensor() && c->toTensor().dim() == 0) return c->toTensor().item<double>();
  return WrongType(*this, node, i, "a number", *c);
}

absl::StatusOr<bool> ImportContext::ConstBool(const Node& node, size_t i) const {
  std::optional<c10::IValue> c =
      i < node.inputs().size() ? ConstantOf(node.inputs()[i]) : std::nullopt;
  if (!c) return NotConstant(*this, node, i);
  if (c->isBool()) return c->toBool();
  if (c->isInt()) return c->toInt() != 0;
  return WrongType(*this, node, i, "a bool", *c);
}

absl::StatusOr<std::string> ImportContext::ConstString(const Node& node, size_t i) const {
  std::optional<c10::IValue> c =
      i < node.inputs().size() ? ConstantOf(node.inputs()[i]) : std::nullopt;
  if (!c) return NotConstant(*this, node, i);
  if (c->isString()) return c->toStringRef();
  return WrongType(*this, node, i, "a string", *c);
}

absl::StatusOr<std::vector<int64_t>> ImportContext::ConstInts(const Node& node, size_t i) const {
  if (i >= node.inputs().size()) return NotConstant(*this, node, i);
  const Value* v = Resolve(node.inputs()[i]);
  if (std::optional<c10::IValue> c = ConstantOf(v)) {
    if (c->isIntList()) return c->toIntVector();
    if (c->isInt()) return std::vector<int64_t>{c->toInt()};
    return WrongType(*this, node, i, "an int list", *c);
  }
  if (mutated_.count(v) > 0 || v->node()->kind() != c10::prim::ListConstruct) {
    return NotConstant(*this, node, i);
  }
  std::vector<int64_t> ints;
  for (const Value* element : v->node()->inputs()) {
    std::optional<c10::IValue> c = ConstantOf(element);
    if (!c || !c->isInt()) {
      return Unimplemented(
          node, absl::StrCat(ArgName(node, i), " is computed at run time (element ", ints.size(),
                             " comes from ", element->node()->kind().toQualString(),
                             "); only constant shapes are supported"));
    }
    ints.push_back(c->toInt());
  }
  return ints;
}

std::optional<at::Tensor> ImportContext::ConstTensor(const Node& node, size_t i) const {
  if (i >= node.inputs().size()) return std::nullopt;
  std::optional<c10::IValue> c = ConstantOf(node.inputs()[i]);
  if (!c || !c->isTensor()) return std::nullopt;
  return c->toTensor();
}

absl::StatusOr<std::vector<ir::ValueId>> ImportContext::TensorListInput(const Node& node,
                                                                        size_t i) {
  if (i >= node.inputs().size()) return NotConstant(*this, node, i);
  const Value* v = Resolve(node.inputs()[i]);
  const std::string user = absl::StrCat(Where(node), ArgName(node, i), ": ");
  std::vector<ir::ValueId> ids;
  if (auto it = bound_.find(v); it != bound_.end()) {
    if (const std::vector<ir::ValueId>* elements = ListElements(it->second)) return *elements;
    if (mutated_.count(v) == 0 && v->node()->kind() == c10::prim::ListConstruct) {
      return absl::InternalError(absl::StrCat(user, "literal list without elements"));
    }
    if (KindOf(it->second) != ir::ValueKind::kTensorList) {
      return InvalidArgument(node, absl::StrCat(ArgName(node, i), " is not a tensor list"));
    }
    // Built at run time (appended to in a loop): its length is unknown here,
    // so the op runs through the fallback, which takes the list whole.
    return Unimplemented(node, absl::StrCat(ArgName(node, i),
                                            " is a tensor list built at run time"));
  }
  if (v->node()->kind() == c10::prim::ListConstruct) {
    for (const Value* element : v->node()->inputs()) {
      ASSIGN_OR_RETURN(ir::ValueId id, ValueFor(element, user));
      ids.push_back(id);
    }
    return ids;
  }
  if (std::optional<c10::IValue> c = ConstantOf(v); c && c->isTensorList()) {
    for (const at::Tensor& t : c->toTensorVector()) {
      ASSIGN_OR_RETURN(ir::ValueId id,
                       AddTensorConstant(t, absl::StrCat(v->debugName(), ".", ids.size())));
      ids.push_back(id);
    }
    // Bound once (a frozen RNN's weights): a second reader, such as the op's
    // libtorch twin, gets the same constants, not copies the node lacks.
    Bind(v, MakeTensorList(*v->node(), ids));
    return ids;
  }
  return Unimplemented(node, absl::StrCat(ArgName(node, i), " is a tensor list built by ",
                                          v->node()->kind().toQualString(),
                                          ", which Kiln does not import"));
}

// ------------------------------------------------------------ building

ir::ValueId ImportContext::Emit(const Node& src, ir::OpKind op, std::vector<ir::ValueId> inputs,
                                ir::Attributes attrs, absl::string_view suffix) {
  std::string name =
      src.outputs().empty() ? std::string() : absl::StrCat(src.outputs()[0]->debugName(), suffix);
  ir::NodeId id = graph_->AddNode(op, std::move(inputs), std::move(attrs),
                                  src.kind().toQualString(), {std::move(name)});
  return graph_->node(id).outputs[0];
}

ir::ValueId ImportContext::EmitValue(const Node& src, ir::OpKind op, ir::ValueKind kind,
                                     std::vector<ir::ValueId> inputs, ir::Attributes attrs) {
  ir::ValueId id = Emit(src, op, std::move(inputs), std::move(attrs));
  ir::Value& value = graph_->mutable_value(id);
  value.kind = kind;
  if (ir::IsScalarKind(kind)) value.type = ir::TensorType{ir::ScalarKindDType(kind), Dims{}};
  if (ir::IsScalarListKind(kind)) value.type.dtype = ir::ScalarKindDType(kind);
  return id;
}

absl::StatusOr<ir::ValueId> ImportContext::AddTensorConstant(const at::Tensor& tensor,
                                                             std::string name) {
  if (tensor.layout() != c10::kStrided || tensor.is_quantized()) {
    return absl::UnimplementedError(
        absl::StrCat("constant %", name, " is not a dense tensor (", tensor.toString(), ")"));
  }
  ASSIGN_OR_RETURN(DType dtype, DTypeFromTorch(tensor.scalar_type()));
  const at::Tensor dense = tensor.is_cpu() ? tensor.contiguous() : tensor.cpu().contiguous();
  Tensor value = Tensor::Zeros(dtype, Dims(dense.sizes().begin(), dense.sizes().end()));
  if (value.byte_size() > 0) std::memcpy(value.raw_data(), dense.data_ptr(), value.byte_size());
  return graph_->AddConstant(std::move(value), std::move(name));
}

}  // namespace kiln::importer
