// TorchScript-only converters for creation ops (folded to constants with
// libtorch when their sizes are constant; dtype=x.dtype read through
// prim::dtype), interpolation (scale lists), the recurrent layers (their
// weights a TorchScript list) and the fused attention op that freezing leaves
// in transformer models.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ops/eye.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linspace.h>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/aten_op_table.h"

namespace kiln::importer {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

std::string Kind(const TorchNode& node) { return node.kind().toUnqualString(); }

int ArgIndex(const TorchNode& node, const char* name) {
  const c10::FunctionSchema* schema = node.maybeSchema();
  if (schema == nullptr) return -1;
  for (size_t i = 0; i < schema->arguments().size(); ++i) {
    if (schema->arguments()[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

// The ScalarType argument called `name` (an int constant), or nullopt when absent or None.
absl::StatusOr<std::optional<c10::ScalarType>> ScalarTypeArg(const TorchNode& node,
                                                             ImportContext& ctx, const char* name) {
  const int i = ArgIndex(node, name);
  if (i < 0 || ctx.IsNone(node, i)) return std::optional<c10::ScalarType>();
  ASSIGN_OR_RETURN(int64_t v, ctx.ConstInt(node, i));
  return std::optional<c10::ScalarType>(static_cast<c10::ScalarType>(v));
}

// A constant Scalar argument as a c10::Scalar (int stays int, float float).
absl::StatusOr<c10::Scalar> ScalarArg(const TorchNode& node, ImportContext& ctx, size_t i) {
  std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[i]);
  if (!c) return ctx.Unimplemented(node, absl::StrCat("argument ", i, " is computed at run time"));
  if (c->isInt()) return c10::Scalar(c->toInt());
  if (c->isDouble()) return c10::Scalar(c->toDouble());
  if (c->isBool()) return c10::Scalar(c->toBool());
  if (c->isTensor() && c->toTensor().dim() == 0) return c->toTensor().item();
  return ctx.InvalidArgument(node, absl::StrCat("argument ", i, " is not a number"));
}

// Creation ops compute their constant with libtorch itself, so dtype
// inference (arange(5) is int64, arange(0.5) float) is PyTorch's.
absl::StatusOr<ir::ValueId> Folded(const TorchNode& node, ImportContext& ctx, const at::Tensor& t) {
  return ctx.AddTensorConstant(t, node.output()->debugName());
}

at::TensorOptions Options(const std::optional<c10::ScalarType>& dtype) {
  at::TensorOptions options;
  if (dtype) options = options.dtype(*dtype);
  return options;
}

}  // namespace

// ---------------------------------------------------------------- creation

// zeros / ones / full / empty(size[, fill_value], *, dtype, ...): a constant.
// empty is zero-filled (its contents are unspecified).
ConvertResult ConvertFull(const TorchNode& node, ImportContext& ctx) {
  const std::string kind = Kind(node);
  c10::Scalar value(0);
  if (kind == "ones") value = c10::Scalar(1);
  if (kind == "full") {
    ASSIGN_OR_RETURN(value, ScalarArg(node, ctx, 1));
  }
  ASSIGN_OR_RETURN(IntsArg size, ctx.IntsInput(node, 0));
  if (const int di = ArgIndex(node, "dtype");
      di >= 0 && node.inputs()[di]->node()->kind() == c10::prim::dtype) {
    // dtype=x.dtype (prim::dtype, see ConvertDTypeOf): a Fill like x.
    ASSIGN_OR_RETURN(ir::ValueId like, ctx.Input(*node.inputs()[di]->node(), 0));
    ir::Attributes attrs;
    attrs.SetFloat("value", value.toDouble());
    if (!size.values.has_value()) {
      return One(ctx.Emit(node, OpKind::kFill, {like, size.value}, std::move(attrs)));
    }
    attrs.SetInts("shape", *std::move(size.values));
    return One(ctx.Emit(node, OpKind::kFill, {like}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(std::optional<c10::ScalarType> dtype, ScalarTypeArg(node, ctx, "dtype"));
  // full's dtype follows the fill value when not given (float -> default float).
  c10::ScalarType st = dtype.value_or(kind == "full" && value.isIntegral(false) ? c10::kLong
                                      : kind == "full" && value.isBoolean()     ? c10::kBool
                                                                                : c10::kFloat);
  if (!size.values.has_value()) {
    // A size computed at run time (an LSTM's zero state): a Fill node.
    ASSIGN_OR_RETURN(DType kd, DTypeFromTorch(st));
    ir::Attributes attrs;
    attrs.SetFloat("value", value.toDouble());
    attrs.SetString("dtype", DTypeName(kd));
    return One(ctx.Emit(node, OpKind::kFill, {ir::kNoValue, size.value}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(ir::ValueId id, Folded(node, ctx, at::full(*size.values, value, at::TensorOptions().dtype(st))));
  return One(id);
}

namespace {

// eye(n[, m], *, dtype) whose sizes a run computes (x.size(1)): the positions
// where arange(n)[:, None] == arange(m)[None, :], cast to the dtype. Arange
// takes run-time ints, folded once a signature fixes them.
ConvertResult EyeOfRunTimeSize(const TorchNode& node, ImportContext& ctx, bool has_m,
                               std::optional<c10::ScalarType> dtype) {
  ASSIGN_OR_RETURN(ir::ValueId n, ctx.ScalarInput(node, 0));
  ir::ValueId m = n;
  if (has_m) {
    ASSIGN_OR_RETURN(m, ctx.ScalarInput(node, 1));
  }
  ASSIGN_OR_RETURN(DType d, DTypeFromTorch(dtype.value_or(c10::ScalarType::Float)));
  const ir::ValueId zero = ctx.AddInt(0), one = ctx.AddInt(1);
  ir::ValueId ranges[2];
  for (int k = 0; k < 2; ++k) {
    ir::Attributes arange;
    arange.SetString("dtype", DTypeName(DType::kInt64));
    const ir::ValueId r = ctx.Emit(node, OpKind::kArange, {zero, k == 0 ? n : m, one},
                                   std::move(arange), k == 0 ? ".rows" : ".cols");
    ir::Attributes unsqueeze;
    unsqueeze.SetInt("axis", 1 - k);  // rows [n, 1], columns [1, m]
    ranges[k] = ctx.Emit(node, OpKind::kUnsqueeze, {r}, std::move(unsqueeze),
                         k == 0 ? ".rows2d" : ".cols2d");
  }
  const ir::ValueId diagonal =
      ctx.Emit(node, OpKind::kEqual, {ranges[0], ranges[1]}, {}, d == DType::kBool ? "" : ".mask");
  if (d == DType::kBool) return One(diagonal);
  ir::Attributes cast;
  cast.SetString("dtype", DTypeName(d));
  return One(ctx.Emit(node, OpKind::kCast, {diagonal}, std::move(cast)));
}

}  // namespace

// linspace(start, end, steps, *, dtype) and eye(n[, m], *, dtype): constants
// (eye also of sizes a run computes).
ConvertResult ConvertLinspaceEye(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(std::optional<c10::ScalarType> dtype, ScalarTypeArg(node, ctx, "dtype"));
  if (Kind(node) == "eye") {
    const bool has_m = node.maybeSchema() && node.maybeSchema()->overload_name() == "m";
    const bool constant = ctx.ConstantOf(node.inputs()[0]).has_value() &&
                          (!has_m || ctx.ConstantOf(node.inputs()[1]).has_value());
    if (!constant) return EyeOfRunTimeSize(node, ctx, has_m, dtype);
  }
  at::Tensor t;
  if (Kind(node) == "linspace") {
    ASSIGN_OR_RETURN(c10::Scalar start, ScalarArg(node, ctx, 0));
    ASSIGN_OR_RETURN(c10::Scalar end, ScalarArg(node, ctx, 1));
    ASSIGN_OR_RETURN(int64_t steps, ctx.ConstInt(node, 2));
    t = at::linspace(start, end, steps, Options(dtype));
  } else {
    ASSIGN_OR_RETURN(int64_t n, ctx.ConstInt(node, 0));
    const bool has_m = node.maybeSchema() && node.maybeSchema()->overload_name() == "m";
    int64_t m = n;
    if (has_m) {
      ASSIGN_OR_RETURN(m, ctx.ConstInt(node, 1));
    }
    t = at::eye(n, m, Options(dtype));
  }
  ASSIGN_OR_RETURN(ir::ValueId id, Folded(node, ctx, t));
  return One(id);
}

// ---------------------------------------------------------------- interpolation

// upsample_{nearest,linear,bilinear,bicubic,trilinear}{1,2,3}d and
// _upsample_nearest_exact*: .vec(input, output_size?, [align_corners,]
// scale_factors?) or (self, output_size, [align_corners,] scales...).
ConvertResult ConvertUpsample(const TorchNode& node, ImportContext& ctx) {
  const std::string kind = Kind(node);
  std::string mode;
  if (kind.find("nearest_exact") != std::string::npos) {
    mode = "nearest_exact";
  } else if (kind.find("nearest") != std::string::npos) {
    mode = "nearest";
  } else if (kind.find("bicubic") != std::string::npos) {
    mode = "cubic";
  } else {
    mode = "linear";
  }
  const bool nearest = mode.rfind("nearest", 0) == 0;
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ir::Attributes attrs;
  attrs.SetString("mode", mode);
  size_t i = 2;
  if (!nearest) {
    ASSIGN_OR_RETURN(bool align, ctx.ConstBool(node, 2));
    attrs.SetBool("align_corners", align);
    i = 3;
  }
  const bool vec = node.maybeSchema() && node.maybeSchema()->overload_name() == "vec";
  std::vector<double> scales;
  if (vec) {
    if (i < node.inputs().size() && !ctx.IsNone(node, i)) {
      std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[i]);
      // Scripted F.interpolate builds the list in a loop: left to the fallback.
      if (!c || !c->isDoubleList()) return ctx.Unimplemented(node, "scale factors computed at run time");
      scales = c->toDoubleVector();
    }
  } else {
    for (size_t k = i; k < node.inputs().size(); ++k) {
      if (ctx.IsNone(node, k)) {
        scales.clear();
        break;
      }
      ASSIGN_OR_RETURN(double s, ctx.ConstDouble(node, k));
      scales.push_back(s);
    }
  }
  ir::ValueId sizes = ir::kNoValue;
  if (!ctx.IsNone(node, 1)) {
    // The size may be computed from the input's shape (segmentation heads
    // upsample to the input's height and width).
    ASSIGN_OR_RETURN(IntsArg size, ctx.IntsInput(node, 1));
    if (size.values.has_value()) {
      attrs.SetInts("sizes", *std::move(size.values));
    } else {
      sizes = size.value;
    }
  } else if (scales.empty()) {
    return ctx.InvalidArgument(node, "has neither an output size nor scale factors");
  }
  // Scales also set the coordinate mapping (PyTorch uses 1/scale, not in/out).
  if (!scales.empty()) attrs.SetFloats("scales", scales);
  if (sizes != ir::kNoValue) return One(ctx.Emit(node, OpKind::kResize, {x, sizes}, std::move(attrs)));
  return One(ctx.Emit(node, OpKind::kResize, {x}, std::move(attrs)));
}

// ---------------------------------------------------------------- recurrent

// lstm(input, hx[], params[], has_biases, num_layers, dropout, train,
// bidirectional, batch_first); gru / rnn_tanh / rnn_relu(input, hx, params[], ...).
// An initial state made by aten::zeros is dropped (the kernel starts from zero).
ConvertResult ConvertRecurrent(const TorchNode& node, ImportContext& ctx) {
  const std::string kind = Kind(node);
  const bool lstm = kind == "lstm";
  if (node.maybeSchema() && node.maybeSchema()->overload_name() == "data") {
    return ctx.Unimplemented(node, "packed sequences");
  }
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  std::vector<ir::ValueId> states;
  if (lstm) {
    ASSIGN_OR_RETURN(states, ctx.TensorListInput(node, 1));
  } else {
    ASSIGN_OR_RETURN(ir::ValueId h, ctx.Input(node, 1));
    states = {h};
  }
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> params, ctx.TensorListInput(node, 2));
  ASSIGN_OR_RETURN(bool has_biases, ctx.ConstBool(node, 3));
  ASSIGN_OR_RETURN(int64_t num_layers, ctx.ConstInt(node, 4));
  ASSIGN_OR_RETURN(bool train, ctx.ConstBool(node, 6));
  ASSIGN_OR_RETURN(bool bidirectional, ctx.ConstBool(node, 7));
  ASSIGN_OR_RETURN(bool batch_first, ctx.ConstBool(node, 8));
  if (train) return ctx.Unimplemented(node, "training mode (dropout between layers)");
  ir::Attributes attrs;
  if (!lstm) attrs.SetString("cell", kind == "gru" ? "gru" : kind == "rnn_relu" ? "relu" : "tanh");
  attrs.SetInt("num_layers", num_layers);
  attrs.SetBool("bidirectional", bidirectional);
  attrs.SetBool("batch_first", batch_first);
  attrs.SetBool("has_biases", has_biases);
  attrs.SetBool("has_state", true);
  std::vector<ir::ValueId> inputs = {x};
  inputs.insert(inputs.end(), states.begin(), states.end());
  inputs.insert(inputs.end(), params.begin(), params.end());
  std::vector<std::string> names;
  for (const torch::jit::Value* out : node.outputs()) names.push_back(out->debugName());
  ir::NodeId n = ctx.graph().AddNode(lstm ? OpKind::kLSTM : OpKind::kRNN, std::move(inputs),
                                     std::move(attrs), node.kind().toQualString(), names);
  return ctx.graph().node(n).outputs;
}

// ---------------------------------------------------------------- attention

// _native_multi_head_attention(query, key, value, embed_dim, num_head,
// qkv_weight, qkv_bias, proj_weight, proj_bias, mask=None, need_weights=True,
// average_attn_weights=True, mask_type=None) -> (output, weights).
ConvertResult ConvertNativeMha(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId q, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId k, ctx.Input(node, 1));
  ASSIGN_OR_RETURN(ir::ValueId v, ctx.Input(node, 2));
  ASSIGN_OR_RETURN(int64_t heads, ctx.ConstInt(node, 4));
  ASSIGN_OR_RETURN(ir::ValueId w_in, ctx.Input(node, 5));
  ASSIGN_OR_RETURN(ir::ValueId b_in, ctx.OptionalInput(node, 6));
  ASSIGN_OR_RETURN(ir::ValueId w_out, ctx.Input(node, 7));
  ASSIGN_OR_RETURN(ir::ValueId b_out, ctx.OptionalInput(node, 8));
  ASSIGN_OR_RETURN(ir::ValueId mask, ctx.OptionalInput(node, 9));
  ir::Attributes attrs;
  attrs.SetInt("num_heads", heads);
  if (node.inputs().size() > 10) {
    ASSIGN_OR_RETURN(bool need, ctx.ConstBool(node, 10));
    attrs.SetBool("need_weights", need);
  } else {
    attrs.SetBool("need_weights", true);
  }
  if (node.inputs().size() > 11) {
    ASSIGN_OR_RETURN(bool average, ctx.ConstBool(node, 11));
    attrs.SetBool("average_weights", average);
  }
  if (node.inputs().size() > 12 && !ctx.IsNone(node, 12)) {
    ASSIGN_OR_RETURN(int64_t mask_type, ctx.ConstInt(node, 12));
    attrs.SetInt("mask_type", mask_type);
  }
  std::vector<ir::ValueId> inputs = {q, k, v, w_in, w_out, b_in, b_out, mask};
  while (inputs.size() > 5 && inputs.back() == ir::kNoValue) inputs.pop_back();
  ir::NodeId n = ctx.graph().AddNode(
      OpKind::kMultiHeadAttention, std::move(inputs), std::move(attrs), node.kind().toQualString(),
      {node.outputs()[0]->debugName(), node.outputs()[1]->debugName()});
  return ctx.graph().node(n).outputs;
}

}  // namespace kiln::importer
