// A loaded model: its imported graph, the input/output contract it accepts, and
// the executables compiled for each input signature seen so far. Validates every
// request against the contract before running.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"
#include "engine/runtime/executable.h"

namespace kiln::runtime {

// One input or output as the server advertises it. dims: -1 is a dynamic dim;
// nullopt means the rank itself is open.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kUnknown;
  std::optional<Dims> dims;
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct ModelOptions {
  CompileOptions compile;
  // Declarations from the load config; they override what the graph implies.
  // Matched by name; an empty name in `inputs` at position i renames nothing.
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

class Model {
 public:
  // Builds the contract from the graph (names from the importer, dtypes and
  // ranks implied by the first consumers) and the declarations in `options`.
  static absl::StatusOr<std::unique_ptr<Model>> Create(ir::Graph graph, ModelOptions options);

  const std::vector<TensorSpec>& inputs() const { return inputs_; }
  const std::vector<TensorSpec>& outputs() const { return outputs_; }
  const ir::Graph& graph() const { return graph_; }

  // Checks `inputs` against the contract (unknown, missing or duplicate name,
  // dtype, rank, fixed dims: InvalidArgument naming the input with expected
  // versus got), compiles for their signature on first use, runs, and returns
  // the requested outputs (all when `requested` is empty; an unknown name is
  // InvalidArgument).
  absl::StatusOr<std::vector<NamedTensor>> Infer(const std::vector<NamedTensor>& inputs,
                                                 const std::vector<std::string>& requested) const;

  // The executable for one signature (graph input order), compiled on first use.
  absl::StatusOr<std::shared_ptr<const Executable>> GetExecutable(
      const std::vector<kernels::TensorInfo>& signature) const;

  size_t num_compiled() const;

 private:
  Model() = default;

  ir::Graph graph_;
  ModelOptions options_;
  std::vector<TensorSpec> inputs_;
  std::vector<TensorSpec> outputs_;

  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const Executable>> executables_;
};

}  // namespace kiln::runtime
