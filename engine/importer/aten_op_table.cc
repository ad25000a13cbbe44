// The one list of aten ops Kiln imports. Adding an op: a row here, pointing at a
// converter in the matching aten_convert_*.cc family file.
//
// In-place variants (relu_, add_) share the functional converter: the
// translator rebinds the mutated input to the result, so later reads of it see
// the new value.
#include "engine/importer/aten_op_table.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::importer {
namespace {

using ir::OpKind;
using AtenOpTable = std::unordered_map<std::string_view, Converter>;

const AtenOpTable& Table() {
  static const AtenOpTable* const kTable = new AtenOpTable{
      // ---------- unary activations ----------
      {"aten::relu", Unary<OpKind::kRelu>},
      {"aten::relu_", Unary<OpKind::kRelu>},
      {"aten::sigmoid", Unary<OpKind::kSigmoid>},
      {"aten::sigmoid_", Unary<OpKind::kSigmoid>},
      {"aten::tanh", Unary<OpKind::kTanh>},
      {"aten::tanh_", Unary<OpKind::kTanh>},
      {"aten::silu", Unary<OpKind::kSilu>},
      {"aten::silu_", Unary<OpKind::kSilu>},
      {"aten::hardswish", Unary<OpKind::kHardSwish>},
      {"aten::hardswish_", Unary<OpKind::kHardSwish>},
      {"aten::hardsigmoid", Unary<OpKind::kHardSigmoid>},
      {"aten::hardsigmoid_", Unary<OpKind::kHardSigmoid>},
      {"aten::hardtanh", ConvertHardtanh},
      {"aten::hardtanh_", ConvertHardtanh},
      {"aten::relu6", ConvertRelu6},
      {"aten::relu6_", ConvertRelu6},
      {"aten::gelu", ConvertGelu},
      {"aten::gelu_", ConvertGelu},
      // ---------- binary (Tensor and Scalar overloads) ----------
      {"aten::add", Binary<OpKind::kAdd>},
      {"aten::add_", Binary<OpKind::kAdd>},
      {"aten::sub", Binary<OpKind::kSub>},
      {"aten::sub_", Binary<OpKind::kSub>},
      {"aten::mul", Binary<OpKind::kMul>},
      {"aten::mul_", Binary<OpKind::kMul>},
      {"aten::div", Binary<OpKind::kDiv>},
      {"aten::div_", Binary<OpKind::kDiv>},
      // ---------- no-ops at inference ----------
      {"aten::dropout", PassThrough},
      {"aten::dropout_", PassThrough},
      {"aten::feature_dropout", PassThrough},
      {"aten::feature_dropout_", PassThrough},
      {"aten::alpha_dropout", PassThrough},
      {"aten::feature_alpha_dropout", PassThrough},
      {"aten::contiguous", PassThrough},
      {"aten::detach", PassThrough},
      {"aten::clone", PassThrough},
      // ---------- linear algebra ----------
      {"aten::linear", ConvertLinear},
      {"aten::addmm", ConvertAddmm},
      {"aten::matmul", ConvertMatMul},
      {"aten::mm", ConvertMatMul},
      {"aten::bmm", ConvertMatMul},
      // ---------- convolution and pooling ----------
      {"aten::_convolution", ConvertConvolution},
      {"aten::conv2d", ConvertConv2d},
      {"aten::max_pool2d", ConvertMaxPool2d},
      {"aten::avg_pool2d", ConvertAvgPool2d},
      {"aten::adaptive_avg_pool2d", ConvertAdaptiveAvgPool2d},
      // ---------- normalization, softmax, reductions ----------
      {"aten::batch_norm", ConvertBatchNorm},
      {"aten::layer_norm", ConvertLayerNorm},
      {"aten::softmax", ConvertSoftmax},
      {"aten::log_softmax", ConvertLogSoftmax},
      {"aten::mean", ConvertMean},
      // ---------- shape ----------
      {"aten::flatten", ConvertFlatten},
      {"aten::view", ConvertReshape},
      {"aten::reshape", ConvertReshape},
      {"aten::cat", ConvertCat},
      {"aten::t", ConvertTranspose2d},
  };
  return *kTable;
}

}  // namespace

Converter FindAtenConverter(std::string_view kind) {
  auto it = Table().find(kind);
  return it == Table().end() ? nullptr : it->second;
}

std::vector<std::string> SupportedAtenOps() {
  std::vector<std::string> ops;
  for (const auto& [kind, converter] : Table()) ops.emplace_back(kind);
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace kiln::importer
