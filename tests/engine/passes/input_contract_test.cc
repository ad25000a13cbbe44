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
}

TEST(InputContractTest, LinearWeightFixesLastDimAndFloatWeightFixesDtype) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId w = g.AddConstant(Tensor::Zeros(DType::kF64, {3, 5}));
  g.AddOutput(g.node(g.AddNode(ir::OpKind::kLinear, {x, w})).outputs[0], "output0");
  auto types = InferInputContract(g);
  EXPECT_EQ(types[0].dtype, DType::kF64);
  EXPECT_EQ(types[0].dims, (Dims{-1, 5}));
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
