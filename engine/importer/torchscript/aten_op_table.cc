// The one list of aten ops Kiln imports. Adding an op: a row here, pointing at a
// converter in the matching aten_convert_*.cc family file.
//
// In-place variants (relu_, add_) share the functional converter: the
// translator rebinds the mutated input to the result, so later reads of it see
// the new value.
#include "engine/importer/torchscript/aten_op_table.h"

#include <algorithm>
#include <unordered_map>

#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer {
namespace {

using ir::OpKind;
using AtenOpTable = std::unordered_map<std::string_view, Converter>;

// aten::add on tensors, or on lists (concatenation: add.t).
ConvertResult AddTensorsOrLists(const TorchNode& node, ImportContext& ctx) {
  if (node.outputs().size() == 1 && node.output()->type()->kind() == c10::TypeKind::ListType) {
    return ConvertListConcat(node, ctx);
  }
  return Binary<OpKind::kAdd>(node, ctx);
}

const AtenOpTable& Table() {
  static const AtenOpTable* const kTable = new AtenOpTable{
      // ---------- unary activations ----------
      // ---------- binary (Tensor and Scalar overloads) ----------
      {"aten::add", AddTensorsOrLists},
      // ---------- no-ops at inference ----------
      // ---------- linear algebra ----------
      // ---------- convolution and pooling ----------
      {"aten::adaptive_avg_pool2d", ConvertAdaptiveAvgPool2d},
      // ---------- normalization, softmax, reductions ----------
      // ---------- shape ----------
      {"aten::cat", ConvertCat},
      {"aten::t", ConvertPermute},  // constants transposed at import
      // ======== op coverage (issue 3) ========
      // ---------- unary math (in-place forms share the converter) ----------
      {"aten::square", ConvertSquare},
      {"aten::square_", ConvertSquare},
      // ---------- more activations ----------
      {"aten::leaky_relu", ConvertLeakyRelu},
      {"aten::leaky_relu_", ConvertLeakyRelu},
      {"aten::elu", ConvertElu},
      {"aten::elu_", ConvertElu},
      {"aten::selu", ConvertElu},
      {"aten::selu_", ConvertElu},
      {"aten::celu", ConvertElu},
      {"aten::celu_", ConvertElu},
      {"aten::softplus", ConvertSoftplus},
      {"aten::hardshrink", ConvertShrink},
      {"aten::softshrink", ConvertShrink},
      {"aten::threshold", ConvertThreshold},
      {"aten::threshold_", ConvertThreshold},
      {"aten::prelu", ConvertPrelu},
      {"aten::glu", ConvertGlu},
      {"aten::softmin", ConvertSoftmin},
      // ---------- binary with tensor or scalar operands ----------
      {"aten::__and__", ConvertBitwise},
      {"aten::bitwise_and", ConvertBitwise},
      {"aten::__or__", ConvertBitwise},
      {"aten::bitwise_or", ConvertBitwise},
      {"aten::__xor__", ConvertBitwise},
      {"aten::bitwise_xor", ConvertBitwise},
      {"aten::bitwise_not", ConvertBitwise},  // ~mask
      {"aten::bitwise_and_", ConvertBitwise},
      {"aten::bitwise_or_", ConvertBitwise},
      {"aten::bitwise_xor_", ConvertBitwise},
      {"aten::bitwise_not_", ConvertBitwise},
      {"aten::greater", ConvertComparisonAlias},
      {"aten::greater_equal", ConvertComparisonAlias},
      {"aten::less", ConvertComparisonAlias},
      {"aten::less_equal", ConvertComparisonAlias},
      {"aten::not_equal", ConvertComparisonAlias},
      {"aten::true_divide", ConvertDiv},
      {"aten::true_divide_", ConvertDiv},
      {"aten::floor_divide", ConvertFloorDivide},
      {"aten::floor_divide_", ConvertFloorDivide},
      {"aten::clamp", ConvertClamp},
      {"aten::clamp_", ConvertClamp},
      {"aten::clamp_min", ConvertClamp},
      {"aten::clamp_min_", ConvertClamp},
      {"aten::clamp_max", ConvertClamp},
      {"aten::clamp_max_", ConvertClamp},
      {"aten::clip", ConvertClamp},
      {"aten::clip_", ConvertClamp},
      {"aten::addcmul", ConvertAddcmulDiv},
      {"aten::addcmul_", ConvertAddcmulDiv},
      {"aten::addcdiv", ConvertAddcmulDiv},
      {"aten::addcdiv_", ConvertAddcmulDiv},
      {"aten::lerp", ConvertLerp},
      {"aten::lerp_", ConvertLerp},
      // ---------- reductions, scans, sorting ----------
      {"aten::prod", Reduce<OpKind::kProd>},
      {"aten::all", Reduce<OpKind::kReduceAll>},
      {"aten::any", Reduce<OpKind::kReduceAny>},
      {"aten::max", ConvertMaxMin},
      {"aten::min", ConvertMaxMin},
      {"aten::argmax", ArgMaxMin<OpKind::kArgMax>},
      {"aten::argmin", ArgMaxMin<OpKind::kArgMin>},
      {"aten::var", VarStd<OpKind::kVar>},
      {"aten::std", VarStd<OpKind::kStd>},
      {"aten::norm", ConvertNorm},
      {"aten::frobenius_norm", ConvertNorm},
      {"aten::linalg_vector_norm", ConvertNorm},
      {"aten::cumsum", Cumulative<OpKind::kCumSum>},
      {"aten::cumsum_", Cumulative<OpKind::kCumSum>},
      {"aten::cumprod", Cumulative<OpKind::kCumProd>},
      {"aten::cumprod_", Cumulative<OpKind::kCumProd>},
      {"aten::topk", ConvertTopK},
      {"aten::sort", ConvertSort},
      {"aten::argsort", ConvertSort},
      {"aten::kthvalue", ConvertKthvalue},
      // ---------- shape and indexing ----------
      {"aten::movedim", ConvertPermute},
      {"aten::moveaxis", ConvertPermute},
      {"aten::swapaxes", ConvertPermute},
      {"aten::swapdims", ConvertPermute},
      {"aten::t_", ConvertPermute},
      {"aten::expand", ConvertExpand},
      {"aten::expand_as", ConvertExpand},
      {"aten::broadcast_to", ConvertExpand},
      {"aten::repeat", ConvertRepeat},
      {"aten::stack", ConvertStack},
      {"aten::split", ConvertSplit},
      {"aten::split_with_sizes", ConvertSplit},
      {"aten::chunk", ConvertSplit},
      {"aten::unsafe_chunk", ConvertSplit},
      {"aten::unsafe_split", ConvertSplit},
      {"aten::unbind", ConvertSplit},
      {"aten::unflatten", ConvertUnflatten},
      {"aten::view_as", ConvertViewAs},
      {"aten::reshape_as", ConvertViewAs},
      {"aten::slice", ConvertSlice},
      {"aten::narrow", ConvertSlice},
      {"aten::index_select", ConvertIndexSelect},
      {"aten::gather", ConvertIndexSelect},
      {"aten::index", ConvertIndex},
      {"aten::slice_scatter", ConvertSliceScatter},
      {"aten::select_scatter", ConvertSliceScatter},
      {"aten::fill_", ConvertInplaceWrite},
      {"aten::copy_", ConvertInplaceWrite},
      {"aten::roll", ConvertRoll},
      {"aten::flip", ConvertFlip},
      {"aten::fliplr", ConvertFlip},
      {"aten::flipud", ConvertFlip},
      {"aten::pad", ConvertPad},
      {"aten::constant_pad_nd", ConvertPad},
      {"aten::reflection_pad1d", ConvertPad},
      {"aten::reflection_pad2d", ConvertPad},
      {"aten::reflection_pad3d", ConvertPad},
      {"aten::replication_pad1d", ConvertPad},
      {"aten::replication_pad2d", ConvertPad},
      {"aten::replication_pad3d", ConvertPad},
      {"aten::tril", ConvertTriangle},
      {"aten::tril_", ConvertTriangle},
      {"aten::triu", ConvertTriangle},
      {"aten::triu_", ConvertTriangle},
      {"aten::pixel_shuffle", ConvertPixelShuffle},
      {"aten::pixel_unshuffle", ConvertPixelShuffle},
      // ---------- creation (constants when sizes are constant) and casts ----------
      {"aten::arange", ConvertArange},
      {"aten::zeros", ConvertFull},
      {"aten::ones", ConvertFull},
      {"aten::full", ConvertFull},
      {"aten::empty", ConvertFull},
      {"aten::zeros_like", ConvertFullLike},
      {"aten::ones_like", ConvertFullLike},
      {"aten::full_like", ConvertFullLike},
      {"aten::empty_like", ConvertFullLike},
      {"aten::new_zeros", ConvertNewFull},
      {"aten::new_ones", ConvertNewFull},
      {"aten::new_full", ConvertNewFull},
      {"aten::new_empty", ConvertNewFull},
      {"aten::linspace", ConvertLinspaceEye},
      {"aten::eye", ConvertLinspaceEye},
      {"aten::to", ConvertTo},
      {"aten::type_as", ConvertTo},
      // ---------- linear algebra ----------
      {"aten::einsum", ConvertEinsum},
      {"aten::baddbmm", ConvertBaddbmm},
      {"aten::mv", ConvertVectorProduct},
      {"aten::dot", ConvertVectorProduct},
      {"aten::outer", ConvertVectorProduct},
      {"aten::ger", ConvertVectorProduct},
      // ---------- convolution and pooling in 1 to 3 dims ----------
      // What tracing nn.ConvNd(padding="same"/"valid") records; conv2d.padding's arguments.
      {"aten::conv_transpose1d", ConvertConvTransposeNd},
      {"aten::conv_transpose2d", ConvertConvTransposeNd},
      {"aten::conv_transpose3d", ConvertConvTransposeNd},
      {"aten::adaptive_avg_pool1d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_avg_pool3d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_max_pool1d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_max_pool2d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_max_pool3d", ConvertAdaptiveAvgPool2d},
      // ---------- normalization, interpolation, sequence models, attention ----------
      {"aten::group_norm", ConvertGroupNorm},
      {"aten::instance_norm", ConvertInstanceNorm},
      {"aten::upsample_nearest1d", ConvertUpsample},
      {"aten::upsample_nearest2d", ConvertUpsample},
      {"aten::upsample_nearest3d", ConvertUpsample},
      {"aten::upsample_linear1d", ConvertUpsample},
      {"aten::upsample_bilinear2d", ConvertUpsample},
      {"aten::upsample_bicubic2d", ConvertUpsample},
      {"aten::upsample_trilinear3d", ConvertUpsample},
      {"aten::_upsample_nearest_exact1d", ConvertUpsample},
      {"aten::_upsample_nearest_exact2d", ConvertUpsample},
      {"aten::_upsample_nearest_exact3d", ConvertUpsample},
      {"aten::lstm", ConvertRecurrent},
      {"aten::gru", ConvertRecurrent},
      {"aten::rnn_tanh", ConvertRecurrent},
      {"aten::rnn_relu", ConvertRecurrent},
      {"aten::_native_multi_head_attention", ConvertNativeMha},
  };
  return *kTable;
}

}  // namespace

Converter FindTorchScriptConverter(std::string_view kind) {
  auto it = Table().find(kind);
  return it == Table().end() ? nullptr : it->second;
}

std::vector<std::string> SupportedTorchScriptOps() {
  std::vector<std::string> ops;
  for (const auto& [kind, converter] : Table()) ops.emplace_back(kind);
  for (std::string& op : SharedAtenOps()) ops.push_back(std::move(op));
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace kiln::importer
