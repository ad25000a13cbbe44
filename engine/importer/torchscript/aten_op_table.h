// What the TorchScript front adds to the shared aten op table
// (engine/importer/aten/aten_op_table.h, which serves both fronts): the
// converter type of its scalar table (aten_convert_scalar.cc, for the Python
// arithmetic a script keeps on ints and floats), read through the
// ImportContext. Every aten op on tensors is a row of the shared table; a new
// one goes there.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/aten/aten_op_table.h"
#include "engine/importer/torchscript/import_context.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

using ConvertResult = absl::StatusOr<std::vector<ir::ValueId>>;
using TorchNode = torch::jit::Node;
using Converter = absl::StatusOr<std::vector<ir::ValueId>> (*)(const torch::jit::Node&,
                                                                ImportContext&);

// Every aten op kind the TorchScript front translates natively, sorted (the
// shared table's rows; in-place forms map to them by rule).
std::vector<std::string> SupportedTorchScriptOps();

}  // namespace kiln::importer
