// The aten op table: one row per ATen operator ("aten::conv2d", no overload),
// with the converter that emits the equivalent Kiln IR. It serves every
// importer front: a converter reads its call through AtenCall (by schema
// argument name, with the schema's defaults) and builds through
// ConvertContext, so nothing here depends on TorchScript or libtorch.
//
// In-place forms are not rows: both fronts map "aten::relu_" to the
// "aten::relu" row by rule (a converter sees op() with the "_" and may keep
// the destination's dtype), rebind the written tensor to the result and write
// it back through the views it came from (view_write.h).
//
// The rows are in aten_op_table.cc; converters live by family in
// convert_{elementwise,nn,shape,create,transformer,vision}.cc.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/aten/aten_call.h"
#include "engine/importer/aten/convert_context.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

using ConvertResult = absl::StatusOr<std::vector<ir::ValueId>>;
using AtenConverter = ConvertResult (*)(AtenCall& call, ConvertContext& cx);

// The converter for `op` ("aten::conv2d"), or nullptr when the table has no row.
AtenConverter FindAtenConverter(std::string_view op);

// The op an in-place form stands for: "aten::relu_" -> "aten::relu"; `op` itself
// when it is not an in-place form ("aten::__and__" is not).
std::string_view OutOfPlaceOp(std::string_view op);

// Every op in the table, sorted (for docs and tests).
std::vector<std::string> SharedAtenOps();

namespace aten {

// convert_elementwise.cc
ConvertResult ConvertUnary(ir::OpKind op, AtenCall& call, ConvertContext& cx);
template <ir::OpKind kOp>
ConvertResult Unary(AtenCall& call, ConvertContext& cx) {
  return ConvertUnary(kOp, call, cx);
}
// add/sub/mul/div, Tensor and Scalar overloads (add.t of lists: ConvertListConcat); alpha != 1 is folded or becomes a Mul;
// div with rounding_mode "floor"/"trunc".
ConvertResult ConvertBinary(ir::OpKind op, AtenCall& call, ConvertContext& cx);
template <ir::OpKind kOp>
ConvertResult Binary(AtenCall& call, ConvertContext& cx) {
  return ConvertBinary(kOp, call, cx);
}
// Binary ops whose operands may be tensors or numbers (pow, comparisons, ...).
ConvertResult ConvertBinaryOp(ir::OpKind op, AtenCall& call, ConvertContext& cx);
template <ir::OpKind kOp>
ConvertResult BinaryOp(AtenCall& call, ConvertContext& cx) {
  return ConvertBinaryOp(kOp, call, cx);
}
ConvertResult ConvertRsub(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertRound(AtenCall& call, ConvertContext& cx);  // decimals too
// &, |, ^ (dunder and bitwise_* names), bitwise_not: logical on BOOL, bitwise on integers.
ConvertResult ConvertBitwise(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertClamp(AtenCall& call, ConvertContext& cx);  // clamp, clamp_min/max, clip
ConvertResult ConvertAddcmulDiv(AtenCall& call, ConvertContext& cx);  // addcmul, addcdiv
ConvertResult ConvertLerp(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertSquare(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertWhere(AtenCall& call, ConvertContext& cx);
// isinf, isposinf, isneginf, isfinite (comparisons with infinity).
ConvertResult ConvertIsInf(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertNanToNum(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertMaskedFill(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertHardtanh(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertRelu6(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertGelu(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertLeakyRelu(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertElu(AtenCall& call, ConvertContext& cx);  // elu, selu, celu
ConvertResult ConvertSoftplus(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertShrink(AtenCall& call, ConvertContext& cx);  // hardshrink, softshrink
ConvertResult ConvertThreshold(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertPrelu(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertGlu(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertFloorDivide(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertSoftmin(AtenCall& call, ConvertContext& cx);  // softmax(-self)
// dropout (inference), contiguous, detach, clone, alias: the output is the input.
ConvertResult PassThrough(AtenCall& call, ConvertContext& cx);

// convert_nn.cc
// convNd, conv_transposeNd, _convolution, convolution, _convolution_mode.
ConvertResult ConvertConv(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertLinear(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertAddmm(AtenCall& call, ConvertContext& cx);  // addmm, baddbmm
ConvertResult ConvertMatMul(AtenCall& call, ConvertContext& cx);  // matmul, mm, bmm
ConvertResult ConvertEinsum(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertVectorProduct(AtenCall& call, ConvertContext& cx);  // mv, dot, outer, ger
ConvertResult ConvertMaxPool(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertAvgPool(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertAdaptivePool(AtenCall& call, ConvertContext& cx);
// upsample_* and _upsample_nearest_exact*: a Resize (output sizes or scale factors).
ConvertResult ConvertUpsample(AtenCall& call, ConvertContext& cx);
// grid_sampler_2d / grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners).
ConvertResult ConvertGridSampler(AtenCall& call, ConvertContext& cx);
// affine_grid_generator(theta, size, align_corners) (F.affine_grid).
ConvertResult ConvertAffineGrid(AtenCall& call, ConvertContext& cx);
// batch_norm and _native_batch_norm_legit_no_training (export's eval form).
ConvertResult ConvertBatchNorm(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertLayerNorm(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertRmsNorm(AtenCall& call, ConvertContext& cx);  // torch >= 2.4
ConvertResult ConvertGroupNorm(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertInstanceNorm(AtenCall& call, ConvertContext& cx);  // input statistics only
ConvertResult ConvertSoftmax(AtenCall& call, ConvertContext& cx);  // softmax, _softmax
ConvertResult ConvertSafeSoftmax(AtenCall& call, ConvertContext& cx);  // torch >= 2.5
ConvertResult ConvertLogSoftmax(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertMean(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertReduce(ir::OpKind op, AtenCall& call, ConvertContext& cx);
template <ir::OpKind kOp>
ConvertResult Reduce(AtenCall& call, ConvertContext& cx) {
  return ConvertReduce(kOp, call, cx);
}
// max, min: the whole tensor, elementwise (other) or over a dim (values, indices).
ConvertResult ConvertMaxMin(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertArgMaxMin(ir::OpKind op, AtenCall& call, ConvertContext& cx);
template <ir::OpKind kOp>
ConvertResult ArgMaxMin(AtenCall& call, ConvertContext& cx) {
  return ConvertArgMaxMin(kOp, call, cx);
}
ConvertResult ConvertVarStd(ir::OpKind op, AtenCall& call, ConvertContext& cx);
// var_mean, std_mean -> (var or std, mean).
ConvertResult ConvertVarStdMean(AtenCall& call, ConvertContext& cx);
template <ir::OpKind kOp>
ConvertResult VarStd(AtenCall& call, ConvertContext& cx) {
  return ConvertVarStd(kOp, call, cx);
}
ConvertResult ConvertNorm(AtenCall& call, ConvertContext& cx);  // norm, frobenius, linalg_vector
ConvertResult ConvertCumulative(ir::OpKind op, AtenCall& call, ConvertContext& cx);
template <ir::OpKind kOp>
ConvertResult Cumulative(AtenCall& call, ConvertContext& cx) {
  return ConvertCumulative(kOp, call, cx);
}
ConvertResult ConvertTopK(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertSort(AtenCall& call, ConvertContext& cx);  // sort, argsort
ConvertResult ConvertKthvalue(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertEmbedding(AtenCall& call, ConvertContext& cx);
// lstm, gru, rnn_tanh, rnn_relu (their .input overloads).
ConvertResult ConvertRecurrent(AtenCall& call, ConvertContext& cx);

// convert_shape.cc
ConvertResult ConvertFlatten(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertReshape(AtenCall& call, ConvertContext& cx);  // view, reshape, _unsafe_view
// cat of literal elements, or of a list built at run time (TorchScript).
ConvertResult ConvertCat(AtenCall& call, ConvertContext& cx);
// stack of literal elements, or of a list built at run time (TorchScript).
ConvertResult ConvertStack(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertT(AtenCall& call, ConvertContext& cx);  // a constant is transposed at import
// add.t: the concatenation of two int, float or bool lists (TorchScript).
ConvertResult ConvertListConcat(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertPermute(AtenCall& call, ConvertContext& cx);  // permute, transpose, movedim
// The Permute attributes of permute, transpose, swapdims, swapaxes, movedim, moveaxis or t;
// with `inverse`, of the permutation that undoes it (a write back through it: view_write.h).
absl::StatusOr<ir::Attributes> PermuteAttrs(AtenCall& call, bool inverse);
ConvertResult ConvertUnsqueeze(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertSqueeze(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertExpand(AtenCall& call, ConvertContext& cx);
// split, split_with_sizes, chunk, unbind and their unsafe_ forms: a tensor list.
ConvertResult ConvertSplit(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertUnflatten(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertSelect(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertExpandAs(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertViewAs(AtenCall& call, ConvertContext& cx);  // view_as, reshape_as
ConvertResult ConvertRepeat(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertTile(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertRepeatInterleave(AtenCall& call, ConvertContext& cx);
// index_put (integer indices or one boolean mask), scatter (src or value, reduce
// add/multiply), scatter_add, scatter_reduce.
ConvertResult ConvertIndexPut(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertScatter(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertRoll(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertFlip(AtenCall& call, ConvertContext& cx);  // flip, fliplr, flipud
// pad, constant_pad_nd, reflection_padNd, replication_padNd.
ConvertResult ConvertPad(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertTriangle(AtenCall& call, ConvertContext& cx);  // tril, triu
ConvertResult ConvertPixelShuffle(AtenCall& call, ConvertContext& cx);  // and pixel_unshuffle
ConvertResult ConvertIndexSelect(AtenCall& call, ConvertContext& cx);  // index_select, gather
ConvertResult ConvertIndex(AtenCall& call, ConvertContext& cx);  // index.Tensor
ConvertResult ConvertNonZero(AtenCall& call, ConvertContext& cx);
// Columns 0 .. rank - 1 of NonZero's [n, rank] result `nz`: one 1-D index per dim.
std::vector<ir::ValueId> NonZeroColumns(const AtenCall& call, ConvertContext& cx, ir::ValueId nz,
                                        size_t rank);
ConvertResult ConvertSliceScatter(AtenCall& call, ConvertContext& cx);  // and select_scatter
ConvertResult ConvertNarrow(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertSlice(AtenCall& call, ConvertContext& cx);  // also slice.t of a list
ConvertResult ConvertToCopy(AtenCall& call, ConvertContext& cx);  // _to_copy, to, type_as
ConvertResult ConvertFullLike(AtenCall& call, ConvertContext& cx);  // zeros_like, ones_like, full_like
ConvertResult ConvertNewFull(AtenCall& call, ConvertContext& cx);  // new_zeros, new_ones, new_full
ConvertResult ConvertArange(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertSymSize(AtenCall& call, ConvertContext& cx);  // sym_size.int

// convert_create.cc: zeros, ones, full, empty of a size; linspace, eye.
ConvertResult ConvertFull(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertLinspaceEye(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertScalarTensor(AtenCall& call, ConvertContext& cx);  // tensor(number), scalar_tensor
// fill, zero, copy: self's shape and dtype (their in-place forms: view_write.h).
ConvertResult ConvertFill(AtenCall& call, ConvertContext& cx);

// convert_transformer.cc: the fused encoder layer and nested tensors (held
// padded, see ConvertContext::Nested).
ConvertResult ConvertTransformerEncoderLayer(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertScaledDotProductAttention(AtenCall& call, ConvertContext& cx);
// _native_multi_head_attention: Linear, ScaledDotProductAttention, Linear.
ConvertResult ConvertNativeMultiHeadAttention(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertNestedTensorFromMask(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertToPaddedTensor(AtenCall& call, ConvertContext& cx);

// convert_vision.cc: torchvision::nms, torchvision::roi_align.
ConvertResult ConvertNms(AtenCall& call, ConvertContext& cx);
ConvertResult ConvertRoiAlign(AtenCall& call, ConvertContext& cx);

}  // namespace aten
}  // namespace kiln::importer
