// The kernel interface: every op kind has, per input dtype, a Prepare (run once
// per compile: checks arity, dtypes and ranks, computes output types and
// workspace, may precompute state such as packed weights) and an Eval (run per
// request: no allocation, no re-validation). Families live one per file, each
// exporting a table; registry.cc is the only list of families.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/common/dtype.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"

namespace kiln::kernels {

// What Prepare knows about one input or output: concrete dtype and dims, and,
// for inputs, the constant tensor when the value is a graph constant.
struct TensorInfo {
  DType dtype = DType::kUnknown;
  Dims dims;
  const Tensor* constant = nullptr;
  bool present = true;  // false for an absent optional input
};

struct PrepareContext {
  const ir::Node& node;
  std::vector<TensorInfo> inputs;   // one per node input
  std::vector<TensorInfo> outputs;  // filled by Prepare, one per node output
  size_t workspace_bytes = 0;       // scratch needed by Eval
  std::shared_ptr<void> state;      // kernel-private, read by Eval
  int num_threads = 1;
};

struct EvalContext {
  const ir::Node& node;
  std::vector<const Tensor*> inputs;  // nullptr for an absent optional input
  std::vector<Tensor*> outputs;       // preallocated with the prepared dims
  void* workspace = nullptr;          // workspace_bytes, 64-byte aligned
  const void* state = nullptr;
  int num_threads = 1;
};

using PrepareFn = absl::Status (*)(PrepareContext&);
using EvalFn = absl::Status (*)(EvalContext&);

struct KernelDef {
  ir::OpKind op;
  DType dtype;  // dtype of input 0; kUnknown matches any dtype
  PrepareFn prepare;
  EvalFn eval;
  // When true the output is a view of input 0 (same bytes, new dims): the
  // executor aliases the buffers and never calls eval.
  bool aliases_input0 = false;
};

// Family tables (one per file).
absl::Span<const KernelDef> ElementwiseKernels();
absl::Span<const KernelDef> ActivationKernels();
absl::Span<const KernelDef> MatMulKernels();
absl::Span<const KernelDef> ConvKernels();
absl::Span<const KernelDef> PoolKernels();
absl::Span<const KernelDef> NormKernels();
absl::Span<const KernelDef> ShapeKernels();
absl::Span<const KernelDef> ReduceKernels();

// Every kernel of every family.
const std::vector<KernelDef>& AllKernels();

// The kernel for `op` whose dtype is `dtype` (or kUnknown); nullptr when none.
const KernelDef* FindKernel(ir::OpKind op, DType dtype);

// Message prefix for kernel errors: "node (Conv, aten::_convolution): ".
std::string NodeContext(const ir::Node& node);

}  // namespace kiln::kernels
