// Converters for the creation ops that take a size rather than a tensor:
// zeros, ones, full, empty, linspace, eye. Constant sizes make an ir Constant
// computed here (with PyTorch's default dtypes and linspace's arithmetic); a
// size known only at run time (an LSTM's zero state, eye(x.size(1))) makes
// a Fill or an Arange-built node that the executor folds once shapes are known.
// The *_like and new_* forms are in convert_shape.cc. fill, zero and copy
// (what fill_, zero_ and copy_ stand for) give a tensor of their first
// argument's shape and dtype too.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer::aten {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

// eye(n[, m], *, dtype) whose sizes a run computes (x.size(1)): the positions
// where arange(n)[:, None] == arange(m)[None, :], cast to the dtype. Arange
// takes run-time ints, folded once a signature fixes them.
ConvertResult EyeOfRunTimeSize(AtenCall& call, ConvertContext& cx, DType dtype) {
  ASSIGN_OR_RETURN(ir::ValueId n, call.ScalarValue("n"));
  ir::ValueId m = n;
  if (call.Has("m")) {
    ASSIGN_OR_RETURN(m, call.ScalarValue("m"));
  }
  const ir::ValueId zero = cx.AddInt(0), one = cx.AddInt(1);
  ir::ValueId ranges[2];
  for (int k = 0; k < 2; ++k) {
    ir::Attributes arange;
    arange.SetString("dtype", DTypeName(DType::kInt64));
    const ir::ValueId r = cx.Emit(call, OpKind::kArange, {zero, k == 0 ? n : m, one},
                                  std::move(arange), k == 0 ? ".rows" : ".cols");
    ir::Attributes unsqueeze;
    unsqueeze.SetInt("axis", 1 - k);  // rows [n, 1], columns [1, m]
    ranges[k] = cx.Emit(call, OpKind::kUnsqueeze, {r}, std::move(unsqueeze),
                        k == 0 ? ".rows2d" : ".cols2d");
  }
  const ir::ValueId diagonal = cx.Emit(call, OpKind::kEqual, {ranges[0], ranges[1]}, {},
                                       dtype == DType::kBool ? "" : ".mask");
  if (dtype == DType::kBool) return One(diagonal);
  ir::Attributes cast;
  cast.SetString("dtype", DTypeName(dtype));
  return One(cx.Emit(call, OpKind::kCast, {diagonal}, std::move(cast)));
}

// Element i of linspace(start, end, steps) as ATen computes it in type T:
// from the start for the first half, from the end for the second.
template <typename T, typename Step>
T LinspaceAt(double start, double end, int64_t steps, int64_t i) {
  if (steps == 1) return static_cast<T>(static_cast<Step>(start));
  const Step s = static_cast<Step>(start), e = static_cast<Step>(end);
  const Step step = (e - s) / static_cast<Step>(steps - 1);
  if (i < steps / 2) return static_cast<T>(s + step * static_cast<Step>(i));
  return static_cast<T>(e - step * static_cast<Step>(steps - i - 1));
}

}  // namespace

// zeros / ones / empty(size, *, dtype=None, ...), full(size, fill_value, *,
// dtype=None, ...): a constant; empty is zero-filled (its contents are
// unspecified). full's dtype follows the fill value when not given (int ->
// int64, bool -> bool, float -> float32).
ConvertResult ConvertFull(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = call.op();
  Number value;
  value.i = op == "aten::ones" ? 1 : 0;
  if (op == "aten::full") {
    std::optional<Number> n = call.ConstNumber("fill_value");
    if (!n) return call.Unimplemented("a fill value computed at run time");
    value = *n;
  }
  ASSIGN_OR_RETURN(IntsArg size, call.IntsOrValue("size"));
  ir::Attributes attrs;
  attrs.SetFloat("value", value.ToDouble());
  ASSIGN_OR_RETURN(std::optional<ir::ValueId> like, call.DTypeSource("dtype"));
  if (like.has_value()) {
    // dtype=x.dtype read at run time: a Fill in x's dtype.
    if (!size.values.has_value()) {
      return One(cx.Emit(call, OpKind::kFill, {*like, size.value}, std::move(attrs)));
    }
    attrs.SetInts("shape", *std::move(size.values));
    return One(cx.Emit(call, OpKind::kFill, {*like}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(std::optional<DType> given, call.ScalarType("dtype"));
  const bool full = op == "aten::full";
  const DType dtype = given.value_or(full && value.kind == Number::kInt    ? DType::kInt64
                                     : full && value.kind == Number::kBool ? DType::kBool
                                                                           : DType::kF32);
  if (!size.values.has_value()) {
    // A size computed at run time (an LSTM's zero state): a Fill node.
    attrs.SetString("dtype", DTypeName(dtype));
    return One(cx.Emit(call, OpKind::kFill, {ir::kNoValue, size.value}, std::move(attrs)));
  }
  for (int64_t d : *size.values) {
    if (d < 0) return call.InvalidArgument(absl::StrCat("a negative size ", d));
  }
  ASSIGN_OR_RETURN(ir::ValueId id,
                   cx.AddFilledConstant(Dims(size.values->begin(), size.values->end()),
                                        value.ToDouble(), dtype, call.OutputName(0)));
  return One(id);
}

// linspace(start, end, steps, *, dtype=None) and eye(n[, m], *, dtype=None):
// constants (eye also of sizes a run computes); float32 unless dtype is given.
ConvertResult ConvertLinspaceEye(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(std::optional<DType> given, call.ScalarType("dtype"));
  const DType dtype = given.value_or(DType::kF32);
  if (call.op() == "aten::eye") {
    std::optional<Number> n = call.ConstNumber("n");
    std::optional<Number> m = call.Has("m") ? call.ConstNumber("m") : n;
    if (!n || !m) return EyeOfRunTimeSize(call, cx, dtype);
    if (!n->IsIntegral() || !m->IsIntegral() || n->i < 0 || m->i < 0) {
      return call.InvalidArgument("eye of a size that is not a non-negative int");
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, {n->i, m->i}, "eye"));
    Tensor one = Tensor::Zeros(dtype, {});
    FillTensor(one, 1.0);
    for (int64_t i = 0; i < std::min(n->i, m->i); ++i) {
      std::memcpy(static_cast<char*>(t.raw_data()) + (i * m->i + i) * DTypeSize(dtype),
                  one.raw_data(), DTypeSize(dtype));
    }
    return One(cx.AddConstant(std::move(t), call.OutputName(0)));
  }
  std::optional<Number> start = call.ConstNumber("start");
  std::optional<Number> end = call.ConstNumber("end");
  if (!start || !end) return call.Unimplemented("linspace bounds computed at run time");
  ASSIGN_OR_RETURN(int64_t steps, call.Int("steps"));
  if (steps < 0) return call.InvalidArgument("linspace of a negative number of steps");
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, {steps}, "linspace"));
  const double s = start->ToDouble(), e = end->ToDouble();
  for (int64_t i = 0; i < steps; ++i) {
    switch (dtype) {
      case DType::kF32: t.data<float>()[i] = LinspaceAt<float, float>(s, e, steps, i); break;
      case DType::kF64: t.data<double>()[i] = LinspaceAt<double, double>(s, e, steps, i); break;
      case DType::kInt64: t.data<int64_t>()[i] = LinspaceAt<int64_t, double>(s, e, steps, i); break;
      case DType::kInt32: t.data<int32_t>()[i] = LinspaceAt<int32_t, double>(s, e, steps, i); break;
      default:
        return call.Unimplemented(absl::StrCat("linspace in ", DTypeName(dtype)));
    }
  }
  return One(cx.AddConstant(std::move(t), call.OutputName(0)));
}

// tensor.float / .int / .bool(t, *, dtype=None, device=None,
// requires_grad=False) of a number: a 0-dim constant, in dtype or the
// number's default (float32, int64, bool); a scripted x[:, 1] = 2.0 makes one
// in x's dtype (dtype=x.dtype, read at run time: a Cast) to copy_ from. The
// device is the CPU. scalar_tensor(s, *, dtype=None) likewise, float32 by default.
ConvertResult ConvertScalarTensor(AtenCall& call, ConvertContext& cx) {
  const bool scalar_tensor = call.op() == "aten::scalar_tensor";
  std::optional<Number> n = call.ConstNumber(scalar_tensor ? "s" : call.Has("t") ? "t" : "data");
  if (!n.has_value()) return call.Unimplemented("a tensor made of a list or of a run-time number");
  // scalar_tensor(s, *, dtype=None) is float32 whatever the number's kind.
  const DType own = n->kind == Number::kFloat || scalar_tensor ? DType::kF32
                  : n->kind == Number::kBool ? DType::kBool
                                             : DType::kInt64;
  ASSIGN_OR_RETURN(std::optional<ir::ValueId> like, call.DTypeSource("dtype"));
  if (like.has_value()) {
    ASSIGN_OR_RETURN(ir::ValueId id, cx.AddScalarConstant(n->ToDouble(), own, call.OutputName(0)));
    return One(cx.Emit(call, OpKind::kCast, {id, *like}));
  }
  ASSIGN_OR_RETURN(std::optional<DType> given, call.ScalarType("dtype"));
  ASSIGN_OR_RETURN(ir::ValueId id,
                   cx.AddScalarConstant(n->ToDouble(), given.value_or(own), call.OutputName(0)));
  return One(id);
}

// fill.Scalar / fill.Tensor(self, value), zero(self): self's shape and
// dtype, every element `value` (0 for zero), converted as PyTorch's fill_
// converts it. copy(self, src, non_blocking=False): src broadcast to self's
// shape, in self's dtype. Their in-place forms write into self (view_write.h).
ConvertResult ConvertFill(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId self, call.Tensor("self"));
  const std::string_view op = OutOfPlaceOp(call.op());
  ir::ValueId value = ir::kNoValue;
  if (op == "aten::copy") {
    ASSIGN_OR_RETURN(value, call.Tensor("src"));
  } else {
    std::optional<Number> n =
        op == "aten::zero" ? std::optional<Number>(Number()) : call.ConstNumber("value");
    if (n.has_value()) {
      ir::Attributes attrs;
      attrs.SetFloat("value", n->ToDouble());
      return One(cx.Emit(call, OpKind::kFill, {self}, std::move(attrs)));
    }
    if (call.IsScalar("value")) {
      ASSIGN_OR_RETURN(value, call.ScalarValue("value"));
    } else {
      ASSIGN_OR_RETURN(value, call.Tensor("value"));
    }
  }
  ir::Attributes like;
  like.SetBool("like", true);
  ir::ValueId spread = cx.Emit(call, OpKind::kExpand, {value, self}, std::move(like), ".value");
  return One(cx.Emit(call, OpKind::kCast, {spread, self}));
}

}  // namespace kiln::importer::aten
