// Converters for the values TorchScript computes besides tensors: tensor
// metadata (aten::size, dim, numel), conversions (aten::Int, Float, Bool),
// Python arithmetic and comparisons on ints, floats and bools (also as the
// 0-dim tensors tracing records through prim::NumToTensor, e.g. shufflenet's
// `num_channels // groups`), and list ops. They emit the ops of the "scalars
// and lists" section of op_kinds.def; the table is at the bottom.
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/csrc/jit/ir/constants.h>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/translator.h"

namespace kiln::importer {
namespace {

using ir::OpKind;
using ir::ValueKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

ir::Attributes OpAttr(const char* op) {
  ir::Attributes attrs;
  attrs.SetString("op", op);
  return attrs;
}

// The kind ScalarBinary gives `op` on operands of kinds a and b (mirrors
// PrepareScalarBinary in engine/kernels/scalar_ops.cc).
ValueKind BinaryKind(const std::string& op, ValueKind a, ValueKind b) {
  if (op == "eq" || op == "ne" || op == "lt" || op == "le" || op == "gt" || op == "ge") {
    return ValueKind::kBool;
  }
  if (op == "and" || op == "or" || op == "xor") {
    return a == ValueKind::kBool && b == ValueKind::kBool ? ValueKind::kBool : ValueKind::kInt;
  }
  if (op == "truediv" || op == "pow") return ValueKind::kFloat;
  return a == ValueKind::kFloat || b == ValueKind::kFloat ? ValueKind::kFloat : ValueKind::kInt;
}

ConvertResult EmitBinary(const char* op, const TorchNode& node, ImportContext& ctx) {
  if (node.inputs().size() < 2) return ctx.InvalidArgument(node, "expected 2 operands");
  ASSIGN_OR_RETURN(ir::ValueId a, ctx.ScalarInput(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId b, ctx.ScalarInput(node, 1));
  // add/sub on 0-dim tensors carry alpha: a + alpha * b.
  if (node.inputs().size() == 3 && (std::string(op) == "add" || std::string(op) == "sub")) {
    ASSIGN_OR_RETURN(double alpha, ctx.ConstDouble(node, 2));
    if (alpha != 1.0) {
      ir::ValueId scale = ctx.KindOf(b) == ValueKind::kFloat || alpha != static_cast<int64_t>(alpha)
                              ? ctx.AddFloat(alpha)
                              : ctx.AddInt(static_cast<int64_t>(alpha));
      b = ctx.EmitValue(node, OpKind::kScalarBinary,
                        BinaryKind("mul", ctx.KindOf(b), ctx.KindOf(scale)), {b, scale},
                        OpAttr("mul"));
    }
  }
  return One(ctx.EmitValue(node, OpKind::kScalarBinary,
                           BinaryKind(op, ctx.KindOf(a), ctx.KindOf(b)), {a, b}, OpAttr(op)));
}

template <const char* kOp>
ConvertResult Binary(const TorchNode& node, ImportContext& ctx) {
  return EmitBinary(kOp, node, ctx);
}

constexpr char kAdd[] = "add", kSub[] = "sub", kMul[] = "mul", kTrueDiv[] = "truediv",
               kFloorDiv[] = "floordiv", kTruncDiv[] = "truncdiv", kMod[] = "mod",
               kPow[] = "pow", kMin[] = "min", kMax[] = "max", kEq[] = "eq", kNe[] = "ne",
               kLt[] = "lt", kLe[] = "le", kGt[] = "gt", kGe[] = "ge", kAnd[] = "and",
               kOr[] = "or", kXor[] = "xor";

// div(a, b, rounding_mode) on 0-dim tensors: "floor" is floordiv, "trunc" is
// truncdiv (no Python operator; traced sequence-first MultiheadAttention
// computes head_dim = embed_dim // num_heads with it). Ints stay ints.
ConvertResult ConvertDiv(const TorchNode& node, ImportContext& ctx) {
  if (node.inputs().size() == 3 && !ctx.IsNone(node, 2)) {
    ASSIGN_OR_RETURN(std::string mode, ctx.ConstString(node, 2));
    if (mode == "floor") return EmitBinary(kFloorDiv, node, ctx);
    if (mode == "trunc") return EmitBinary(kTruncDiv, node, ctx);
    return ctx.Unimplemented(node, absl::StrCat("rounding_mode '", mode, "' on scalars"));
  }
  return EmitBinary(kTrueDiv, node, ctx);
}

ConvertResult EmitUnary(const char* op, ValueKind kind, const TorchNode& node,
                        ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId a, ctx.ScalarInput(node, 0));
  if (kind == ValueKind::kNone) kind = ctx.KindOf(a) == ValueKind::kFloat ? ValueKind::kFloat
                                                                          : ValueKind::kInt;
  return One(ctx.EmitValue(node, OpKind::kScalarUnary, kind, {a}, OpAttr(op)));
}

ConvertResult ConvertNeg(const TorchNode& node, ImportContext& ctx) {
  return EmitUnary("neg", ValueKind::kNone, node, ctx);
}
ConvertResult ConvertAbs(const TorchNode& node, ImportContext& ctx) {
  return EmitUnary("abs", ValueKind::kNone, node, ctx);
}
ConvertResult ConvertNot(const TorchNode& node, ImportContext& ctx) {
  return EmitUnary("not", ValueKind::kBool, node, ctx);
}
ConvertResult ConvertFloor(const TorchNode& node, ImportContext& ctx) {
  return EmitUnary("floor", ValueKind::kInt, node, ctx);
}
ConvertResult ConvertCeil(const TorchNode& node, ImportContext& ctx) {
  return EmitUnary("ceil", ValueKind::kInt, node, ctx);
}
ConvertResult ConvertSqrt(const TorchNode& node, ImportContext& ctx) {
  return EmitUnary("sqrt", ValueKind::kFloat, node, ctx);
}

// ---------------------------------------------------------------- metadata

// size(self) -> int[]; size(self, dim) -> int.
ConvertResult ConvertSize(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  if (node.inputs().size() < 2) {
    return One(ctx.EmitValue(node, OpKind::kSize, ValueKind::kIntList, {x}));
  }
  if (absl::StatusOr<int64_t> dim = ctx.ConstInt(node, 1); dim.ok()) {
    ir::Attributes attrs;
    attrs.SetInt("dim", *dim);
    return One(ctx.EmitValue(node, OpKind::kSize, ValueKind::kInt, {x}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(ir::ValueId dim, ctx.ScalarInput(node, 1));
  return One(ctx.EmitValue(node, OpKind::kSize, ValueKind::kInt, {x, dim}));
}

ConvertResult ConvertDim(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  return One(ctx.EmitValue(node, OpKind::kRank, ValueKind::kInt, {x}));
}

// prim::dtype(x): x's dtype as a number, read here only as the dtype= of a
// creation op (a scripted LSTM's zero state: zeros(..., dtype=x.dtype)), whose
// converter looks through it (AtenCall::DTypeSource) and makes a Fill like x. Kiln has
// no value for the number itself, so any other use is Unimplemented.
ConvertResult ConvertDTypeOf(const TorchNode& node, ImportContext& ctx) {
  for (const torch::jit::Use& use : node.output()->uses()) {
    const std::string user = use.user->kind().toQualString();
    const c10::FunctionSchema* schema = use.user->maybeSchema();
    const bool creation = user == "aten::zeros" || user == "aten::ones" ||
                          user == "aten::full" || user == "aten::empty";
    if (!creation || schema == nullptr || schema->arguments()[use.offset].name() != "dtype") {
      return ctx.Unimplemented(node, "x.dtype read other than as a creation op's dtype=");
    }
  }
  return One(ctx.AddNone(node.output()->debugName()));
}

ConvertResult ConvertNumel(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  return One(ctx.EmitValue(node, OpKind::kNumel, ValueKind::kInt, {x}));
}

// ---------------------------------------------------------------- conversions

// aten::Int / Float / Bool / ScalarImplicit / item of a scalar or a one-element tensor.
ConvertResult EmitToScalar(ValueKind kind, const TorchNode& node, ImportContext& ctx) {
  ir::ValueId x;
  if (ctx.IsScalarLike(node, 0)) {
    ASSIGN_OR_RETURN(x, ctx.ScalarInput(node, 0));
    if (ctx.KindOf(x) == kind) return One(x);
  } else {
    ASSIGN_OR_RETURN(x, ctx.Input(node, 0));
  }
  ir::Attributes attrs;
  attrs.SetString("type", kind == ValueKind::kInt     ? "int"
                          : kind == ValueKind::kFloat ? "float"
                                                      : "bool");
  return One(ctx.EmitValue(node, OpKind::kToScalar, kind, {x}, std::move(attrs)));
}

ConvertResult ConvertInt(const TorchNode& node, ImportContext& ctx) {
  return EmitToScalar(ValueKind::kInt, node, ctx);
}
ConvertResult ConvertFloat(const TorchNode& node, ImportContext& ctx) {
  return EmitToScalar(ValueKind::kFloat, node, ctx);
}
ConvertResult ConvertBool(const TorchNode& node, ImportContext& ctx) {
  return EmitToScalar(ValueKind::kBool, node, ctx);
}

// Whether `v` is an integer 0-dim tensor by construction: a traced size
// (prim::NumToTensor of an int), an integer constant, or integer arithmetic of
// those (x.size(0) * 4 traced is mul(NumToTensor(size), tensor(4))).
bool IsIntegerTensorExpression(const torch::jit::Value* v, int depth = 0) {
  if (depth > 16) return false;
  const torch::jit::Node* n = v->node();
  const std::string kind = n->kind().toQualString();
  if (kind == "prim::NumToTensor") return n->input(0)->type()->kind() == c10::TypeKind::IntType;
  if (kind == "prim::Constant") {
    c10::optional<c10::IValue> c = torch::jit::toIValue(v);
    if (!c) return false;
    if (c->isInt()) return true;
    return c->isTensor() && c->toTensor().dim() == 0 &&
           c10::isIntegralType(c->toTensor().scalar_type(), /*includeBool=*/false);
  }
  if (kind != "aten::add" && kind != "aten::sub" && kind != "aten::mul" &&
      kind != "aten::floor_divide" && kind != "aten::remainder" && kind != "aten::neg") {
    return false;
  }
  for (const torch::jit::Value* in : n->inputs()) {
    if (!IsIntegerTensorExpression(in, depth + 1)) return false;
  }
  return true;
}

// ScalarImplicit / item: the kind the schema says; a Scalar is an int when its
// tensor is integer arithmetic of sizes and constants, else a float.
ConvertResult ConvertItem(const TorchNode& node, ImportContext& ctx) {
  std::optional<ValueKind> kind = KindOfType(node.output()->type());
  if (node.output()->type()->kind() == c10::TypeKind::NumberType &&
      IsIntegerTensorExpression(node.input(0))) {
    kind = ValueKind::kInt;
  }
  return EmitToScalar(kind.value_or(ValueKind::kFloat), node, ctx);
}

// ---------------------------------------------------------------- lists

ConvertResult ConvertLen(const TorchNode& node, ImportContext& ctx) {
  if (node.input(0)->type()->cast<c10::TensorType>()) {
    // len(tensor) is its first dim.
    ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
    ir::Attributes attrs;
    attrs.SetInt("dim", 0);
    return One(ctx.EmitValue(node, OpKind::kSize, ValueKind::kInt, {x}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(ir::ValueId list, ctx.AnyValue(node.input(0), ctx.Where(node)));
  if (const std::vector<ir::ValueId>* elements = ctx.ListElements(list)) {
    return One(ctx.AddInt(static_cast<int64_t>(elements->size())));
  }
  return One(ctx.EmitValue(node, OpKind::kListLen, ValueKind::kInt, {list}));
}

// list[index]: a literal list at a constant index is its element.
ConvertResult ConvertGetItem(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId list, ctx.AnyValue(node.input(0), ctx.Where(node)));
  const ValueKind list_kind = ctx.KindOf(list);
  const std::vector<ir::ValueId>* elements = ctx.ListElements(list);
  if (elements != nullptr) {
    if (absl::StatusOr<int64_t> index = ctx.ConstInt(node, 1); index.ok()) {
      const int64_t n = static_cast<int64_t>(elements->size());
      const int64_t i = *index < 0 ? *index + n : *index;
      if (i < 0 || i >= n) {
        return ctx.InvalidArgument(node, absl::StrCat("index ", *index,
                                                      " is out of range for a list of ", n));
      }
      return One((*elements)[i]);
    }
  }
  ASSIGN_OR_RETURN(ir::ValueId index, ctx.ScalarInput(node, 1));
  ValueKind kind;
  switch (list_kind) {
    case ValueKind::kIntList: kind = ValueKind::kInt; break;
    case ValueKind::kFloatList: kind = ValueKind::kFloat; break;
    case ValueKind::kBoolList: kind = ValueKind::kBool; break;
    case ValueKind::kTensorList: kind = ValueKind::kTensor; break;
    default:
      return ctx.Unimplemented(node, absl::StrCat("indexing a ", ir::ValueKindName(list_kind)));
  }
  return One(ctx.EmitValue(node, OpKind::kListGetItem, kind, {list, index}));
}

// list.append(x): a new list value; the translator rebinds the list to it.
ConvertResult ConvertAppend(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId list, ctx.AnyValue(node.input(0), ctx.Where(node)));
  const ValueKind kind = ctx.KindOf(list);
  ir::ValueId element;
  if (kind == ValueKind::kTensorList) {
    ASSIGN_OR_RETURN(element, ctx.Input(node, 1));
    if (const std::vector<ir::ValueId>* elements = ctx.ListElements(list)) {
      // Still known at import: a longer literal list.
      std::vector<ir::ValueId> longer = *elements;
      longer.push_back(element);
      return One(ctx.MakeTensorList(node, std::move(longer)));
    }
  } else if (ir::IsScalarListKind(kind)) {
    ASSIGN_OR_RETURN(element, ctx.ScalarInput(node, 1));
  } else {
    return ctx.Unimplemented(node, absl::StrCat("appending to a ", ir::ValueKindName(kind)));
  }
  return One(ctx.EmitValue(node, OpKind::kListAppend, kind, {list, element}));
}

// list(x), copy: the same value (Kiln's lists are immutable values).
ConvertResult ConvertListCopy(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId list, ctx.AnyValue(node.input(0), ctx.Where(node)));
  return One(list);
}

// __range_length(lo, hi, step): the trip count of range(lo, hi, step).
ConvertResult ConvertRangeLength(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(int64_t step, ctx.ConstInt(node, 2));
  if (step == 0) return ctx.InvalidArgument(node, "range() step must not be zero");
  ASSIGN_OR_RETURN(ir::ValueId lo, ctx.ScalarInput(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId hi, ctx.ScalarInput(node, 1));
  // step > 0: max(0, (hi - lo + step - 1) // step); step < 0: the same on (lo - hi, -step).
  auto bin = [&](const char* op, ir::ValueId a, ir::ValueId b) {
    return ctx.EmitValue(node, OpKind::kScalarBinary, ValueKind::kInt, {a, b}, OpAttr(op));
  };
  const int64_t s = step > 0 ? step : -step;
  ir::ValueId span = step > 0 ? bin("sub", hi, lo) : bin("sub", lo, hi);
  ir::ValueId n = bin("floordiv", bin("add", span, ctx.AddInt(s - 1)), ctx.AddInt(s));
  return One(bin("max", n, ctx.AddInt(0)));
}

// __derive_index(index, start, step) = start + index * step.
ConvertResult ConvertDeriveIndex(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId index, ctx.ScalarInput(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId start, ctx.ScalarInput(node, 1));
  ASSIGN_OR_RETURN(ir::ValueId step, ctx.ScalarInput(node, 2));
  ir::ValueId scaled =
      ctx.EmitValue(node, OpKind::kScalarBinary, ValueKind::kInt, {index, step}, OpAttr("mul"));
  return One(
      ctx.EmitValue(node, OpKind::kScalarBinary, ValueKind::kInt, {start, scaled}, OpAttr("add")));
}

struct ScalarRow {
  Converter convert;
  bool arithmetic;  // the kind also names a tensor op
};

using ScalarTable = std::unordered_map<std::string_view, ScalarRow>;

const ScalarTable& Table() {
  static const ScalarTable* const kTable = new ScalarTable{
      // ---------- metadata ----------
      {"aten::size", {ConvertSize, false}},
      {"aten::sym_size", {ConvertSize, false}},
      {"aten::dim", {ConvertDim, false}},
      {"aten::numel", {ConvertNumel, false}},
      {"prim::dtype", {ConvertDTypeOf, false}},
      {"aten::len", {ConvertLen, false}},
      // ---------- conversions ----------
      {"aten::Int", {ConvertInt, false}},
      {"aten::IntImplicit", {ConvertInt, false}},
      {"aten::Float", {ConvertFloat, false}},
      {"aten::FloatImplicit", {ConvertFloat, false}},
      {"aten::Bool", {ConvertBool, false}},
      {"aten::ScalarImplicit", {ConvertItem, false}},
      {"aten::item", {ConvertItem, false}},
      // ---------- Python arithmetic (also on traced 0-dim tensors) ----------
      {"aten::add", {Binary<kAdd>, true}},
      {"aten::sub", {Binary<kSub>, true}},
      {"aten::mul", {Binary<kMul>, true}},
      {"aten::div", {ConvertDiv, true}},
      {"aten::floordiv", {Binary<kFloorDiv>, false}},
      {"aten::floor_divide", {Binary<kFloorDiv>, true}},
      {"aten::remainder", {Binary<kMod>, true}},
      {"aten::pow", {Binary<kPow>, true}},
      {"aten::min", {Binary<kMin>, true}},
      {"aten::max", {Binary<kMax>, true}},
      {"prim::min", {Binary<kMin>, false}},
      {"prim::max", {Binary<kMax>, false}},
      {"aten::eq", {Binary<kEq>, true}},
      {"aten::ne", {Binary<kNe>, true}},
      {"aten::lt", {Binary<kLt>, true}},
      {"aten::le", {Binary<kLe>, true}},
      {"aten::gt", {Binary<kGt>, true}},
      {"aten::ge", {Binary<kGe>, true}},
      {"aten::__and__", {Binary<kAnd>, true}},
      {"aten::__or__", {Binary<kOr>, true}},
      {"aten::__xor__", {Binary<kXor>, true}},
      {"aten::neg", {ConvertNeg, true}},
      {"aten::abs", {ConvertAbs, true}},
      {"aten::__not__", {ConvertNot, false}},
      {"aten::floor", {ConvertFloor, true}},
      {"aten::ceil", {ConvertCeil, true}},
      {"aten::sqrt", {ConvertSqrt, true}},
      // ---------- lists ----------
      {"aten::__getitem__", {ConvertGetItem, false}},
      {"aten::append", {ConvertAppend, false}},
      {"aten::list", {ConvertListCopy, false}},
      {"aten::__range_length", {ConvertRangeLength, false}},
      {"aten::__derive_index", {ConvertDeriveIndex, false}},
  };
  return *kTable;
}

}  // namespace

Converter FindScalarConverter(std::string_view kind, bool* arithmetic) {
  auto it = Table().find(kind);
  if (it == Table().end()) return nullptr;
  if (arithmetic != nullptr) *arithmetic = it->second.arithmetic;
  return it->second.convert;
}

}  // namespace kiln::importer
