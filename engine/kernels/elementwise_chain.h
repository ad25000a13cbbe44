// ElementwiseChain: a run of elementwise ops as one node (op_kinds.def says
// how its attributes spell the steps). The compile phase's fuse_elementwise
// (engine/runtime/compile/fuse_elementwise.cc) makes it from ops whose
// kernels it has already prepared; elementwise_chain.cc runs it.
//
// Its kernel prepares each step's own kernel, so every step computes with
// the numbers, dtypes and broadcasting of the op it replaces. Where every
// step is float32 over the output's shape (or a single element), the steps
// run tile by tile, each tile through all of them while it is in cache:
// the input is read and the output written once, where the ops one after
// another read and write the whole tensor at every step. Elsewhere the steps
// run one after another over whole tensors, in the workspace.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir/graph.h"

namespace kiln::kernels {

inline constexpr int kMaxChainInputs = 8;
inline constexpr int kMaxChainSteps = 16;

struct ChainStep {
  ir::OpKind kind = ir::OpKind::kIdentity;
  // Operand ids: [0, number of chain inputs) the chain's inputs, then
  // (number of chain inputs + k) step k's result.
  std::vector<int> operands;
  ir::Attributes attrs;
};

// The ops a chain may hold: elementwise ops of one output whose every
// element depends only on the same element of the operands.
bool IsChainableOp(ir::OpKind kind);

// Writes `steps` into a chain node's attributes (ops, operands, "<k>.<name>").
void EncodeChain(const std::vector<ChainStep>& steps, ir::Attributes& attrs);

// The steps of chain node `node`; InvalidArgument
// when the attributes do not spell a chain (an unknown or unchainable op, an
// operand that is neither an input nor an earlier step).
absl::StatusOr<std::vector<ChainStep>> DecodeChain(const ir::Node& node);

}  // namespace kiln::kernels
