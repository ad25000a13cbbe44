// Kernels for the values TorchScript computes besides tensors: tensor metadata
// (Size, Rank, Numel), Python arithmetic on ints, floats and bools, and lists
// of those. At run time a scalar is a 0-dim tensor of INT64, FP64 or BOOL and
// a scalar list a 1-D one (see ir::ValueKind), so these are ordinary kernels.
//
// Metadata ops know their result from the operand types alone: their Prepare
// publishes it as a constant output (TensorInfo::constant), which lets the
// executor fold shape arithmetic such as shufflenet's
//   view(x, [size(x, 0), 2, size(x, 1) // 2, ...])
// at compile time and plan the graph statically. Tensor lists are held by the
// executor, not here.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {
namespace {

bool IsScalarDType(DType d) {
  return d == DType::kInt64 || d == DType::kF64 || d == DType::kBool;
}

// Reads element `i` of a tensor of any numeric dtype as double / int64.
double ElementAsDouble(const Tensor& t, int64_t i) { return LoadAsDouble(t.raw_data(), t.dtype(), i); }

int64_t ElementAsInt(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kInt64) return t.data<int64_t>()[i];
  return static_cast<int64_t>(ElementAsDouble(t, i));  // truncates, like int()
}

void StoreScalar(Tensor& out, int64_t i, double v) {
  switch (out.dtype()) {
    case DType::kInt64: out.data<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::kF64: out.data<double>()[i] = v; break;
    case DType::kBool: out.data<bool>()[i] = v != 0.0; break;
    default: break;
  }
}

// A constant output: the tensor lives in the kernel state, so it outlives
// Prepare as the executor requires.
struct ConstantState {
  Tensor value;
};

void PublishConstant(PrepareContext& ctx, Tensor value) {
  auto state = std::make_shared<ConstantState>(ConstantState{std::move(value)});
  ctx.outputs.resize(1);
  ctx.outputs[0] = TensorInfo{state->value.dtype(), state->value.dims(), &state->value, true};
  ctx.state = std::move(state);
}

Tensor IntScalar(int64_t v) {
  Tensor t = Tensor::Zeros(DType::kInt64, {});
  *t.data<int64_t>() = v;
  return t;
}

absl::Status EvalCopyConstant(EvalContext& ctx) {
  const Tensor& value = StateAs<ConstantState>(ctx).value;
  if (value.byte_size() > 0 && ctx.outputs[0]->raw_data() != value.raw_data()) {
    std::memcpy(ctx.outputs[0]->raw_data(), value.raw_data(), value.byte_size());
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------- metadata

// Size(x) -> int[] shape; Size(x) {dim} or Size(x, dim) -> int.
absl::Status PrepareSize(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 2));
  const Dims& dims = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (HasInput(ctx, 1)) {
    const TensorInfo& dim = ctx.inputs[1];
    if (dim.constant == nullptr) {
      // A dim computed at run time: Eval reads it.
      ctx.outputs = {TensorInfo{DType::kInt64, {}}};
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ElementAsInt(*dim.constant, 0), rank,
                                                 "dim"));
    PublishConstant(ctx, IntScalar(dims[axis]));
    return absl::OkStatus();
  }
  if (ctx.node.attrs.Has("dim")) {
    ASSIGN_OR_RETURN(int64_t axis,
                     NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("dim"), rank, "dim"));
    PublishConstant(ctx, IntScalar(dims[axis]));
    return absl::OkStatus();
  }
  Tensor shape = Tensor::Zeros(DType::kInt64, {rank});
  std::copy(dims.begin(), dims.end(), shape.data<int64_t>());
  PublishConstant(ctx, std::move(shape));
  return absl::OkStatus();
}

absl::Status EvalSize(EvalContext& ctx) {
  if (ctx.state != nullptr) return EvalCopyConstant(ctx);
  const Dims& dims = ctx.inputs[0]->dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = ElementAsInt(*ctx.inputs[1], 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    return InvalidArg(ctx.node, "dim ", ElementAsInt(*ctx.inputs[1], 0),
                      " is out of range for a ", rank, "-D input");
  }
  *ctx.outputs[0]->data<int64_t>() = dims[axis];
  return absl::OkStatus();
}

absl::Status PrepareRank(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  PublishConstant(ctx, IntScalar(static_cast<int64_t>(ctx.inputs[0].dims.size())));
  return absl::OkStatus();
}

absl::Status PrepareNumel(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  PublishConstant(ctx, IntScalar(NumElements(ctx.inputs[0].dims)));
  return absl::OkStatus();
}

// ------------------------------------------------------------- arithmetic

enum class BinOp {
  kAdd, kSub, kMul, kTrueDiv, kFloorDiv, kTruncDiv, kMod, kPow, kMin, kMax,
  kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr, kXor,
};

struct BinOpInfo {
  const char* name;
  BinOp op;
};

constexpr BinOpInfo kBinOps[] = {
    {"add", BinOp::kAdd},  {"sub", BinOp::kSub},           {"mul", BinOp::kMul},
    {"truediv", BinOp::kTrueDiv}, {"floordiv", BinOp::kFloorDiv}, {"mod", BinOp::kMod},
    {"truncdiv", BinOp::kTruncDiv},  // torch.div(rounding_mode="trunc"): no Python operator
    {"pow", BinOp::kPow},  {"min", BinOp::kMin},           {"max", BinOp::kMax},
    {"eq", BinOp::kEq},    {"ne", BinOp::kNe},             {"lt", BinOp::kLt},
    {"le", BinOp::kLe},    {"gt", BinOp::kGt},             {"ge", BinOp::kGe},
    {"and", BinOp::kAnd},  {"or", BinOp::kOr},             {"xor", BinOp::kXor},
};

bool IsComparison(BinOp op) { return op >= BinOp::kEq && op <= BinOp::kGe; }
bool IsLogical(BinOp op) { return op >= BinOp::kAnd; }

struct BinaryPlan {
  BinOp op;
  bool int_math;  // both operands int or bool, computed in int64
  bool lists = false;  // eq/ne of two scalar lists (Python's list ==)
};

absl::Status PrepareScalarBinary(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  const std::string name = ctx.node.attrs.GetString("op");
  const BinOpInfo* info = nullptr;
  for (const BinOpInfo& i : kBinOps) {
    if (name == i.name) info = &i;
  }
  if (info == nullptr) return InvalidArg(ctx.node, "unknown scalar op '", name, "'");
  if ((info->op == BinOp::kEq || info->op == BinOp::kNe) && ctx.inputs[0].dims.size() == 1 &&
      ctx.inputs[1].dims.size() == 1) {
    // hx.size() != [layers, batch, hidden] (an RNN's check of its state): equal
    // lengths and elements.
    auto plan = std::make_shared<BinaryPlan>(BinaryPlan{info->op, false, true});
    ctx.outputs = {TensorInfo{DType::kBool, {}}};
    ctx.state = std::move(plan);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < 2; ++i) {
    const TensorInfo& in = ctx.inputs[i];
    if (NumElements(in.dims) != 1) {
      return InvalidArg(ctx.node, "operand ", i, " must be a scalar, got ", DTypeName(in.dtype),
                        DimsToString(in.dims));
    }
  }
  const DType a = ctx.inputs[0].dtype;
  const DType b = ctx.inputs[1].dtype;
  const bool a_float = IsFloatingPoint(a);
  const bool b_float = IsFloatingPoint(b);
  auto plan = std::make_shared<BinaryPlan>(BinaryPlan{info->op, !a_float && !b_float});
  DType out;
  if (IsComparison(info->op)) {
    out = DType::kBool;
  } else if (IsLogical(info->op)) {
    if (a_float || b_float) {
      return InvalidArg(ctx.node, "'", name, "' needs int or bool operands");
    }
    out = a == DType::kBool && b == DType::kBool ? DType::kBool : DType::kInt64;
  } else if (info->op == BinOp::kTrueDiv || info->op == BinOp::kPow) {
    // TorchScript: int / int and int ** int are floats.
    out = DType::kF64;
  } else {
    out = plan->int_math ? DType::kInt64 : DType::kF64;
  }
  ctx.outputs = {TensorInfo{out, {}}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

// Python's floor division and modulo (the result takes the divisor's sign).
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t PyMod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double PyFMod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

absl::Status EvalScalarBinary(EvalContext& ctx) {
  const BinaryPlan& p = StateAs<BinaryPlan>(ctx);
  Tensor& out = *ctx.outputs[0];
  if (p.lists) {
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    bool equal = a.num_elements() == b.num_elements();
    for (int64_t i = 0; equal && i < a.num_elements(); ++i) {
      equal = ElementAsDouble(a, i) == ElementAsDouble(b, i);
    }
    *out.data<bool>() = p.op == BinOp::kEq ? equal : !equal;
    return absl::OkStatus();
  }
  const bool divides = p.op == BinOp::kTrueDiv || p.op == BinOp::kFloorDiv ||
                       p.op == BinOp::kTruncDiv || p.op == BinOp::kMod;
  if (p.int_math) {
    const int64_t a = ElementAsInt(*ctx.inputs[0], 0);
    const int64_t b = ElementAsInt(*ctx.inputs[1], 0);
    if (divides && b == 0) return InvalidArg(ctx.node, "division by zero");
    double r = 0;
    int64_t ir = 0;
    bool is_int = true;
    switch (p.op) {
      case BinOp::kAdd: ir = a + b; break;
      case BinOp::kSub: ir = a - b; break;
      case BinOp::kMul: ir = a * b; break;
      case BinOp::kTrueDiv: r = static_cast<double>(a) / static_cast<double>(b); is_int = false; break;
      case BinOp::kFloorDiv: ir = FloorDiv(a, b); break;
      case BinOp::kTruncDiv: ir = a / b; break;  // C++ int division rounds toward zero
      case BinOp::kMod: ir = PyMod(a, b); break;
      case BinOp::kPow: r = std::pow(static_cast<double>(a), static_cast<double>(b)); is_int = false; break;
      case BinOp::kMin: ir = std::min(a, b); break;
      case BinOp::kMax: ir = std::max(a, b); break;
      case BinOp::kEq: ir = a == b; break;
      case BinOp::kNe: ir = a != b; break;
      case BinOp::kLt: ir = a < b; break;
      case BinOp::kLe: ir = a <= b; break;
      case BinOp::kGt: ir = a > b; break;
      case BinOp::kGe: ir = a >= b; break;
      case BinOp::kAnd: ir = a & b; break;
      case BinOp::kOr: ir = a | b; break;
      case BinOp::kXor: ir = a ^ b; break;
    }
    if (is_int && out.dtype() == DType::kInt64) {
      *out.data<int64_t>() = ir;  // exact beyond 2^53
    } else {
      StoreScalar(out, 0, is_int ? static_cast<double>(ir) : r);
    }
    return absl::OkStatus();
  }
  const double a = ElementAsDouble(*ctx.inputs[0], 0);
  const double b = ElementAsDouble(*ctx.inputs[1], 0);
  if ((p.op == BinOp::kFloorDiv || p.op == BinOp::kMod) && b == 0) {
    return InvalidArg(ctx.node, "float division by zero");
  }
  double r = 0;
  switch (p.op) {
    case BinOp::kAdd: r = a + b; break;
    case BinOp::kSub: r = a - b; break;
    case BinOp::kMul: r = a * b; break;
    case BinOp::kTrueDiv: r = a / b; break;
    case BinOp::kFloorDiv: r = std::floor(a / b); break;
    // Only torch.div makes truncdiv, and float tensors divide by zero to
    // inf/nan there instead of raising, so no zero check above.
    case BinOp::kTruncDiv: r = std::trunc(a / b); break;
    case BinOp::kMod: r = PyFMod(a, b); break;
    case BinOp::kPow: r = std::pow(a, b); break;
    case BinOp::kMin: r = std::min(a, b); break;
    case BinOp::kMax: r = std::max(a, b); break;
    case BinOp::kEq: r = a == b; break;
    case BinOp::kNe: r = a != b; break;
    case BinOp::kLt: r = a < b; break;
    case BinOp::kLe: r = a <= b; break;
    case BinOp::kGt: r = a > b; break;
    case BinOp::kGe: r = a >= b; break;
    default: return InvalidArg(ctx.node, "logical op on floats");
  }
  StoreScalar(out, 0, r);
  return absl::OkStatus();
}

enum class UnOp { kNeg, kNot, kAbs, kFloor, kCeil, kSqrt };

struct UnaryPlan {
  UnOp op;
};

absl::Status PrepareScalarUnary(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  if (NumElements(ctx.inputs[0].dims) != 1) {
    return InvalidArg(ctx.node, "operand must be a scalar, got ", DimsToString(ctx.inputs[0].dims));
  }
  const std::string name = ctx.node.attrs.GetString("op");
  const DType in = ctx.inputs[0].dtype;
  UnOp op;
  DType out;
  if (name == "neg" || name == "abs") {
    op = name == "neg" ? UnOp::kNeg : UnOp::kAbs;
    out = IsFloatingPoint(in) ? DType::kF64 : DType::kInt64;
  } else if (name == "not") {
    op = UnOp::kNot;
    out = DType::kBool;
  } else if (name == "floor" || name == "ceil") {
    op = name == "floor" ? UnOp::kFloor : UnOp::kCeil;
    out = DType::kInt64;  // math.floor / math.ceil return ints
  } else if (name == "sqrt") {
    op = UnOp::kSqrt;
    out = DType::kF64;
  } else {
    return InvalidArg(ctx.node, "unknown scalar op '", name, "'");
  }
  ctx.outputs = {TensorInfo{out, {}}};
  ctx.state = std::make_shared<UnaryPlan>(UnaryPlan{op});
  return absl::OkStatus();
}

absl::Status EvalScalarUnary(EvalContext& ctx) {
  const UnaryPlan& p = StateAs<UnaryPlan>(ctx);
  const Tensor& in = *ctx.inputs[0];
  Tensor& out = *ctx.outputs[0];
  if (out.dtype() == DType::kInt64 && !IsFloatingPoint(in.dtype()) &&
      (p.op == UnOp::kNeg || p.op == UnOp::kAbs)) {
    const int64_t v = ElementAsInt(in, 0);
    *out.data<int64_t>() = p.op == UnOp::kNeg ? -v : (v < 0 ? -v : v);
    return absl::OkStatus();
  }
  const double v = ElementAsDouble(in, 0);
  double r = 0;
  switch (p.op) {
    case UnOp::kNeg: r = -v; break;
    case UnOp::kAbs: r = std::fabs(v); break;
    case UnOp::kNot: r = v == 0; break;
    case UnOp::kFloor: r = std::floor(v); break;
    case UnOp::kCeil: r = std::ceil(v); break;
    case UnOp::kSqrt: r = std::sqrt(v); break;
  }
  StoreScalar(out, 0, r);
  return absl::OkStatus();
}

// ToScalar {type}: aten::Int / Float / Bool of a one-element tensor (any
// dtype) or of a scalar.
absl::Status PrepareToScalar(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  if (NumElements(ctx.inputs[0].dims) != 1) {
    return InvalidArg(ctx.node, "only one-element tensors can be converted to scalars, got ",
                      DimsToString(ctx.inputs[0].dims));
  }
  if (DTypeSize(ctx.inputs[0].dtype) == 0) return InvalidArg(ctx.node, "input dtype is unknown");
  const std::string type = ctx.node.attrs.GetString("type");
  DType out;
  if (type == "int") {
    out = DType::kInt64;
  } else if (type == "float") {
    out = DType::kF64;
  } else if (type == "bool") {
    out = DType::kBool;
  } else {
    return InvalidArg(ctx.node, "unknown scalar type '", type, "'");
  }
  ctx.outputs = {TensorInfo{out, {}}};
  return absl::OkStatus();
}

absl::Status EvalToScalar(EvalContext& ctx) {
  const Tensor& in = *ctx.inputs[0];
  Tensor& out = *ctx.outputs[0];
  if (out.dtype() == DType::kInt64) {
    *out.data<int64_t>() = ElementAsInt(in, 0);
  } else {
    StoreScalar(out, 0, ElementAsDouble(in, 0));
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------- scalar lists

DType CommonScalarDType(const PrepareContext& ctx) {
  bool any_float = false, all_bool = !ctx.inputs.empty();
  for (const TensorInfo& in : ctx.inputs) {
    any_float |= IsFloatingPoint(in.dtype);
    all_bool &= in.dtype == DType::kBool;
  }
  return any_float ? DType::kF64 : all_bool ? DType::kBool : DType::kInt64;
}

// ListConstruct(a, b, ...) of scalars -> 1-D list; an empty list is int[].
absl::Status PrepareListConstruct(PrepareContext& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorInfo& in = ctx.inputs[i];
    if (!in.present || NumElements(in.dims) != 1 || !IsScalarDType(in.dtype)) {
      return InvalidArg(ctx.node, "element ", i, " must be an int, float or bool scalar, got ",
                        DTypeName(in.dtype), DimsToString(in.dims));
    }
  }
  ctx.outputs = {TensorInfo{CommonScalarDType(ctx), {static_cast<int64_t>(ctx.inputs.size())}}};
  return absl::OkStatus();
}

absl::Status EvalListConstruct(EvalContext& ctx) {
  Tensor& out = *ctx.outputs[0];
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (out.dtype() == DType::kInt64) {
      out.data<int64_t>()[i] = ElementAsInt(*ctx.inputs[i], 0);
    } else {
      StoreScalar(out, static_cast<int64_t>(i), ElementAsDouble(*ctx.inputs[i], 0));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckList(const PrepareContext& ctx) {
  if (ctx.inputs[0].dims.size() != 1 || !IsScalarDType(ctx.inputs[0].dtype)) {
    return InvalidArg(ctx.node, "expected an int, float or bool list, got ",
                      DTypeName(ctx.inputs[0].dtype), DimsToString(ctx.inputs[0].dims));
  }
  return absl::OkStatus();
}

absl::Status PrepareListGetItem(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  RETURN_IF_ERROR(CheckList(ctx));
  if (NumElements(ctx.inputs[1].dims) != 1 || IsFloatingPoint(ctx.inputs[1].dtype)) {
    return InvalidArg(ctx.node, "index must be an int");
  }
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, {}}};
  return absl::OkStatus();
}

absl::Status EvalListGetItem(EvalContext& ctx) {
  const Tensor& list = *ctx.inputs[0];
  const int64_t n = list.dim(0);
  int64_t i = ElementAsInt(*ctx.inputs[1], 0);
  if (i < 0) i += n;
  if (i < 0 || i >= n) {
    return InvalidArg(ctx.node, "list index ", ElementAsInt(*ctx.inputs[1], 0),
                      " out of range for a list of ", n);
  }
  const size_t elem = DTypeSize(list.dtype());
  std::memcpy(ctx.outputs[0]->raw_data(), static_cast<const char*>(list.raw_data()) + i * elem,
              elem);
  return absl::OkStatus();
}

absl::Status PrepareListLen(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckList(ctx));
  PublishConstant(ctx, IntScalar(ctx.inputs[0].dims[0]));
  return absl::OkStatus();
}

absl::Status PrepareListAppend(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  RETURN_IF_ERROR(CheckList(ctx));
  if (NumElements(ctx.inputs[1].dims) != 1) return InvalidArg(ctx.node, "element must be a scalar");
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, {ctx.inputs[0].dims[0] + 1}}};
  return absl::OkStatus();
}

absl::Status EvalListAppend(EvalContext& ctx) {
  const Tensor& list = *ctx.inputs[0];
  Tensor& out = *ctx.outputs[0];
  if (list.byte_size() > 0) std::memcpy(out.raw_data(), list.raw_data(), list.byte_size());
  const int64_t last = list.dim(0);
  if (out.dtype() == DType::kInt64) {
    out.data<int64_t>()[last] = ElementAsInt(*ctx.inputs[1], 0);
  } else {
    StoreScalar(out, last, ElementAsDouble(*ctx.inputs[1], 0));
  }
  return absl::OkStatus();
}

// ListUnpack: one scalar output per element; the node's output count must
// match the list's length.
absl::Status PrepareListUnpack(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckList(ctx));
  const size_t n = ctx.node.outputs.size();
  if (ctx.inputs[0].dims[0] != static_cast<int64_t>(n)) {
    return InvalidArg(ctx.node, "cannot unpack a list of ", ctx.inputs[0].dims[0], " into ", n,
                      " values");
  }
  ctx.outputs.assign(n, TensorInfo{ctx.inputs[0].dtype, {}});
  return absl::OkStatus();
}

absl::Status EvalListUnpack(EvalContext& ctx) {
  const Tensor& list = *ctx.inputs[0];
  const size_t elem = DTypeSize(list.dtype());
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    std::memcpy(ctx.outputs[i]->raw_data(), static_cast<const char*>(list.raw_data()) + i * elem,
                elem);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> ScalarKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kSize, DType::kUnknown, PrepareSize, EvalSize},
      {ir::OpKind::kRank, DType::kUnknown, PrepareRank, EvalCopyConstant},
      {ir::OpKind::kNumel, DType::kUnknown, PrepareNumel, EvalCopyConstant},
      {ir::OpKind::kScalarBinary, DType::kUnknown, PrepareScalarBinary, EvalScalarBinary},
      {ir::OpKind::kScalarUnary, DType::kUnknown, PrepareScalarUnary, EvalScalarUnary},
      {ir::OpKind::kToScalar, DType::kUnknown, PrepareToScalar, EvalToScalar},
      {ir::OpKind::kListConstruct, DType::kUnknown, PrepareListConstruct, EvalListConstruct},
      {ir::OpKind::kListGetItem, DType::kUnknown, PrepareListGetItem, EvalListGetItem},
      {ir::OpKind::kListLen, DType::kUnknown, PrepareListLen, EvalCopyConstant},
      {ir::OpKind::kListAppend, DType::kUnknown, PrepareListAppend, EvalListAppend},
      {ir::OpKind::kListUnpack, DType::kUnknown, PrepareListUnpack, EvalListUnpack},
  };
  return kKernels;
}

}  // namespace kiln::kernels
