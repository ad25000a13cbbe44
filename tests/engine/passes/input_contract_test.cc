#include "engine/passes/input_contract.h"

#include <gtest/gtest.h>

namespace kiln::passes {
namespace {

TEST(InputContractTest, ConvWeightFixesRankAndChannels) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId w = g.AddConstant(Tensor::Zeros(DType::kF32, {8, 1, 3, 3}));
  ir::Attributes a;
  a.SetInt("groups", 4);
  g.AddOutput(g.node(g.AddNode(ir::OpKind::kConv, {x, w}, a)).outputs[0], "output0");
  auto types = InferInputContract(g);
  ASSERT_EQ(types.size(), 1u);
  EXPECT_EQ(types[0].dtype, DType::kF32);
  EXPECT_EQ(types[0].dims, (Dims{-1, 4, -1, -1}));
  EXPECT_FALSE(TakesAnyLeadingDims(g, x));
}

TEST(InputContractTest, LinearWeightFixesLastDimAndFloatWeightFixesDtype) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId w = g.AddConstant(Tensor::Zeros(DType::kF64, {3, 5}));
  g.AddOutput(g.node(g.AddNode(ir::OpKind::kLinear, {x, w})).outputs[0], "output0");
  auto types = InferInputContract(g);
  EXPECT_EQ(types[0].dtype, DType::kF64);
  // The weight fixes the last dim; a Linear takes any leading dims ([B, T, C] as well as
  // [B, C]).
  EXPECT_EQ(types[0].dims, (Dims{-1, 5}));
  EXPECT_TRUE(TakesAnyLeadingDims(g, x));
}

TEST(InputContractTest, OpsOfTheInputsThemselvesFixNothing) {
  // softmax(x), a @ y, mean(x): PyTorch takes float64, float16 and integer inputs there
  // (or refuses them itself); without a weight to match, the dtype stays open.
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId y = g.AddInput("y", {});
  ir::Attributes axis;
  axis.SetInt("axis", -1);
  ir::NodeId softmax = g.AddNode(ir::OpKind::kSoftmax, {x}, axis);
  ir::NodeId matmul = g.AddNode(ir::OpKind::kMatMul, {g.node(softmax).outputs[0], y});
  ir::NodeId mean = g.AddNode(ir::OpKind::kMean, {x});
  g.AddOutput(g.node(matmul).outputs[0], "output0");
  g.AddOutput(g.node(mean).outputs[0], "output1");
  auto types = InferInputContract(g);
  EXPECT_EQ(types[0].dtype, DType::kUnknown);
  EXPECT_FALSE(types[0].dims.has_value());
  EXPECT_EQ(types[1].dtype, DType::kUnknown);
  // A matmul by a constant float64 matrix fixes its input's dtype: PyTorch refuses mixing.
  ir::Graph h;
  ir::ValueId z = h.AddInput("z", {});
  ir::ValueId w = h.AddConstant(Tensor::Zeros(DType::kF64, {4, 2}));
  h.AddOutput(h.node(h.AddNode(ir::OpKind::kMatMul, {z, w})).outputs[0], "output0");
  EXPECT_EQ(InferInputContract(h)[0].dtype, DType::kF64);
}

TEST(InputContractTest, IndexingTakesBoolMasksAsWellAsIndices) {
  // x[m] imports to IndexSelect too, but m may be a bool mask: not INT64.
  ir::Graph g;
  ir::ValueId m = g.AddInput("m", {});
  ir::ValueId table = g.AddConstant(Tensor::Zeros(DType::kF32, {10, 4}));
  ir::Attributes axis;
  axis.SetInt("axis", 0);
  ir::NodeId index = g.AddNode(ir::OpKind::kIndexSelect, {table, m}, axis, "aten::index");
  g.AddOutput(g.node(index).outputs[0], "output0");
  EXPECT_EQ(InferInputContract(g)[0].dtype, DType::kUnknown);
  EXPECT_FALSE(IsIndexOnlyInput(g, m));
}

TEST(InputContractTest, UnconstrainedInputStaysOpen) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId y = g.AddInput("y", {});
  g.AddOutput(g.node(g.AddNode(ir::OpKind::kAdd, {x, y})).outputs[0], "output0");
  auto types = InferInputContract(g);
  EXPECT_EQ(types[1].dtype, DType::kUnknown);
  EXPECT_FALSE(types[1].dims.has_value());
}

TEST(InputContractTest, TokenIdsAreIndexOnlyInputs) {
  // ids feed an embedding (IndexSelect) and a size query: INT64 implied, index only.
  // Used in arithmetic too, or returned, they are not.
  ir::Graph g;
  ir::ValueId ids = g.AddInput("ids", {});
  ir::ValueId other = g.AddInput("other", {});
  ir::ValueId table = g.AddConstant(Tensor::Zeros(DType::kF32, {10, 4}));
  ir::Attributes axis;
  axis.SetInt("axis", 0);
  ir::NodeId embed = g.AddNode(ir::OpKind::kIndexSelect, {table, ids}, axis);
  ir::Attributes dim;
  dim.SetInt("dim", 1);
  g.AddNode(ir::OpKind::kSize, {ids}, dim);
  ir::NodeId gather = g.AddNode(ir::OpKind::kIndexSelect, {table, other}, axis);
  ir::NodeId sum = g.AddNode(ir::OpKind::kAdd, {other, other});
  g.AddOutput(g.node(embed).outputs[0], "output0");
  g.AddOutput(g.node(gather).outputs[0], "output1");
  g.AddOutput(g.node(sum).outputs[0], "output2");
  auto types = InferInputContract(g);
  EXPECT_EQ(types[0].dtype, DType::kInt64);
  EXPECT_EQ(types[1].dtype, DType::kInt64);
  EXPECT_TRUE(IsIndexOnlyInput(g, ids));
  EXPECT_FALSE(IsIndexOnlyInput(g, other));
  // The table operand is not an index.
  ir::Graph h;
  ir::ValueId x = h.AddInput("x", {});
  ir::ValueId i = h.AddConstant(Tensor::Zeros(DType::kInt64, {2}));
  h.AddOutput(h.node(h.AddNode(ir::OpKind::kIndexSelect, {x, i}, axis)).outputs[0], "output0");
  EXPECT_FALSE(IsIndexOnlyInput(h, x));
}

}  // namespace
}  // namespace kiln::passes
