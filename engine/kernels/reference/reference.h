// Naive, obviously-correct implementations of every Kiln op, used as the test
// oracle (tests/engine/kernels/kernel_sweep_test.cc) and as a readable
// statement of each op's semantics. They are written for clarity, not speed:
// one multi-index loop per output element, double accumulation, and shapes
// derived independently of the optimised kernels.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"

namespace kiln::kernels::reference {

// Runs `node` on `inputs` (one per node input, nullptr for an absent optional
// input) and returns its outputs in fresh tensors. Float ops support FP32
// only; Identity, Reshape, Flatten and Concat accept any dtype. Returns
// InvalidArgument for operands the op rejects and Unimplemented for Constant
// or an unsupported dtype.
absl::StatusOr<std::vector<Tensor>> RunReference(const ir::Node& node,
                                                 const std::vector<const Tensor*>& inputs);

}  // namespace kiln::kernels::reference
