// The fuse_conv_epilogue pass with the Conv kernel's epilogue: a fused
// Conv -> BatchNorm -> Relu/Clip gives bit-identical results to the unfused
// ops (passes off), for every convolution algorithm and for FP32 and FP64,
// and fusion stops where an intermediate value is needed elsewhere.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "engine/passes/pass.h"
#include "engine/runtime/executable.h"

namespace kiln::runtime {
namespace {

using ir::OpKind;

int Count(const ir::Graph& g, OpKind kind) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.kind == kind;
  return n;
}

template <typename T>
Tensor Random(DType dtype, Dims dims, std::mt19937& rng, double lo, double hi) {
  Tensor t = Tensor::Zeros(dtype, std::move(dims));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<T>()[i] = static_cast<T>(u(rng));
  return t;
}

struct Spec {
  int64_t c = 4, o = 6, k = 3, groups = 1, stride = 1;
  bool bias = false;
  bool batch_norm = true;
  OpKind act = OpKind::kRelu;  // kRelu, kClip, or kIdentity for none
  bool expose_conv = false;    // the conv's output is also a graph output
};

template <typename T>
ir::Graph ConvGraph(DType dtype, const Spec& s, std::mt19937& rng) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", ir::TensorType{dtype, Dims{2, s.c, 9, 9}});
  std::vector<ir::ValueId> in = {
      x, g.AddConstant(Random<T>(dtype, {s.o, s.c / s.groups, s.k, s.k}, rng, -0.5, 0.5), "w")};
  if (s.bias) in.push_back(g.AddConstant(Random<T>(dtype, {s.o}, rng, -1, 1), "b"));
  ir::Attributes conv_attrs;
  conv_attrs.SetInts("stride", {s.stride, s.stride});
  conv_attrs.SetInts("padding", {s.k / 2, s.k / 2});
  conv_attrs.SetInts("dilation", {1, 1});
  conv_attrs.SetInt("groups", s.groups);
  ir::ValueId y = g.node(g.AddNode(OpKind::kConv, in, conv_attrs, "aten::_convolution")).outputs[0];
  if (s.expose_conv) g.AddOutput(y, "conv");
  if (s.batch_norm) {
    ir::Attributes bn_attrs;
    bn_attrs.SetFloat("eps", 1e-5);
    y = g.node(g.AddNode(OpKind::kBatchNorm,
                         {y, g.AddConstant(Random<T>(dtype, {s.o}, rng, 0.5, 2), "gamma"),
                          g.AddConstant(Random<T>(dtype, {s.o}, rng, -1, 1), "beta"),
                          g.AddConstant(Random<T>(dtype, {s.o}, rng, -0.5, 0.5), "mean"),
                          g.AddConstant(Random<T>(dtype, {s.o}, rng, 1e-3, 3), "var")},
                         bn_attrs, "aten::batch_norm"))
            .outputs[0];
  }
  if (s.act == OpKind::kRelu) {
    y = g.node(g.AddNode(OpKind::kRelu, {y}, {}, "aten::relu")).outputs[0];
  } else if (s.act == OpKind::kClip) {
    ir::Attributes clip;
    clip.SetFloat("min", 0.0);
    clip.SetFloat("max", 0.25);
    y = g.node(g.AddNode(OpKind::kClip, {y}, clip, "aten::hardtanh")).outputs[0];
  }
  g.AddOutput(y, "output0");
  return g;
}

template <typename T>
void ExpectFusedEqualsUnfused(DType dtype, const Spec& s, int expect_nodes) {
  std::mt19937 rng(7);
  const ir::Graph graph = ConvGraph<T>(dtype, s, rng);
  ir::Graph fused = graph;
  ASSERT_TRUE(passes::RunPipeline(fused).ok());
  EXPECT_EQ(static_cast<int>(fused.nodes().size()) - Count(fused, OpKind::kConstant), expect_nodes)
      << ir::PrintGraph(fused);

  Tensor x = Random<T>(dtype, {2, s.c, 9, 9}, rng, -2, 2);
  kernels::TensorInfo info{dtype, x.dims()};
  // Kiln's own conv kernel and its epilogue (layout_test.cc checks the
  // oneDNN provider against it).
  CompileOptions with, without;
  with.use_providers = without.use_providers = false;
  without.run_passes = false;
  auto a = Executable::Compile(graph, {info}, with);
  auto b = Executable::Compile(graph, {info}, without);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  auto ra = (*a)->Run({x});
  auto rb = (*b)->Run({x});
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_EQ(ra->size(), rb->size());
  for (size_t i = 0; i < ra->size(); ++i) {
    const Tensor& p = (*ra)[i];
    const Tensor& q = (*rb)[i];
    ASSERT_EQ(p.dims(), q.dims());
    EXPECT_EQ(std::memcmp(p.raw_data(), q.raw_data(), p.byte_size()), 0)
        << "output " << i << " differs between fused and unfused";
  }
}

TEST(ConvEpilogueTest, Im2colBatchNormReluIsOneNodeAndExact) {
  ExpectFusedEqualsUnfused<float>(DType::kF32, Spec{}, 1);
}

TEST(ConvEpilogueTest, BiasBatchNormAndClip) {
  Spec s;
  s.bias = true;
  s.act = OpKind::kClip;
  s.stride = 2;
  ExpectFusedEqualsUnfused<float>(DType::kF32, s, 1);
}

TEST(ConvEpilogueTest, PointwiseWithoutActivation) {
  Spec s;
  s.k = 1;
  s.act = OpKind::kIdentity;
  ExpectFusedEqualsUnfused<float>(DType::kF32, s, 1);
}

TEST(ConvEpilogueTest, DepthwiseBatchNormRelu) {
  Spec s;
  s.c = s.o = s.groups = 8;
  ExpectFusedEqualsUnfused<float>(DType::kF32, s, 1);
  s.stride = 2;
  ExpectFusedEqualsUnfused<float>(DType::kF32, s, 1);
  s.k = 5;  // the tap-by-tap depthwise path
  ExpectFusedEqualsUnfused<float>(DType::kF32, s, 1);
}

TEST(ConvEpilogueTest, GroupedConvReluWithoutBatchNorm) {
  Spec s;
  s.groups = 2;
  s.batch_norm = false;
  ExpectFusedEqualsUnfused<float>(DType::kF32, s, 1);
}

TEST(ConvEpilogueTest, Float64) {
  ExpectFusedEqualsUnfused<double>(DType::kF64, Spec{}, 1);
  Spec s;
  s.c = s.o = s.groups = 4;
  ExpectFusedEqualsUnfused<double>(DType::kF64, s, 1);
}

TEST(ConvEpilogueTest, KeepsOpsWhoseInputIsAlsoAnOutput) {
  Spec s;
  s.expose_conv = true;  // the conv's own output is needed: nothing fuses into it
  ExpectFusedEqualsUnfused<float>(DType::kF32, s, 3);
}

TEST(ConvEpilogueTest, FusedAttributesAreOnTheConv) {
  std::mt19937 rng(1);
  ir::Graph g = ConvGraph<float>(DType::kF32, Spec{}, rng);
  ASSERT_TRUE(passes::RunPipeline(g).ok());
  ASSERT_EQ(Count(g, OpKind::kConv), 1);
  EXPECT_EQ(Count(g, OpKind::kBatchNorm), 0);
  EXPECT_EQ(Count(g, OpKind::kRelu), 0);
  const ir::Node* conv_node = nullptr;
  for (const ir::Node& n : g.nodes()) {
    if (n.kind == OpKind::kConv) conv_node = &n;
  }
  const ir::Node& conv = *conv_node;
  ASSERT_NE(conv.attrs.GetTensor("post_scale"), nullptr);
  EXPECT_EQ(conv.attrs.GetTensor("post_scale")->num_elements(), 6);
  EXPECT_EQ(conv.attrs.GetFloat("post_min", -1), 0.0);
  EXPECT_EQ(conv.attrs.GetFloat("post_max", 0), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(ir::VerifyGraph(g).ok());
}

}  // namespace
}  // namespace kiln::runtime
