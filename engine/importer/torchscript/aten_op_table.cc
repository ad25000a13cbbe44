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

namespace kiln::importer {
namespace {

using AtenOpTable = std::unordered_map<std::string_view, Converter>;

const AtenOpTable& Table() {
  static const AtenOpTable* const kTable = new AtenOpTable{
      // ---------- writes through views (torch.export graphs are functional) ----------
      {"aten::fill_", ConvertInplaceWrite},
      {"aten::copy_", ConvertInplaceWrite},
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
