#include <gtest/gtest.h>

#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

int CountOps(const ir::Graph& g, ir::OpKind kind) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.kind == kind;
  return n;
}

// x -> Identity (dropout) -> Relu -> Identity (contiguous) -> output, plus a dead Sigmoid.
ir::Graph GraphWithIdentities() {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId a = g.node(g.AddNode(ir::OpKind::kIdentity, {x}, {}, "aten::dropout")).outputs[0];
  ir::ValueId b = g.node(g.AddNode(ir::OpKind::kRelu, {a}, {}, "aten::relu")).outputs[0];
  g.AddNode(ir::OpKind::kSigmoid, {b});
  ir::ValueId c = g.node(g.AddNode(ir::OpKind::kIdentity, {b}, {}, "aten::contiguous")).outputs[0];
  g.AddOutput(c, "output0");
  return g;
}

TEST(EliminateIdentityTest, RewiresUsersAndRemovesIdentities) {
  ir::Graph g = GraphWithIdentities();
  ASSERT_EQ(CountOps(g, ir::OpKind::kIdentity), 2);
  auto changed = MakeEliminateIdentityPass()->Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(CountOps(g, ir::OpKind::kIdentity), 0);
  EXPECT_EQ(g.node(0).kind, ir::OpKind::kRelu);
  EXPECT_EQ(g.node(0).inputs[0], g.inputs()[0]);
  EXPECT_TRUE(ir::VerifyGraph(g).ok());
}

TEST(EliminateIdentityTest, KeepsIdentityFromInputToOutput) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  g.AddOutput(g.node(g.AddNode(ir::OpKind::kIdentity, {x})).outputs[0], "output0");
  auto changed = MakeEliminateIdentityPass()->Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(CountOps(g, ir::OpKind::kIdentity), 1);
}

TEST(DeadCodeEliminationTest, DropsUnusedNodes) {
  ir::Graph g = GraphWithIdentities();
  auto changed = MakeDeadCodeEliminationPass()->Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(CountOps(g, ir::OpKind::kSigmoid), 0);
  EXPECT_EQ(g.nodes().size(), 3u);
}

TEST(PipelineTest, RunsEveryPassAndCanDisableByName) {
  ir::Graph g = GraphWithIdentities();
  ASSERT_TRUE(RunPipeline(g).ok());
  EXPECT_EQ(g.nodes().size(), 1u);

  ir::Graph h = GraphWithIdentities();
  PipelineOptions opts;
  opts.disabled = {"eliminate_identity"};
  ASSERT_TRUE(RunPipeline(h, opts).ok());
  EXPECT_EQ(CountOps(h, ir::OpKind::kIdentity), 2);
  EXPECT_EQ(CountOps(h, ir::OpKind::kSigmoid), 0);
  EXPECT_EQ(PipelinePassNames(),
            (std::vector<std::string>{"resolve_lists", "eliminate_identity", "fuse_conv_epilogue",
                                      "dead_code_elimination"}));
}

// Passes see nodes inside blocks too: an Identity in a branch is removed and
// the block yields its input; a dead node in a loop body goes.
TEST(PipelineTest, RewritesInsideBlocksAndKeepsThemValid) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId c = g.AddInput("c", ir::TensorType{DType::kBool, Dims{}}, ir::ValueKind::kBool);
  ir::NodeId n = g.AddNodeWithOutputs(ir::OpKind::kIf, {c}, 1);
  ir::BlockId then_block = g.AddBlock(n);
  g.SetInsertionBlock(then_block);
  ir::ValueId r = g.node(g.AddNode(ir::OpKind::kRelu, {x})).outputs[0];
  ir::ValueId id = g.node(g.AddNode(ir::OpKind::kIdentity, {r}, {}, "aten::dropout")).outputs[0];
  g.AddNode(ir::OpKind::kSigmoid, {r});  // dead
  g.SetBlockResults(then_block, {id});
  ir::BlockId else_block = g.AddBlock(n);
  g.SetBlockResults(else_block, {x});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(g.node(n).outputs[0], "output0");
  ASSERT_TRUE(RunPipeline(g).ok());
  EXPECT_TRUE(ir::VerifyGraph(g).ok()) << ir::PrintGraph(g);
  EXPECT_EQ(CountOps(g, ir::OpKind::kIdentity), 0);
  EXPECT_EQ(CountOps(g, ir::OpKind::kSigmoid), 0);
  const ir::Block& then_after = g.block(g.node(g.value(g.outputs()[0]).producer).blocks[0]);
  EXPECT_EQ(g.node(g.value(then_after.results[0]).producer).kind, ir::OpKind::kRelu);
}

}  // namespace
}  // namespace kiln::passes
