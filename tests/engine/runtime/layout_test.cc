// The layout pass of Compile with the oneDNN provider, and the typed fusion of
// residual adds into convolutions: a network of convolutions, pools, a
// residual block and a squeeze-excite product runs in NHWC between its first
// convolution and the first op that needs a plain tensor, with one Reorder
// there, and gives the numbers of the unfused plain plan on Kiln's own kernels
// (CompileOptions::use_providers = false, run_passes = false).
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

class Builder {
 public:
  explicit Builder(ir::Graph& g) : g_(g), rng_(11) {}

  ValueId Conv(ValueId x, int64_t c, int64_t o, int64_t k, int64_t stride, int64_t groups,
               bool batch_norm_relu) {
    ir::Attributes a;
    a.SetInts("stride", {stride, stride});
    a.SetInts("padding", {k / 2, k / 2});
    a.SetInts("dilation", {1, 1});
    a.SetInt("groups", groups);
    ValueId w = g_.AddConstant(Random({o, c / groups, k, k}, rng_, -0.4, 0.4));
    ValueId b = g_.AddConstant(Random({o}, rng_, -0.5, 0.5));
    ValueId y = Out(g_.AddNode(OpKind::kConv, {x, w, b}, a, "aten::_convolution"));
    if (!batch_norm_relu) return y;
    ir::Attributes bn;
    bn.SetFloat("eps", 1e-5);
    y = Out(g_.AddNode(OpKind::kBatchNorm,
                       {y, g_.AddConstant(Random({o}, rng_, 0.5, 2)),
                        g_.AddConstant(Random({o}, rng_, -1, 1)),
                        g_.AddConstant(Random({o}, rng_, -0.5, 0.5)),
                        g_.AddConstant(Random({o}, rng_, 0.1, 3))},
                       bn, "aten::batch_norm"));
    return Out(g_.AddNode(OpKind::kRelu, {y}));
  }
  ValueId Op(OpKind kind, std::vector<ValueId> in, ir::Attributes a = {}) {
    return Out(g_.AddNode(kind, std::move(in), std::move(a)));
  }
  ValueId Out(ir::NodeId n) { return g_.node(n).outputs[0]; }

 private:
  ir::Graph& g_;
  std::mt19937 rng_;
};

// conv-bn-relu, maxpool, a residual block, a depthwise conv, squeeze-excite,
// global average pool, flatten: outputs the flattened features and a tensor
// taken in the middle of the NHWC chain.
ir::Graph Network() {
  ir::Graph g;
  Builder b(g);
  ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{2, 3, 20, 20}});
  ValueId y = b.Conv(x, 3, 16, 3, 2, 1, true);  // [2, 16, 10, 10]
  ir::Attributes pool;
  pool.SetInts("kernel", {3, 3});
  pool.SetInts("stride", {2, 2});
  pool.SetInts("padding", {1, 1});
  y = b.Op(OpKind::kMaxPool, {y}, pool);  // [2, 16, 5, 5]
  ValueId r = b.Conv(y, 16, 16, 3, 1, 1, true);
  r = b.Conv(r, 16, 16, 3, 1, 1, false);
  y = b.Op(OpKind::kRelu, {b.Op(OpKind::kAdd, {r, y})});
  ValueId middle = y;
  y = b.Conv(y, 16, 16, 3, 1, 16, true);  // depthwise
  ir::Attributes gap;
  gap.SetInts("output_size", {1, 1});
  ValueId s = b.Op(OpKind::kAdaptiveAvgPool, {y}, gap);
  s = b.Op(OpKind::kSigmoid, {b.Conv(s, 16, 16, 1, 1, 1, false)});
  y = b.Op(OpKind::kMul, {y, s});
  y = b.Op(OpKind::kAdaptiveAvgPool, {y}, gap);
  ir::Attributes flat;
  flat.SetInt("start_dim", 1);
  flat.SetInt("end_dim", -1);
  y = b.Op(OpKind::kFlatten, {y}, flat);
  g.AddOutput(y, "features");
  g.AddOutput(middle, "middle");
  return g;
}

int Count(const ir::Graph& g, OpKind kind) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.kind == kind;
  return n;
}

// Max |a - b| over max |b|.
double RelativeError(const Tensor& a, const Tensor& b) {
  double max_abs = 0, max_diff = 0;
  for (int64_t e = 0; e < b.num_elements(); ++e) {
    max_abs = std::max(max_abs, std::fabs(double(b.data<float>()[e])));
    max_diff = std::max(max_diff, std::fabs(double(a.data<float>()[e]) - b.data<float>()[e]));
  }
  return max_abs == 0 ? max_diff : max_diff / max_abs;
}

TEST(LayoutTest, ConvolutionChainRunsInNhwcAndMatchesThePlainPlan) {
  const ir::Graph g = Network();
  std::mt19937 rng(3);
  Tensor x = Random({2, 3, 20, 20}, rng, -2, 2);
  kernels::TensorInfo info{DType::kF32, x.dims()};
  // oneDNN in NHWC with every fusion; Kiln's kernels with every fusion; Kiln's
  // kernels, nothing fused (the reference).
  CompileOptions fast, native, reference;
  native.use_providers = reference.use_providers = false;
  reference.run_passes = false;
  auto a = Executable::Compile(g, {info}, fast);
  auto b = Executable::Compile(g, {info}, native);
  auto c = Executable::Compile(g, {info}, reference);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(c.ok()) << c.status();

  const ir::Graph compiled = (*a)->graph().Compacted();
  const std::string printed = ir::PrintGraph(compiled);
  EXPECT_NE(printed.find("{nhwc}"), std::string::npos) << printed;
  // One Reorder before Flatten, one for the middle output; none in the plain plan.
  EXPECT_EQ(Count(compiled, OpKind::kReorder), 2) << printed;
  EXPECT_EQ(Count((*b)->graph().Compacted(), OpKind::kReorder), 0);
  // The residual Add and the Relu after it went into the convolution, in both fused plans.
  EXPECT_EQ(Count(compiled, OpKind::kAdd), 0) << printed;
  EXPECT_EQ(Count((*b)->graph().Compacted(), OpKind::kAdd), 0);
  EXPECT_EQ(Count((*c)->graph().Compacted(), OpKind::kAdd), 1);

  auto ra = (*a)->Run({x});
  auto rb = (*b)->Run({x});
  auto rc = (*c)->Run({x});
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_TRUE(rc.ok()) << rc.status();
  ASSERT_EQ(ra->size(), 2u);
  for (size_t i = 0; i < ra->size(); ++i) {
    ASSERT_EQ((*ra)[i].dims(), (*rc)[i].dims());
    ASSERT_EQ((*rb)[i].dims(), (*rc)[i].dims());
    EXPECT_LE(RelativeError((*ra)[i], (*rc)[i]), 1e-5) << "output " << i;
    // Kiln's fused epilogue computes exactly what the unfused ops compute.
    EXPECT_EQ(std::memcmp((*rb)[i].raw_data(), (*rc)[i].raw_data(), (*rc)[i].byte_size()), 0)
        << "output " << i;
  }
  // Twice through the same plan: the arena and the prepacked weights are reused.
  auto again = (*a)->Run({x});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::memcmp((*again)[0].raw_data(), (*ra)[0].raw_data(), (*ra)[0].byte_size()), 0);
}

// The compiled graph, Reorders and layouts included, compiles again to the same plan (a
// plan read back from the compiled-graph cache skips the passes).
TEST(LayoutTest, CompiledGraphRecompilesWithoutNewReorders) {
  const ir::Graph g = Network();
  kernels::TensorInfo info{DType::kF32, Dims{2, 3, 20, 20}};
  auto a = Executable::Compile(g, {info}, CompileOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  CompileOptions again;
  again.run_passes = false;
  auto b = Executable::Compile((*a)->graph().Compacted(), {info}, again);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(ir::PrintGraph((*a)->graph().Compacted()), ir::PrintGraph((*b)->graph().Compacted()));
}

// A 1x1 stride-2 downsample of an even size leaves the last input row and
// column unread (PyTorch floors the size); oneDNN takes it with no right
// padding, and it stays in the NHWC chain.
TEST(LayoutTest, StridedOneByOneConvolutionRunsOnOneDnn) {
  ir::Graph g;
  Builder b(g);
  ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{2, 8, 10, 10}});
  ValueId y = b.Conv(x, 8, 8, 3, 1, 1, true);
  ir::Attributes a;
  a.SetInts("stride", {2, 2});
  a.SetInts("padding", {0, 0});
  a.SetInts("dilation", {1, 1});
  a.SetInt("groups", 1);
  std::mt19937 rng(7);
  y = b.Out(g.AddNode(OpKind::kConv, {y, g.AddConstant(Random({16, 8, 1, 1}, rng, -0.5, 0.5))}, a,
                      "aten::_convolution"));
  g.AddOutput(y, "y");
  Tensor in = Random({2, 8, 10, 10}, rng, -1, 1);
  kernels::TensorInfo info{DType::kF32, in.dims()};
  CompileOptions reference;
  reference.use_providers = false;
  reference.run_passes = false;
  auto fast = Executable::Compile(g, {info}, CompileOptions{});
  auto plain = Executable::Compile(g, {info}, reference);
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  const std::string printed = ir::PrintGraph((*fast)->graph().Compacted());
  EXPECT_NE(printed.find("FP32[2, 16, 5, 5]{nhwc}"), std::string::npos) << printed;
  auto ra = (*fast)->Run({in});
  auto rb = (*plain)->Run({in});
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ((*ra)[0].dims(), (Dims{2, 16, 5, 5}));
  EXPECT_LE(RelativeError((*ra)[0], (*rb)[0]), 1e-5);
}

// A residual block: conv-bn-relu, then a conv whose output adds the block's
// input. With `keep_input` the block's input is also a graph output, so the
// fused convolution may not write over it.
ir::Graph ResidualBlock(bool keep_input, int64_t c = 8) {
  ir::Graph g;
  Builder b(g);
  ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{2, c, 12, 12}});
  ValueId y = b.Conv(x, c, c, 3, 1, 1, true);
  ValueId r = b.Conv(b.Conv(y, c, c, 3, 1, 1, true), c, c, 3, 1, 1, false);
  g.AddOutput(b.Op(OpKind::kRelu, {b.Op(OpKind::kAdd, {r, y})}), "out");
  if (keep_input) g.AddOutput(y, "y");
  return g;
}

// The fused residual convolution accumulates into its output: where the
// residual's buffer has no later use the output takes it (one activation
// buffer fewer in the arena), and where it has one the residual is copied
// first and survives; both give the unfused plan's numbers.
TEST(LayoutTest, ResidualConvolutionWritesOverTheResidualOnlyAtItsLastUse) {
  std::mt19937 rng(5);
  Tensor in = Random({2, 8, 12, 12}, rng, -1, 1);
  kernels::TensorInfo info{DType::kF32, in.dims()};
  CompileOptions reference;
  reference.use_providers = false;
  reference.run_passes = false;
  size_t arena[2] = {0, 0};
  for (bool keep : {false, true}) {
    const ir::Graph g = ResidualBlock(keep);
    auto fast = Executable::Compile(g, {info}, CompileOptions{});
    auto plain = Executable::Compile(g, {info}, reference);
    ASSERT_TRUE(fast.ok()) << fast.status();
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(Count((*fast)->graph().Compacted(), OpKind::kAdd), 0);
    arena[keep] = (*fast)->arena_bytes();
    for (int run = 0; run < 2; ++run) {
      auto ra = (*fast)->Run({in});
      auto rb = (*plain)->Run({in});
      ASSERT_TRUE(ra.ok()) << ra.status();
      ASSERT_TRUE(rb.ok()) << rb.status();
      ASSERT_EQ(ra->size(), rb->size());
      for (size_t i = 0; i < ra->size(); ++i) {
        ASSERT_EQ((*ra)[i].dims(), (*rb)[i].dims());
        EXPECT_LE(RelativeError((*ra)[i], (*rb)[i]), 1e-5) << "keep " << keep << " output " << i;
      }
    }
  }
  // One [2, 8, 12, 12] float buffer (4.5 KiB) fewer where the output took the residual's.
  EXPECT_LE(arena[false] + 2 * 8 * 12 * 12 * sizeof(float), arena[true]);
}

// A 3x3 stride-1 convolution with channels in blocks of 16 runs Winograd's
// algorithm by default (another summation order: not bit-identical to the
// direct algorithm, which Precision::kFp32Direct keeps), the residual and the
// epilogue included, and both stay within float rounding of the unfused plan.
TEST(LayoutTest, WinogradConvolutionsMatchTheDirectAlgorithm) {
  std::mt19937 rng(9);
  Tensor in = Random({2, 32, 12, 12}, rng, -1, 1);
  kernels::TensorInfo info{DType::kF32, in.dims()};
  const ir::Graph g = ResidualBlock(false, 32);
  CompileOptions direct, reference;
  direct.precision = Precision::kFp32Direct;
  reference.use_providers = false;
  reference.run_passes = false;
  auto wino = Executable::Compile(g, {info}, CompileOptions{});
  auto plain = Executable::Compile(g, {info}, direct);
  auto ref = Executable::Compile(g, {info}, reference);
  ASSERT_TRUE(wino.ok() && plain.ok() && ref.ok());
  auto rw = (*wino)->Run({in});
  auto rd = (*plain)->Run({in});
  auto rr = (*ref)->Run({in});
  ASSERT_TRUE(rw.ok() && rd.ok() && rr.ok());
  EXPECT_LE(RelativeError((*rw)[0], (*rr)[0]), 1e-5);
  EXPECT_LE(RelativeError((*rd)[0], (*rr)[0]), 1e-5);
  EXPECT_NE(std::memcmp((*rw)[0].raw_data(), (*rd)[0].raw_data(), (*rd)[0].byte_size()), 0)
      << "expected Winograd's summation order by default";
}

// Below 8x8 output pixels (ResNet's last stage, 7x7) the direct algorithm runs
// by default: there Winograd's transformed weights (4x the plain ones) cost
// more memory than its tiles save time.
TEST(LayoutTest, SmallImagesKeepTheDirectAlgorithm) {
  std::mt19937 rng(9);
  Tensor in = Random({2, 32, 7, 7}, rng, -1, 1);
  kernels::TensorInfo info{DType::kF32, in.dims()};
  const ir::Graph g = ResidualBlock(false, 32);
  CompileOptions direct;
  direct.precision = Precision::kFp32Direct;
  auto dflt = Executable::Compile(g, {info}, CompileOptions{});
  auto plain = Executable::Compile(g, {info}, direct);
  ASSERT_TRUE(dflt.ok() && plain.ok());
  auto ra = (*dflt)->Run({in});
  auto rd = (*plain)->Run({in});
  ASSERT_TRUE(ra.ok() && rd.ok());
  EXPECT_EQ((*dflt)->arena_bytes(), (*plain)->arena_bytes());
  EXPECT_EQ(std::memcmp((*ra)[0].raw_data(), (*rd)[0].raw_data(), (*rd)[0].byte_size()), 0);
}

}  // namespace
}  // namespace kiln::runtime
