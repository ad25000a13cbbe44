// Imports a torch.export ExportedProgram saved by torch.export.save into Kiln's
// graph IR, without libtorch: the PT2 archive layout of torch >= 2.8, and the
// layout of torch 2.1-2.7 (serialized_exported_program.json with the weights
// in torch.save pickles) where its schema major version is Kiln's (torch 2.6
// and 2.7).
//
// The archive's graph is translated node by node through the aten op table the
// TorchScript front uses (engine/importer/aten/). Inputs are the program's
// user inputs, named after forward()'s arguments, typed from tensor_values:
// a dim with a symbolic size (a Dim marked dynamic) is -1 and its range from
// range_constraints is set on the graph input (ir::Value::dim_ranges) and
// reported in ExportedProgramInfo. torch.cond and while_loop become the ir's
// If and Loop with their subgraphs in the blocks. Parameters, buffers
// and lifted constants become graph constants, read from the archive's weight
// and constant files. Outputs follow the output tree spec, flattened and
// named as the TorchScript front names a structured result ("output<i>", a
// dict's keys, ".<i>" for nested positions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/import.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

// What the program says beyond the graph: its dynamic dims and versions.
struct ExportedProgramInfo {
  struct DynamicDim {
    std::string input;   // the graph input
    int dim = 0;         // which of its dims
    std::string symbol;  // torch's symbol for it ("s43"); dims sharing one are equal
    int64_t min = 0;
    int64_t max = 0;  // INT64_MAX when unbounded
  };
  std::vector<DynamicDim> dynamic_dims;
  std::string torch_version;  // as the archive records it ("2.14.1")
  int schema_major = 0;
  int schema_minor = 0;
};

// The schema major version of the ExportedProgram JSON Kiln reads.
inline constexpr int kExportSchemaMajor = 8;

// Imports the archive in `bytes`. InvalidArgument for an archive that is not
// a readable PT2 archive (not a zip, an AOTInductor package, JSON that is not
// an ExportedProgram, a schema major version other than kExportSchemaMajor,
// sizes/strides/offsets outside their storage, short weight files, hostile
// zip entries, a refused or malformed pickle in the older layout);
// Unimplemented listing every op Kiln cannot translate.
// options.input_names/output_names rename.
// Every weight is copied out of `bytes` into its constant, so the bytes may go
// once this returns.
absl::StatusOr<ir::Graph> ImportExportedProgram(std::string_view bytes,
                                                const ImportOptions& options = {},
                                                ExportedProgramInfo* info = nullptr);

// Which ir value each top-level node's tensor outputs became: the verified
// import compares Kiln's intermediate values with the reference's by it, to
// name the first node whose translation diverges.
struct ExportTrace {
  struct Entry {
    int index = 0;   // the node's number in messages ("node 12")
    std::string op;  // "aten::conv2d"
    // The node's tensor outputs by the program's names ("conv2d_3"), and the
    // ir values that stand for them in the imported graph.
    std::vector<std::pair<std::string, ir::ValueId>> outputs;
  };
  std::vector<Entry> nodes;
};

// The same over bytes that `owner` keeps alive (a MappedFile of the archive, a
// shared buffer), which must never be written while it lives: a weight stored
// uncompressed in the PT2 layout whose tensor is contiguous and starts
// kConstantViewAlign-aligned in memory (torch aligns each entry's data to 64
// bytes in the file, and a mapping starts on a page) becomes a constant that
// views those bytes and holds `owner`, instead of a copy. Deflated or
// misaligned weights, and the torch 2.1-2.7 layout's, are copied.
//
// With `trace`, also records which ir value each top-level node's tensor
// outputs became (the verified import's divergence search).
absl::StatusOr<ir::Graph> ImportExportedProgram(std::string_view bytes,
                                                std::shared_ptr<const void> owner,
                                                const ImportOptions& options = {},
                                                ExportedProgramInfo* info = nullptr,
                                                ExportTrace* trace = nullptr);

// The ops ("aten::conv2d") of the program that Kiln cannot translate, sorted;
// empty when every op has a translation. Fails as ImportExportedProgram does
// on an unreadable archive.
absl::StatusOr<std::vector<std::string>> UnsupportedExportOps(std::string_view bytes);

// The sample inputs torch.export.save stored in the archive (what the program
// was exported with): forward()'s positional arguments in order (empty
// names), then its keyword arguments by name. Read by Kiln's own bounded
// pickle reader, which runs nothing. NotFound when the archive holds none,
// InvalidArgument when they are not tensors or the archive is unreadable.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ExportedProgramSampleInputs(
    std::string_view bytes);


}  // namespace kiln::importer
