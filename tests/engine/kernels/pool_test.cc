// MaxPool, AvgPool, AdaptiveAvgPool: expected values from PyTorch 1.13
// (F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d), including ceil_mode's
// rule that the last window must start inside the input or the left padding.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Attrs;
using testing::F32;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using testing::SingleOpGraph;
using testing::Values;

Tensor Arange(Dims dims) {
  std::vector<float> v(NumElements(dims));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return F32(std::move(dims), v);
}

// (7 i) mod 11 on a 6x6 plane: the maxima are not simply the last element.
Tensor Scrambled6x6() {
  std::vector<float> v(36);
  for (int i = 0; i < 36; ++i) v[i] = static_cast<float>((i * 7) % 11);
  return F32({1, 1, 6, 6}, v);
}

struct Result {
  Dims dims;
  std::vector<float> values;
};

Result RunPool(ir::OpKind op, Tensor x, ir::Attributes attrs) {
  SingleOpGraph g(op, {std::move(x)}, std::move(attrs));
  auto out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto ref = g.RunReference();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) {
    EXPECT_EQ((*ref)[0].dims(), (*out)[0].dims());
    EXPECT_THAT(Values((*out)[0]), Pointwise(FloatNear(1e-5), Values((*ref)[0])));
  }
  return {(*out)[0].dims(), Values((*out)[0])};
}

auto Near(std::vector<float> v) { return Pointwise(FloatNear(1e-5), std::move(v)); }

Attrs Window(int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  return Attrs()
      .Ints("kernel", {k, k})
      .Ints("stride", {s, s})
      .Ints("padding", {p, p})
      .Bool("ceil_mode", ceil_mode);
}

TEST(PoolKernelTest, MaxPoolResNetStemWindow) {
  Result r = RunPool(ir::OpKind::kMaxPool, Scrambled6x6(), Window(3, 2, 1, false));
  EXPECT_EQ(r.dims, (Dims{1, 1, 3, 3}));
  EXPECT_THAT(r.values, Near({9, 10, 10, 9, 10, 9, 10, 10, 9}));
}

TEST(PoolKernelTest, MaxPoolCeilModeAddsPartialWindow) {
  Result r = RunPool(ir::OpKind::kMaxPool, Arange({1, 1, 5, 5}), Window(2, 2, 0, true));
  EXPECT_EQ(r.dims, (Dims{1, 1, 3, 3}));
  EXPECT_THAT(r.values, Near({6, 8, 9, 16, 18, 19, 21, 23, 24}));
}

TEST(PoolKernelTest, MaxPoolCeilModeWithPadding) {
  Result r = RunPool(ir::OpKind::kMaxPool, Arange({1, 1, 6, 6}), Window(3, 2, 1, true));
  EXPECT_EQ(r.dims, (Dims{1, 1, 4, 4}));
  EXPECT_THAT(r.values, Near({7, 9, 11, 11, 19, 21, 23, 23, 31, 33, 35, 35, 31, 33, 35, 35}));
}

TEST(PoolKernelTest, MaxPoolCeilModeDropsWindowStartingInRightPadding) {
  // 5 + 2*1 padding, k=2, s=2: ceil gives 4 windows, but the 4th would start at
  // 6 >= 5 + 1 (in the right padding), so PyTorch keeps 3.
  Result r = RunPool(ir::OpKind::kMaxPool, Arange({1, 1, 5, 5}), Window(2, 2, 1, true));
  EXPECT_EQ(r.dims, (Dims{1, 1, 3, 3}));
  EXPECT_THAT(r.values, Near({0, 2, 4, 10, 12, 14, 20, 22, 24}));
}

TEST(PoolKernelTest, MaxPoolDilation) {
  Attrs a = Window(3, 2, 1, true);
  a.Ints("dilation", {2, 2});
  Result r = RunPool(ir::OpKind::kMaxPool, Arange({1, 1, 7, 7}), a);
  EXPECT_EQ(r.dims, (Dims{1, 1, 3, 3}));
  EXPECT_THAT(r.values, Near({24, 26, 26, 38, 40, 40, 38, 40, 40}));
}

TEST(PoolKernelTest, AvgPoolCeilModeMatchesPyTorch) {
  // count_include_pad counts padding cells but not the cells beyond the
  // padding that ceil_mode's last window reaches.
  Attrs a = Window(3, 2, 1, true);
  a.Bool("count_include_pad", true);
  Result r = RunPool(ir::OpKind::kAvgPool, Scrambled6x6(), a);
  EXPECT_EQ(r.dims, (Dims{1, 1, 4, 4}));
  EXPECT_THAT(r.values, Near({2.3333333f, 3.7777777f, 3.3333333f, 0.33333334f, 3.3333333f,
                              5.1111112f, 4.4444447f, 2.6666667f, 3.1111112f, 4.7777777f,
                              4.1111112f, 2.5f, 1.5f, 2, 1.6666666f, 0.75f}));
}

TEST(PoolKernelTest, AvgPoolCeilModeExcludingPadding) {
  Attrs a = Window(3, 2, 1, true);
  a.Bool("count_include_pad", false);
  Result r = RunPool(ir::OpKind::kAvgPool, Scrambled6x6(), a);
  EXPECT_THAT(r.values, Near({5.25f, 5.6666665f, 5, 1, 5, 5.1111112f, 4.4444447f, 5.3333335f,
                              4.6666665f, 4.7777777f, 4.1111112f, 5, 4.5f, 4, 3.3333333f, 3}));
}

TEST(PoolKernelTest, AvgPoolCeilModeDropsWindowStartingInRightPadding) {
  Attrs a = Window(2, 2, 1, true);
  a.Bool("count_include_pad", true);
  Result r = RunPool(ir::OpKind::kAvgPool, Arange({1, 1, 5, 5}), a);
  EXPECT_EQ(r.dims, (Dims{1, 1, 3, 3}));
  EXPECT_THAT(r.values, Near({0, 0.75f, 1.75f, 3.75f, 9, 11, 8.75f, 19, 21}));
}

TEST(PoolKernelTest, AvgPoolDivisorOverride) {
  Attrs a = Window(3, 2, 1, true);
  a.Int("divisor_override", 2);
  Result r = RunPool(ir::OpKind::kAvgPool, Arange({1, 1, 5, 5}), a);
  EXPECT_THAT(r.values, Near({6, 13.5f, 12, 31.5f, 54, 40.5f, 36, 58.5f, 42}));
}

TEST(PoolKernelTest, AvgPoolEmptyStrideMeansKernel) {
  Result r = RunPool(ir::OpKind::kAvgPool, Arange({1, 1, 5, 5}), Attrs().Ints("kernel", {2, 2}));
  EXPECT_EQ(r.dims, (Dims{1, 1, 2, 2}));
  EXPECT_THAT(r.values, Near({3, 5, 13, 15}));
}

TEST(PoolKernelTest, AdaptiveAvgPoolUsesFloorCeilWindows) {
  Result r = RunPool(ir::OpKind::kAdaptiveAvgPool, Arange({1, 1, 5, 7}),
                     Attrs().Ints("output_size", {3, 4}));
  EXPECT_EQ(r.dims, (Dims{1, 1, 3, 4}));
  EXPECT_THAT(r.values, Near({4, 5.5f, 7.5f, 9, 14.5f, 16, 18, 19.5f, 25, 26.5f, 28.5f, 30}));
}

TEST(PoolKernelTest, AdaptiveAvgPoolUpsamples) {
  Result r = RunPool(ir::OpKind::kAdaptiveAvgPool, Arange({1, 1, 3, 4}),
                     Attrs().Ints("output_size", {5, 6}));
  EXPECT_THAT(r.values, Near({0, 0.5f, 1, 2, 2.5f, 3, 2, 2.5f, 3, 4, 4.5f, 5, 4,  4.5f,  5,
                              6, 6.5f, 7, 6, 6.5f, 7, 8, 8.5f, 9, 8, 8.5f, 9, 10, 10.5f, 11}));
}

TEST(PoolKernelTest, AdaptiveAvgPoolGlobal) {
  Result r = RunPool(ir::OpKind::kAdaptiveAvgPool, Arange({1, 2, 3, 3}),
                     Attrs().Ints("output_size", {1, 1}));
  EXPECT_EQ(r.dims, (Dims{1, 2, 1, 1}));
  EXPECT_THAT(r.values, Near({4, 13}));
}

TEST(PoolKernelTest, RejectsPaddingOverHalfKernel) {
  SingleOpGraph g(ir::OpKind::kMaxPool, {Arange({1, 1, 5, 5})}, Window(2, 2, 2, false));
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("at most half of kernel"));
}

TEST(PoolKernelTest, RejectsTooSmallInput) {
  SingleOpGraph g(ir::OpKind::kAvgPool, {Arange({1, 1, 2, 2})}, Window(3, 1, 0, false));
  EXPECT_EQ(g.Prepare().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PoolKernelTest, RejectsTwoDimInput) {
  SingleOpGraph g(ir::OpKind::kMaxPool, {Arange({3, 224})}, Window(2, 2, 0, false));
  absl::Status s = g.Prepare();
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected 4-D input, got [3, 224]"));
}

}  // namespace
}  // namespace kiln::kernels
