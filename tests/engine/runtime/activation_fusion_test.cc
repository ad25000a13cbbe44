// The fuse_conv_epilogue pass's activations: Linear -> Gelu/Relu/Silu/Tanh and
// Conv [-> BatchNorm] -> Silu/HardSwish/Sigmoid become the producer's
// epilogue (post_min/post_max, post_act). Kiln's own kernels then compute
// exactly what the unfused ops compute (same bytes); the oneDNN provider
// (matmul and convolution post-ops) stays within float rounding of them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/runtime/executable.h"
#include "tests/engine/runtime/graph_test_util.h"

namespace kiln::runtime {
namespace {

using ir::OpKind;
using ir::ValueId;
using testing::Random;
using testing::Out;

ValueId Linear(ir::Graph& g, std::mt19937& rng, ValueId x, int64_t k, int64_t n, bool bias) {
  std::vector<ValueId> in = {x, g.AddConstant(Random({n, k}, rng, -0.5, 0.5))};
  if (bias) in.push_back(g.AddConstant(Random({n}, rng, -0.5, 0.5)));
  return Out(g, g.AddNode(OpKind::kLinear, in, {}, "aten::linear"));
}

ValueId Act(ir::Graph& g, OpKind kind, ValueId x, const char* approximate = nullptr) {
  ir::Attributes a;
  if (approximate != nullptr) a.SetString("approximate", approximate);
  return Out(g, g.AddNode(kind, {x}, a));
}

// An MLP over [2, 5, 16] with each fusable activation after a Linear, and a
// convolution stack with Silu, BatchNorm + HardSwish and Sigmoid.
ir::Graph Network() {
  ir::Graph g;
  std::mt19937 rng(5);
  ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{2, 5, 16}});
  ValueId y = Act(g, OpKind::kGelu, Linear(g, rng, x, 16, 32, true));
  y = Act(g, OpKind::kGelu, Linear(g, rng, y, 32, 24, false), "tanh");
  y = Act(g, OpKind::kRelu, Linear(g, rng, y, 24, 24, true));
  y = Act(g, OpKind::kSilu, Linear(g, rng, y, 24, 20, true));
  y = Act(g, OpKind::kTanh, Linear(g, rng, y, 20, 8, true));
  g.AddOutput(y, "mlp");

  ValueId img = g.AddInput("img", ir::TensorType{DType::kF32, Dims{2, 3, 12, 12}});
  auto conv = [&](ValueId v, int64_t c, int64_t o) {
    ir::Attributes a;
    a.SetInts("stride", {1, 1});
    a.SetInts("padding", {1, 1});
    a.SetInts("dilation", {1, 1});
    a.SetInt("groups", 1);
    return Out(g, g.AddNode(OpKind::kConv,
                            {v, g.AddConstant(Random({o, c, 3, 3}, rng, -0.4, 0.4)),
                             g.AddConstant(Random({o}, rng, -0.5, 0.5))},
                            a, "aten::_convolution"));
  };
  ValueId z = Act(g, OpKind::kSilu, conv(img, 3, 8));
  ir::Attributes bn;
  bn.SetFloat("eps", 1e-5);
  z = Out(g, g.AddNode(OpKind::kBatchNorm,
                       {conv(z, 8, 8), g.AddConstant(Random({8}, rng, 0.5, 2)),
                        g.AddConstant(Random({8}, rng, -1, 1)),
                        g.AddConstant(Random({8}, rng, -0.5, 0.5)),
                        g.AddConstant(Random({8}, rng, 0.1, 3))},
                       bn, "aten::batch_norm"));
  z = Act(g, OpKind::kHardSwish, z);
  z = Act(g, OpKind::kSigmoid, conv(z, 8, 4));
  g.AddOutput(z, "conv");
  return g;
}

int Count(const ir::Graph& g, OpKind kind) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.kind == kind;
  return n;
}

double MaxDiff(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (int64_t e = 0; e < b.num_elements(); ++e) {
    d = std::max(d, std::fabs(double(a.data<float>()[e]) - b.data<float>()[e]));
  }
  return d;
}

TEST(ActivationFusionTest, FusedEpiloguesMatchTheUnfusedOps) {
  const ir::Graph g = Network();
  std::mt19937 rng(9);
  Tensor x = Random({2, 5, 16}, rng, -2, 2);
  Tensor img = Random({2, 3, 12, 12}, rng, -2, 2);
  std::vector<kernels::TensorInfo> infos = {{DType::kF32, x.dims()}, {DType::kF32, img.dims()}};
  absl::StatusOr<testing::ThreeWays> w = testing::CompileThreeWays(g, infos);
  ASSERT_TRUE(w.ok()) << w.status();

  for (const Executable* exe : {w->onednn.get(), w->native.get()}) {
    const ir::Graph compiled = exe->graph().Compacted();
    const std::string printed = ir::PrintGraph(compiled);
    for (OpKind k : {OpKind::kGelu, OpKind::kRelu, OpKind::kSilu, OpKind::kTanh,
                     OpKind::kHardSwish, OpKind::kSigmoid, OpKind::kBatchNorm}) {
      EXPECT_EQ(Count(compiled, k), 0) << ir::OpName(k) << " not fused:\n" << printed;
    }
    EXPECT_NE(printed.find("post_act"), std::string::npos) << printed;
  }
  EXPECT_EQ(Count(w->reference->graph().Compacted(), OpKind::kGelu), 2);

  auto ra = w->onednn->Run({x, img});
  auto rb = w->native->Run({x, img});
  auto rc = w->reference->Run({x, img});
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_TRUE(rc.ok()) << rc.status();
  for (size_t i = 0; i < rc->size(); ++i) {
    ASSERT_EQ((*ra)[i].dims(), (*rc)[i].dims());
    ASSERT_EQ((*rb)[i].dims(), (*rc)[i].dims());
    // Kiln's fused epilogue computes exactly what the unfused ops compute.
    EXPECT_EQ(std::memcmp((*rb)[i].raw_data(), (*rc)[i].raw_data(), (*rc)[i].byte_size()), 0)
        << "output " << i;
    // oneDNN: another GEMM order and its own erf/exp, within float rounding.
    EXPECT_LE(MaxDiff((*ra)[i], (*rc)[i]), 2e-5) << "output " << i;
  }
}

ValueId Reshape(ir::Graph& g, ValueId x, std::vector<int64_t> shape) {
  ir::Attributes a;
  a.SetInts("shape", std::move(shape));
  return Out(g, g.AddNode(OpKind::kReshape, {x}, a, "aten::view"));
}

// Core ATen's linear: addmm on the rows, viewed back before the activation
// (vit_b_16's MLP: Linear -> view -> gelu -> view -> Linear). The view does
// not stop the fusion; the activation applies in the epilogue and the view
// takes its uses. A view read twice keeps its activation.
TEST(ActivationFusionTest, ActivationAfterAViewOfTheLinearIsFused) {
  ir::Graph g;
  std::mt19937 rng(4);
  ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{2, 5, 16}});
  ValueId y = Linear(g, rng, Reshape(g, x, {10, 16}), 16, 32, true);
  y = Act(g, OpKind::kGelu, Reshape(g, y, {2, 5, 32}));
  y = Linear(g, rng, Reshape(g, y, {10, 32}), 32, 8, true);
  const ValueId viewed = Reshape(g, y, {2, 5, 8});
  g.AddOutput(Act(g, OpKind::kRelu, viewed), "relu");
  ValueId z = Reshape(g, Linear(g, rng, Reshape(g, x, {10, 16}), 16, 4, false), {2, 5, 4});
  g.AddOutput(Act(g, OpKind::kTanh, z), "tanh");
  g.AddOutput(z, "shared");  // the view read twice: not fused

  std::mt19937 in_rng(2);
  Tensor input = Random({2, 5, 16}, in_rng, -2, 2);
  std::vector<kernels::TensorInfo> infos = {{DType::kF32, input.dims()}};
  absl::StatusOr<testing::ThreeWays> w = testing::CompileThreeWays(g, infos);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const Executable* exe : {w->onednn.get(), w->native.get()}) {
    const ir::Graph compiled = exe->graph().Compacted();
    const std::string printed = ir::PrintGraph(compiled);
    EXPECT_EQ(Count(compiled, OpKind::kGelu), 0) << printed;
    EXPECT_EQ(Count(compiled, OpKind::kRelu), 0) << printed;
    EXPECT_EQ(Count(compiled, OpKind::kTanh), 1) << printed;
  }
  auto ra = w->onednn->Run({input});
  auto rb = w->native->Run({input});
  auto rc = w->reference->Run({input});
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_TRUE(rc.ok()) << rc.status();
  for (size_t i = 0; i < rc->size(); ++i) {
    ASSERT_EQ((*rb)[i].dims(), (*rc)[i].dims());
    EXPECT_EQ(std::memcmp((*rb)[i].raw_data(), (*rc)[i].raw_data(), (*rc)[i].byte_size()), 0)
        << "output " << i;
    EXPECT_LE(MaxDiff((*ra)[i], (*rc)[i]), 2e-5) << "output " << i;
  }
}

// A Linear whose output is used twice keeps its activation as a node of its own.
TEST(ActivationFusionTest, SharedOutputIsNotFused) {
  ir::Graph g;
  std::mt19937 rng(1);
  ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{3, 8}});
  ValueId y = Linear(g, rng, x, 8, 8, true);
  g.AddOutput(Act(g, OpKind::kGelu, y), "gelu");
  g.AddOutput(y, "linear");
  auto exe = Executable::Compile(g, {{DType::kF32, Dims{3, 8}}}, CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(Count((*exe)->graph().Compacted(), OpKind::kGelu), 1);
}

}  // namespace
}  // namespace kiln::runtime
