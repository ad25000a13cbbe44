// Reference elementwise ops: unary math, the newer activations, every
// broadcasting binary op (arithmetic, comparison, logical) in every dtype,
// Where, Cast and Fill. Computed in double from the definitions.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/common/type_promotion.h"
#include "engine/kernels/reference/ref_util.h"

namespace kiln::kernels::reference {
namespace {

using ir::OpKind;

std::optional<double> UnaryValue(const ir::Node& node, double x) {
  const ir::Attributes& a = node.attrs;
  switch (node.kind) {
    case OpKind::kNeg: return -x;
    case OpKind::kAbs: return std::abs(x);
    case OpKind::kSign: return std::isnan(x) ? x : (x > 0) - (x < 0);
    case OpKind::kSqrt: return std::sqrt(x);
    case OpKind::kRsqrt: return 1.0 / std::sqrt(x);
    case OpKind::kExp: return std::exp(x);
    case OpKind::kExpm1: return std::expm1(x);
    case OpKind::kLog: return std::log(x);
    case OpKind::kLog2: return std::log2(x);
    case OpKind::kLog10: return std::log10(x);
    case OpKind::kLog1p: return std::log1p(x);
    case OpKind::kReciprocal: return 1.0 / x;
    case OpKind::kFloor: return std::floor(x);
    case OpKind::kCeil: return std::ceil(x);
    case OpKind::kRound: return std::nearbyint(x);
    case OpKind::kTrunc: return std::trunc(x);
    case OpKind::kFrac: return x - std::trunc(x);
    case OpKind::kErf: return std::erf(x);
    case OpKind::kSin: return std::sin(x);
    case OpKind::kCos: return std::cos(x);
    case OpKind::kTan: return std::tan(x);
    case OpKind::kAsin: return std::asin(x);
    case OpKind::kAcos: return std::acos(x);
    case OpKind::kAtan: return std::atan(x);
    case OpKind::kSinh: return std::sinh(x);
    case OpKind::kCosh: return std::cosh(x);
    case OpKind::kAsinh: return std::asinh(x);
    case OpKind::kAcosh: return std::acosh(x);
    case OpKind::kAtanh: return std::atanh(x);
    case OpKind::kIsNan: return std::isnan(x) ? 1.0 : 0.0;
    case OpKind::kNanToNum: {  // (FP32 cases: float32's finite limits by default)
      const double hi = std::numeric_limits<float>::max();
      if (std::isnan(x)) return a.GetFloat("nan", 0.0);
      if (std::isinf(x)) return x > 0 ? a.GetFloat("posinf", hi) : a.GetFloat("neginf", -hi);
      return x;
    }
    case OpKind::kLogicalNot: return x == 0 ? 1.0 : 0.0;
    case OpKind::kLeakyRelu: return x > 0 ? x : x * a.GetFloat("negative_slope", 0.01);
    case OpKind::kElu: {
      const double alpha = a.GetFloat("alpha", 1), scale = a.GetFloat("scale", 1);
      const double input_scale = a.GetFloat("input_scale", 1);
      return x > 0 ? scale * x : alpha * scale * (std::exp(x * input_scale) - 1);
    }
    case OpKind::kMish: return x * std::tanh(std::log1p(std::exp(x)));
    case OpKind::kSoftplus: {
      const double beta = a.GetFloat("beta", 1), threshold = a.GetFloat("threshold", 20);
      return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
    }
    case OpKind::kLogSigmoid: return -std::log1p(std::exp(-x));
    case OpKind::kHardShrink: {
      const double l = a.GetFloat("lambd", 0.5);
      return (x >= -l && x <= l) ? 0.0 : x;
    }
    case OpKind::kSoftShrink: {
      const double l = a.GetFloat("lambd", 0.5);
      return x > l ? x - l : (x < -l ? x + l : 0.0);
    }
    case OpKind::kThreshold:
      return x <= a.GetFloat("threshold", 0) ? a.GetFloat("value", 0) : x;
    default:
      return std::nullopt;
  }
}

bool IsBoolResult(OpKind op) {
  switch (op) {
    case OpKind::kIsNan:
    case OpKind::kLogicalNot:
    case OpKind::kEqual:
    case OpKind::kNotEqual:
    case OpKind::kLess:
    case OpKind::kLessEqual:
    case OpKind::kGreater:
    case OpKind::kGreaterEqual:
    case OpKind::kLogicalAnd:
    case OpKind::kLogicalOr:
    case OpKind::kLogicalXor:
      return true;
    default:
      return false;
  }
}

std::optional<double> BinaryValue(OpKind op, double x, double y, bool integral) {
  switch (op) {
    case OpKind::kAdd: return x + y;
    case OpKind::kSub: return x - y;
    case OpKind::kMul: return x * y;
    case OpKind::kDiv: return x / y;
    case OpKind::kPow: return std::pow(x, y);
    case OpKind::kMaximum: return std::isnan(x) ? x : std::isnan(y) ? y : std::max(x, y);
    case OpKind::kMinimum: return std::isnan(x) ? x : std::isnan(y) ? y : std::min(x, y);
    case OpKind::kFloorDiv: return std::floor(x / y);
    case OpKind::kTruncDiv: return std::trunc(x / y);
    case OpKind::kRemainder: return x - std::floor(x / y) * y;
    case OpKind::kFmod: return integral ? std::trunc(x / y) * -y + x : std::fmod(x, y);
    case OpKind::kAtan2: return std::atan2(x, y);
    case OpKind::kEqual: return x == y;
    case OpKind::kNotEqual: return x != y;
    case OpKind::kLess: return x < y;
    case OpKind::kLessEqual: return x <= y;
    case OpKind::kGreater: return x > y;
    case OpKind::kGreaterEqual: return x >= y;
    case OpKind::kLogicalAnd: return (x != 0) && (y != 0);
    case OpKind::kLogicalOr: return (x != 0) || (y != 0);
    case OpKind::kLogicalXor: return (x != 0) != (y != 0);
    default: return std::nullopt;
  }
}

// numpy broadcasting of `shapes`.
absl::StatusOr<Dims> Broadcast(const ir::Node& node, const std::vector<Dims>& shapes) {
  size_t r = 0;
  for (const Dims& d : shapes) r = std::max(r, d.size());
  Dims out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    for (const Dims& d : shapes) {
      if (i + d.size() < r) continue;
      const int64_t di = d[i + d.size() - r];
      if (di == 1) continue;
      if (out[i] != 1 && out[i] != di) return RefError(node, "shapes do not broadcast");
      out[i] = di;
    }
  }
  return out;
}

double BroadcastAt(const Values& t, const Index& out_idx) {
  Index idx(t.dims.size());
  for (size_t k = 0; k < t.dims.size(); ++k) {
    const size_t i = out_idx.size() - t.dims.size() + k;
    idx[k] = t.dims[k] == 1 ? 0 : out_idx[i];
  }
  return t.at(idx);
}

// The dtype two operands combine in, by PyTorch's promotion
// (engine/common/type_promotion), counting 0-dim operands as Python numbers
// as the kernels count 0-dim constants (except for the tensor-only ops
// Maximum, Minimum and the logical ones, where they are 0-dim tensors).
DType CommonDType(OpKind op, const Tensor* a, const Tensor* b) {
  const bool tensor_only = op == OpKind::kMaximum || op == OpKind::kMinimum ||
                           op == OpKind::kLogicalAnd || op == OpKind::kLogicalOr ||
                           op == OpKind::kLogicalXor;
  auto operand = [&](const Tensor* t) {
    return PromotionOperand{t->dtype(), t->rank() > 0 ? OperandKind::kTensor
                                        : tensor_only  ? OperandKind::kZeroDim
                                                       : OperandKind::kScalar};
  };
  return ResultType({operand(a), operand(b)});
}

}  // namespace

MaybeOutputs ElementwiseReference(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const OpKind op = node.kind;
  if (op == OpKind::kCast) {
    DType to = in.size() > 1 && in[1] != nullptr
                   ? in[1]->dtype()
                   : DTypeFromName(node.attrs.GetString("dtype")).value_or(DType::kUnknown);
    Values x = Read(*in[0]);
    for (double& v : x.v) {
      if (IsIntegral(to) && IsFloatingPoint(in[0]->dtype())) {
        const double t = std::trunc(v);
        v = std::isfinite(t) && std::abs(t) < 9e18 ? t : static_cast<double>(INT64_MIN);
      }
    }
    return Outputs{Write(to, x.dims, x.v)};
  }
  if (op == OpKind::kFill) {
    const bool like = !in.empty() && in[0] != nullptr;
    DType dtype = like ? in[0]->dtype() : DType::kF32;
    if (node.attrs.Has("dtype")) dtype = DTypeFromName(node.attrs.GetString("dtype")).value_or(dtype);
    Dims dims;
    if (in.size() > 1 && in[1] != nullptr) {
      for (double d : Read(*in[1]).v) dims.push_back(static_cast<int64_t>(d));
    } else {
      dims = node.attrs.Has("shape") ? node.attrs.GetInts("shape") : in[0]->dims();
    }
    return Outputs{Write(dtype, dims, std::vector<double>(NumElements(dims),
                                                           node.attrs.GetFloat("value", 0)))};
  }
  if (op == OpKind::kArange) {
    const double start = Read(*in[0]).v[0], end = Read(*in[1]).v[0], step = Read(*in[2]).v[0];
    std::vector<double> v;
    for (double x = start; step > 0 ? x < end : x > end; x = start + step * v.size()) v.push_back(x);
    const DType dtype = DTypeFromName(node.attrs.GetString("dtype")).value_or(DType::kInt64);
    return Outputs{Write(dtype, {static_cast<int64_t>(v.size())}, v)};
  }
  if (op == OpKind::kPRelu) {
    Values x = Read(*in[0]), w = Read(*in[1]);
    std::vector<double> out(x.v.size());
    int64_t i = 0;
    ForEach(x.dims, [&](const Index& idx) {
      const int64_t c = w.v.size() == 1 ? 0 : idx[x.dims.size() >= 2 ? 1 : 0];
      out[i] = x.v[i] > 0 ? x.v[i] : w.v[c] * x.v[i];
      ++i;
    });
    return Outputs{Write(DType::kF32, x.dims, out)};
  }
  if (in.size() == 1 && in[0] != nullptr && UnaryValue(node, 0.0).has_value()) {
    Values x = Read(*in[0]);
    std::vector<double> out(x.v.size());
    for (size_t i = 0; i < x.v.size(); ++i) out[i] = *UnaryValue(node, x.v[i]);
    return Outputs{Write(IsBoolResult(op) ? DType::kBool : in[0]->dtype(), x.dims, out)};
  }
  if (op == OpKind::kWhere) {
    Values c = Read(*in[0]), a = Read(*in[1]), b = Read(*in[2]);
    absl::StatusOr<Dims> dims = Broadcast(node, {c.dims, a.dims, b.dims});
    if (!dims.ok()) return MaybeOutputs(dims.status());
    std::vector<double> out;
    ForEach(*dims, [&](const Index& idx) {
      out.push_back(BroadcastAt(c, idx) != 0 ? BroadcastAt(a, idx) : BroadcastAt(b, idx));
    });
    return Outputs{Write(CommonDType(op, in[1], in[2]), *dims, out)};
  }
  if (in.size() == 2 && in[0] != nullptr && in[1] != nullptr &&
      BinaryValue(op, 1.0, 1.0, false).has_value()) {
    Values a = Read(*in[0]), b = Read(*in[1]);
    DType t = CommonDType(op, in[0], in[1]);
    // True division and atan2 of integers compute in the default float.
    if ((op == OpKind::kDiv || op == OpKind::kAtan2) && !IsFloatingPoint(t)) t = kDefaultFloat;
    absl::StatusOr<Dims> dims = Broadcast(node, {a.dims, b.dims});
    if (!dims.ok()) return MaybeOutputs(dims.status());
    std::vector<double> out;
    ForEach(*dims, [&](const Index& idx) {
      double x = BroadcastAt(a, idx), y = BroadcastAt(b, idx);
      if (t == DType::kF32) {  // operands as the kernel sees them
        x = static_cast<float>(x);
        y = static_cast<float>(y);
      }
      out.push_back(*BinaryValue(op, x, y, IsIntegral(t)));
    });
    return Outputs{Write(IsBoolResult(op) ? DType::kBool : t, *dims, out)};
  }
  return std::nullopt;
}

}  // namespace kiln::kernels::reference
