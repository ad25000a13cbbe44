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

ir::ValueId IntConstant(ir::Graph& g, int64_t v) {
  Tensor t = Tensor::Zeros(DType::kInt64, {});
  *t.data<int64_t>() = v;
  return g.AddConstant(t, "", ir::ValueKind::kInt);
}

// xs = [a, b]; outputs: cat(xs), xs[-1] * len(xs), the unpacked first element + 1.
ir::Graph ListGraph(ir::ValueId* a, ir::ValueId* b) {
  ir::Graph g;
  *a = g.AddInput("a", {});
  *b = g.AddInput("b", {});
  ir::NodeId construct = g.AddNode(ir::OpKind::kListConstruct, {*a, *b});
  const ir::ValueId xs = g.node(construct).outputs[0];
  g.mutable_value(xs).kind = ir::ValueKind::kTensorList;
  ir::Attributes axis;
  axis.SetInt("axis", 0);
  ir::NodeId cat = g.AddNode(ir::OpKind::kConcat, {xs}, axis);
  ir::NodeId len = g.AddNode(ir::OpKind::kListLen, {xs});
  g.mutable_value(g.node(len).outputs[0]).kind = ir::ValueKind::kInt;
  ir::NodeId last = g.AddNode(ir::OpKind::kListGetItem, {xs, IntConstant(g, -1)});
  ir::NodeId scaled =
      g.AddNode(ir::OpKind::kMul, {g.node(last).outputs[0], g.node(len).outputs[0]});
  ir::NodeId unpack = g.AddNodeWithOutputs(ir::OpKind::kListUnpack, {xs}, 2, {}, "", {"u0", "u1"});
  ir::NodeId plus = g.AddNode(ir::OpKind::kAdd, {g.node(unpack).outputs[0], IntConstant(g, 1)});
  g.AddOutput(g.node(cat).outputs[0], "output0");
  g.AddOutput(g.node(scaled).outputs[0], "output1");
  g.AddOutput(g.node(plus).outputs[0], "output2");
  return g;
}

TEST(ResolveListsTest, KnownListsBecomeTheirElements) {
  ir::ValueId a, b;
  ir::Graph g = ListGraph(&a, &b);
  ASSERT_TRUE(ir::VerifyGraph(g).ok()) << ir::VerifyGraph(g);
  absl::StatusOr<bool> changed = MakeResolveListsPass()->Run(g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(ir::VerifyGraph(g).ok()) << ir::VerifyGraph(g) << "\n" << ir::PrintGraph(g);
  for (ir::OpKind list_op : {ir::OpKind::kListConstruct, ir::OpKind::kListLen,
                             ir::OpKind::kListGetItem, ir::OpKind::kListUnpack}) {
    EXPECT_EQ(CountOps(g, list_op), 0) << ir::OpName(list_op) << "\n" << ir::PrintGraph(g);
  }
  const ir::Node& cat = g.node(g.value(g.outputs()[0]).producer);
  EXPECT_EQ(cat.inputs, (std::vector<ir::ValueId>{g.inputs()[0], g.inputs()[1]}));
  const ir::Node& mul = g.node(g.value(g.outputs()[1]).producer);
  EXPECT_EQ(mul.inputs[0], g.inputs()[1]);  // xs[-1] is b
  const Tensor* len = g.ConstantValue(mul.inputs[1]);
  ASSERT_NE(len, nullptr);
  EXPECT_EQ(*len->data<int64_t>(), 2);
  const ir::Node& add = g.node(g.value(g.outputs()[2]).producer);
  EXPECT_EQ(add.inputs[0], g.inputs()[0]);  // the unpacked first element is a
}

TEST(ResolveListsTest, ListsThatLeaveOrFeedControlFlowAreLeftAlone) {
  // The list is a graph output: nothing is resolved.
  ir::Graph g;
  ir::ValueId a = g.AddInput("a", {});
  ir::NodeId construct = g.AddNode(ir::OpKind::kListConstruct, {a});
  const ir::ValueId xs = g.node(construct).outputs[0];
  g.mutable_value(xs).kind = ir::ValueKind::kTensorList;
  ir::NodeId len = g.AddNode(ir::OpKind::kListLen, {xs});
  g.mutable_value(g.node(len).outputs[0]).kind = ir::ValueKind::kInt;
  g.AddOutput(xs, "output0");
  g.AddOutput(g.node(len).outputs[0], "output1");
  absl::StatusOr<bool> changed = MakeResolveListsPass()->Run(g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(CountOps(g, ir::OpKind::kListLen), 1);
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
            (std::vector<std::string>{"resolve_lists", "eliminate_identity", "fuse_safe_softmax",
                                      "fuse_attention", "fuse_conv_epilogue",
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
