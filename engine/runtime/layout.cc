#include "engine/runtime/layout.h"

namespace kiln::runtime::layout {

Dims PhysicalDims(const Dims& logical, ir::Layout layout) {
  if (layout != ir::Layout::kNHWC || logical.size() != 4) return logical;
  return {logical[0], logical[2], logical[3], logical[1]};
}

Dims LogicalDims(const Dims& physical, ir::Layout layout) {
  if (layout != ir::Layout::kNHWC || physical.size() != 4) return physical;
  return {physical[0], physical[3], physical[1], physical[2]};
}

bool IsElementwise(ir::OpKind op) {
  using K = ir::OpKind;
  switch (op) {
    case K::kIdentity: case K::kAdd: case K::kSub: case K::kMul: case K::kDiv:
    case K::kRelu: case K::kClip: case K::kSigmoid: case K::kTanh: case K::kGelu:
    case K::kSilu: case K::kHardSigmoid: case K::kHardSwish: case K::kNeg: case K::kAbs:
    case K::kSqrt: case K::kRsqrt: case K::kExp: case K::kLog: case K::kErf:
    case K::kReciprocal: case K::kLeakyRelu: case K::kElu: case K::kMish: case K::kSoftplus:
    case K::kMaximum: case K::kMinimum: case K::kPow: case K::kElementwiseChain:
      return true;
    default:
      return false;
  }
}

}  // namespace kiln::runtime::layout
