// Loading a TorchScript archive and preparing forward()'s graph for
// translation (stages 1-2 of torchscript_importer.cc), shared by the importer
// and the verified import's libtorch half (engine/fallback/torch_reference.cc).
// Internal; includes libtorch.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <torch/csrc/jit/api/module.h>

namespace kiln::importer {

struct PreparedModule {
  torch::jit::Module module;  // eval mode, not frozen
  torch::jit::Module frozen;  // graph's `self`
  std::shared_ptr<torch::jit::Graph> graph;  // frozen, inlined, cleaned, tuples lowered
  std::vector<std::string> input_names;      // forward()'s parameters, self dropped, tuples flattened
  // One per input name: the parameter's default when it is an int, float or
  // bool declared with one (a 0-dim INT64, FP64 or BOOL tensor).
  std::vector<std::optional<Tensor>> input_defaults;
  // One per graph output after lowering: "output<i>" for element i of the
  // result, "<parent>.<i>" for nested positions, a dict's keys for its values.
  std::vector<std::string> output_names;
};

// Loads the archive (CPU) and prepares the graph. With `float64`, the
// module's floating-point parameters and buffers are converted to float64
// first (the verified import's float64 reference). libtorch exceptions
// propagate to the caller.
PreparedModule LoadAndPrepare(std::string_view bytes, bool float64 = false);

}  // namespace kiln::importer
