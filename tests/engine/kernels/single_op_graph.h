// Test harness for one kernel (in the spirit of TFLite's SingleOpModel): builds
// an ir::Graph holding a single node, then runs that node's KernelDef directly,
// Prepare then Eval, the way the executor does, without the runtime.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"
#include "engine/kernels/kernel.h"

namespace kiln::kernels::testing {

// A float32 tensor with the given dims and values (row-major).
Tensor F32(Dims dims, std::vector<float> values);
// A float32 tensor of uniform random values in [lo, hi).
Tensor RandomF32(Dims dims, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f);
// The values of a float32 tensor.
std::vector<float> Values(const Tensor& t);
// A float32 tensor converted to `to` (absent and other tensors as they are).
Tensor ConvertedTensor(const Tensor& t, DType to);
// An absent optional input.
inline Tensor Absent() { return Tensor(); }

class SingleOpGraph {
 public:
  // `inputs`: one per node input; Absent() for a missing optional input.
  // Inputs listed in `constant_inputs` become Constant nodes (weights), the
  // others graph inputs.
  SingleOpGraph(ir::OpKind op, std::vector<Tensor> inputs, ir::Attributes attrs = {},
                std::vector<int> constant_inputs = {});

  const ir::Graph& graph() const { return graph_; }
  const ir::Node& node() const { return graph_.node(node_id_); }
  const std::vector<Tensor>& inputs() const { return inputs_; }

  // Runs Prepare only; returns its status (for error tests).
  absl::Status Prepare(int num_threads = 1) const;

  // Prepare, then Eval on outputs and workspace pre-filled with NaN (so a
  // kernel that leaves an element unwritten or reads scratch it did not write
  // is caught). Aliasing kernels get a view of input 0 and no Eval, exactly as
  // in the executor, unless `eval_aliases` is set.
  absl::StatusOr<std::vector<Tensor>> Run(int num_threads = 1, bool eval_aliases = false) const;

  // The reference implementation's outputs for the same node and inputs.
  absl::StatusOr<std::vector<Tensor>> RunReference() const;

  // Workspace bytes Prepare asked for (after Prepare succeeded).
  absl::StatusOr<size_t> WorkspaceBytes() const;

 private:
  PrepareContext MakePrepareContext(int num_threads) const;
  absl::StatusOr<const KernelDef*> PrepareInto(PrepareContext& ctx) const;

  ir::Graph graph_;
  ir::NodeId node_id_ = ir::kNoNode;
  std::vector<Tensor> inputs_;
  std::vector<int> constant_inputs_;
};

// Float64 accumulation (the accumulate = "float64" attribute): runs `op` on
// FP32 `inputs` with the attribute, and its FP64 kernel on the same values in
// double without it, on 2 threads, with the inputs listed in
// `constant_inputs` as constants. OK when every output element is the FP64
// result rounded to float, bit for bit; else an error naming the first element
// that is not.
absl::Status CheckFloat64Accumulation(ir::OpKind op, const std::vector<Tensor>& inputs,
                                      const ir::Attributes& attrs,
                                      const std::vector<int>& constant_inputs);

// Attribute builder: Attrs().Ints("stride", {2, 2}).Int("groups", 1).
class Attrs {
 public:
  Attrs& Int(const std::string& name, int64_t v) {
    a_.SetInt(name, v);
    return *this;
  }
  Attrs& Float(const std::string& name, double v) {
    a_.SetFloat(name, v);
    return *this;
  }
  Attrs& Bool(const std::string& name, bool v) {
    a_.SetBool(name, v);
    return *this;
  }
  Attrs& Str(const std::string& name, std::string v) {
    a_.SetString(name, std::move(v));
    return *this;
  }
  Attrs& Ints(const std::string& name, std::vector<int64_t> v) {
    a_.SetInts(name, std::move(v));
    return *this;
  }
  Attrs& Floats(const std::string& name, std::vector<double> v) {
    a_.SetFloats(name, std::move(v));
    return *this;
  }
  operator ir::Attributes() const { return a_; }  // NOLINT: builder converts implicitly

 private:
  ir::Attributes a_;
};

}  // namespace kiln::kernels::testing
