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

// Core ATen expands each operand of a batched matmul to the dims it already
// has: such an Expand is a view of its input (no arena buffer of its own, as
// an Identity), while one that broadcasts still copies; both give the right numbers.
TEST(ExecutableTest, ExpandToItsOwnDimsIsAView) {
  auto build = [](ir::OpKind kind, std::vector<int64_t> shape) {
    ir::Graph g;
    ir::ValueId x = g.AddInput("x", {});
    ir::ValueId r = g.node(g.AddNode(ir::OpKind::kRelu, {x})).outputs[0];
    ir::Attributes a;
    if (kind == ir::OpKind::kExpand) a.SetInts("shape", std::move(shape));
    ir::ValueId e = g.node(g.AddNode(kind, {r}, a)).outputs[0];
    g.AddOutput(g.node(g.AddNode(ir::OpKind::kMul, {e, e})).outputs[0], "output0");
    return g;
  };
  const int64_t n = 1 << 14;
  auto same = Executable::Compile(build(ir::OpKind::kExpand, {1, n}), {Info(DType::kF32, {1, n})}, {});
  auto identity = Executable::Compile(build(ir::OpKind::kIdentity, {}), {Info(DType::kF32, {1, n})}, {});
  auto broadcast = Executable::Compile(build(ir::OpKind::kExpand, {2, n}), {Info(DType::kF32, {1, n})}, {});
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_TRUE(identity.ok()) << identity.status();
  ASSERT_TRUE(broadcast.ok()) << broadcast.status();
  EXPECT_EQ((*same)->arena_bytes(), (*identity)->arena_bytes());
  EXPECT_GE((*broadcast)->arena_bytes(), (*identity)->arena_bytes() + 2 * n * 4);
  std::vector<float> in(n);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<float>(i % 7) - 3.0f;
  auto a = (*same)->Run({Filled({1, n}, in)});
  auto b = (*broadcast)->Run({Filled({1, n}, in)});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ((*b)[0].dims(), (Dims{2, n}));
  for (int64_t i = 0; i < n; ++i) {
    const float want = in[i] > 0 ? in[i] * in[i] : 0.0f;
    ASSERT_EQ((*a)[0].data<float>()[i], want);
    ASSERT_EQ((*b)[0].data<float>()[i], want);
    ASSERT_EQ((*b)[0].data<float>()[n + i], want);
  }
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
