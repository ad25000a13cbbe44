// TorchScript -> Kiln IR.
//
// Stages:
//   1. torch::jit::load from memory, eval(), torch::jit::freeze without its
//      numerics-changing optimisations: parameters become prim::Constant
//      tensors; batch norms stay ops (Kiln's fuse_conv_epilogue pass fuses them
//      with libtorch's unfused numerics).
//   2. Clean the forward graph: Inline, removeDropout, ConstantPropagation,
//      RemoveShapeGuards (rank checks that raise, see below), EliminateDeadCode,
//      LowerAllTuples (tuples have a static arity, so they never reach the IR).
//   3. Translate block by block in graph order (translator.cc): the aten table
//      for tensor ops, scalar ops (aten_convert_scalar.cc) for run-time ints,
//      floats, bools and lists, If/Loop with nested blocks for control flow,
//      and a Fallback node (fallback_convert.cc) for whatever Kiln does not
//      translate, unless the import is strict.
//
// libtorch reports failures by throwing; this file is the only place that
// catches (c10::Error and std::exception) and turns them into InvalidArgument.
#include "engine/importer/torchscript/torchscript_importer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <c10/core/GradMode.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/remove_dropout.h>
#include <torch/csrc/jit/serialization/import.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/aten_op_table.h"
#include "engine/importer/torchscript/import_context.h"
#include "engine/importer/torchscript/prepared_module.h"
#include "engine/importer/torchscript/translator.h"

namespace kiln::importer {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool IsTensor(const Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

// ---- shape guards ----
//
// Scripted modules check their input's rank before computing, e.g. BatchNorm's
// `if input.dim() != 4: raise ValueError(...)`. Such guards are prim::If nodes
// whose only effect is prim::RaiseException and whose condition reads tensor
// metadata alone. Kiln's runtime validates ranks and shapes itself (the input
// contract, then each kernel's Prepare), so these guards are dropped. Guards
// that read tensor *values* are kept and run as If and Raise nodes.

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

// Names for forward()'s parameter `name` of `type` after tuples are lowered:
// a tuple parameter "p" becomes "p.0", "p.1", ... (recursively).
void FlattenedNames(const std::string& name, const c10::TypePtr& type,
                    std::vector<std::string>& out) {
  if (auto tuple = type->cast<c10::TupleType>()) {
    for (size_t i = 0; i < tuple->elements().size(); ++i) {
      FlattenedNames(absl::StrCat(name, ".", i), tuple->elements()[i], out);
    }
    return;
  }
  out.push_back(name);
}

// ---- structured results ----
//
// forward() may return a tuple, a list literal or a dict (string keys) of
// tensors, nested. Dicts and tensor-list literals are rebuilt as tuples, so
// that LowerAllTuples flattens the whole result into graph outputs, and every
// leaf is named after its place: element i of the result is "output<i>", a
// nested position appends ".<i>", and a dict's value takes its key (nested:
// "<parent>.<key>"). A lone tensor is "output0". A lone tensor list whose
// length only a run tells (`return torch.split(x, 2)`) is "output": its
// elements are the result's positions, so they come back as "output0",
// "output1", ... like a tuple's (runtime::Model::Infer).

std::string ChildName(const std::optional<std::string>& parent, const std::string& part,
                      bool positional) {
  if (!parent.has_value()) return positional ? absl::StrCat("output", part) : part;
  return absl::StrCat(*parent, ".", part);
}

bool IsTensorList(const c10::TypePtr& type) {
  const auto* list = type->castRaw<c10::ListType>();
  return list != nullptr && list->getElementType()->kind() == c10::TypeKind::TensorType;
}

void NamesOfType(const c10::TypePtr& type, const std::optional<std::string>& name,
                 std::vector<std::string>& out) {
  if (auto tuple = type->cast<c10::TupleType>()) {
    for (size_t i = 0; i < tuple->elements().size(); ++i) {
      NamesOfType(tuple->elements()[i], ChildName(name, std::to_string(i), true), out);
    }
    return;
  }
  if (!name.has_value() && IsTensorList(type)) {
    out.push_back("output");
    return;
  }
  out.push_back(name.value_or("output0"));
}

// Returns `v`, or the tuple that replaces it, and appends the leaves' names.
Value* StructureResult(torch::jit::Graph& graph, Value* v, const std::optional<std::string>& name,
                       std::vector<std::string>& out) {
  Node* node = v->node();
  // A dict or list mutated after it was built (append, setitem) is not a literal.
  const bool literal = v->uses().size() == 1;
  const bool dict = node->kind() == c10::prim::DictConstruct && literal;
  const bool tensor_list = node->kind() == c10::prim::ListConstruct && literal &&
                           v->type()->castRaw<c10::ListType>() != nullptr &&
                           v->type()->castRaw<c10::ListType>()->getElementType()->kind() ==
                               c10::TypeKind::TensorType;
  if (dict) {
    std::vector<Value*> values;
    for (size_t i = 0; i + 1 < node->inputs().size(); i += 2) {
      std::optional<c10::IValue> key = torch::jit::toIValue(node->input(i));
      if (!key.has_value() || !key->isString()) {
        NamesOfType(v->type(), name, out);  // left for the translator to reject
        return v;
      }
      values.push_back(
          StructureResult(graph, node->input(i + 1), ChildName(name, key->toStringRef(), false),
                          out));
    }
    torch::jit::WithInsertPoint guard(graph.return_node());
    return graph.insertNode(graph.createTuple(values))->output();
  }
  if (node->kind() == c10::prim::TupleConstruct || tensor_list) {
    std::vector<Value*> values;
    bool changed = tensor_list;
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      Value* e = StructureResult(graph, node->input(i), ChildName(name, std::to_string(i), true),
                                 out);
      changed = changed || e != node->input(i);
      values.push_back(e);
    }
    if (!changed) return v;
    torch::jit::WithInsertPoint guard(graph.return_node());
    return graph.insertNode(graph.createTuple(values))->output();
  }
  NamesOfType(v->type(), name, out);
  return v;
}

// Rewrites forward()'s result as above; returns the output names, or none
// when the graph returns more than one value (a parsed graph).
std::vector<std::string> StructureResults(torch::jit::Graph& graph) {
  std::vector<std::string> names;
  if (graph.outputs().size() != 1) return names;
  Value* result = StructureResult(graph, graph.outputs()[0], std::nullopt, names);
  if (result != graph.outputs()[0]) graph.return_node()->replaceInput(0, result);
  return names;
}

// ---- nested tuples out of branches ----
//
// libtorch 1.13's LowerAllTuples flattens a tuple an If yields, but asserts
// on a nested one (`return x, (y, z)` from both branches). So nested tuples
// out of an If are flattened here first: each branch yields one flat tuple of
// the leaves, and right after the If the nested structure is rebuilt from
// them for the If's users, which LowerAllTuples then flattens as usual.

bool IsNestedTuple(const c10::TypePtr& type) {
  auto tuple = type->cast<c10::TupleType>();
  if (!tuple) return false;
  for (const c10::TypePtr& e : tuple->elements()) {
    if (e->cast<c10::TupleType>()) return true;
  }
  return false;
}

void LeafTypes(const c10::TypePtr& type, std::vector<c10::TypePtr>& out) {
  if (auto tuple = type->cast<c10::TupleType>()) {
    for (const c10::TypePtr& e : tuple->elements()) LeafTypes(e, out);
    return;
  }
  out.push_back(type);
}

// The leaves of tuple value `v`, unpacking where it is not a TupleConstruct.
void Leaves(torch::jit::Graph& graph, Value* v, std::vector<Value*>& out) {
  if (!v->type()->cast<c10::TupleType>()) {
    out.push_back(v);
    return;
  }
  if (v->node()->kind() == c10::prim::TupleConstruct) {
    for (Value* e : v->node()->inputs()) Leaves(graph, e, out);
    return;
  }
  Node* unpack = graph.insertNode(graph.createTupleUnpack(v));
  for (Value* e : unpack->outputs()) Leaves(graph, e, out);
}

// Rebuilds a value of tuple `type` from `leaves` (consumed from `next`).
Value* Rebuild(torch::jit::Graph& graph, const c10::TypePtr& type,
               const std::vector<Value*>& leaves, size_t& next) {
  auto tuple = type->cast<c10::TupleType>();
  if (!tuple) return leaves[next++];
  std::vector<Value*> elements;
  for (const c10::TypePtr& e : tuple->elements()) elements.push_back(Rebuild(graph, e, leaves, next));
  return graph.insertNode(graph.createTuple(elements))->output();
}

void FlattenNestedTupleBranches(torch::jit::Graph& graph, torch::jit::Block* block) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* b : node->blocks()) FlattenNestedTupleBranches(graph, b);
    if (node->kind() != c10::prim::If) continue;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      Value* out = node->output(i);
      const c10::TypePtr nested = out->type();
      if (!IsNestedTuple(nested)) continue;
      std::vector<c10::TypePtr> leaf_types;
      LeafTypes(nested, leaf_types);
      for (torch::jit::Block* b : node->blocks()) {
        torch::jit::WithInsertPoint guard(b->return_node());
        std::vector<Value*> leaves;
        Leaves(graph, b->outputs()[i], leaves);
        b->return_node()->replaceInput(i, graph.insertNode(graph.createTuple(leaves))->output());
      }
      out->setType(c10::TupleType::create(leaf_types));
      torch::jit::WithInsertPoint guard(node->next());
      Node* unpack = graph.insertNode(graph.createTupleUnpack(out));
      std::vector<Value*> leaves(unpack->outputs().begin(), unpack->outputs().end());
      size_t next = 0;
      Value* rebuilt = Rebuild(graph, nested, leaves, next);
      out->replaceAllUsesWith(rebuilt);
      unpack->replaceInput(0, out);
    }
  }
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

std::optional<Tensor> ScalarTensor(const c10::IValue& v) {
  if (v.isBool()) {
    Tensor t = Tensor::Zeros(DType::kBool, {});
    *t.data<bool>() = v.toBool();
    return t;
  }
  if (v.isInt()) {
    Tensor t = Tensor::Zeros(DType::kInt64, {});
    *t.data<int64_t>() = v.toInt();
    return t;
  }
  if (v.isDouble()) {
    Tensor t = Tensor::Zeros(DType::kF64, {});
    *t.data<double>() = v.toDouble();
    return t;
  }
  return std::nullopt;
}

absl::StatusOr<c10::ScalarType> TorchFromDType(DType dtype) {
  // The inverse of the table above, so the two cannot drift apart.
  for (c10::ScalarType t :
       {c10::ScalarType::Bool, c10::ScalarType::Byte, c10::ScalarType::Char,
        c10::ScalarType::Short, c10::ScalarType::Int, c10::ScalarType::Long,
        c10::ScalarType::Half, c10::ScalarType::BFloat16, c10::ScalarType::Float,
        c10::ScalarType::Double}) {
    absl::StatusOr<DType> d = DTypeFromTorch(t);
    if (d.ok() && *d == dtype) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("a tensor of dtype ", DTypeName(dtype), " has no libtorch scalar type"));
}

std::optional<ir::ValueKind> KindOfType(const c10::TypePtr& type, bool* optional) {
  if (optional != nullptr) *optional = false;
  c10::TypePtr t = type;
  if (auto opt = t->cast<c10::OptionalType>()) {
    if (optional != nullptr) *optional = true;
    t = opt->getElementType();
  }
  switch (t->kind()) {
    case c10::TypeKind::TensorType: return ir::ValueKind::kTensor;
    case c10::TypeKind::IntType: return ir::ValueKind::kInt;
    case c10::TypeKind::FloatType: return ir::ValueKind::kFloat;
    case c10::TypeKind::NumberType: return ir::ValueKind::kFloat;
    case c10::TypeKind::BoolType: return ir::ValueKind::kBool;
    case c10::TypeKind::NoneType: return ir::ValueKind::kNone;
    case c10::TypeKind::ListType: {
      c10::TypePtr element = t->castRaw<c10::ListType>()->getElementType();
      if (auto opt = element->cast<c10::OptionalType>()) element = opt->getElementType();
      switch (element->kind()) {
        case c10::TypeKind::TensorType: return ir::ValueKind::kTensorList;
        case c10::TypeKind::IntType: return ir::ValueKind::kIntList;
        case c10::TypeKind::FloatType: return ir::ValueKind::kFloatList;
        case c10::TypeKind::BoolType: return ir::ValueKind::kBoolList;
        default: return std::nullopt;
      }
    }
    default:
      return std::nullopt;
  }
}

// ------------------------------------------------------------- entry points

PreparedModule LoadAndPrepare(std::string_view bytes, bool float64) {
  c10::NoGradGuard no_grad;
  std::istringstream in(std::string(bytes), std::ios::in | std::ios::binary);
  PreparedModule prepared;
  prepared.module = torch::jit::load(in, c10::Device(c10::kCPU));
  prepared.module.eval();
  if (float64) prepared.module.to(at::kDouble);
  // optimize_numerics=false: libtorch would fold batch norm into the convolution
  // weights, which changes results by ~1e-4 in deep nets (libtorch frozen vs
  // unfrozen on resnet101); the IR keeps the model's own ops and Kiln's
  // passes fuse them with the numerics of the unfused ops.
  prepared.frozen = torch::jit::freeze(prepared.module, c10::nullopt, /*optimize_numerics=*/false);
  torch::jit::Method forward = prepared.frozen.get_method("forward");
  std::shared_ptr<torch::jit::Graph> graph = forward.graph()->copy();
  torch::jit::Inline(*graph);
  torch::jit::removeDropout(graph);
  torch::jit::ConstantPropagation(graph);
  RemoveShapeGuards(*graph);  // before DCE, which then drops the guards' conditions
  torch::jit::EliminateDeadCode(graph);
  // Tuples have a static arity: flattening them (forward()'s tuple
  // parameters and results, tuples carried by If and Loop) keeps them out of
  // the IR.
  std::vector<std::string> output_names = StructureResults(*graph);
  FlattenNestedTupleBranches(*graph, graph->block());
  torch::jit::LowerAllTuples(graph);
  torch::jit::EliminateDeadCode(graph);
  // Keep the names only when they still match the outputs one to one.
  if (output_names.size() == graph->outputs().size()) {
    prepared.output_names = std::move(output_names);
  }
  // The graph's debug names may be renumbered by inlining; the schema keeps
  // the names the user wrote.
  const std::vector<c10::Argument>& args = forward.function().getSchema().arguments();
  for (size_t i = 1; i < args.size(); ++i) {
    const size_t before = prepared.input_names.size();
    FlattenedNames(args[i].name(), args[i].type(), prepared.input_names);
    prepared.input_defaults.resize(prepared.input_names.size());
    if (prepared.input_names.size() == before + 1 && args[i].default_value().has_value()) {
      prepared.input_defaults[before] = ScalarTensor(*args[i].default_value());
    }
  }
  prepared.graph = std::move(graph);
  return prepared;
}

absl::StatusOr<ir::Graph> ImportTorchGraph(const torch::jit::Graph& graph,
                                           const ImportOptions& options, bool has_self,
                                           ImportTrace* trace) {
  return CatchTorchErrors([&] { return TranslateGraph(graph, options, has_self, trace); });
}

absl::StatusOr<ir::Graph> ImportTorchScript(std::string_view bytes,
                                            const ImportOptions& options) {
  return CatchTorchErrors([&]() -> absl::StatusOr<ir::Graph> {
    PreparedModule prepared = LoadAndPrepare(bytes);
    ImportOptions named = options;
    named.input_names = prepared.input_names;
    named.input_defaults = prepared.input_defaults;
    const size_t num_inputs = prepared.graph->inputs().size() - 1;
    if (named.input_names.size() != num_inputs) {
      return absl::InternalError(absl::StrCat("forward() has ", named.input_names.size(),
                                              " parameter names for ", num_inputs, " inputs"));
    }
    named.output_names = prepared.output_names;
    for (size_t i = 0; i < options.output_names.size(); ++i) {
      if (i >= named.output_names.size()) named.output_names.resize(i + 1);
      if (!options.output_names[i].empty()) named.output_names[i] = options.output_names[i];
    }
    for (size_t i = 0; i < options.input_names.size(); ++i) {
      if (i >= named.input_names.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("ImportOptions::input_names has ", options.input_names.size(),
                         " names but forward() takes ", named.input_names.size(), " inputs"));
      }
      if (!options.input_names[i].empty()) named.input_names[i] = options.input_names[i];
    }
    return TranslateGraph(*prepared.graph, named, /*has_self=*/true, nullptr);
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

std::vector<std::string> FallbackOps(const ir::Graph& graph) {
  std::set<std::string> ops;
  for (const ir::Node& node : graph.nodes()) {
    if (node.kind == ir::OpKind::kFallback) ops.insert(node.source_op);
  }
  return std::vector<std::string>(ops.begin(), ops.end());
}

}  // namespace kiln::importer
