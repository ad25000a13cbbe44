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
