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

}  // namespace
}  // namespace kiln::passes
