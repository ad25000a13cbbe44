// The one list of aten ops (and torchvision's) both importer fronts translate natively. Adding an
// op: a row here, pointing at a converter in the matching convert_*.cc family
// file. Keys carry no overload: a converter tells overloads apart by the
// arguments it is given (AtenCall::Has) or by AtenCall::overload().
#include "engine/importer/aten/aten_op_table.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::importer {
namespace {

using ir::OpKind;
using AtenOpTable = std::unordered_map<std::string_view, AtenConverter>;

const AtenOpTable& Table() {
  using namespace aten;  // NOLINT: the converters
  static const AtenOpTable* const kTable = new AtenOpTable{
      // ---------- unary ----------
      {"aten::relu", Unary<OpKind::kRelu>},
      {"aten::sigmoid", Unary<OpKind::kSigmoid>},
      {"aten::tanh", Unary<OpKind::kTanh>},
      {"aten::silu", Unary<OpKind::kSilu>},
      {"aten::hardswish", Unary<OpKind::kHardSwish>},
      {"aten::hardsigmoid", Unary<OpKind::kHardSigmoid>},
      {"aten::hardtanh", ConvertHardtanh},
      {"aten::relu6", ConvertRelu6},
      {"aten::gelu", ConvertGelu},
      {"aten::neg", Unary<OpKind::kNeg>},
      {"aten::abs", Unary<OpKind::kAbs>},
      {"aten::sign", Unary<OpKind::kSign>},
      {"aten::sqrt", Unary<OpKind::kSqrt>},
      {"aten::rsqrt", Unary<OpKind::kRsqrt>},
      {"aten::exp", Unary<OpKind::kExp>},
      {"aten::expm1", Unary<OpKind::kExpm1>},
      {"aten::log", Unary<OpKind::kLog>},
      {"aten::log2", Unary<OpKind::kLog2>},
      {"aten::log10", Unary<OpKind::kLog10>},
      {"aten::log1p", Unary<OpKind::kLog1p>},
      {"aten::reciprocal", Unary<OpKind::kReciprocal>},
      {"aten::floor", Unary<OpKind::kFloor>},
      {"aten::ceil", Unary<OpKind::kCeil>},
      {"aten::round", ConvertRound},
      {"aten::trunc", Unary<OpKind::kTrunc>},
      {"aten::fix", Unary<OpKind::kTrunc>},
      {"aten::frac", Unary<OpKind::kFrac>},
      {"aten::erf", Unary<OpKind::kErf>},
      {"aten::sin", Unary<OpKind::kSin>},
      {"aten::cos", Unary<OpKind::kCos>},
      {"aten::tan", Unary<OpKind::kTan>},
      {"aten::asin", Unary<OpKind::kAsin>},
      {"aten::acos", Unary<OpKind::kAcos>},
      {"aten::atan", Unary<OpKind::kAtan>},
      {"aten::sinh", Unary<OpKind::kSinh>},
      {"aten::cosh", Unary<OpKind::kCosh>},
      {"aten::logical_not", Unary<OpKind::kLogicalNot>},
      {"aten::isnan", Unary<OpKind::kIsNan>},
      {"aten::mish", Unary<OpKind::kMish>},
      {"aten::log_sigmoid", Unary<OpKind::kLogSigmoid>},
      // ---------- binary (Tensor and Scalar overloads) ----------
      {"aten::add", Binary<OpKind::kAdd>},
      {"aten::sub", Binary<OpKind::kSub>},
      {"aten::mul", Binary<OpKind::kMul>},
      {"aten::div", Binary<OpKind::kDiv>},  // rounding_mode="floor" / "trunc" too
      {"aten::rsub", ConvertRsub},
      {"aten::pow", BinaryOp<OpKind::kPow>},
      {"aten::maximum", BinaryOp<OpKind::kMaximum>},
      {"aten::minimum", BinaryOp<OpKind::kMinimum>},
      {"aten::remainder", BinaryOp<OpKind::kRemainder>},
      {"aten::fmod", BinaryOp<OpKind::kFmod>},
      {"aten::atan2", BinaryOp<OpKind::kAtan2>},
      {"aten::eq", BinaryOp<OpKind::kEqual>},
      {"aten::ne", BinaryOp<OpKind::kNotEqual>},
      {"aten::lt", BinaryOp<OpKind::kLess>},
      {"aten::le", BinaryOp<OpKind::kLessEqual>},
      {"aten::gt", BinaryOp<OpKind::kGreater>},
      {"aten::ge", BinaryOp<OpKind::kGreaterEqual>},
      {"aten::logical_and", BinaryOp<OpKind::kLogicalAnd>},
      {"aten::logical_or", BinaryOp<OpKind::kLogicalOr>},
      {"aten::logical_xor", BinaryOp<OpKind::kLogicalXor>},
      {"aten::where", ConvertWhere},
      {"aten::masked_fill", ConvertMaskedFill},
      // ---------- no-ops at inference ----------
      {"aten::dropout", PassThrough},
      {"aten::feature_dropout", PassThrough},
      {"aten::alpha_dropout", PassThrough},
      {"aten::feature_alpha_dropout", PassThrough},
      {"aten::contiguous", PassThrough},
      {"aten::detach", PassThrough},
      {"aten::clone", PassThrough},
      {"aten::alias", PassThrough},
      {"aten::lift_fresh_copy", PassThrough},
      // ---------- linear algebra ----------
      {"aten::linear", ConvertLinear},
      {"aten::addmm", ConvertAddmm},
      {"aten::matmul", ConvertMatMul},
      {"aten::mm", ConvertMatMul},
      {"aten::bmm", ConvertMatMul},
      // ---------- convolution and pooling, 1 to 3 dims ----------
      {"aten::_convolution", ConvertConv},
      {"aten::convolution", ConvertConv},
      {"aten::conv1d", ConvertConv},
      {"aten::conv2d", ConvertConv},
      {"aten::conv3d", ConvertConv},
      // What tracing nn.ConvNd(padding="same"/"valid") records; conv2d.padding's arguments.
      {"aten::_convolution_mode", ConvertConv},
      {"aten::max_pool1d", ConvertMaxPool},
      {"aten::max_pool2d", ConvertMaxPool},
      {"aten::max_pool3d", ConvertMaxPool},
      {"aten::max_pool1d_with_indices", ConvertMaxPool},
      {"aten::max_pool2d_with_indices", ConvertMaxPool},
      {"aten::max_pool3d_with_indices", ConvertMaxPool},
      {"aten::avg_pool1d", ConvertAvgPool},
      {"aten::avg_pool2d", ConvertAvgPool},
      {"aten::avg_pool3d", ConvertAvgPool},
      {"aten::adaptive_avg_pool1d", ConvertAdaptivePool},
      {"aten::adaptive_avg_pool2d", ConvertAdaptivePool},
      {"aten::adaptive_avg_pool3d", ConvertAdaptivePool},
      {"aten::adaptive_max_pool1d", ConvertAdaptivePool},
      {"aten::adaptive_max_pool2d", ConvertAdaptivePool},
      {"aten::adaptive_max_pool3d", ConvertAdaptivePool},
      // ---------- normalization, softmax, reductions, embedding ----------
      {"aten::batch_norm", ConvertBatchNorm},
      {"aten::_native_batch_norm_legit_no_training", ConvertBatchNorm},
      {"aten::layer_norm", ConvertLayerNorm},
      {"aten::softmax", ConvertSoftmax},
      {"aten::_softmax", ConvertSoftmax},
      {"aten::log_softmax", ConvertLogSoftmax},
      {"aten::_log_softmax", ConvertLogSoftmax},
      {"aten::mean", ConvertMean},
      {"aten::sum", Reduce<OpKind::kSum>},
      {"aten::amax", Reduce<OpKind::kReduceMax>},
      {"aten::amin", Reduce<OpKind::kReduceMin>},
      {"aten::logsumexp", Reduce<OpKind::kLogSumExp>},
      {"aten::embedding", ConvertEmbedding},
      // ---------- shape and indexing ----------
      {"aten::flatten", ConvertFlatten},
      {"aten::view", ConvertReshape},
      {"aten::reshape", ConvertReshape},
      {"aten::_unsafe_view", ConvertReshape},
      {"aten::cat", ConvertCat},
      {"aten::permute", ConvertPermute},
      {"aten::transpose", ConvertPermute},
      {"aten::unsqueeze", ConvertUnsqueeze},
      {"aten::squeeze", ConvertSqueeze},
      {"aten::expand", ConvertExpand},
      {"aten::select", ConvertSelect},
      {"aten::slice", ConvertSlice},
      // ---------- creation and casts ----------
      {"aten::_to_copy", ConvertToCopy},
      {"aten::to", ConvertToCopy},
      {"aten::zeros_like", ConvertFullLike},
      {"aten::ones_like", ConvertFullLike},
      {"aten::full_like", ConvertFullLike},
      {"aten::empty_like", ConvertFullLike},
      {"aten::arange", ConvertArange},
      {"aten::sym_size", ConvertSymSize},
      // ---------- attention ----------
      {"aten::scaled_dot_product_attention", ConvertScaledDotProductAttention},
      // ---------- transformer fast path (nested tensors held padded) ----------
      {"aten::_transformer_encoder_layer_fwd", ConvertTransformerEncoderLayer},
      {"aten::_nested_tensor_from_mask", ConvertNestedTensorFromMask},
      {"aten::to_padded_tensor", ConvertToPaddedTensor},
      // ---------- torchvision's operators (deform_conv2d runs on the fallback) ----------
      {"torchvision::nms", ConvertNms},
      {"torchvision::roi_align", ConvertRoiAlign},
  };
  return *kTable;
}

}  // namespace

AtenConverter FindAtenConverter(std::string_view op) {
  auto it = Table().find(op);
  return it == Table().end() ? nullptr : it->second;
}

std::string_view OutOfPlaceOp(std::string_view op) {
  // add_ -> add, but not __and__ (a dunder) nor an op ending in "_" by name alone.
  if (op.size() > 1 && op.back() == '_' && op[op.size() - 2] != '_') {
    return op.substr(0, op.size() - 1);
  }
  return op;
}

std::vector<std::string> SharedAtenOps() {
  std::vector<std::string> ops;
  for (const auto& [op, converter] : Table()) ops.emplace_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace kiln::importer
