// Softmax, LogSoftmax and Mean; expected values from PyTorch 1.13.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Attrs;
using ::testing::ElementsAre;
using testing::F32;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using testing::SingleOpGraph;
using testing::Values;

Tensor Arange(Dims dims, float scale = 1) {
  std::vector<float> v(NumElements(dims));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * scale;
  return F32(std::move(dims), v);
}

struct Result {
  Dims dims;
  std::vector<float> values;
};

Result RunOp(ir::OpKind op, Tensor x, ir::Attributes attrs) {
  SingleOpGraph g(op, {std::move(x)}, std::move(attrs));
  auto out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto ref = g.RunReference();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) {
    EXPECT_EQ((*ref)[0].dims(), (*out)[0].dims());
    EXPECT_THAT(Values((*out)[0]), Pointwise(FloatNear(1e-6), Values((*ref)[0])));
  }
  return {(*out)[0].dims(), Values((*out)[0])};
}

auto Near(std::vector<float> v) { return Pointwise(FloatNear(1e-6), std::move(v)); }

TEST(ReduceKernelTest, SoftmaxIsStableForLargeInputs) {
  // exp(1000) overflows float; subtracting the row max keeps it finite.
  Result r = RunOp(ir::OpKind::kSoftmax, F32({2, 3}, {1, 2, 3, 1000, 1001, 1002}),
                   Attrs().Int("axis", -1));
  EXPECT_THAT(r.values, Near({0.090030573f, 0.24472848f, 0.66524094f, 0.090030573f, 0.24472848f,
                              0.66524094f}));
}

TEST(ReduceKernelTest, LogSoftmaxIsStableForLargeInputs) {
  Result r = RunOp(ir::OpKind::kLogSoftmax, F32({2, 3}, {1, 2, 3, 1000, 1001, 1002}),
                   Attrs().Int("axis", 1));
  EXPECT_THAT(r.values, Pointwise(FloatNear(1e-5),
                                  std::vector<float>{-2.4076059f, -1.4076059f, -0.40760595f,
                                                     -2.4076059f, -1.4076059f, -0.40760595f}));
}

TEST(ReduceKernelTest, SoftmaxOverMiddleAxis) {
  Result r = RunOp(ir::OpKind::kSoftmax, Arange({2, 3, 2}, 0.5f), Attrs().Int("axis", 1));
  EXPECT_EQ(r.dims, (Dims{2, 3, 2}));
  EXPECT_THAT(r.values, Near({0.090030573f, 0.090030573f, 0.24472848f, 0.24472848f, 0.66524094f,
                              0.66524094f, 0.090030573f, 0.090030573f, 0.24472848f, 0.24472848f,
                              0.66524094f, 0.66524094f}));
}

TEST(ReduceKernelTest, LogSoftmaxOverMiddleAxis) {
  Result r = RunOp(ir::OpKind::kLogSoftmax, Arange({2, 3, 2}, 0.5f), Attrs().Int("axis", -2));
  EXPECT_THAT(r.values, Near({-2.4076059f, -2.4076059f, -1.4076059f, -1.4076059f, -0.40760595f,
                              -0.40760595f, -2.4076059f, -2.4076059f, -1.4076059f, -1.4076059f,
                              -0.40760595f, -0.40760595f}));
}

TEST(ReduceKernelTest, SoftmaxRejectsBadAxis) {
  SingleOpGraph g(ir::OpKind::kSoftmax, {Arange({2, 3})}, Attrs().Int("axis", 2));
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("axis 2 is out of range for a 2-D input"));
}

TEST(ReduceKernelTest, SoftmaxOfScalar) {
  // PyTorch accepts dim 0 or -1 on a 0-dim tensor: softmax 1, log_softmax 0.
  EXPECT_THAT(RunOp(ir::OpKind::kSoftmax, F32({}, {5}), Attrs().Int("axis", 0)).values,
              ElementsAre(1));
  EXPECT_THAT(RunOp(ir::OpKind::kLogSoftmax, F32({}, {5}), Attrs().Int("axis", -1)).values,
              ElementsAre(0));
}

TEST(ReduceKernelTest, MeanOverSpatialDimsKeepDim) {
  Result r = RunOp(ir::OpKind::kMean, Arange({1, 2, 3, 4}),
                   Attrs().Ints("axes", {2, 3}).Bool("keepdim", true));
  EXPECT_EQ(r.dims, (Dims{1, 2, 1, 1}));
  EXPECT_THAT(r.values, ElementsAre(5.5f, 17.5f));
}

TEST(ReduceKernelTest, MeanOverLeadingAxis) {
  Result r = RunOp(ir::OpKind::kMean, Arange({2, 3, 4}), Attrs().Ints("axes", {0}));
  EXPECT_EQ(r.dims, (Dims{3, 4}));
  EXPECT_THAT(r.values, ElementsAre(6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17));
}

TEST(ReduceKernelTest, MeanOverAlternatingAxes) {
  Result r = RunOp(ir::OpKind::kMean, Arange({2, 3, 4}), Attrs().Ints("axes", {0, -1}));
  EXPECT_EQ(r.dims, (Dims{3}));
  EXPECT_THAT(r.values, ElementsAre(7.5f, 11.5f, 15.5f));
}

TEST(ReduceKernelTest, MeanWithNoAxesReducesEverything) {
  Result r = RunOp(ir::OpKind::kMean, Arange({2, 3, 4}), Attrs());
  EXPECT_EQ(r.dims, Dims{});
  EXPECT_THAT(r.values, ElementsAre(11.5f));
}

TEST(ReduceKernelTest, MeanRejectsRepeatedAxis) {
  SingleOpGraph g(ir::OpKind::kMean, {Arange({2, 3})}, Attrs().Ints("axes", {1, -1}));
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("appears more than once"));
}

}  // namespace
}  // namespace kiln::kernels
