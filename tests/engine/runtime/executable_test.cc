#include "engine/runtime/executable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor Filled(Dims dims, std::vector<float> values) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

kernels::TensorInfo Info(DType dtype, Dims dims) { return kernels::TensorInfo{dtype, dims}; }

TEST(ExecutableTest, RunsChainWithViewsAndConstants) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::NodeId relu = g.AddNode(ir::OpKind::kRelu, {x});
  ir::Attributes shape;
  shape.SetInts("shape", {4});
  ir::NodeId flat = g.AddNode(ir::OpKind::kReshape, {g.node(relu).outputs[0]}, shape);
  ir::ValueId c = g.AddConstant(Filled({4}, {10, 20, 30, 40}));
  ir::NodeId add = g.AddNode(ir::OpKind::kAdd, {g.node(flat).outputs[0], c});
  g.AddOutput(g.node(add).outputs[0], "output0");

  auto exe = Executable::Compile(g, {Info(DType::kF32, {2, 2})}, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*exe)->output_infos()[0].dims, Dims{4});
  // Run twice: the pooled arena must give the same answer.
  for (int i = 0; i < 2; ++i) {
    auto out = (*exe)->Run({Filled({2, 2}, {-1, 2, -3, 4})});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(Values((*out)[0]), ElementsAre(10, 22, 30, 44));
  }
}

TEST(ExecutableTest, PlannerReusesBuffersOfDeadValues) {
  // x -> relu -> sigmoid -> relu -> tanh: at most two intermediates are alive at once.
  ir::Graph g;
  ir::ValueId v = g.AddInput("x", {});
  for (ir::OpKind k : {ir::OpKind::kRelu, ir::OpKind::kSigmoid, ir::OpKind::kRelu,
                       ir::OpKind::kTanh}) {
    v = g.node(g.AddNode(k, {v})).outputs[0];
  }
  g.AddOutput(v, "output0");
  const int64_t n = 1 << 16;
  auto exe = Executable::Compile(g, {Info(DType::kF32, {n})}, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_LE((*exe)->arena_bytes(), static_cast<size_t>(2 * n * 4 + 4096));
}

TEST(ExecutableTest, KernelErrorsNameTheNode) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId w = g.AddConstant(Tensor::Zeros(DType::kF32, {8, 3, 3, 3}));
  ir::Attributes a;
  a.SetInts("stride", {1, 1});
  a.SetInts("padding", {0, 0});
  a.SetInts("dilation", {1, 1});
  a.SetInt("groups", 1);
  ir::NodeId conv = g.AddNode(ir::OpKind::kConv, {x, w, ir::kNoValue}, a, "aten::_convolution");
  g.AddOutput(g.node(conv).outputs[0], "output0");
  auto exe = Executable::Compile(g, {Info(DType::kF32, {3, 224})}, {});
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(exe.status().message()), HasSubstr("aten::_convolution"));
}

TEST(ExecutableTest, RunRejectsSignatureMismatch) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  g.AddOutput(g.node(g.AddNode(ir::OpKind::kRelu, {x})).outputs[0], "output0");
  auto exe = Executable::Compile(g, {Info(DType::kF32, {2})}, {});
  ASSERT_TRUE(exe.ok());
  auto out = (*exe)->Run({Filled({3}, {1, 2, 3})});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::runtime
