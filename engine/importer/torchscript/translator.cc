// Translates a prepared torch graph into Kiln IR, block by block.
//
// Every node goes to exactly one of:
//   - structure, handled here: constants, literal lists and tuples (read by
//     their consumers), unpacking, prim::If and prim::Loop (ir If and Loop
//     with nested blocks), raise, None, Optional checks, NumToTensor;
//   - the scalar table (aten_convert_scalar.cc) for ints, floats, bools and
//     lists, including arithmetic on the 0-dim tensors tracing records;
//   - the aten table (aten_op_table.cc) for tensor ops;
//   - a Fallback node (fallback_convert.cc) when neither translates it, or
//     its converter reports Unimplemented. A strict import records the op
//     instead and fails at the end, listing all of them.
//
// Mutation. TorchScript mutates tensors in place (relu_) and lists
// (append). Kiln's IR is pure, so a mutated value is rebound to the result;
// a tensor written through a view writes the tensors it is a view of, and
// their other views are taken again (Written, view_write.h). When a block mutates a value defined outside it, the value is threaded
// through the control node: an extra If output, or an extra loop-carried
// value, whose result the outer scope is rebound to afterwards.
#include "engine/importer/torchscript/translator.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"
#include "engine/importer/aten/view_write.h"
#include "engine/importer/torchscript/torchscript_call.h"

namespace kiln::importer {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool IsTensor(const Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

// relu_, add_ (but not __and__): the result replaces the first input.
bool IsInPlaceKind(std::string_view kind) {
  return kind.size() > 1 && kind.back() == '_' && kind[kind.size() - 2] != '_';
}

// "x.1" -> "x": TorchScript appends ".N" to keep debug names unique.
std::string StripDebugSuffix(const std::string& name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, dot);
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

// Whether `v` is defined inside one of `node`'s blocks.
bool DefinedInside(const Value* v, const Node* node) {
  for (const torch::jit::Block* b = v->node()->owningBlock(); b != nullptr;) {
    const Node* owner = b->owningNode();
    if (owner == nullptr) return false;
    if (owner == node) return true;
    b = owner->owningBlock();
  }
  return false;
}

// The view op that made tensor `v` (a slice, select, view, ...: a write into
// v is a write into the op's first input), or nullptr when v owns its memory.
const Node* ViewProducer(const Value* v) {
  const Node* n = v->node();
  if (!IsViewOp(n->kind().toQualString()) || n->outputs().size() != 1 || n->inputs().empty() ||
      !IsTensor(v) || !IsTensor(n->input(0))) {
    return nullptr;
  }
  return n;
}

// A piece of a split-like op's list (IsPieceViewOp: split, chunk, unbind),
// taken by prim::ListUnpack or by aten::__getitem__ at a constant index: a
// write into it is a write into the op's first input.
struct PieceOf {
  const Node* split = nullptr;
  int64_t piece = 0;
};

std::optional<PieceOf> PieceProducer(const Value* v) {
  const Node* n = v->node();
  if (!IsTensor(v) || n->inputs().empty()) return std::nullopt;
  PieceOf p;
  if (n->kind() == c10::prim::ListUnpack) {
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      if (n->outputs()[i] == v) p.piece = static_cast<int64_t>(i);
    }
  } else if (n->kind() == c10::aten::__getitem__ && n->inputs().size() == 2) {
    const c10::optional<c10::IValue> index = torch::jit::toIValue(n->input(1));
    if (!index.has_value() || !index->isInt() || index->toInt() < 0) return std::nullopt;
    p.piece = index->toInt();
  } else {
    return std::nullopt;
  }
  p.split = n->input(0)->node();
  if (!IsPieceViewOp(p.split->kind().toQualString()) || p.split->inputs().empty() ||
      !IsTensor(p.split->input(0))) {
    return std::nullopt;
  }
  return p;
}

bool IsListMutation(c10::Symbol kind) {
  return kind == c10::aten::append || kind == c10::aten::_set_item ||
         kind == c10::aten::insert || kind == c10::Symbol::aten("extend") || kind == c10::aten::pop ||
         kind == c10::aten::clear;
}

class Translator {
 public:
  Translator(const ImportOptions& options, ir::Graph* out, ImportTrace* trace)
      : options_(options), g_(*out), ctx_(out), trace_(trace) {
    forced_.insert(options.force_fallback.begin(), options.force_fallback.end());
  }

  absl::Status Inputs(const torch::jit::Graph& graph, bool has_self);
  absl::Status TranslateBlock(const torch::jit::Block* block, bool top_level);
  absl::Status Outputs(const torch::jit::Graph& graph);
  // Strict mode: the one error listing every unsupported op.
  absl::Status Report() const;
  void Number(const torch::jit::Block* block);

 private:
  absl::Status TranslateNode(const Node* node, bool top_level);
  absl::Status Unpack(const Node* node);
  absl::Status If(const Node* node);
  absl::Status Loop(const Node* node);
  absl::Status IsNoneCheck(const Node* node);
  absl::Status Raise(const Node* node);
  absl::Status Convert(const Node* node, Converter convert);
  // Through the shared aten table (engine/importer/aten), the node seen as a TorchScriptCall.
  absl::Status ConvertShared(const Node* node, AtenConverter convert);
  absl::Status Finish(const Node* node, absl::StatusOr<std::vector<ir::ValueId>> results);
  // Mutating `node` (relu_, fill_, append) left `value` in its first input:
  // rebinds that, and for an in-place op on a tensor writes the value up the
  // views the input was taken through and takes the other views of every
  // tensor that changed again (engine/importer/aten/view_write.h).
  absl::Status Written(const Node* node, ir::ValueId value);
  // Takes again the translated views of `base` not yet in `done`, and theirs.
  absl::Status RetakeViews(const Value* base, std::set<const Value*>& done);
  absl::Status Fallback(const Node* node, const absl::Status& why, bool forced);
  bool UseScalarTable(const Node* node, Converter* convert) const;
  // Values defined outside `node` that its blocks mutate, in first-seen order.
  std::vector<const Value*> MutatedOutside(const Node* node) const;
  void CollectMutated(const torch::jit::Block* block, const Node* owner, std::vector<const Value*>& out,
                      std::set<const Value*>& seen) const;
  // Makes the tensor constants used inside `node`'s blocks before the node, so
  // each weight is copied once.
  absl::Status HoistConstants(const Node* node);
  void SetKinds(const std::vector<ir::ValueId>& ir_values, const std::vector<const Value*>& values);

  const ImportOptions& options_;
  ir::Graph& g_;
  ImportContext ctx_;
  ImportTrace* trace_;
  std::set<std::string> forced_;
  int next_index_ = 0;
  std::set<std::string> unsupported_;
  std::vector<std::string> details_;
};

void Translator::Number(const torch::jit::Block* block) {
  for (const Node* node : block->nodes()) {
    ctx_.SetNodeIndex(node, next_index_++);
    for (const torch::jit::Block* sub : node->blocks()) Number(sub);
  }
}

absl::Status Translator::Inputs(const torch::jit::Graph& graph, bool has_self) {
  const auto inputs = graph.inputs();
  const size_t first = has_self && !inputs.empty() ? 1 : 0;
  const size_t num_inputs = inputs.size() - first;
  if (options_.input_names.size() > num_inputs) {
    return absl::InvalidArgumentError(absl::StrCat("ImportOptions::input_names has ",
                                                   options_.input_names.size(),
                                                   " names but forward() takes ", num_inputs,
                                                   " inputs"));
  }
  std::set<std::string> seen_names;
  for (size_t k = 0; k < num_inputs; ++k) {
    const Value* input = inputs[first + k];
    std::string name = k < options_.input_names.size() && !options_.input_names[k].empty()
                           ? options_.input_names[k]
                           : StripDebugSuffix(input->debugName());
    if (!seen_names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate input name '", name, "'"));
    }
    bool optional = false;
    std::optional<ir::ValueKind> kind = KindOfType(input->type(), &optional);
    if (!kind.has_value() || *kind == ir::ValueKind::kNone) {
      return absl::UnimplementedError(absl::StrCat(
          "forward() argument '", name, "' has type ", input->type()->repr_str(),
          "; supported are tensors, Optional[Tensor], int, float, bool, lists and tuples of them"));
    }
    ir::TensorType type;
    if (auto tt = input->type()->cast<c10::TensorType>()) {
      ASSIGN_OR_RETURN(type, InputType(*tt));
    } else if (ir::IsScalarKind(*kind)) {
      type = ir::TensorType{ir::ScalarKindDType(*kind), Dims{}};
    }
    ir::ValueId id = g_.AddInput(std::move(name), std::move(type), *kind);
    g_.mutable_value(id).optional = optional;
    if (k < options_.input_defaults.size() && options_.input_defaults[k].has_value() &&
        ir::IsScalarKind(*kind) &&
        options_.input_defaults[k]->dtype() == ir::ScalarKindDType(*kind)) {
      g_.mutable_value(id).default_value = options_.input_defaults[k];
    }
    ctx_.Bind(input, id);
  }
  return absl::OkStatus();
}

absl::Status Translator::Outputs(const torch::jit::Graph& graph) {
  // A returned tuple gives one graph output per element (tuples lowered by
  // LowerAllTuples already are; parsed graphs may still return one).
  std::vector<const Value*> returned;
  std::function<void(const Value*)> flatten = [&](const Value* v) {
    if (v->node()->kind() == c10::prim::TupleConstruct) {
      for (const Value* e : v->node()->inputs()) flatten(e);
    } else {
      returned.push_back(v);
    }
  };
  for (const Value* v : graph.outputs()) flatten(v);
  if (options_.output_names.size() > returned.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ImportOptions::output_names has ",
                                                   options_.output_names.size(),
                                                   " names but forward() returns ",
                                                   returned.size(), " values"));
  }
  for (size_t k = 0; k < returned.size(); ++k) {
    std::string name = k < options_.output_names.size() && !options_.output_names[k].empty()
                           ? options_.output_names[k]
                           : absl::StrCat("output", k);
    std::optional<ir::ValueKind> kind = KindOfType(returned[k]->type());
    if (!kind.has_value()) {
      return absl::UnimplementedError(absl::StrCat(
          "forward() output ", k, " has type ", returned[k]->type()->repr_str(),
          "; supported are tensors, int, float, bool, None, lists and tuples of them"));
    }
    ASSIGN_OR_RETURN(ir::ValueId id,
                     ctx_.AnyValue(returned[k], absl::StrCat("forward() output ", k, ": ")));
    g_.AddOutput(id, std::move(name));
  }
  return absl::OkStatus();
}

absl::Status Translator::Report() const {
  if (unsupported_.empty()) return absl::OkStatus();
  std::string message = absl::StrCat("unsupported ops: ", absl::StrJoin(unsupported_, ", "));
  if (!details_.empty()) absl::StrAppend(&message, " (", absl::StrJoin(details_, "; "), ")");
  return absl::UnimplementedError(message);
}

absl::Status Translator::TranslateBlock(const torch::jit::Block* block, bool top_level) {
  for (const Node* node : block->nodes()) {
    RETURN_IF_ERROR(TranslateNode(node, top_level));
    if (trace_ != nullptr && top_level) {
      ImportTrace::Entry entry{node, ctx_.NodeIndex(node), {}};
      for (const Value* out : node->outputs()) {
        if (!IsTensor(out)) continue;
        if (std::optional<ir::ValueId> id = ctx_.Bound(out);
            id && g_.value(*id).kind == ir::ValueKind::kTensor) {
          entry.outputs.push_back({out, *id});
        }
      }
      if (!entry.outputs.empty()) trace_->nodes.push_back(std::move(entry));
    }
  }
  return absl::OkStatus();
}

bool Translator::UseScalarTable(const Node* node, Converter* convert) const {
  bool arithmetic = false;
  *convert = FindScalarConverter(node->kind().toQualString(), &arithmetic);
  if (*convert == nullptr) return false;
  if (!arithmetic) return true;
  // A tensor op as well: scalars only when no input is a tensor with data.
  const bool list_compare = node->kind() == c10::aten::eq || node->kind() == c10::aten::ne;
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    if (ctx_.IsScalarLike(*node, i)) continue;
    if (list_compare && KindOfType(node->inputs()[i]->type()) == ir::ValueKind::kIntList) {
      continue;  // hx.size() != [...]: Python's list comparison
    }
    std::optional<c10::IValue> c = ctx_.ConstantOf(node->inputs()[i]);
    if (c.has_value() && !c->isTensor() && !c->isList()) continue;  // None, str, numbers
    return false;
  }
  return !node->inputs().empty();
}

absl::Status Translator::TranslateNode(const Node* node, bool top_level) {
  const c10::Symbol kind = node->kind();
  // ---- structure ----
  if (kind == c10::prim::Constant || kind == c10::prim::ListConstruct ||
      kind == c10::prim::TupleConstruct || kind == c10::prim::GetAttr ||
      kind == c10::prim::Print || kind == c10::aten::warn) {
    return absl::OkStatus();  // read by consumers, or no effect on outputs
  }
  if (kind == c10::prim::TupleUnpack || kind == c10::prim::ListUnpack) return Unpack(node);
  if (kind == c10::prim::TupleIndex) {
    const Node* producer = node->input(0)->node();
    ASSIGN_OR_RETURN(int64_t i, ctx_.ConstInt(*node, 1));
    if (producer->kind() != c10::prim::TupleConstruct || i < 0 ||
        i >= static_cast<int64_t>(producer->inputs().size())) {
      return ctx_.Unimplemented(*node, "indexes a tuple Kiln cannot see");
    }
    ctx_.Alias(node->output(), producer->input(i));
    return absl::OkStatus();
  }
  if (kind == c10::prim::If) return If(node);
  if (kind == c10::prim::Loop) return Loop(node);
  if (kind == c10::prim::RaiseException) return Raise(node);
  if (kind == c10::prim::device) {
    // x.device: Kiln runs on the CPU; an op that takes device= (aten::tensor,
    // or one run through the fallback) is given None, the default device.
    ctx_.Bind(node->output(), ctx_.AddNone(node->output()->debugName()));
    return absl::OkStatus();
  }
  if (kind == c10::prim::Uninitialized) {
    // A value no path reads (the other branch of an early return).
    ctx_.Bind(node->output(), ctx_.AddNone(node->output()->debugName()));
    return absl::OkStatus();
  }
  if (kind == c10::prim::unchecked_cast || kind == c10::prim::NumToTensor) {
    // The same value, seen with another type (NumToTensor: the int as a 0-dim tensor).
    ASSIGN_OR_RETURN(ir::ValueId id, ctx_.AnyValue(node->input(0), ctx_.Where(*node)));
    ctx_.Bind(node->output(), id);
    return absl::OkStatus();
  }
  if (!node->outputs().empty() && node->blocks().empty()) {
    // Strings and other values Kiln has no kind for (aten::format for a raise
    // message): only their consumers can say whether they matter.
    bool holdable = false;
    for (const Value* out : node->outputs()) holdable |= KindOfType(out->type()).has_value();
    if (!holdable) return absl::OkStatus();
  }
  if (kind == c10::aten::__is__ || kind == c10::aten::__isnot__) return IsNoneCheck(node);

  const std::string qual = kind.toQualString();
  if (forced_.count(qual) > 0) return Fallback(node, absl::OkStatus(), /*forced=*/true);
  Converter convert = nullptr;
  if (UseScalarTable(node, &convert)) return Convert(node, convert);
  // The table shared with the torch.export front, where an in-place form maps
  // to its functional row.
  if (AtenConverter shared = FindAtenConverter(OutOfPlaceOp(qual)); shared != nullptr) {
    return ConvertShared(node, shared);
  }
  return Fallback(node, ctx_.Unimplemented(*node, "has no native translation"), false);
}

absl::Status Translator::Convert(const Node* node, Converter convert) {
  return Finish(node, convert(*node, ctx_));
}

absl::Status Translator::ConvertShared(const Node* node, AtenConverter convert) {
  TorchScriptCall call(*node, ctx_);
  return Finish(node, convert(call, ctx_));
}

absl::Status Translator::Finish(const Node* node,
                                absl::StatusOr<std::vector<ir::ValueId>> results) {
  if (!results.ok()) {
    if (absl::IsUnimplemented(results.status())) return Fallback(node, results.status(), false);
    return results.status();
  }
  if (results->size() != node->outputs().size()) {
    return absl::InternalError(absl::StrCat(ctx_.Where(*node), "converter returned ",
                                            results->size(), " values for ",
                                            node->outputs().size(), " outputs"));
  }
  AddFallbackTwin(*node, *results, ctx_);
  if (std::getenv("KILN_TEST_PERTURB_OP") != nullptr) {  // the test hook; see PerturbForTest
    TorchScriptCall call(*node, ctx_);
    RETURN_IF_ERROR(ctx_.PerturbForTest(call, *results));
  }
  for (size_t i = 0; i < results->size(); ++i) ctx_.Bind(node->outputs()[i], (*results)[i]);
  if (MutatesFirstInput(*node) && !node->inputs().empty() && !results->empty()) {
    return Written(node, (*results)[0]);
  }
  return absl::OkStatus();
}

absl::Status Translator::Fallback(const Node* node, const absl::Status& why, bool forced) {
  const std::string qual = node->kind().toQualString();
  if (options_.strict && !forced) {
    // Record, then keep translating with a fallback node so the list is complete.
    unsupported_.insert(qual);
    if (!why.ok() && why.message().find("has no native translation") == std::string_view::npos) {
      details_.push_back(std::string(why.message()));
    }
  }
  absl::StatusOr<std::vector<ir::ValueId>> results = ConvertFallback(*node, ctx_);
  if (!results.ok()) {
    if (options_.strict && !forced) {
      // The import fails anyway; bind placeholders so translation continues.
      for (const Value* out : node->outputs()) ctx_.Bind(out, ctx_.AddNone());
      return absl::OkStatus();
    }
    if (!why.ok() && why.message().find("has no native translation") == std::string_view::npos) {
      return absl::Status(results.status().code(),
                          absl::StrCat(why.message(), "; and the libtorch fallback: ",
                                       results.status().message()));
    }
    return results.status();
  }
  for (size_t i = 0; i < results->size(); ++i) ctx_.Bind(node->outputs()[i], (*results)[i]);
  if (MutatesFirstInput(*node) && !node->inputs().empty() && !results->empty()) {
    return Written(node, (*results)[0]);
  }
  return absl::OkStatus();
}

absl::Status Translator::Written(const Node* node, ir::ValueId value) {
  const Value* target = node->input(0);
  ctx_.MarkMutated(target);
  ctx_.Bind(target, value);
  if (!IsInPlaceKind(node->kind().toQualString()) || !IsTensor(target)) return absl::OkStatus();
  std::set<const Value*> done = {target};
  std::vector<const Value*> changed = {target};
  for (;;) {
    const Value* written = changed.back();
    const Value* base = nullptr;
    if (const Node* view = ViewProducer(written)) {
      base = view->input(0);
      TorchScriptCall call(*view, ctx_);
      const bool base_is_view = ViewProducer(base) != nullptr || PieceProducer(base).has_value();
      ASSIGN_OR_RETURN(value, WriteThroughView(call, base_is_view, value, ctx_));
    } else if (std::optional<PieceOf> piece = PieceProducer(written)) {
      base = piece->split->input(0);
      TorchScriptCall call(*piece->split, ctx_);
      ASSIGN_OR_RETURN(value, WriteThroughPiece(call, piece->piece, value, ctx_));
    } else {
      break;
    }
    ctx_.MarkMutated(base);
    ctx_.Bind(base, value);
    done.insert(base);
    changed.push_back(base);
  }
  for (const Value* c : changed) RETURN_IF_ERROR(RetakeViews(c, done));
  return absl::OkStatus();
}

absl::Status Translator::RetakeViews(const Value* base, std::set<const Value*>& done) {
  std::vector<const Value*> pending = {base};
  while (!pending.empty()) {
    const Value* v = pending.back();
    pending.pop_back();
    for (const torch::jit::Use& use : v->uses()) {
      const Node* user = use.user;
      if (use.offset == 0 && IsPieceViewOp(user->kind().toQualString()) &&
          user->outputs().size() == 1 && ctx_.Bound(user->output()).has_value() &&
          done.insert(user->output()).second) {
        // The list of pieces again, and the pieces taken from it.
        RETURN_IF_ERROR(TranslateNode(user, /*top_level=*/false));
        for (const torch::jit::Use& take : user->output()->uses()) {
          const Node* unpack = take.user;
          if (unpack->outputs().empty() || !ctx_.Bound(unpack->outputs()[0]).has_value()) continue;
          if (!PieceProducer(unpack->outputs()[0]).has_value()) continue;
          RETURN_IF_ERROR(TranslateNode(unpack, /*top_level=*/false));
          for (const Value* piece : unpack->outputs()) {
            if (done.insert(piece).second) pending.push_back(piece);
          }
        }
        continue;
      }
      if (use.offset != 0 || user->outputs().size() != 1 || ViewProducer(user->output()) != user) {
        continue;
      }
      // Only views already translated (a later one reads the new value anyway).
      if (!ctx_.Bound(user->output()).has_value() || !done.insert(user->output()).second) continue;
      RETURN_IF_ERROR(TranslateNode(user, /*top_level=*/false));
      pending.push_back(user->output());
    }
  }
  return absl::OkStatus();
}

absl::Status Translator::Unpack(const Node* node) {
  const Value* in = node->input(0);
  const Node* producer = in->node();
  if (!ctx_.Bound(in).has_value() &&
      (producer->kind() == c10::prim::TupleConstruct ||
       producer->kind() == c10::prim::ListConstruct)) {
    if (producer->inputs().size() != node->outputs().size()) {
      return ctx_.InvalidArgument(*node, "unpacks a list of another length");
    }
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      ctx_.Alias(node->outputs()[i], producer->inputs()[i]);
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(ir::ValueId list, ctx_.AnyValue(in, ctx_.Where(*node)));
  if (const std::vector<ir::ValueId>* elements = ctx_.ListElements(list)) {
    if (elements->size() != node->outputs().size()) {
      return ctx_.InvalidArgument(*node, absl::StrCat("unpacks ", node->outputs().size(),
                                                      " values from a list of ",
                                                      elements->size()));
    }
    const std::vector<ir::ValueId> copy = *elements;
    for (size_t i = 0; i < copy.size(); ++i) ctx_.Bind(node->outputs()[i], copy[i]);
    return absl::OkStatus();
  }
  const ir::ValueKind list_kind = ctx_.KindOf(list);
  ir::ValueKind element;
  switch (list_kind) {
    case ir::ValueKind::kTensorList: element = ir::ValueKind::kTensor; break;
    case ir::ValueKind::kIntList: element = ir::ValueKind::kInt; break;
    case ir::ValueKind::kFloatList: element = ir::ValueKind::kFloat; break;
    case ir::ValueKind::kBoolList: element = ir::ValueKind::kBool; break;
    default:
      return ctx_.Unimplemented(*node, absl::StrCat("unpacks a ", ir::ValueKindName(list_kind)));
  }
  std::vector<std::string> names;
  for (const Value* out : node->outputs()) names.push_back(out->debugName());
  ir::NodeId id = g_.AddNodeWithOutputs(ir::OpKind::kListUnpack, {list},
                                        static_cast<int>(node->outputs().size()), {},
                                        node->kind().toQualString(), names);
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    ir::ValueId out = g_.node(id).outputs[i];
    g_.mutable_value(out).kind = element;
    if (ir::IsScalarKind(element)) {
      g_.mutable_value(out).type = ir::TensorType{ir::ScalarKindDType(element), Dims{}};
    }
    ctx_.Bind(node->outputs()[i], out);
  }
  return absl::OkStatus();
}

absl::Status Translator::IsNoneCheck(const Node* node) {
  const bool negate = node->kind() == c10::aten::__isnot__;
  // x is None: one side is the constant None.
  const Value* other = nullptr;
  for (size_t i = 0; i < 2; ++i) {
    std::optional<c10::IValue> c = ctx_.ConstantOf(node->input(i));
    if (c && c->isNone()) other = node->input(1 - i);
  }
  if (other == nullptr) {
    return ctx_.Unimplemented(*node, "compares identities of values other than None");
  }
  std::optional<c10::IValue> c = ctx_.ConstantOf(other);
  std::optional<ir::ValueId> bound = ctx_.Bound(other);
  ir::ValueId result;
  if (c.has_value()) {
    result = ctx_.AddBool(c->isNone() != negate);
  } else if (bound && !g_.value(*bound).optional &&
             g_.value(*bound).kind != ir::ValueKind::kNone) {
    result = ctx_.AddBool(negate);  // a value that cannot be None
  } else {
    ASSIGN_OR_RETURN(ir::ValueId v, ctx_.AnyValue(other, ctx_.Where(*node)));
    result = ctx_.EmitValue(*node, ir::OpKind::kIsNone, ir::ValueKind::kBool, {v});
    if (negate) {
      ir::Attributes attrs;
      attrs.SetString("op", "not");
      result = ctx_.EmitValue(*node, ir::OpKind::kScalarUnary, ir::ValueKind::kBool, {result},
                              std::move(attrs));
    }
  }
  ctx_.Bind(node->output(), result);
  return absl::OkStatus();
}

absl::Status Translator::Raise(const Node* node) {
  std::string message = "an exception";
  if (!node->inputs().empty()) {
    const Value* msg = node->input(0);
    if (std::optional<c10::IValue> c = ctx_.ConstantOf(msg); c && c->isString()) {
      message = c->toStringRef();
    } else if (msg->node()->kind() == c10::aten::format && !msg->node()->inputs().empty()) {
      // A formatted message: its template (the arguments are run-time values).
      if (std::optional<c10::IValue> f = ctx_.ConstantOf(msg->node()->input(0));
          f && f->isString()) {
        message = f->toStringRef();
      }
    }
  }
  ir::Attributes attrs;
  attrs.SetString("message", message);
  g_.AddNodeWithOutputs(ir::OpKind::kRaise, {}, 0, std::move(attrs), "prim::RaiseException");
  return absl::OkStatus();
}

void Translator::CollectMutated(const torch::jit::Block* block, const Node* owner,
                                std::vector<const Value*>& out,
                                std::set<const Value*>& seen) const {
  for (const Node* n : block->nodes()) {
    if (MutatesFirstInput(*n) && !n->inputs().empty()) {
      // The written value, and for an in-place op the tensors it is a view of.
      const bool in_place = IsInPlaceKind(n->kind().toQualString());
      for (const Value* target = n->input(0); target != nullptr;) {
        if (!DefinedInside(target, owner) && seen.insert(target).second) out.push_back(target);
        const Node* view = in_place ? ViewProducer(target) : nullptr;
        std::optional<PieceOf> piece;
        if (in_place && view == nullptr) piece = PieceProducer(target);
        target = view != nullptr ? view->input(0)
                 : piece.has_value() ? piece->split->input(0)
                                     : nullptr;
      }
    }
    for (const torch::jit::Block* sub : n->blocks()) CollectMutated(sub, owner, out, seen);
  }
}

std::vector<const Value*> Translator::MutatedOutside(const Node* node) const {
  std::vector<const Value*> out;
  std::set<const Value*> seen;
  for (const torch::jit::Block* block : node->blocks()) CollectMutated(block, node, out, seen);
  return out;
}

absl::Status Translator::HoistConstants(const Node* node) {
  for (const torch::jit::Block* block : node->blocks()) {
    for (const Node* n : block->nodes()) {
      for (const Value* in : n->inputs()) {
        if (in->node()->kind() != c10::prim::Constant || ctx_.Bound(in).has_value()) continue;
        std::optional<c10::IValue> c = ctx_.ConstantOf(in);
        if (c && c->isTensor()) {
          RETURN_IF_ERROR(ctx_.ValueFor(in, ctx_.Where(*n)).status());
        }
      }
      RETURN_IF_ERROR(HoistConstants(n));
    }
  }
  return absl::OkStatus();
}

void Translator::SetKinds(const std::vector<ir::ValueId>& ir_values,
                          const std::vector<const Value*>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    bool optional = false;
    std::optional<ir::ValueKind> kind = KindOfType(values[i]->type(), &optional);
    ir::Value& v = g_.mutable_value(ir_values[i]);
    if (kind.has_value()) v.kind = *kind;
    v.optional = optional;
    if (ir::IsScalarKind(v.kind)) v.type = ir::TensorType{ir::ScalarKindDType(v.kind), Dims{}};
  }
}

absl::Status Translator::If(const Node* node) {
  const Value* cond_value = node->input(0);
  if (std::optional<c10::IValue> c = ctx_.ConstantOf(cond_value); c && (c->isBool() || c->isInt())) {
    // Known at import: only the taken branch.
    const torch::jit::Block* taken = node->blocks()[c->toBool() ? 0 : 1];
    RETURN_IF_ERROR(TranslateBlock(taken, /*top_level=*/false));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      ASSIGN_OR_RETURN(ir::ValueId id, ctx_.AnyValue(taken->outputs()[i], ctx_.Where(*node)));
      ctx_.Bind(node->outputs()[i], id);
    }
    return absl::OkStatus();
  }
  ir::ValueId cond;
  if (ctx_.IsScalarLike(*node, 0)) {
    ASSIGN_OR_RETURN(cond, ctx_.ScalarInput(*node, 0));
  } else {
    ASSIGN_OR_RETURN(cond, ctx_.Input(*node, 0));  // a tensor condition: its truth at run time
  }
  const std::vector<const Value*> mutated = MutatedOutside(node);
  RETURN_IF_ERROR(HoistConstants(node));
  const size_t n = node->outputs().size();
  std::vector<std::string> names;
  for (const Value* out : node->outputs()) names.push_back(out->debugName());
  for (const Value* m : mutated) names.push_back(m->debugName() + ".after");
  const ir::NodeId id = g_.AddNodeWithOutputs(ir::OpKind::kIf, {cond},
                                              static_cast<int>(n + mutated.size()), {},
                                              "prim::If", names);
  for (const Value* m : mutated) ctx_.MarkMutated(m);
  const ir::BlockId parent = g_.insertion_block();
  std::vector<std::vector<ir::ValueId>> block_results;
  for (const torch::jit::Block* block : node->blocks()) {
    const ir::BlockId b = g_.AddBlock(id);
    g_.SetInsertionBlock(b);
    ctx_.PushScope();
    absl::Status s = TranslateBlock(block, /*top_level=*/false);
    std::vector<ir::ValueId> results;
    for (size_t i = 0; s.ok() && i < n; ++i) {
      absl::StatusOr<ir::ValueId> r = ctx_.AnyValue(block->outputs()[i], ctx_.Where(*node));
      if (!r.ok()) s = r.status();
      results.push_back(r.value_or(ir::kNoValue));
    }
    for (size_t i = 0; s.ok() && i < mutated.size(); ++i) {
      absl::StatusOr<ir::ValueId> r = ctx_.AnyValue(mutated[i], ctx_.Where(*node));
      if (!r.ok()) s = r.status();
      results.push_back(r.value_or(ir::kNoValue));
    }
    ctx_.PopScope();
    g_.SetInsertionBlock(parent);
    RETURN_IF_ERROR(s);
    g_.SetBlockResults(b, results);
    block_results.push_back(std::move(results));
  }
  const std::vector<ir::ValueId> outs = g_.node(id).outputs;
  SetKinds(std::vector<ir::ValueId>(outs.begin(), outs.begin() + n),
           std::vector<const Value*>(node->outputs().begin(), node->outputs().end()));
  for (size_t i = 0; i < outs.size(); ++i) {
    // A branch yielding None and the other a value (an early return): optional.
    ir::Value& v = g_.mutable_value(outs[i]);
    const ir::Value& a = g_.value(block_results[0][i]);
    const ir::Value& b = g_.value(block_results[1][i]);
    if (i >= n) v.kind = a.kind != ir::ValueKind::kNone ? a.kind : b.kind;
    if (a.kind == ir::ValueKind::kNone || b.kind == ir::ValueKind::kNone || a.optional ||
        b.optional) {
      if (v.kind == ir::ValueKind::kNone) v.kind = a.kind != ir::ValueKind::kNone ? a.kind : b.kind;
      v.optional = v.kind != ir::ValueKind::kNone;
    }
  }
  for (size_t i = 0; i < n; ++i) ctx_.Bind(node->outputs()[i], outs[i]);
  for (size_t i = 0; i < mutated.size(); ++i) ctx_.Bind(mutated[i], outs[n + i]);
  // Views of what the branches wrote, taken before the If, now show the write.
  std::set<const Value*> done(mutated.begin(), mutated.end());
  for (const Value* m : mutated) RETURN_IF_ERROR(RetakeViews(m, done));
  return absl::OkStatus();
}

absl::Status Translator::Loop(const Node* node) {
  // prim::Loop(max_trips, cond, carried...) with body(i, carried...) -> (cond, carried...).
  ASSIGN_OR_RETURN(ir::ValueId trips, ctx_.ScalarInput(*node, 0));
  ASSIGN_OR_RETURN(ir::ValueId cond, ctx_.ScalarInput(*node, 1));
  std::vector<ir::ValueId> inputs = {trips, cond};
  const size_t carried = node->inputs().size() - 2;
  for (size_t k = 0; k < carried; ++k) {
    ASSIGN_OR_RETURN(ir::ValueId v, ctx_.AnyValue(node->input(2 + k), ctx_.Where(*node)));
    inputs.push_back(v);
  }
  const std::vector<const Value*> mutated = MutatedOutside(node);
  for (const Value* m : mutated) {
    ASSIGN_OR_RETURN(ir::ValueId v, ctx_.AnyValue(m, ctx_.Where(*node)));
    inputs.push_back(v);
  }
  RETURN_IF_ERROR(HoistConstants(node));
  std::vector<std::string> names;
  for (const Value* out : node->outputs()) names.push_back(out->debugName());
  for (const Value* m : mutated) names.push_back(m->debugName() + ".after");
  const ir::NodeId id = g_.AddNodeWithOutputs(
      ir::OpKind::kLoop, inputs, static_cast<int>(carried + mutated.size()), {}, "prim::Loop",
      names);
  for (const Value* m : mutated) ctx_.MarkMutated(m);
  const torch::jit::Block* body = node->blocks()[0];
  const ir::BlockId parent = g_.insertion_block();
  const ir::BlockId b = g_.AddBlock(id);
  g_.SetInsertionBlock(b);
  ctx_.PushScope();
  absl::Status s = [&]() -> absl::Status {
    const ir::ValueId iter = g_.AddBlockParam(b, body->inputs()[0]->debugName(),
                                              ir::TensorType{DType::kInt64, Dims{}},
                                              ir::ValueKind::kInt);
    ctx_.Bind(body->inputs()[0], iter);
    std::vector<ir::ValueId> params;
    for (size_t k = 0; k < carried + mutated.size(); ++k) {
      // A copy: AddBlockParam adds a value, which may move the graph's values.
      const ir::Value init = g_.value(inputs[2 + k]);
      // A value the body mutates gets a name of its own inside the body.
      const std::string name = k < carried ? body->inputs()[1 + k]->debugName()
                                           : mutated[k - carried]->debugName() + ".carried";
      ir::ValueId p = g_.AddBlockParam(b, name, init.type, init.kind);
      g_.mutable_value(p).optional = init.optional;
      params.push_back(p);
      ctx_.Bind(k < carried ? body->inputs()[1 + k] : mutated[k - carried], p);
    }
    if (carried > 0) {
      SetKinds(std::vector<ir::ValueId>(params.begin(), params.begin() + carried),
               std::vector<const Value*>(body->inputs().begin() + 1, body->inputs().end()));
    }
    RETURN_IF_ERROR(TranslateBlock(body, /*top_level=*/false));
    std::vector<ir::ValueId> results;
    ASSIGN_OR_RETURN(ir::ValueId next, ctx_.AnyValue(body->outputs()[0], ctx_.Where(*node)));
    results.push_back(next);
    for (size_t k = 0; k < carried; ++k) {
      ASSIGN_OR_RETURN(ir::ValueId r, ctx_.AnyValue(body->outputs()[1 + k], ctx_.Where(*node)));
      results.push_back(r);
    }
    for (const Value* m : mutated) {
      ASSIGN_OR_RETURN(ir::ValueId r, ctx_.AnyValue(m, ctx_.Where(*node)));
      results.push_back(r);
    }
    g_.SetBlockResults(b, std::move(results));
    return absl::OkStatus();
  }();
  ctx_.PopScope();
  g_.SetInsertionBlock(parent);
  RETURN_IF_ERROR(s);
  const std::vector<ir::ValueId> outs = g_.node(id).outputs;
  for (size_t k = 0; k < outs.size(); ++k) {
    const ir::Value& init = g_.value(inputs[2 + k]);
    ir::Value& v = g_.mutable_value(outs[k]);
    v.kind = init.kind;
    v.optional = init.optional;
    v.type = init.type;
  }
  if (carried > 0) {
    SetKinds(std::vector<ir::ValueId>(outs.begin(), outs.begin() + carried),
             std::vector<const Value*>(node->outputs().begin(), node->outputs().end()));
  }
  for (size_t k = 0; k < carried; ++k) ctx_.Bind(node->outputs()[k], outs[k]);
  for (size_t i = 0; i < mutated.size(); ++i) ctx_.Bind(mutated[i], outs[carried + i]);
  // Views of what the body wrote, taken before the loop, now show the writes.
  std::set<const Value*> done(mutated.begin(), mutated.end());
  for (const Value* m : mutated) RETURN_IF_ERROR(RetakeViews(m, done));
  return absl::OkStatus();
}

}  // namespace

bool MutatesFirstInput(const torch::jit::Node& node) {
  return IsInPlaceKind(node.kind().toQualString()) || IsListMutation(node.kind());
}

absl::StatusOr<ir::Graph> TranslateGraph(const torch::jit::Graph& graph,
                                         const ImportOptions& options, bool has_self,
                                         ImportTrace* trace) {
  ir::Graph out;
  Translator translator(options, &out, trace);
  translator.Number(graph.block());
  RETURN_IF_ERROR(translator.Inputs(graph, has_self));
  RETURN_IF_ERROR(translator.TranslateBlock(graph.block(), /*top_level=*/true));
  if (options.strict) RETURN_IF_ERROR(translator.Report());
  RETURN_IF_ERROR(translator.Outputs(graph));
  if (absl::Status s = ir::VerifyGraph(out); !s.ok()) {
    return absl::InternalError(absl::StrCat("imported graph is malformed: ", s.message()));
  }
  // Drop what translation left unused (unused literals, unpacked lists); the
  // trace follows the renumbering.
  std::vector<ir::ValueId> remap;
  ir::Graph compacted = out.Compacted(&remap);
  if (trace != nullptr) {
    for (ImportTrace::Entry& entry : trace->nodes) {
      std::vector<std::pair<const torch::jit::Value*, ir::ValueId>> kept;
      for (const auto& [value, id] : entry.outputs) {
        if (remap[id] != ir::kNoValue) kept.push_back({value, remap[id]});
      }
      entry.outputs = std::move(kept);
    }
  }
  return compacted;
}

}  // namespace kiln::importer
