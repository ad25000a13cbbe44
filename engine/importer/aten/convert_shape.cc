// Converters for shape and indexing aten ops with constant arguments
// (flatten, view/reshape, cat, permute/transpose, (un)squeeze, expand, select,
// slice), casts, the *_like fills, arange, and torch.export's sym_size.
//
// A shape made of sizes known only at run time (a dynamic batch: sym_size
// results in export, aten::size in TorchScript) becomes an int[] input of the
// node, which its kernel reads in Prepare and the executor folds when the
// input shapes fix it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer::aten {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

}  // namespace

// flatten(self, start_dim=0, end_dim=-1).
ConvertResult ConvertFlatten(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t start_dim, call.Int("start_dim", 0));
  ASSIGN_OR_RETURN(int64_t end_dim, call.Int("end_dim", -1));
  ir::Attributes attrs;
  attrs.SetInt("start_dim", start_dim);
  attrs.SetInt("end_dim", end_dim);
  return One(cx.Emit(call, OpKind::kFlatten, {x}, std::move(attrs)));
}

// view(self, size) / reshape(self, shape) / _unsafe_view(self, size).
ConvertResult ConvertReshape(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(IntsArg arg, call.IntsOrValue(call.Has("shape") ? "shape" : "size"));
  if (!arg.values.has_value()) return One(cx.Emit(call, OpKind::kReshape, {x, arg.value}));
  std::vector<int64_t> shape = *std::move(arg.values);
  int inferred = 0;
  for (int64_t d : shape) {
    if (d == -1) {
      ++inferred;
    } else if (d < 0) {
      return call.InvalidArgument(
          absl::StrCat("invalid size ", d, " in shape ", DimsToString(shape)));
    }
  }
  if (inferred > 1) {
    return call.InvalidArgument(
        absl::StrCat("shape ", DimsToString(shape), " has more than one -1"));
  }
  ir::Attributes attrs;
  attrs.SetInts("shape", std::move(shape));
  return One(cx.Emit(call, OpKind::kReshape, {x}, std::move(attrs)));
}

// cat(tensors, dim=0).
ConvertResult ConvertCat(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> inputs, call.Tensors("tensors"));
  if (inputs.empty()) return call.InvalidArgument("concatenates an empty list");
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", 0));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(cx.Emit(call, OpKind::kConcat, std::move(inputs), std::move(attrs)));
}

// permute(self, dims), transpose(self, dim0, dim1).
ConvertResult ConvertPermute(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ir::Attributes attrs;
  if (OutOfPlaceOp(call.op()) == "aten::permute") {
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, call.Ints("dims"));
    attrs.SetInts("perm", std::move(perm));
  } else {
    ASSIGN_OR_RETURN(int64_t d0, call.Int("dim0"));
    ASSIGN_OR_RETURN(int64_t d1, call.Int("dim1"));
    attrs.SetInt("dim0", d0);
    attrs.SetInt("dim1", d1);
  }
  return One(cx.Emit(call, OpKind::kPermute, {x}, std::move(attrs)));
}

ConvertResult ConvertUnsqueeze(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(cx.Emit(call, OpKind::kUnsqueeze, {x}, std::move(attrs)));
}

// squeeze(self), squeeze.dim(self, dim), squeeze.dims(self, dim).
ConvertResult ConvertSqueeze(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ir::Attributes attrs;
  if (call.Has("dim")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, call.Ints("dim"));
    attrs.SetInts("axes", std::move(axes));
  }
  return One(cx.Emit(call, OpKind::kSqueeze, {x}, std::move(attrs)));
}

// expand(self, size, implicit=False).
ConvertResult ConvertExpand(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(IntsArg size, call.IntsOrValue("size"));
  if (!size.values.has_value()) return One(cx.Emit(call, OpKind::kExpand, {x, size.value}));
  ir::Attributes attrs;
  attrs.SetInts("shape", *std::move(size.values));
  return One(cx.Emit(call, OpKind::kExpand, {x}, std::move(attrs)));
}

// select(self, dim, index).
ConvertResult ConvertSelect(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  if (!call.ConstNumber("index").has_value()) {
    // An index computed at run time: IndexSelect with the int as a 0-dim
    // index has select's shape, wraps negative indices, and fails the
    // request when out of range.
    ASSIGN_OR_RETURN(ir::ValueId index, call.ScalarValue("index"));
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    return One(cx.Emit(call, OpKind::kIndexSelect, {x, index}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(int64_t index, call.Int("index"));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  attrs.SetInt("index", index);
  return One(cx.Emit(call, OpKind::kSelect, {x}, std::move(attrs)));
}

// slice.Tensor(self, dim=0, start=None, end=None, step=1); bounds may be
// computed at run time (x[:, :n] with n a size).
ConvertResult ConvertSlice(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", 0));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  std::vector<ir::ValueId> inputs = {x, ir::kNoValue, ir::kNoValue};
  const char* names[] = {"start", "end"};
  for (size_t k = 0; k < 2; ++k) {
    if (!call.Has(names[k])) continue;
    if (std::optional<Number> n = call.ConstNumber(names[k])) {
      // INT64_MAX ("to the end") is how export writes an open end.
      attrs.SetInt(names[k], static_cast<int64_t>(n->kind == Number::kInt ? n->i : n->ToDouble()));
    } else {
      ASSIGN_OR_RETURN(inputs[k + 1], call.ScalarValue(names[k]));
    }
  }
  ASSIGN_OR_RETURN(int64_t step, call.Int("step", 1));
  attrs.SetInt("step", step);
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  return One(cx.Emit(call, OpKind::kSlice, std::move(inputs), std::move(attrs)));
}

// _to_copy(self, *, dtype=None, ...), to.dtype(self, dtype, ...): a Cast, or
// the input itself when no dtype is given (device and layout moves are no-ops
// on a CPU-only runtime).
ConvertResult ConvertToCopy(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
  if (!dtype) return One(x);
  ir::Attributes attrs;
  attrs.SetString("dtype", DTypeName(*dtype));
  return One(cx.Emit(call, OpKind::kCast, {x}, std::move(attrs)));
}

// zeros_like / ones_like / full_like / empty_like(self[, fill_value], *, dtype=None).
ConvertResult ConvertFullLike(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId like, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
  double value = OutOfPlaceOp(call.op()) == "aten::ones_like" ? 1.0 : 0.0;
  if (call.op() == "aten::full_like") {
    ASSIGN_OR_RETURN(value, call.Double("fill_value"));
  }
  ir::Attributes attrs;
  attrs.SetFloat("value", value);
  if (dtype) attrs.SetString("dtype", DTypeName(*dtype));
  return One(cx.Emit(call, OpKind::kFill, {like}, std::move(attrs)));
}

// arange(end), arange.start(start, end), arange.start_step(start, end, step),
// with dtype=None: int64 when every bound is an int, else float32 (PyTorch's
// default). Constant bounds make a constant; a bound known only at run time
// (arange(seq_len)) an Arange node.
ConvertResult ConvertArange(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
  const char* names[] = {"start", "end", "step"};
  bool constant = true;
  bool floating = false;
  double bounds[3] = {0.0, 0.0, 1.0};
  for (size_t k = 0; k < 3; ++k) {
    if (!call.Has(names[k])) continue;
    std::optional<Number> n = call.ConstNumber(names[k]);
    if (!n) {
      constant = false;
      continue;
    }
    bounds[k] = n->ToDouble();
    floating |= !n->IsIntegral();
  }
  if (!constant) {
    std::vector<ir::ValueId> args;
    for (size_t k = 0; k < 3; ++k) {
      if (!call.Has(names[k])) {
        args.push_back(cx.AddInt(k == 2 ? 1 : 0));
        continue;
      }
      ASSIGN_OR_RETURN(ir::ValueId a, call.ScalarValue(names[k]));
      floating |= cx.KindOf(a) == ir::ValueKind::kFloat;
      args.push_back(a);
    }
    ir::Attributes attrs;
    attrs.SetString("dtype", DTypeName(dtype.value_or(floating ? DType::kF32 : DType::kInt64)));
    return One(cx.Emit(call, OpKind::kArange, std::move(args), std::move(attrs)));
  }
  const double start = bounds[0], end = bounds[1], step = bounds[2];
  if (step == 0 || (end - start) / step > 1e9) {
    return call.InvalidArgument(absl::StrCat("arange(", start, ", ", end, ", ", step,
                                             ") is empty-stepped or too long"));
  }
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  const DType d = dtype.value_or(floating ? DType::kF32 : DType::kInt64);
  Tensor t = Tensor::Zeros(d, {n});
  for (int64_t i = 0; i < n; ++i) {
    Tensor element = Tensor::Zeros(d, {});
    FillTensor(element, start + static_cast<double>(i) * step);
    std::memcpy(static_cast<char*>(t.raw_data()) + i * DTypeSize(d), element.raw_data(),
                DTypeSize(d));
  }
  return One(cx.AddConstant(std::move(t), call.OutputName(0)));
}

// sym_size.int(self, dim): a size known only at run time, as an int value.
ConvertResult ConvertSymSize(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ir::Attributes attrs;
  attrs.SetInt("dim", dim);
  return One(cx.EmitValue(call, OpKind::kSize, ir::ValueKind::kInt, {x}, std::move(attrs)));
}

}  // namespace kiln::importer::aten
