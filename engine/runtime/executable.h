// A graph compiled for one concrete input signature: every value's dtype and
// dims resolved, kernels chosen and prepared (weights prepacked), buffers
// planned into one arena. Run() is thread-safe; each call takes an arena from a
// small pool so concurrent requests never share scratch memory.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"
#include "engine/kernels/kernel.h"

namespace kiln::runtime {

struct CompileOptions {
  int num_threads = 1;
};

class Executable {
 public:
  // Compiles `graph` for `inputs` (one per graph input, concrete dtype and dims).
  // Fails with InvalidArgument naming the node when an op rejects its operands,
  // Unimplemented when no kernel exists for an op and dtype.
  static absl::StatusOr<std::unique_ptr<Executable>> Compile(
      const ir::Graph& graph, const std::vector<kernels::TensorInfo>& inputs,
      const CompileOptions& options);

  // Runs on `inputs` (graph input order; dtypes and dims must match the
  // signature compiled for) and returns the graph outputs in order.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs) const;

  const std::vector<kernels::TensorInfo>& output_infos() const { return output_infos_; }
  size_t arena_bytes() const { return arena_bytes_; }
  const ir::Graph& graph() const { return graph_; }
  const std::string& signature() const { return signature_; }

  ~Executable();

 private:
  struct Step;
  struct Slot;
  // Per-run memory: the arena and a tensor view of every value's slot in it.
  struct Arena {
    Tensor memory;
    std::vector<Tensor> views;
  };
  Executable() = default;
  std::unique_ptr<Arena> NewArena() const;

  ir::Graph graph_;  // the compiled (optimized) graph
  CompileOptions options_;
  std::vector<Step> steps_;
  std::vector<Slot> slots_;  // one per value: where its bytes live at run time
  std::vector<kernels::TensorInfo> output_infos_;
  size_t arena_bytes_ = 0;
  size_t workspace_offset_ = 0;
  std::string signature_;

  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<Arena>> arena_pool_;
};

}  // namespace kiln::runtime
