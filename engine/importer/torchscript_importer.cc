// TorchScript -> Kiln IR.
//
// Stages:
//   1. torch::jit::load from memory, eval(), torch::jit::freeze: parameters become
//      prim::Constant tensors and conv+batch_norm pairs are folded.
//   2. Clean the forward graph: Inline, removeDropout, ConstantPropagation,
//      RemoveShapeGuards (rank checks that raise, see below), EliminateDeadCode.
//   3. Check every node kind against the aten table and fail once, listing every
//      unsupported kind, before translating anything.
//   4. Translate node by node in graph order. Constants are materialized lazily,
//      when a converter asks for them as tensors, so scalar and list constants
//      never reach the IR. prim::ListConstruct/TupleConstruct are read by their
//      consumers; TupleUnpack/ListUnpack alias their producer's inputs.
//
// libtorch reports failures by throwing; this file is the only place that
// catches (c10::Error and std::exception) and turns them into InvalidArgument.
#include "engine/importer/torchscript_importer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <c10/core/GradMode.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/remove_dropout.h>
#include <torch/csrc/jit/serialization/import.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten_op_table.h"
#include "engine/importer/import_context.h"

namespace kiln::importer {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Nodes the translator handles itself rather than through the aten table.
bool IsStructural(c10::Symbol kind) {
  return kind == c10::prim::Constant || kind == c10::prim::ListConstruct ||
         kind == c10::prim::ListUnpack || kind == c10::prim::TupleConstruct ||
         kind == c10::prim::TupleUnpack || kind == c10::prim::GetAttr;
}

// Run-time shape computations. They are not listed as unsupported ops: the op
// that consumes their result fails instead, naming itself ("node 7 (aten::view):
// argument 1 ('size') is computed at run time"), which says more to the user.
bool IsDeferredShapeOp(c10::Symbol kind) {
  return kind == c10::aten::size || kind == c10::aten::Int || kind == c10::prim::NumToTensor ||
         kind == c10::aten::ScalarImplicit;
}

// relu_, add_ (but not __and__): the result replaces the first input.
bool IsInPlace(std::string_view kind) {
  return kind.size() > 1 && kind.back() == '_' && kind[kind.size() - 2] != '_';
}

bool IsTensor(const Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

// "x.1" -> "x": TorchScript appends ".N" to keep debug names unique.
std::string StripDebugSuffix(const std::string& name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, dot);
}

void CollectUnsupported(const torch::jit::Block* block, std::set<std::string>& unsupported) {
  for (const Node* node : block->nodes()) {
    const c10::Symbol kind = node->kind();
    if (!IsStructural(kind) && !IsDeferredShapeOp(kind) &&
        FindAtenConverter(kind.toQualString()) == nullptr) {
      unsupported.insert(kind.toQualString());
    }
    for (const torch::jit::Block* sub : node->blocks()) CollectUnsupported(sub, unsupported);
  }
}

// Kiln's type for a graph input: whatever the torch type states (parsed IR may
// carry dtypes and sizes; loaded archives never do), unknown otherwise.
absl::StatusOr<ir::TensorType> InputType(const c10::TensorType& tt) {
  ir::TensorType type;
  if (auto st = tt.scalarType()) {
    ASSIGN_OR_RETURN(type.dtype, DTypeFromTorch(*st));
  }
  if (auto sizes = tt.sizes().sizes()) {
    Dims dims;
    for (const auto& d : *sizes) dims.push_back(d.has_value() ? *d : -1);
    type.dims = std::move(dims);
  }
  return type;
}

// ---- shape guards ----
//
// Scripted modules check their input's rank before computing, e.g. BatchNorm's
// `if input.dim() != 4: raise ValueError(...)`. Such guards are prim::If nodes
// whose only effect is prim::RaiseException and whose condition reads tensor
// metadata alone. Kiln's runtime validates ranks and shapes itself (the input
// contract, then each kernel's Prepare), so these guards are dropped. Guards
// that read tensor *values* are kept and then reported as unsupported ops.

// Ops on ints, bools, lists and strings that never touch tensor data.
bool IsScalarOp(c10::Symbol kind) {
  static const auto* const kOps = new std::set<c10::Symbol>{
      c10::aten::eq,      c10::aten::ne,      c10::aten::lt,         c10::aten::gt,
      c10::aten::le,      c10::aten::ge,      c10::aten::__not__,    c10::aten::__and__,
      c10::aten::__or__,  c10::aten::__is__,  c10::aten::__isnot__,  c10::aten::add,
      c10::aten::sub,     c10::aten::mul,     c10::aten::floordiv,   c10::aten::neg,
      c10::aten::len,     c10::aten::format,  c10::aten::__getitem__, c10::prim::ListConstruct,
      c10::prim::TupleConstruct, c10::prim::Constant};
  return kOps->count(kind) > 0;
}

// Ops that read a tensor's metadata (rank, sizes), not its elements.
bool IsMetadataOp(c10::Symbol kind) {
  return kind == c10::aten::dim || kind == c10::aten::size || kind == c10::aten::len;
}

bool IsShapeOnly(const Value* v);

bool IsShapeOnlyNode(const Node* n) {
  const c10::Symbol kind = n->kind();
  for (const Value* out : n->outputs()) {
    if (IsTensor(out)) return false;
  }
  if (kind == c10::prim::If) {
    if (!IsShapeOnly(n->input(0))) return false;
    for (const torch::jit::Block* block : n->blocks()) {
      for (const Node* inner : block->nodes()) {
        if (!IsShapeOnlyNode(inner)) return false;
      }
      for (const Value* out : block->outputs()) {
        if (!IsShapeOnly(out)) return false;
      }
    }
    return true;
  }
  const bool metadata = IsMetadataOp(kind);
  if (!metadata && !IsScalarOp(kind)) return false;
  for (const Value* in : n->inputs()) {
    if (IsTensor(in) ? !metadata : !IsShapeOnly(in)) return false;
  }
  return true;
}

bool IsShapeOnly(const Value* v) {
  if (IsTensor(v) || v->node()->kind() == c10::prim::Param) return false;
  return IsShapeOnlyNode(v->node());
}

bool IsShapeGuard(const Node* n) {
  if (n->kind() != c10::prim::If || !n->outputs().empty() || n->blocks().size() != 2) {
    return false;
  }
  int raising = 0, empty = 0;
  for (const torch::jit::Block* block : n->blocks()) {
    if (block->nodes().begin() == block->nodes().end()) {
      ++empty;
      continue;
    }
    bool raises = false;
    for (const Node* inner : block->nodes()) {
      if (inner->kind() == c10::prim::RaiseException) {
        raises = true;
      } else if (inner->kind() != c10::prim::Constant && inner->kind() != c10::aten::format) {
        return false;
      }
    }
    raising += raises ? 1 : 0;
  }
  return raising == 1 && empty == 1 && IsShapeOnly(n->input(0));
}

// Drops the shape guards of the top-level block; returns how many.
int RemoveShapeGuards(torch::jit::Graph& graph) {
  std::vector<Node*> guards;
  for (Node* n : graph.nodes()) {
    if (IsShapeGuard(n)) guards.push_back(n);
  }
  for (Node* n : guards) n->destroy();
  return static_cast<int>(guards.size());
}

absl::StatusOr<ir::Graph> TranslateGraph(const torch::jit::Graph& graph,
                                         const ImportOptions& options, bool has_self) {
  std::set<std::string> unsupported;
  CollectUnsupported(graph.block(), unsupported);
  if (!unsupported.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("unsupported ops: ", absl::StrJoin(unsupported, ", ")));
  }

  ir::Graph out;
  ImportContext ctx(&out);

  // ---- inputs ----
  const auto inputs = graph.inputs();
  const size_t first = has_self && !inputs.empty() ? 1 : 0;
  const size_t num_inputs = inputs.size() - first;
  if (options.input_names.size() > num_inputs) {
    return absl::InvalidArgumentError(absl::StrCat("ImportOptions::input_names has ",
                                                   options.input_names.size(),
                                                   " names but forward() takes ", num_inputs,
                                                   " inputs"));
  }
  std::set<std::string> seen_names;
  for (size_t k = 0; k < num_inputs; ++k) {
    const Value* input = inputs[first + k];
    std::string name = k < options.input_names.size() && !options.input_names[k].empty()
                           ? options.input_names[k]
                           : StripDebugSuffix(input->debugName());
    if (!seen_names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate input name '", name, "'"));
    }
    auto tt = input->type()->cast<c10::TensorType>();
    if (tt == nullptr) {
      return absl::UnimplementedError(absl::StrCat("forward() argument '", name, "' has type ",
                                                   input->type()->repr_str(),
                                                   "; only Tensor arguments are supported"));
    }
    ASSIGN_OR_RETURN(ir::TensorType type, InputType(*tt));
    ctx.Bind(input, out.AddInput(std::move(name), std::move(type)));
  }

  // ---- nodes ----
  int index = 0;
  for (const Node* node : graph.nodes()) ctx.SetNodeIndex(node, index++);
  for (const Node* node : graph.nodes()) {
    const c10::Symbol kind = node->kind();
    if (kind == c10::prim::TupleUnpack || kind == c10::prim::ListUnpack) {
      const Node* producer = node->input(0)->node();
      if (producer->kind() != c10::prim::TupleConstruct &&
          producer->kind() != c10::prim::ListConstruct) {
        return ctx.Unimplemented(*node, absl::StrCat("unpacks the result of ",
                                                     producer->kind().toQualString()));
      }
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        ctx.Alias(node->outputs()[i], producer->inputs()[i]);
      }
      continue;
    }
    if (IsStructural(kind) || IsDeferredShapeOp(kind)) continue;

    for (const Value* output : node->outputs()) {
      if (!IsTensor(output)) {
        return ctx.Unimplemented(
            *node, absl::StrCat("produces a value of type ", output->type()->repr_str(),
                                "; only tensor computations are imported (run-time shape "
                                "arithmetic is not supported)"));
      }
    }
    const Converter convert = FindAtenConverter(kind.toQualString());
    ASSIGN_OR_RETURN(std::vector<ir::ValueId> results, convert(*node, ctx));
    if (results.size() != node->outputs().size()) {
      return absl::InternalError(absl::StrCat(ctx.Where(*node), "converter returned ",
                                              results.size(), " values for ",
                                              node->outputs().size(), " outputs"));
    }
    for (size_t i = 0; i < results.size(); ++i) ctx.Bind(node->outputs()[i], results[i]);
    if (IsInPlace(kind.toQualString()) && !node->inputs().empty() && IsTensor(node->input(0))) {
      ctx.Bind(node->input(0), results[0]);
    }
  }

  // ---- outputs: a returned tuple gives one graph output per element ----
  std::vector<const Value*> returned(graph.outputs().begin(), graph.outputs().end());
  if (returned.size() == 1 && returned[0]->node()->kind() == c10::prim::TupleConstruct) {
    const auto elements = returned[0]->node()->inputs();
    returned.assign(elements.begin(), elements.end());
  }
  if (options.output_names.size() > returned.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ImportOptions::output_names has ",
                                                   options.output_names.size(),
                                                   " names but forward() returns ",
                                                   returned.size(), " tensors"));
  }
  for (size_t k = 0; k < returned.size(); ++k) {
    std::string name = k < options.output_names.size() && !options.output_names[k].empty()
                           ? options.output_names[k]
                           : absl::StrCat("output", k);
    if (!IsTensor(returned[k])) {
      return absl::UnimplementedError(absl::StrCat("forward() output ", k, " has type ",
                                                   returned[k]->type()->repr_str(),
                                                   "; only tensors (or a tuple of tensors) "
                                                   "can be returned"));
    }
    ASSIGN_OR_RETURN(ir::ValueId id,
                     ctx.ValueFor(returned[k], absl::StrCat("forward() output ", k, ": ")));
    out.AddOutput(id, std::move(name));
  }

  if (absl::Status s = ir::VerifyGraph(out); !s.ok()) {
    return absl::InternalError(absl::StrCat("imported graph is malformed: ", s.message()));
  }
  return out;
}

// The single place libtorch exceptions are caught.
template <typename Fn>
absl::StatusOr<ir::Graph> CatchTorchErrors(Fn&& fn) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("TorchScript import failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("TorchScript import failed: ", e.what()));
  }
}

}  // namespace

// ------------------------------------------------------------------- dtypes

absl::StatusOr<DType> DTypeFromTorch(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool: return DType::kBool;
    case c10::ScalarType::Byte: return DType::kUInt8;
    case c10::ScalarType::Char: return DType::kInt8;
    case c10::ScalarType::Short: return DType::kInt16;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Long: return DType::kInt64;
    case c10::ScalarType::Half: return DType::kF16;
    case c10::ScalarType::BFloat16: return DType::kBF16;
    case c10::ScalarType::Float: return DType::kF32;
    case c10::ScalarType::Double: return DType::kF64;
    default:
      return absl::UnimplementedError(
          absl::StrCat("torch dtype ", c10::toString(type), " has no Kiln equivalent"));
  }
}

// ------------------------------------------------------------ ImportContext

std::string ImportContext::Where(const Node& node) const {
  auto it = node_index_.find(&node);
  std::string index = it == node_index_.end() ? "?" : absl::StrCat(it->second);
  return absl::StrCat("node ", index, " (", node.kind().toQualString(), "): ");
}

absl::Status ImportContext::Unimplemented(const Node& node, absl::string_view what) const {
  return absl::UnimplementedError(absl::StrCat(Where(node), what));
}

absl::Status ImportContext::InvalidArgument(const Node& node, absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(node), what));
}

namespace {

// "argument 3 ('stride')", or "argument 3" when the node has no schema.
std::string ArgName(const Node& node, size_t i) {
  if (const c10::FunctionSchema* schema = node.maybeSchema()) {
    if (i < schema->arguments().size()) {
      return absl::StrCat("argument ", i, " ('", schema->arguments()[i].name(), "')");
    }
  }
  return absl::StrCat("argument ", i);
}

}  // namespace

const Value* ImportContext::Resolve(const Value* value) const {
  while (bound_.count(value) == 0) {
    auto it = aliases_.find(value);
    if (it == aliases_.end()) break;
    value = it->second;
  }
  return value;
}

absl::StatusOr<ir::ValueId> ImportContext::ValueFor(const Value* value, absl::string_view user) {
  const Value* v = Resolve(value);
  if (auto it = bound_.find(v); it != bound_.end()) return it->second;
  const Node* producer = v->node();
  if (producer->kind() == c10::prim::Constant) {
    c10::optional<c10::IValue> constant = torch::jit::toIValue(v);
    if (constant && constant->isTensor()) {
      ASSIGN_OR_RETURN(ir::ValueId id, AddTensorConstant(constant->toTensor(), v->debugName()));
      bound_[v] = id;
      return id;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        user, "expected a tensor, got the constant ",
        constant ? constant->tagKind() : std::string("?"), " %", v->debugName()));
  }
  return absl::UnimplementedError(absl::StrCat(
      user, "%", v->debugName(), " comes from ", producer->kind().toQualString(),
      ", which Kiln does not import (a value computed at run time, such as a shape)"));
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

std::optional<c10::IValue> ImportContext::ConstantOf(const Value* value) const {
  c10::optional<c10::IValue> constant = torch::jit::toIValue(Resolve(value));
  if (!constant) return std::nullopt;
  return *constant;
}

bool ImportContext::IsNone(const Node& node, size_t i) const {
  if (i >= node.inputs().size()) return true;  // absent trailing optional
  std::optional<c10::IValue> c = ConstantOf(node.inputs()[i]);
  return c && c->isNone();
}

namespace {

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
  if (v->node()->kind() != c10::prim::ListConstruct) return NotConstant(*this, node, i);
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
  std::vector<ir::ValueId> ids;
  if (v->node()->kind() == c10::prim::ListConstruct) {
    for (const Value* element : v->node()->inputs()) {
      ASSIGN_OR_RETURN(ir::ValueId id,
                       ValueFor(element, absl::StrCat(Where(node), ArgName(node, i), ": ")));
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
    return ids;
  }
  return Unimplemented(node, absl::StrCat(ArgName(node, i), " is a tensor list built by ",
                                          v->node()->kind().toQualString(),
                                          "; only literal lists are supported"));
}

ir::ValueId ImportContext::Emit(const Node& src, ir::OpKind op, std::vector<ir::ValueId> inputs,
                                ir::Attributes attrs, absl::string_view suffix) {
  std::string name =
      src.outputs().empty() ? std::string() : absl::StrCat(src.outputs()[0]->debugName(), suffix);
  ir::NodeId id = graph_->AddNode(op, std::move(inputs), std::move(attrs),
                                  src.kind().toQualString(), {std::move(name)});
  return graph_->node(id).outputs[0];
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

absl::StatusOr<ir::ValueId> ImportContext::AddScalarConstant(double v, DType dtype,
                                                             std::string name) {
  Tensor value = Tensor::Zeros(dtype, {});
  switch (dtype) {
    case DType::kBool: *value.data<bool>() = v != 0; break;
    case DType::kUInt8: *value.data<uint8_t>() = static_cast<uint8_t>(v); break;
    case DType::kInt8: *value.data<int8_t>() = static_cast<int8_t>(v); break;
    case DType::kInt16: *value.data<int16_t>() = static_cast<int16_t>(v); break;
    case DType::kInt32: *value.data<int32_t>() = static_cast<int32_t>(v); break;
    case DType::kInt64: *value.data<int64_t>() = static_cast<int64_t>(v); break;
    case DType::kF16: *value.data<c10::Half>() = c10::Half(static_cast<float>(v)); break;
    case DType::kBF16: *value.data<c10::BFloat16>() = c10::BFloat16(static_cast<float>(v)); break;
    case DType::kF32: *value.data<float>() = static_cast<float>(v); break;
    case DType::kF64: *value.data<double>() = v; break;
    case DType::kUnknown:
      return absl::InternalError("scalar constant of unknown dtype");
  }
  return graph_->AddConstant(std::move(value), std::move(name));
}

// ------------------------------------------------------------- entry points

absl::StatusOr<ir::Graph> ImportTorchGraph(const torch::jit::Graph& graph,
                                           const ImportOptions& options, bool has_self) {
  return CatchTorchErrors([&] { return TranslateGraph(graph, options, has_self); });
}

absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view bytes,
                                            const ImportOptions& options) {
  return CatchTorchErrors([&]() -> absl::StatusOr<ir::Graph> {
    c10::NoGradGuard no_grad;
    std::istringstream in(std::string(bytes), std::ios::in | std::ios::binary);
    torch::jit::Module module = torch::jit::load(in, c10::Device(c10::kCPU));
    module.eval();
    torch::jit::Module frozen = torch::jit::freeze(module);
    torch::jit::Method forward = frozen.get_method("forward");
    std::shared_ptr<torch::jit::Graph> graph = forward.graph();
    torch::jit::Inline(*graph);
    torch::jit::removeDropout(graph);
    torch::jit::ConstantPropagation(graph);
    RemoveShapeGuards(*graph);  // before DCE, which then drops the guards' conditions
    torch::jit::EliminateDeadCode(graph);

    // The graph's debug names may be renumbered by inlining; the schema keeps
    // the names the user wrote.
    ImportOptions named = options;
    const std::vector<c10::Argument>& args = forward.function().getSchema().arguments();
    named.input_names.clear();
    for (size_t i = 1; i < args.size(); ++i) named.input_names.push_back(args[i].name());
    for (size_t i = 0; i < options.input_names.size(); ++i) {
      if (i >= named.input_names.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("ImportOptions::input_names has ", options.input_names.size(),
                         " names but forward() takes ", named.input_names.size(), " inputs"));
      }
      if (!options.input_names[i].empty()) named.input_names[i] = options.input_names[i];
    }
    return TranslateGraph(*graph, named, /*has_self=*/true);
  });
}

absl::StatusOr<ir::Graph> ImportTorchScriptFile(const std::string& path,
                                                const ImportOptions& options) {
  std::ifstream file(path, std::ios::in | std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream bytes;
  bytes << file.rdbuf();
  if (file.bad()) return absl::InvalidArgumentError(absl::StrCat("cannot read '", path, "'"));
  return ImportTorchScript(bytes.str(), options);
}

}  // namespace kiln::importer
