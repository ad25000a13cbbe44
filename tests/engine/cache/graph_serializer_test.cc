#include "engine/cache/graph_serializer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "kiln/v1/graph.pb.h"

namespace kiln::cache {
namespace {

using ::testing::HasSubstr;

Tensor Floats(Dims dims, float start) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

// Every attribute type, an absent optional input, a weight, typed values.
ir::Graph SampleGraph() {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{-1, 4}});
  ir::ValueId w = g.AddConstant(Floats({3, 4}, 0.5f), "weight");
  ir::NodeId linear =
      g.AddNode(ir::OpKind::kLinear, {x, w, ir::kNoValue}, {}, "aten::linear", {"hidden"});
  ir::Attributes attrs;
  attrs.SetBool("b", true);
  attrs.SetInt("i", -7);
  attrs.SetFloat("f", 0.25);
  attrs.SetString("s", "tanh");
  attrs.SetInts("ints", {1, -1, 3});
  attrs.SetInts("empty_ints", {});
  attrs.SetFloats("floats", {1.5, -2.5});
  attrs.SetTensor("t", Floats({2}, 9.0f));
  ir::NodeId gelu = g.AddNode(ir::OpKind::kGelu, {g.node(linear).outputs[0]}, attrs, "aten::gelu");
  g.mutable_value(g.node(gelu).outputs[0]).type = ir::TensorType{DType::kF32, Dims{2, 3}};
  // A layout the compiler assigned (a compiled plan's graph keeps it).
  g.mutable_value(g.node(linear).outputs[0]).type =
      ir::TensorType{DType::kF32, Dims{1, 3, 1, 1}, ir::Layout::kNHWC};
  g.AddOutput(g.node(gelu).outputs[0], "logits");
  return g;
}

TEST(GraphSerializerTest, RoundTripsEveryField) {
  const ir::Graph g = SampleGraph();
  auto bytes = SerializeGraph(g);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = ParseGraph(ToString(*bytes));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(ir::StructurallyEqual(g, *back));
  EXPECT_EQ(ir::PrintGraph(g), ir::PrintGraph(*back));
  // Weights are copied, not shared, without a source graph.
  EXPECT_NE(back->ConstantValue(1)->raw_data(), g.ConstantValue(1)->raw_data());
}

TEST(GraphSerializerTest, RoundTripsControlFlowAndValueKinds) {
  // if (flag) { y = relu(x) } else { y = x }; plus a scalar and an optional.
  ir::Graph g;
  ir::ValueId flag = g.AddInput("flag", ir::TensorType{DType::kBool, Dims{}}, ir::ValueKind::kBool);
  ir::ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{4}});
  g.mutable_value(x).optional = true;
  g.mutable_value(x).dim_ranges = {ir::DimRange{0, 1, 64, "s77"}};  // a .pt2's Dim("batch")
  Tensor yes = Tensor::Zeros(DType::kBool, {});
  *yes.data<bool>() = true;
  g.mutable_value(flag).default_value = yes;  // forward(self, flag: bool = True, ...)
  ir::NodeId cond = g.AddNodeWithOutputs(ir::OpKind::kIf, {flag}, 1, {}, "prim::If", {"y"});
  ir::BlockId then_block = g.AddBlock(cond);
  ir::BlockId else_block = g.AddBlock(cond);
  g.SetInsertionBlock(then_block);
  ir::NodeId relu = g.AddNode(ir::OpKind::kRelu, {x});
  g.SetBlockResults(then_block, {g.node(relu).outputs[0]});
  g.SetInsertionBlock(else_block);
  g.SetBlockResults(else_block, {x});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(g.node(cond).outputs[0], "y");
  ASSERT_TRUE(ir::VerifyGraph(g).ok()) << ir::VerifyGraph(g);

  auto bytes = SerializeGraph(g);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = ParseGraph(ToString(*bytes));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(ir::StructurallyEqual(g, *back));
  EXPECT_EQ(back->value(flag).kind, ir::ValueKind::kBool);
  EXPECT_TRUE(back->value(x).optional);
  ASSERT_TRUE(back->value(flag).default_value.has_value());
  EXPECT_TRUE(*back->value(flag).default_value->data<bool>());
  EXPECT_FALSE(back->value(x).default_value.has_value());
  ASSERT_EQ(back->value(x).dim_ranges.size(), 1u);
  EXPECT_EQ(back->value(x).dim_ranges[0], (ir::DimRange{0, 1, 64, "s77"}));
  EXPECT_TRUE(back->value(flag).dim_ranges.empty());
  // A graph that differs only in the default is not the same graph.
  ir::Graph other = *back;
  other.mutable_value(flag).default_value = Tensor::Zeros(DType::kBool, {});  // False
  EXPECT_FALSE(ir::StructurallyEqual(g, other));
  EXPECT_EQ(back->block(then_block).nodes, g.block(then_block).nodes);
}

TEST(GraphSerializerTest, LargeTensorsAreReadInPlaceFromAnAlignedBuffer) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId w = g.AddConstant(Floats({64, 64}, 1.0f), "w");  // 16 KiB: a blob
  ir::ValueId b = g.AddConstant(Floats({64}, 2.0f), "b");      // 256 bytes: inline
  g.AddOutput(g.node(g.AddNode(ir::OpKind::kLinear, {x, w, b})).outputs[0], "y");
  auto serialized = SerializeGraph(g);
  ASSERT_TRUE(serialized.ok()) << serialized.status();
  const std::string bytes = ToString(*serialized);
  EXPECT_EQ(bytes.size(), serialized->size());

  // Aligned, with an owner: the weight points into the buffer and keeps it alive.
  std::shared_ptr<char> buffer(static_cast<char*>(std::aligned_alloc(64, bytes.size() + 64)),
                               std::free);
  std::memcpy(buffer.get(), bytes.data(), bytes.size());
  auto in_place = ParseGraph(absl::string_view(buffer.get(), bytes.size()), buffer);
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  const char* data = static_cast<const char*>(in_place->ConstantValue(w)->raw_data());
  EXPECT_GE(data, buffer.get());
  EXPECT_LT(data, buffer.get() + bytes.size());
  EXPECT_GT(buffer.use_count(), 1);
  EXPECT_TRUE(ir::StructurallyEqual(g, *in_place));

  // Misaligned: copied, same values.
  std::memmove(buffer.get() + 1, buffer.get(), bytes.size());
  auto copied = ParseGraph(absl::string_view(buffer.get() + 1, bytes.size()), buffer);
  ASSERT_TRUE(copied.ok()) << copied.status();
  const char* copy = static_cast<const char*>(copied->ConstantValue(w)->raw_data());
  EXPECT_TRUE(copy < buffer.get() || copy >= buffer.get() + bytes.size() + 64);
  EXPECT_TRUE(ir::StructurallyEqual(g, *copied));

  // Truncated blobs are an error, not a read past the end.
  EXPECT_EQ(ParseGraph(bytes.substr(0, bytes.size() - 100)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GraphSerializerTest, PlanRefersToTheModelsWeightsInsteadOfCopyingThem) {
  const ir::Graph model = SampleGraph();
  const ir::Graph plan = model;  // a compiled graph shares the model's tensors
  v1::Graph proto;
  ASSERT_TRUE(GraphToProto(plan, &proto, &model).ok());
  const v1::TensorData& weight = proto.nodes(0).attrs(0).value().tensor();
  EXPECT_EQ(weight.storage_case(), v1::TensorData::kSourceNode);
  EXPECT_LT(proto.ByteSizeLong(), 1000u);
  auto back = GraphFromProto(proto, &model);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ConstantValue(1)->raw_data(), model.ConstantValue(1)->raw_data());
  // Without the model, the reference cannot be resolved.
  EXPECT_EQ(GraphFromProto(proto).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GraphSerializerTest, UnknownOpsAndDtypesAreUnimplementedNotWrong) {
  v1::Graph proto;
  ASSERT_TRUE(GraphToProto(SampleGraph(), &proto).ok());
  v1::Graph unknown_op = proto;
  unknown_op.mutable_nodes(1)->set_op("FancyFutureOp");
  auto a = GraphFromProto(unknown_op);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(a.status().message(), HasSubstr("FancyFutureOp"));

  v1::Graph unknown_dtype = proto;
  unknown_dtype.mutable_values(0)->mutable_type()->set_dtype("FP8");
  EXPECT_EQ(GraphFromProto(unknown_dtype).status().code(), absl::StatusCode::kUnimplemented);

  v1::Graph unknown_kind = proto;
  unknown_kind.mutable_values(0)->set_kind("complex");
  EXPECT_EQ(GraphFromProto(unknown_kind).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(GraphSerializerTest, MalformedInputIsAnErrorNeverACrash) {
  v1::Graph proto;
  ASSERT_TRUE(GraphToProto(SampleGraph(), &proto).ok());
  v1::Graph bad_input = proto;
  bad_input.mutable_nodes(1)->set_inputs(0, 999);
  EXPECT_FALSE(GraphFromProto(bad_input).ok());
  v1::Graph bad_size = proto;
  bad_size.mutable_nodes(0)->mutable_attrs(0)->mutable_value()->mutable_tensor()->set_data("xy");
  EXPECT_EQ(GraphFromProto(bad_size).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Graph bad_output = proto;
  bad_output.set_outputs(0, -3);
  EXPECT_FALSE(GraphFromProto(bad_output).ok());
  EXPECT_FALSE(ParseGraph("definitely not a protobuf \xff\xff\xff").ok());
}

TEST(GraphSerializerTest, NumberingThatCannotBeReplayedIsRefused) {
  // Node 0's output has id 1, node 1's id 0: not the order AddNode makes.
  v1::Graph proto;
  ASSERT_TRUE(GraphToProto(SampleGraph(), &proto).ok());
  v1::Graph swapped = proto;
  swapped.mutable_values(1)->set_producer(2);
  EXPECT_FALSE(GraphFromProto(swapped).ok());
}

// The torch worker receives a Fallback node alone: op, source op, every
// attribute type (a tensor inline), operand and result counts.
TEST(GraphSerializerTest, OneNodeRoundTripsAlone) {
  ir::Node node{ir::OpKind::kFallback, {4, ir::kNoValue, 7}, {9, 10}, {}, "aten::i0"};
  node.attrs.SetString("op", "aten::i0");
  node.attrs.SetString("args", "in;const");
  node.attrs.SetBool("b", true);
  node.attrs.SetInt("i", -3);
  node.attrs.SetFloat("f", 0.25);
  node.attrs.SetInts("ints", {1, 2});
  node.attrs.SetFloats("floats", {});
  node.attrs.SetTensor("t", Floats({2}, 1.5f));
  v1::Node proto;
  ASSERT_TRUE(NodeToProto(node, &proto).ok());
  absl::StatusOr<ir::Node> back = NodeFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, ir::OpKind::kFallback);
  EXPECT_EQ(back->source_op, "aten::i0");
  EXPECT_EQ(back->inputs.size(), 3u);
  EXPECT_EQ(back->outputs.size(), 2u);
  EXPECT_TRUE(back->attrs == node.attrs);
  proto.set_op("NoSuchOp");
  EXPECT_EQ(NodeFromProto(proto).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln::cache
