// Memory layouts in the compiled plan (the layout pass of Compile, in
// executable.cc). A kernel that takes layouts (the oneDNN convolution and
// pooling) writes its output in NHWC; the value keeps its logical NCHW dims
// and its type says {nhwc}. Each consumer then gets it in a form it can use:
//   - a kernel that takes layouts reads it as it is;
//   - an elementwise op (Add, Mul, Relu, Sigmoid, ...) whose tensor operands
//     are all NHWC (or single elements) runs unchanged on the channels-last
//     bytes: the compiler hands it the physical [N, H, W, C] dims, and its
//     output is NHWC too. So residual adds, activations and squeeze-excite
//     products stay in the fast layout;
//   - everything else (reshape, flatten, reductions, a dynamic step, a graph
//     output) reads a plain copy made by a Reorder node that the compiler
//     inserts right before the first such use, one per value and block.
// The printed compiled graph shows the layouts and the inserted Reorders.
#pragma once

#include "engine/common/tensor.h"
#include "engine/ir/graph.h"

namespace kiln::runtime::layout {

// The dims in memory order: [N, H, W, C] for a 4-D NHWC tensor.
Dims PhysicalDims(const Dims& logical, ir::Layout layout);
// The inverse: logical [N, C, H, W] from physical [N, H, W, C].
Dims LogicalDims(const Dims& physical, ir::Layout layout);

// Ops that compute each output element from the operands' elements at the
// same (broadcast) index, and so run on permuted dims unchanged.
bool IsElementwise(ir::OpKind op);

}  // namespace kiln::runtime::layout
