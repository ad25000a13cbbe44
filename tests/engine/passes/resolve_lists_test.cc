#include <gtest/gtest.h>

#include "engine/ir/graph.h"
#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

int CountOps(const ir::Graph& g, ir::OpKind kind) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.kind == kind;
  return n;
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

}  // namespace
}  // namespace kiln::passes
