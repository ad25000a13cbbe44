// The kernel tables: every op kind (but Constant, which the runtime handles)
// has a float32 kernel, and no (op, dtype) pair is registered twice.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "engine/kernels/kernel.h"

namespace kiln::kernels {
namespace {

TEST(KernelRegistryTest, EveryOpHasAFloatKernel) {
  for (ir::OpKind op : ir::AllOpKinds()) {
    if (op == ir::OpKind::kConstant || IsNonTensorOp(op)) continue;
    EXPECT_NE(FindKernel(op, DType::kF32), nullptr) << ir::OpName(op);
  }
}

TEST(KernelRegistryTest, NoDuplicateEntries) {
  std::set<std::pair<ir::OpKind, DType>> seen;
  for (const KernelDef& k : AllKernels()) {
    EXPECT_TRUE(seen.insert({k.op, k.dtype}).second) << ir::OpName(k.op);
    EXPECT_NE(k.prepare, nullptr) << ir::OpName(k.op);
    EXPECT_NE(k.eval, nullptr) << ir::OpName(k.op);
  }
}

TEST(KernelRegistryTest, FloatOnlyOpsHaveNoIntKernel) {
  EXPECT_EQ(FindKernel(ir::OpKind::kConv, DType::kInt64), nullptr);
  EXPECT_NE(FindKernel(ir::OpKind::kConcat, DType::kInt64), nullptr);
}

TEST(KernelRegistryTest, NodeContextNamesOpAndSource) {
  ir::Node node{ir::OpKind::kConv, {}, {}, {}, "aten::_convolution"};
  EXPECT_EQ(NodeContext(node), "node (Conv, aten::_convolution): ");
}

}  // namespace
}  // namespace kiln::kernels
