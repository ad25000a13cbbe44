// The aten ops only the TorchScript front translates: their converters read
// what only a TorchScript graph has (see aten_op_table.h). Every other op is a
// row of the shared table (engine/importer/aten/aten_op_table.cc), which serves
// both fronts; a new op goes there.
//
// In-place variants (relu_, add_) share the functional converter: the
// translator rebinds the mutated input to the result, so later reads of it see
// the new value.
#include "engine/importer/torchscript/aten_op_table.h"

#include <algorithm>
#include <unordered_map>

#include "engine/importer/aten/aten_op_table.h"
#include "engine/importer/torchscript/torchscript_call.h"

namespace kiln::importer {
namespace {

using ir::OpKind;
using AtenOpTable = std::unordered_map<std::string_view, Converter>;

// aten::add on lists (concatenation: add.t), else the shared row's add on tensors.
ConvertResult AddTensorsOrLists(const TorchNode& node, ImportContext& ctx) {
  if (node.outputs().size() == 1 && node.output()->type()->kind() == c10::TypeKind::ListType) {
    return ConvertListConcat(node, ctx);
  }
  TorchScriptCall call(node, ctx);
  return aten::Binary<OpKind::kAdd>(call, ctx);
}

const AtenOpTable& Table() {
  static const AtenOpTable* const kTable = new AtenOpTable{
      // ---------- list overloads and lists built at run time ----------
      {"aten::add", AddTensorsOrLists},  // add.t concatenates lists
      {"aten::cat", ConvertCat},
      {"aten::stack", ConvertStack},
      {"aten::slice", ConvertSlice},  // slice.t of an int list
      {"aten::index", ConvertIndex},  // a literal list of index tensors
      // adaptive pools: a scripted Optional[int] output size (None keeps that size)
      {"aten::adaptive_avg_pool1d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_avg_pool2d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_avg_pool3d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_max_pool1d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_max_pool2d", ConvertAdaptiveAvgPool2d},
      {"aten::adaptive_max_pool3d", ConvertAdaptiveAvgPool2d},
      // ---------- traced constants and TorchScript types ----------
      {"aten::t", ConvertT},  // constants transposed at import
      {"aten::t_", ConvertT},
      {"aten::floor_divide", ConvertFloorDivide},
      {"aten::floor_divide_", ConvertFloorDivide},
      // ---------- writes through views (torch.export graphs are functional) ----------
      {"aten::fill_", ConvertInplaceWrite},
      {"aten::copy_", ConvertInplaceWrite},
      // ---------- scripted-only ----------
      {"aten::softmin", ConvertSoftmin},
      // ---------- creation (constants when sizes are constant) ----------
      {"aten::zeros", ConvertFull},
      {"aten::ones", ConvertFull},
      {"aten::full", ConvertFull},
      {"aten::empty", ConvertFull},
      {"aten::linspace", ConvertLinspaceEye},
      {"aten::eye", ConvertLinspaceEye},
      // ---------- interpolation, sequence models, attention ----------
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
