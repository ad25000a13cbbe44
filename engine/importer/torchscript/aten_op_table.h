// The TorchScript-only part of the aten op table: rows whose converters read
// what only a torch::jit::Node has (list overloads, lists built at run time,
// traced constants, writes through views, scripted-only ops, ...). The rows
// are in aten_op_table.cc; converters live by family in aten_convert_*.cc.
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

// aten_convert_scalar.cc: add.t, the concatenation of two lists.
ConvertResult ConvertListConcat(const TorchNode& node, ImportContext& ctx);

// aten_convert_nn.cc
// adaptive pools: a scripted Optional[int] list has None entries.
ConvertResult ConvertAdaptiveAvgPool2d(const TorchNode& node, ImportContext& ctx);

// aten_convert_shape.cc: cat of a list built at run time.
ConvertResult ConvertCat(const TorchNode& node, ImportContext& ctx);

// aten_convert_math.cc
ConvertResult ConvertFloorDivide(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSoftmin(const TorchNode& node, ImportContext& ctx);

// aten_convert_index.cc
ConvertResult ConvertT(const TorchNode& node, ImportContext& ctx);  // t, t_: constants folded
ConvertResult ConvertStack(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertSlice(const TorchNode& node, ImportContext& ctx);  // also slice.t of a list
ConvertResult ConvertIndex(const TorchNode& node, ImportContext& ctx);
// fill_ / copy_, also through slices and selects of another tensor.
ConvertResult ConvertInplaceWrite(const TorchNode& node, ImportContext& ctx);

// aten_convert_misc.cc
ConvertResult ConvertFull(const TorchNode& node, ImportContext& ctx);  // zeros, ones, full, empty
ConvertResult ConvertLinspaceEye(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertUpsample(const TorchNode& node, ImportContext& ctx);
ConvertResult ConvertRecurrent(const TorchNode& node, ImportContext& ctx);  // lstm, gru, rnn_*
ConvertResult ConvertNativeMha(const TorchNode& node, ImportContext& ctx);

}  // namespace kiln::importer
