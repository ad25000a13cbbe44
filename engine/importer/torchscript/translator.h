// The block translator (translator.cc) and the two converter families it owns
// besides the aten table: scalar and list ops (aten_convert_scalar.cc) and the
// libtorch fallback (fallback_convert.cc). Internal to engine/importer/.
#pragma once

#include <string_view>
#include <vector>

#include "engine/importer/torchscript/aten_op_table.h"
#include "engine/importer/torchscript/import_context.h"

namespace kiln::importer {

// Translates forward()'s graph (see ImportTorchGraph).
absl::StatusOr<ir::Graph> TranslateGraph(const torch::jit::Graph& graph,
                                         const ImportOptions& options, bool has_self,
                                         ImportTrace* trace);

// A converter for an op on ints, floats, bools or lists. When `arithmetic`
// comes back true the op also exists for tensors (aten::add, aten::eq, ...):
// the translator uses this converter only when no input is a tensor with
// data, and the aten table otherwise.
Converter FindScalarConverter(std::string_view kind, bool* arithmetic);

// Ops that change their first input in place (relu_, aten::append): the
// translator rebinds that input to the result.
bool MutatesFirstInput(const torch::jit::Node& node);

// A Fallback node running `node` through libtorch's operator registry: the
// operator's name and overload, its schema, and for every schema argument
// either an ir input or a constant attribute. One ir value per node output;
// a Tensor[] result that is only unpacked becomes that many tensor outputs.
// Unimplemented when the op has no schema or takes or returns values Kiln
// cannot hold (strings, objects).
ConvertResult ConvertFallback(const TorchNode& node, ImportContext& ctx);

// Keeps, on the one native node that computes all of `node`'s `results`, the
// Fallback node ConvertFallback would make (ir/fallback_twin.h), so a compile
// whose kernel refuses the native node for a signature runs libtorch's op
// instead. Does nothing when the translation is not one node taking every
// input the Fallback node would, or the op cannot run through libtorch.
void AddFallbackTwin(const TorchNode& node, const std::vector<ir::ValueId>& results,
                     ImportContext& ctx);

}  // namespace kiln::importer
