#include "engine/ir/graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::ir {
namespace {

using ::testing::HasSubstr;

Graph SmallGraph() {
  Graph g;
  ValueId x = g.AddInput("x", TensorType{DType::kF32, Dims{-1, 4}});
  Tensor w = Tensor::Zeros(DType::kF32, {3, 4});
  ValueId wv = g.AddConstant(w, "fc.weight");
  Attributes none;
  NodeId lin = g.AddNode(OpKind::kLinear, {x, wv, kNoValue}, none, "aten::linear", {"h"});
  Attributes clip;
  clip.SetFloat("min", 0.0);
  clip.SetFloat("max", 6.0);
  NodeId act = g.AddNode(OpKind::kClip, {g.node(lin).outputs[0]}, clip, "aten::hardtanh_");
  g.AddOutput(g.node(act).outputs[0], "output0");
  return g;
}

TEST(GraphTest, OpTableRoundTrips) {
  for (OpKind k : AllOpKinds()) {
    auto back = OpKindFromName(OpName(k));
    ASSERT_TRUE(back.has_value()) << OpName(k);
    EXPECT_EQ(*back, k);
  }
  EXPECT_FALSE(OpKindFromName("NoSuchOp").has_value());
}

TEST(GraphTest, PrinterShowsOpsAttributesTypesAndSources) {
  std::string text = PrintGraph(SmallGraph());
  EXPECT_THAT(text, HasSubstr("graph(%x : FP32[-1, 4])"));
  EXPECT_THAT(text, HasSubstr("%fc.weight : FP32[3, 4] = Constant() {value=tensor<FP32[3, 4]>}"));
  EXPECT_THAT(text, HasSubstr("%h : ?[?] = Linear(%x, %fc.weight, None)  # aten::linear"));
  EXPECT_THAT(text, HasSubstr("= Clip(%h) {max=6, min=0}  # aten::hardtanh_"));
  EXPECT_THAT(text, HasSubstr("return (output0=%"));
}

TEST(GraphTest, VerifierAcceptsWellFormedGraph) { EXPECT_TRUE(VerifyGraph(SmallGraph()).ok()); }

TEST(GraphTest, VerifierRejectsUseBeforeDefinition) {
  Graph g;
  ValueId x = g.AddInput("x", {});
  NodeId a = g.AddNode(OpKind::kRelu, {x});
  NodeId b = g.AddNode(OpKind::kRelu, {g.node(a).outputs[0]});
  g.mutable_node(a).inputs[0] = g.node(b).outputs[0];
  g.AddOutput(g.node(b).outputs[0], "out");
  absl::Status s = VerifyGraph(g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 0 (Relu)"));
}

TEST(GraphTest, VerifierRejectsWrongArity) {
  Graph g;
  ValueId x = g.AddInput("x", {});
  NodeId a = g.AddNode(OpKind::kAdd, {x});
  g.AddOutput(g.node(a).outputs[0], "out");
  absl::Status s = VerifyGraph(g);
  EXPECT_THAT(std::string(s.message()), HasSubstr("has 1 inputs, expected 2..2"));
}

TEST(GraphTest, CompactedDropsDeadNodesAndKeepsNames) {
  Graph g = SmallGraph();
  g.AddNode(OpKind::kRelu, {g.inputs()[0]});  // unused
  Graph c = g.Compacted();
  EXPECT_EQ(c.nodes().size(), 3u);
  EXPECT_TRUE(VerifyGraph(c).ok());
  EXPECT_TRUE(StructurallyEqual(c, SmallGraph()));
}

TEST(GraphTest, StructuralEqualityComparesAttributesAndConstants) {
  Graph a = SmallGraph();
  Graph b = SmallGraph();
  EXPECT_TRUE(StructurallyEqual(a, b));
  b.mutable_node(2).attrs.SetFloat("max", 5.0);
  EXPECT_FALSE(StructurallyEqual(a, b));
  Graph c = SmallGraph();
  Tensor other = Tensor::Zeros(DType::kF32, {3, 4});
  other.data<float>()[0] = 1.0f;
  c.mutable_node(0).attrs.SetTensor("value", other);
  EXPECT_FALSE(StructurallyEqual(a, c));
}

TEST(GraphTest, TensorTypeToString) {
  EXPECT_EQ((TensorType{DType::kInt64, Dims{2, -1}}).ToString(), "INT64[2, -1]");
  EXPECT_EQ((TensorType{DType::kF32, std::nullopt}).ToString(), "FP32[?]");
  EXPECT_FALSE((TensorType{DType::kF32, Dims{-1}}).IsComplete());
  EXPECT_TRUE((TensorType{DType::kF32, Dims{}}).IsComplete());
}

// y = If(x.sum-like cond) { then: relu(x) } { else: x }; n = Size(y, 0);
// Loop(n, true, y) body(i, acc) -> (true, acc * acc).
Graph ControlFlowGraph() {
  Graph g;
  ValueId x = g.AddInput("x", TensorType{DType::kF32, Dims{-1}});
  ValueId c = g.AddInput("c", TensorType{DType::kBool, Dims{}}, ValueKind::kBool);
  NodeId if_node = g.AddNodeWithOutputs(OpKind::kIf, {c}, 1, {}, "prim::If", {"y"});
  BlockId then_block = g.AddBlock(if_node);
  g.SetInsertionBlock(then_block);
  ValueId r = g.node(g.AddNode(OpKind::kRelu, {x}, {}, "aten::relu", {"r"})).outputs[0];
  g.SetBlockResults(then_block, {r});
  BlockId else_block = g.AddBlock(if_node);
  g.SetBlockResults(else_block, {x});
  g.SetInsertionBlock(kMainBlock);
  ValueId y = g.node(if_node).outputs[0];
  Attributes dim;
  dim.SetInt("dim", 0);
  NodeId size = g.AddNode(OpKind::kSize, {y}, dim, "aten::size", {"n"});
  ValueId n = g.node(size).outputs[0];
  g.mutable_value(n).kind = ValueKind::kInt;
  Tensor t = Tensor::Zeros(DType::kBool, {});
  *t.data<bool>() = true;
  ValueId yes = g.AddConstant(t, "true", ValueKind::kBool);
  NodeId loop = g.AddNodeWithOutputs(OpKind::kLoop, {n, yes, y}, 1, {}, "prim::Loop", {"z"});
  BlockId body = g.AddBlock(loop);
  ValueId i = g.AddBlockParam(body, "i", TensorType{DType::kInt64, Dims{}}, ValueKind::kInt);
  ValueId acc = g.AddBlockParam(body, "acc", TensorType{});
  g.SetInsertionBlock(body);
  ValueId sq = g.node(g.AddNode(OpKind::kMul, {acc, acc}, {}, "aten::mul", {"sq"})).outputs[0];
  g.SetBlockResults(body, {yes, sq});
  g.SetInsertionBlock(kMainBlock);
  (void)i;
  g.AddOutput(g.node(loop).outputs[0], "output0");
  return g;
}

TEST(GraphTest, PrinterIndentsBlocksAndShowsKinds) {
  EXPECT_EQ(PrintGraph(ControlFlowGraph()),
            "graph(%x : FP32[-1], %c : bool) {\n"
            "  %y : ?[?] = If(%c)  # prim::If\n"
            "    then():\n"
            "      %r : ?[?] = Relu(%x)  # aten::relu\n"
            "      -> (%r)\n"
            "    else():\n"
            "      -> (%x)\n"
            "  %n : int = Size(%y) {dim=0}  # aten::size\n"
            "  %true : bool = Constant() {value=true}\n"
            "  %z : ?[?] = Loop(%n, %true, %y)  # prim::Loop\n"
            "    body(%i : int, %acc : ?[?]):\n"
            "      %sq : ?[?] = Mul(%acc, %acc)  # aten::mul\n"
            "      -> (%true, %sq)\n"
            "  return (output0=%z)\n"
            "}\n");
}

TEST(GraphTest, ValueTypeStrings) {
  Value v;
  v.kind = ValueKind::kIntList;
  v.type = TensorType{DType::kInt64, Dims{5}};
  EXPECT_EQ(ValueTypeString(v), "int[5]");
  v.type.dims = Dims{-1};
  EXPECT_EQ(ValueTypeString(v), "int[]");
  v.kind = ValueKind::kTensorList;
  EXPECT_EQ(ValueTypeString(v), "Tensor[]");
  v.kind = ValueKind::kTensor;
  v.optional = true;
  v.type = TensorType{DType::kF32, Dims{2}};
  EXPECT_EQ(ValueTypeString(v), "FP32[2]?");
  EXPECT_EQ(ScalarKindDType(ValueKind::kFloat), DType::kF64);
  EXPECT_TRUE(IsScalarKind(ValueKind::kBool));
  EXPECT_FALSE(IsScalarKind(ValueKind::kIntList));
}

TEST(GraphTest, VerifierAcceptsBlocksAndChecksScopes) {
  Graph g = ControlFlowGraph();
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
  // A value defined inside the then-block used after the If.
  Graph leak = ControlFlowGraph();
  const ValueId r = leak.block(1).results[0];
  leak.mutable_node(leak.value(leak.outputs()[0]).producer).inputs[2] = r;
  absl::Status s = VerifyGraph(leak);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside its block"));
}

TEST(GraphTest, VerifierChecksIfAndLoopShapes) {
  Graph g = ControlFlowGraph();
  g.mutable_block(2).results.pop_back();  // the else block yields nothing
  EXPECT_THAT(std::string(VerifyGraph(g).message()), HasSubstr("one value per output"));
  Graph loop = ControlFlowGraph();
  loop.mutable_block(3).results = {loop.block(3).results[0]};
  EXPECT_THAT(std::string(VerifyGraph(loop).message()), HasSubstr("body takes"));
}

TEST(GraphTest, CompactedKeepsBlocksAndDropsDeadNodesInside) {
  Graph g = ControlFlowGraph();
  g.SetInsertionBlock(1);
  g.AddNode(OpKind::kSigmoid, {g.inputs()[0]});  // unused, inside the then-block
  g.SetInsertionBlock(kMainBlock);
  g.AddNode(OpKind::kTanh, {g.inputs()[0]});  // unused, in the main block
  Graph c = g.Compacted();
  EXPECT_TRUE(VerifyGraph(c).ok()) << VerifyGraph(c);
  EXPECT_TRUE(StructurallyEqual(c, ControlFlowGraph())) << PrintGraph(c);
  // A raise is an effect: the If that holds it stays although nothing uses it.
  Graph r;
  ValueId c2 = r.AddInput("c", TensorType{DType::kBool, Dims{}}, ValueKind::kBool);
  NodeId n = r.AddNodeWithOutputs(OpKind::kIf, {c2}, 0);
  BlockId t = r.AddBlock(n);
  r.AddBlock(n);
  r.SetInsertionBlock(t);
  Attributes msg;
  msg.SetString("message", "negative");
  r.AddNodeWithOutputs(OpKind::kRaise, {}, 0, msg);
  r.SetInsertionBlock(kMainBlock);
  r.AddOutput(c2, "out");
  EXPECT_EQ(r.Compacted().nodes().size(), 2u);
}

TEST(GraphTest, StructuralEqualityComparesKindsAndBlocks) {
  Graph a = ControlFlowGraph();
  Graph b = ControlFlowGraph();
  EXPECT_TRUE(StructurallyEqual(a, b));
  b.mutable_value(b.inputs()[1]).kind = ValueKind::kInt;
  EXPECT_FALSE(StructurallyEqual(a, b));
  Graph c = ControlFlowGraph();
  c.mutable_block(1).results[0] = c.inputs()[0];
  EXPECT_FALSE(StructurallyEqual(a, c));
}

TEST(GraphTest, ReplaceAllUsesRewritesBlockResults) {
  Graph g = ControlFlowGraph();
  const ValueId r = g.block(1).results[0];
  g.ReplaceAllUses(r, g.inputs()[0]);
  EXPECT_EQ(g.block(1).results[0], g.inputs()[0]);
}

TEST(GraphTest, GraphvizHasClustersForBlocks) {
  std::string dot = PrintGraphviz(ControlFlowGraph());
  EXPECT_THAT(dot, HasSubstr("digraph kiln {"));
  EXPECT_THAT(dot, HasSubstr("subgraph cluster_b1"));
  EXPECT_THAT(dot, HasSubstr("label=\"If then\""));
  EXPECT_THAT(dot, HasSubstr("label=\"Loop body\""));
  EXPECT_THAT(dot, HasSubstr("-> out0"));
}

TEST(DTypeTest, ProtocolNamesRoundTrip) {
  for (DType d : {DType::kBool, DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32,
                  DType::kInt64, DType::kF16, DType::kBF16, DType::kF32, DType::kF64}) {
    EXPECT_EQ(DTypeFromName(DTypeName(d)), d);
  }
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_FALSE(DTypeFromName("float").has_value());
}

}  // namespace
}  // namespace kiln::ir
