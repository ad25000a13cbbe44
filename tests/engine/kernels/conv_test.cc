// Conv: each algorithm (im2col, pointwise, depthwise, generic groups) on small
// integer-valued inputs, expected values from PyTorch 1.13's F.conv2d.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Absent;
using testing::Attrs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::F32;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using testing::SingleOpGraph;
using testing::Values;

// (i % mod) - offset for i = 0, 1, ...: the same small integers as the
// PyTorch snippet that produced the expected values.
Tensor Pattern(Dims dims, int mod, int offset) {
  std::vector<float> v(NumElements(dims));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<int>(i) % mod - offset);
  return F32(std::move(dims), v);
}

Tensor Input() { return Pattern({1, 2, 4, 4}, 7, 3); }
Tensor Weight() { return Pattern({3, 2, 3, 3}, 5, 2); }
Tensor Bias() { return F32({3}, {0.5f, -1, 2}); }

struct Result {
  Dims dims;
  std::vector<float> values;
};

// Runs the conv with weights as constants (as in a real model) on 1 and 2
// threads and checks the reference agrees.
Result RunConv(std::vector<Tensor> inputs, ir::Attributes attrs) {
  SingleOpGraph g(ir::OpKind::kConv, std::move(inputs), std::move(attrs), {1, 2});
  auto out = g.Run(1);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto two = g.Run(2);
  EXPECT_TRUE(two.ok());
  if (two.ok()) {
    EXPECT_THAT(Values((*two)[0]), Pointwise(FloatNear(1e-5), Values((*out)[0])));
  }
  auto ref = g.RunReference();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) {
    EXPECT_EQ((*ref)[0].dims(), (*out)[0].dims());
    EXPECT_THAT(Values((*out)[0]), Pointwise(FloatNear(1e-5), Values((*ref)[0])));
  }
  return {(*out)[0].dims(), Values((*out)[0])};
}

auto Near(std::vector<float> v) { return Pointwise(FloatNear(1e-5), std::move(v)); }

TEST(ConvKernelTest, Im2colPadOneMatchesPyTorch) {
  Result r = RunConv({Input(), Weight(), Bias()}, Attrs()
                                                      .Ints("stride", {1, 1})
                                                      .Ints("padding", {1, 1})
                                                      .Ints("dilation", {1, 1})
                                                      .Int("groups", 1));
  EXPECT_EQ(r.dims, (Dims{1, 3, 4, 4}));
  EXPECT_THAT(r.values,
              Near({-3.5, -3.5, 4.5,  3.5,  -0.5, -1.5, 9.5, -10.5, 2.5, 14.5, -2.5, 5.5,
                    -7.5, 11.5, -2.5, -9.5, 6,    -1,   -4,  4,     -2,  -9,   -1,   8,
                    -16,  -12,  17,   -15,  5,    3,    4,   9,     10,  1,    -3,   4,
                    6,    3,    3,    6,    10,   -4,   -4,  9,     -8,  -1,   10,   -8}));
}

TEST(ConvKernelTest, Im2colStrideTwoMatchesPyTorch) {
  Result r =
      RunConv({Input(), Weight(), Bias()}, Attrs().Ints("stride", {2, 2}).Ints("padding", {1, 1}));
  EXPECT_EQ(r.dims, (Dims{1, 3, 2, 2}));
  EXPECT_THAT(r.values, Near({-3.5, 4.5, 2.5, -2.5, 6, -4, -16, 17, 10, -3, 10, -4}));
}

TEST(ConvKernelTest, PointwiseIsAPlainGemm) {
  const Tensor w = F32({3, 2, 1, 1}, {1, 2, -1, 0.5f, 0, 3});
  Result r = RunConv({Input(), w, Bias()}, Attrs());
  EXPECT_EQ(r.dims, (Dims{1, 3, 4, 4}));
  EXPECT_THAT(r.values, Near({-4.5, -1.5, 1.5,  4.5,  7.5,  -3.5, -0.5, -4.5, -1.5, 1.5,  4.5, 7.5,
                              -3.5, -0.5, -4.5, -1.5, 1.5,  1,    0.5,  0,    -0.5, -4.5, -5,  1.5,
                              1,    0.5,  0,    -0.5, -4.5, -5,   1.5,  1,    -1,   2,    5,   8,
                              11,   -7,   -4,   -1,   2,    5,    8,    11,   -7,   -4,   -1,  2}));
}

Tensor DepthwiseWeight() { return Pattern({2, 1, 3, 3}, 4, 1); }

TEST(ConvKernelTest, DepthwiseStrideTwoWithBias) {
  Result r = RunConv({Input(), DepthwiseWeight(), F32({2}, {1, -1})},
                     Attrs().Ints("stride", {2, 2}).Ints("padding", {1, 1}).Int("groups", 2));
  EXPECT_EQ(r.dims, (Dims{1, 2, 2, 2}));
  EXPECT_THAT(r.values, Near({4, 9, 6, -7, -4, -3, 0, -6}));
}

TEST(ConvKernelTest, DepthwiseStrideOneWithoutBias) {
  Result r = RunConv({Input(), DepthwiseWeight(), Absent()},
                     Attrs().Ints("stride", {1, 1}).Ints("padding", {1, 1}).Int("groups", 2));
  EXPECT_EQ(r.dims, (Dims{1, 2, 4, 4}));
  EXPECT_THAT(r.values, Near({3,  -2, 8,  -5, -6, -2, 1, 12, 5, 10, -8, -11, -3, 3, 11, -4,
                              -3, 11, -2, -4, -4, -4, 7, 5,  1, -9, -5, -5,  0,  7, 10, 4}));
}

TEST(ConvKernelTest, GroupedDilatedConv) {
  // groups=2 with 2 output channels per group: the generic grouped path.
  Result r = RunConv({Input(), Pattern({4, 1, 2, 2}, 3, 1), Absent()},
                     Attrs().Ints("padding", {1, 1}).Ints("dilation", {2, 2}).Int("groups", 2));
  EXPECT_EQ(r.dims, (Dims{1, 4, 4, 4}));
  EXPECT_THAT(r.values, Near({-2, -2, 5,  3,  1,  1,  0,  1, -3, 4,  3,  -6, 0,  2,  1,  0,
                              0,  -1, -2, -3, -2, 1,  1,  0, 2,  1,  -6, 3,  -1, 0,  1,  0,
                              -3, -2, -1, 0,  1,  0,  1,  1, 1,  4,  -2, -2, -1, -2, -2, 2,
                              3,  5,  -2, -2, -1, -1, -2, 1, 2,  -5, 1,  1,  0,  0,  -1, -2}));
}

TEST(ConvKernelTest, UnbatchedInputGivesUnbatchedOutput) {
  Result batched = RunConv({Input(), Weight(), Bias()}, Attrs().Ints("padding", {1, 1}));
  Result unbatched =
      RunConv({Input().Reshaped({2, 4, 4}), Weight(), Bias()}, Attrs().Ints("padding", {1, 1}));
  EXPECT_EQ(unbatched.dims, (Dims{3, 4, 4}));
  EXPECT_EQ(unbatched.values, batched.values);
}

TEST(ConvKernelTest, WorkspaceIsIm2colBufferOrZeroRow) {
  // im2col: [C/g * kH * kW, OH * OW] floats.
  SingleOpGraph im2col(ir::OpKind::kConv, {Input(), Weight(), Bias()},
                       Attrs().Ints("padding", {1, 1}));
  EXPECT_EQ(*im2col.WorkspaceBytes(), 2 * 9 * 16 * sizeof(float));
  // Pointwise reads the input in place.
  SingleOpGraph pointwise(ir::OpKind::kConv, {Input(), Pattern({3, 2, 1, 1}, 3, 1), Bias()},
                          Attrs());
  EXPECT_EQ(*pointwise.WorkspaceBytes(), 0u);
  // Depthwise 3x3: one zero input row (W floats) stands in for padding rows.
  SingleOpGraph dw3x3(ir::OpKind::kConv, {Input(), DepthwiseWeight(), Absent()},
                      Attrs().Ints("padding", {1, 1}).Int("groups", 2));
  EXPECT_EQ(*dw3x3.WorkspaceBytes(), 4 * sizeof(float));
  // Other depthwise windows need nothing.
  SingleOpGraph dw2x2(ir::OpKind::kConv, {Input(), Pattern({2, 1, 2, 2}, 3, 1), Absent()},
                      Attrs().Int("groups", 2));
  EXPECT_EQ(*dw2x2.WorkspaceBytes(), 0u);
}

// ---- float64 accumulation (the accumulate = "float64" attribute)

TEST(ConvKernelTest, Float64AccumulationLosesNothingToFloat32Sums) {
  // 1e8 + 1 is 1e8 in float32: a float32 sum of these channels loses the ones.
  const Tensor x = F32({1, 3, 1, 2}, {1e8f, 3e7f, 1, 1, -1e8f, -3e7f});
  const Tensor w = F32({2, 3, 1, 1}, {1, 1, 1, 1, 2, 1});
  ir::Attributes attrs = Attrs().Str("accumulate", "float64");
  SingleOpGraph g(ir::OpKind::kConv, {x, w, F32({2}, {0.5f, 0.25f})}, attrs, {1, 2});
  auto out = g.Run(1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(1.5f, 1.5f, 2.25f, 2.25f));
}

TEST(ConvKernelTest, Float64AccumulationIsTheFloat64ConvolutionRounded) {
  std::mt19937 rng(7);
  const Tensor x = testing::RandomF32({2, 16, 9, 9}, rng, -1e3f, 1e3f);
  const Tensor w3 = testing::RandomF32({8, 8, 3, 3}, rng);
  const Tensor w1 = testing::RandomF32({6, 16, 1, 1}, rng);
  const Tensor bias = testing::RandomF32({8}, rng);
  // An FP32 convolution accumulating in float64 is the FP64 convolution of the
  // same values, rounded once: the same im2col and the same (double) GEMM.
  // im2col, grouped and strided, with a bias: weights and bias constant
  // (prepacked in double) and graph inputs (converted at each run).
  const ir::Attributes im2col =
      Attrs().Int("groups", 2).Ints("stride", {2, 2}).Ints("padding", {1, 1});
  EXPECT_EQ(testing::CheckFloat64Accumulation(ir::OpKind::kConv, {x, w3, bias}, im2col, {1, 2}),
            absl::OkStatus());
  EXPECT_EQ(testing::CheckFloat64Accumulation(ir::OpKind::kConv, {x, w3, bias}, im2col, {}),
            absl::OkStatus());
  // Pointwise, no bias.
  EXPECT_EQ(testing::CheckFloat64Accumulation(ir::OpKind::kConv, {x, w1, Absent()}, Attrs(), {1}),
            absl::OkStatus());
  // A fused epilogue runs in float on the rounded result, as unfused.
  ir::Attributes fused = Attrs().Float("post_min", 0).Float("post_max", 6);
  EXPECT_EQ(testing::CheckFloat64Accumulation(ir::OpKind::kConv, {x, w1, Absent()}, fused, {1}),
            absl::OkStatus());
  // ConvTranspose runs its FP64 kernel (widen.cc).
  const Tensor wt = testing::RandomF32({16, 4, 3, 3}, rng);
  EXPECT_EQ(testing::CheckFloat64Accumulation(
                ir::OpKind::kConvTranspose, {x, wt, Absent()},
                Attrs().Int("groups", 2).Ints("stride", {2, 2}).Ints("padding", {1, 1}), {1}),
            absl::OkStatus());
}

TEST(ConvKernelTest, Float64AccumulationRejectsAnUnknownSetting) {
  SingleOpGraph g(ir::OpKind::kConv, {Input(), Weight(), Bias()},
                  Attrs().Str("accumulate", "float16"), {1, 2});
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown accumulate 'float16'"));
}

TEST(ConvKernelTest, RejectsTwoDimInput) {
  SingleOpGraph g(ir::OpKind::kConv, {Tensor::Zeros(DType::kF32, {3, 224}), Weight(), Bias()});
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("node (Conv, test): expected 4-D input, got [3, 224]"));
}

TEST(ConvKernelTest, RejectsChannelMismatch) {
  SingleOpGraph g(ir::OpKind::kConv, {Input(), Pattern({3, 3, 3, 3}, 5, 2), Bias()});
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("do not match groups=1"));
}

TEST(ConvKernelTest, RejectsKernelLargerThanPaddedInput) {
  SingleOpGraph g(ir::OpKind::kConv, {Tensor::Zeros(DType::kF32, {1, 2, 2, 2}), Weight(), Bias()});
  EXPECT_EQ(g.Prepare().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConvKernelTest, OneDimConvRunsAsARow) {
  // x = [1, 2, 3, 4, 5], w = [1, 0, -1], padding 1: y[i] = x[i-1] - x[i+1].
  SingleOpGraph g(ir::OpKind::kConv, {F32({1, 1, 5}, {1, 2, 3, 4, 5}), F32({1, 1, 3}, {1, 0, -1})},
                  Attrs().Ints("padding", {1}), {1});
  auto out = g.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dims(), (Dims{1, 1, 5}));
  EXPECT_THAT(Values((*out)[0]), ElementsAre(-2, -2, -2, -2, 4));
}

TEST(ConvKernelTest, RejectsWeightOfWrongRank) {
  SingleOpGraph g(ir::OpKind::kConv,
                  {Tensor::Zeros(DType::kF32, {1, 2, 8}), Tensor::Zeros(DType::kF32, {3, 2})});
  EXPECT_EQ(g.Prepare().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::kernels
