// What every importer front shares: the model formats Kiln reads, how a file's
// format is told from its bytes, and the options of an import. Free of libtorch.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/tensor.h"

namespace kiln::importer {

enum class ModelFormat {
  kUnknown,
  kTorchScript,        // torch.jit.save: a zip with <root>/data.pkl and <root>/code/
  kExportedProgram,    // torch.export.save (torch >= 2.8): a zip with <root>/archive_format = "pt2"
  kLegacyExportedProgram,  // torch.export.save (torch 2.1-2.7): serialized_exported_program.json
};

// "torchscript", "exported_program", "exported_program (torch 2.1-2.7 layout)", "unknown".
const char* ModelFormatName(ModelFormat format);

// Tells the format from the file's content (its zip directory), never from a
// file name: kUnknown when `bytes` is none of the formats above.
ModelFormat DetectFormat(std::string_view bytes);

struct ImportOptions {
  // Overrides the forward() parameter names, by position (empty: keep).
  std::vector<std::string> input_names;
  // Output names by position (empty: keep). By default outputs are named
  // after their place in forward()'s result: "output0", "output1", ...,
  // "output1.0" for a nested position, a dict's keys for its values;
  // "output" for a tensor list that is the whole result and whose length
  // only a run tells (its elements come back as "output0", "output1", ...).
  std::vector<std::string> output_names;
  // Defaults of the inputs, by position (nullopt: none); ImportTorchScript
  // fills them from forward()'s int/float/bool parameters declared with one.
  std::vector<std::optional<Tensor>> input_defaults;
  // Unsupported ops are an error listing all of them, instead of Fallback
  // nodes that run libtorch's implementation.
  bool strict = false;
  // Op kinds ("aten::gelu") to run through the fallback even though Kiln
  // translates them (serving a model whose native translation diverges).
  std::vector<std::string> force_fallback;
};

}  // namespace kiln::importer
