// The TorchScript-only part of the aten op table: rows whose converters read
// what only a torch::jit::Node has: in-place writes, through the views that
// made their destination (torch.export graphs are functional). The rows are
// in aten_op_table.cc, their converter in aten_convert_index.cc.
//
// A converter reads its torch node through the ImportContext, adds ir nodes and
// returns one ir value per node output.
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

// The TorchScript-only converter for an op kind such as "aten::copy_", or
// nullptr. The translator looks here first, then in the shared aten table
// (engine/importer/aten/aten_op_table.h), which serves both fronts; rows move
// from here to there as their converters are rewritten over AtenCall.
Converter FindTorchScriptConverter(std::string_view kind);

// Every op kind the TorchScript front translates natively (both tables), sorted.
std::vector<std::string> SupportedTorchScriptOps();

// ------------------------------------------------ converters (aten_convert_index.cc)

using ConvertResult = absl::StatusOr<std::vector<ir::ValueId>>;
using TorchNode = torch::jit::Node;

// fill_ / copy_, also through slices and selects of another tensor.
ConvertResult ConvertInplaceWrite(const TorchNode& node, ImportContext& ctx);

}  // namespace kiln::importer
