// The TorchScript-only part of the aten op table: rows whose converters still
// read a torch::jit::Node by position (list overloads, traced constants,
// splits sized by their ListUnpack, ...). The rows are in aten_op_table.cc;
// converters live by family in aten_convert_*.cc.
//
// A converter reads its torch node through the ImportContext, adds ir nodes and
// returns one ir value per node output. Family factories (Binary<>, BinaryOp<>)
// cover ops whose translation differs only in the Kiln op kind.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/aten/aten_op_table.h"
#include "engine/importer/torchscript/import_context.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

using Converter = absl::StatusOr<std::vector<ir::ValueId>> (*)(const torch::jit::Node&,
                                                                ImportContext&);

// The TorchScript-only converter for an op kind such as "aten::cat", or
// nullptr. The translator looks here first, then in the shared aten table
// (engine/importer/aten/aten_op_table.h), which serves both fronts; rows move
// from here to there as their converters are rewritten over AtenCall.
Converter FindTorchScriptConverter(std::string_view kind);

// Every op kind the TorchScript front translates natively (both tables), sorted.
std::vector<std::string> SupportedTorchScriptOps();

// ------------------------------------------------ converters, by family file

using ConvertResult = absl::StatusOr<std::vector<ir::ValueId>>;
using TorchNode = torch::jit::Node;

// aten_convert_elementwise.cc
ConvertResult ConvertBinary(ir::OpKind op, const TorchNode& node, ImportContext& ctx);
// add on tensors (add.t on lists is aten_convert_math's ConvertListConcat), true_divide.
template <ir::OpKind kOp>
ConvertResult Binary(const TorchNode& node, ImportContext& ctx) {
  return ConvertBinary(kOp, node, ctx);
}

// aten_convert_nn.cc
// adaptive pools: a scripted Optional[int] list has None entries.
ConvertResult ConvertAdaptiveAvgPool2d(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertConvTransposeNd(const TorchNode& node, ImportContext& ctx);

// aten_convert_shape.cc: cat of a list built at run time.
ConvertResult ConvertCat(const TorchNode& node, ImportContext& ctx);

// aten_convert_math.cc: binary ops whose operands may be tensors or scalars.
ConvertResult ConvertBinaryOp(ir::OpKind op, const TorchNode& node, ImportContext& ctx);
template <ir::OpKind kOp>
ConvertResult BinaryOp(const TorchNode& node, ImportContext& ctx) {
  return ConvertBinaryOp(kOp, node, ctx);
}
ConvertResult ConvertBitwise(const TorchNode& node, ImportContext& ctx);  // &, |, ^ on BOOL
ConvertResult ConvertComparisonAlias(const TorchNode& node, ImportContext& ctx);  // greater, ...
ConvertResult ConvertListConcat(const TorchNode& node, ImportContext& ctx);  // int[] + int[]
ConvertResult ConvertDiv(const TorchNode& node, ImportContext& ctx);  // rounding modes
ConvertResult ConvertFloorDivide(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertClamp(const TorchNode& node, ImportContext& ctx);  // clamp, clamp_min/max
ConvertResult ConvertAddcmulDiv(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertLerp(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSquare(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertLeakyRelu(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertElu(const TorchNode& node, ImportContext& ctx);  // elu, selu, celu
ConvertResult ConvertSoftplus(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertShrink(const TorchNode& node, ImportContext& ctx);  // hard/softshrink
ConvertResult ConvertThreshold(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertPrelu(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertGlu(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSoftmin(const TorchNode& node, ImportContext& ctx);

// aten_convert_reduce.cc
ConvertResult ConvertReduce(ir::OpKind op, const TorchNode& node, ImportContext& ctx);
template <ir::OpKind kOp>
ConvertResult Reduce(const TorchNode& node, ImportContext& ctx) {
  return ConvertReduce(kOp, node, ctx);
}
ConvertResult ConvertMaxMin(const TorchNode& node, ImportContext& ctx);  // max, min: 3 overloads
ConvertResult ConvertArgMaxMin(ir::OpKind op, const TorchNode& node, ImportContext& ctx);
template <ir::OpKind kOp>
ConvertResult ArgMaxMin(const TorchNode& node, ImportContext& ctx) {
  return ConvertArgMaxMin(kOp, node, ctx);
}
ConvertResult ConvertVarStd(ir::OpKind op, const TorchNode& node, ImportContext& ctx);
template <ir::OpKind kOp>
ConvertResult VarStd(const TorchNode& node, ImportContext& ctx) {
  return ConvertVarStd(kOp, node, ctx);
}
ConvertResult ConvertNorm(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertCumulative(ir::OpKind op, const TorchNode& node, ImportContext& ctx);
template <ir::OpKind kOp>
ConvertResult Cumulative(const TorchNode& node, ImportContext& ctx) {
  return ConvertCumulative(kOp, node, ctx);
}
ConvertResult ConvertTopK(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSort(const TorchNode& node, ImportContext& ctx);  // sort, argsort
ConvertResult ConvertKthvalue(const TorchNode& node, ImportContext& ctx);

// aten_convert_index.cc
ConvertResult ConvertPermute(const TorchNode& node, ImportContext& ctx);  // permute, transpose, t, movedim
ConvertResult ConvertExpand(const TorchNode& node, ImportContext& ctx);  // expand, expand_as
ConvertResult ConvertRepeat(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertStack(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSplit(const TorchNode& node, ImportContext& ctx);  // split, chunk, unbind
ConvertResult ConvertUnflatten(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertViewAs(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSlice(const TorchNode& node, ImportContext& ctx);  // slice, narrow
ConvertResult ConvertIndexSelect(const TorchNode& node, ImportContext& ctx);  // also gather
ConvertResult ConvertIndex(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSliceScatter(const TorchNode& node, ImportContext& ctx);  // also select_scatter
// fill_ / copy_, also through slices and selects of another tensor.
ConvertResult ConvertInplaceWrite(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertRoll(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertFlip(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertPad(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertTriangle(const TorchNode& node, ImportContext& ctx);  // tril, triu
ConvertResult ConvertPixelShuffle(const TorchNode& node, ImportContext& ctx);

// aten_convert_misc.cc
ConvertResult ConvertArange(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertFull(const TorchNode& node, ImportContext& ctx);  // zeros, ones, full, empty
ConvertResult ConvertFullLike(const TorchNode& node, ImportContext& ctx);  // *_like
ConvertResult ConvertNewFull(const TorchNode& node, ImportContext& ctx);   // new_*
ConvertResult ConvertLinspaceEye(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertTo(const TorchNode& node, ImportContext& ctx);  // to, type_as
ConvertResult ConvertEinsum(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertBaddbmm(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertVectorProduct(const TorchNode& node, ImportContext& ctx);  // mv, dot, outer
ConvertResult ConvertGroupNorm(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertInstanceNorm(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertUpsample(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertRecurrent(const TorchNode& node, ImportContext& ctx);  // lstm, gru, rnn_*
ConvertResult ConvertNativeMha(const TorchNode& node, ImportContext& ctx);

}  // namespace kiln::importer
