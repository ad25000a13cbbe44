// BatchNorm (inference) and LayerNorm; expected values from PyTorch 1.13's
// F.batch_norm(training=False) and F.layer_norm.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Absent;
using testing::Attrs;
using testing::F32;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using testing::SingleOpGraph;
using testing::Values;

std::vector<float> RunNorm(ir::OpKind op, std::vector<Tensor> inputs, ir::Attributes attrs) {
  SingleOpGraph g(op, std::move(inputs), std::move(attrs));
  auto out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ((*out)[0].dims(), g.inputs()[0].dims());
  auto ref = g.RunReference();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) {
    EXPECT_THAT(Values((*out)[0]), Pointwise(FloatNear(1e-5), Values((*ref)[0])));
  }
  return Values((*out)[0]);
}

auto Near(std::vector<float> v) { return Pointwise(FloatNear(2e-6), std::move(v)); }

TEST(NormKernelTest, BatchNormUsesRunningStatistics) {
  const Tensor x = F32({1, 2, 2, 2}, {1, 2, 3, 4, -1, 0, 5, 2});
  EXPECT_THAT(RunNorm(ir::OpKind::kBatchNorm,
                      {x, F32({2}, {2, 0.5f}), F32({2}, {0.1f, -1}), F32({2}, {1.5f, 0.5f}),
                       F32({2}, {4, 0.25f})},
                      Attrs().Float("eps", 1e-5)),
              Near({-0.39999938f, 0.59999943f, 1.5999982f, 2.599997f, -2.49997f, -1.49999f,
                    3.4999099f, 0.49996996f}));
}

TEST(NormKernelTest, BatchNormAcceptsTwoDimInput) {
  // BatchNorm1d on [N, C]: one value per (n, c).
  EXPECT_THAT(RunNorm(ir::OpKind::kBatchNorm,
                      {F32({2, 2}, {1, 2, 3, 4}), F32({2}, {1, 1}), F32({2}, {0, 0}),
                       F32({2}, {1, 2}), F32({2}, {1, 1})},
                      Attrs().Float("eps", 0)),
              Near({0, 0, 2, 2}));
}

TEST(NormKernelTest, BatchNormRejectsWrongParameterShape) {
  SingleOpGraph g(ir::OpKind::kBatchNorm, {F32({1, 2, 1, 1}, {1, 2}), F32({3}, {1, 1, 1}),
                                           F32({2}, {0, 0}), F32({2}, {0, 0}), F32({2}, {1, 1})});
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected weight [2], got [3]"));
}

TEST(NormKernelTest, LayerNormWithWeightAndBias) {
  EXPECT_THAT(RunNorm(ir::OpKind::kLayerNorm,
                      {F32({2, 4}, {1, 2, 3, 4, 2, 2, 2, 10}), F32({4}, {1, 2, 0.5f, -1}),
                       F32({4}, {0, 0.1f, 0.2f, 0.3f})},
                      Attrs().Ints("normalized_shape", {4}).Float("eps", 1e-5)),
              Near({-1.3416355f, -0.7944237f, 0.42360592f, -1.0416355f, -0.57735002f, -1.0547f,
                    -0.088675007f, -1.43205f}));
}

TEST(NormKernelTest, LayerNormOverTwoDimsWithoutAffine) {
  EXPECT_THAT(RunNorm(ir::OpKind::kLayerNorm,
                      {F32({2, 2, 2}, {1, 2, 3, 4, 2, 2, 2, 10}), Absent(), Absent()},
                      Attrs().Ints("normalized_shape", {2, 2}).Float("eps", 1e-5)),
              Near({-1.3416355f, -0.44721186f, 0.4472118f, 1.3416355f, -0.57735002f, -0.57735002f,
                    -0.57735002f, 1.7320501f}));
}

TEST(NormKernelTest, LayerNormRejectsShapeMismatch) {
  SingleOpGraph g(ir::OpKind::kLayerNorm, {F32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})},
                  Attrs().Ints("normalized_shape", {3}));
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("does not match the trailing dims of input [2, 4]"));
}

}  // namespace
}  // namespace kiln::kernels
