// The aten op table: one row per TorchScript op kind ("aten::relu") with the
// converter that emits the equivalent Kiln IR. The rows are in aten_op_table.cc;
// converters live by family in aten_convert_{elementwise,nn,shape}.cc.
//
// A converter reads its torch node through the ImportContext, adds ir nodes and
// returns one ir value per node output. Family factories (Unary<>, Binary<>)
// cover ops whose translation differs only in the Kiln op kind.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/import_context.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

using Converter = absl::StatusOr<std::vector<ir::ValueId>> (*)(const torch::jit::Node&,
                                                                ImportContext&);

// The converter for an op kind such as "aten::conv2d", or nullptr when Kiln
// cannot import it.
Converter FindAtenConverter(std::string_view kind);

// Every op kind in the table, sorted (for docs and tests).
std::vector<std::string> SupportedAtenOps();

// ------------------------------------------------ converters, by family file

using ConvertResult = absl::StatusOr<std::vector<ir::ValueId>>;
using TorchNode = torch::jit::Node;

// aten_convert_elementwise.cc
ConvertResult ConvertUnary(ir::OpKind op, const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertBinary(ir::OpKind op, const TorchNode& node, ImportContext& ctx);
template <ir::OpKind kOp>
ConvertResult Unary(const TorchNode& node, ImportContext& ctx) {
  return ConvertUnary(kOp, node, ctx);
}
// add/sub/mul/div, Tensor and Scalar overloads; alpha != 1 becomes a Mul.
template <ir::OpKind kOp>
ConvertResult Binary(const TorchNode& node, ImportContext& ctx) {
  return ConvertBinary(kOp, node, ctx);
}
ConvertResult ConvertHardtanh(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertRelu6(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertGelu(const TorchNode& node, ImportContext& ctx);
// dropout (inference), contiguous, detach, clone: the output is the input.
ConvertResult PassThrough(const TorchNode& node, ImportContext& ctx);

// aten_convert_nn.cc
ConvertResult ConvertConvolution(const TorchNode& node, ImportContext& ctx);  // aten::_convolution
ConvertResult ConvertConv2d(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertLinear(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertAddmm(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertMatMul(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertMaxPool2d(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertAvgPool2d(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertAdaptiveAvgPool2d(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertBatchNorm(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertLayerNorm(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSoftmax(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertLogSoftmax(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertMean(const TorchNode& node, ImportContext& ctx);

// aten_convert_shape.cc
ConvertResult ConvertFlatten(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertReshape(const TorchNode& node, ImportContext& ctx);  // view, reshape
ConvertResult ConvertCat(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertTranspose2d(const TorchNode& node, ImportContext& ctx);  // aten::t

}  // namespace kiln::importer
