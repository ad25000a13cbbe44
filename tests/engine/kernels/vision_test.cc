// Nms and RoiAlign (vision.cc); expected values from torchvision 0.14 on
// PyTorch 1.13 (torchvision.ops.nms, torchvision.ops.roi_align).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Attrs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::F32;
using ::testing::FloatEq;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using testing::SingleOpGraph;
using testing::Values;

std::vector<int64_t> Indices(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_EQ(t.dims().size(), 1u);
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.num_elements());
}

std::vector<int64_t> RunNms(Tensor boxes, Tensor scores, double threshold) {
  ir::Attributes attrs;
  attrs.SetFloat("iou_threshold", threshold);
  SingleOpGraph g(ir::OpKind::kNms, {std::move(boxes), std::move(scores)}, attrs);
  auto out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto ref = g.RunReference();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) EXPECT_EQ(Indices((*out)[0]), Indices((*ref)[0]));
  return Indices((*out)[0]);
}

TEST(NmsKernelTest, KeepsHighestScoringBoxOfEachOverlappingGroup) {
  Tensor boxes = F32({4, 4}, {0, 0, 10, 10, 1, 1, 11, 11, 20, 20, 30, 30, 0, 0, 10, 10});
  Tensor scores = F32({4}, {0.9f, 0.8f, 0.7f, 0.95f});
  EXPECT_THAT(RunNms(boxes, scores, 0.5), ElementsAre(3, 2));
  // IoU(0, 1) = 81 / 119 = 0.68: kept at a threshold above it; box 0 equals box 3.
  EXPECT_THAT(RunNms(boxes, scores, 0.9), ElementsAre(3, 1, 2));
}

TEST(NmsKernelTest, NoBoxesGiveAnEmptyIndexTensor) {
  EXPECT_THAT(RunNms(F32({0, 4}, {}), F32({0}, {}), 0.5), ::testing::IsEmpty());
}

// 40 boxes whose scores take three values: equal scores are visited in index
// order (torchvision sorts stably), which decides the kept set. An unstable
// sort keeps a different set here.
TEST(NmsKernelTest, TiedScoresAreVisitedInIndexOrder) {
  constexpr int64_t n = 40;
  std::vector<float> b, s;
  for (int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>((i * 7) % 17), y = static_cast<float>((i * 5) % 13);
    b.insert(b.end(), {x, y, x + 3 + i % 4, y + 3 + i % 5});
    s.push_back(static_cast<float>(i % 3) * 0.25f);
  }
  EXPECT_THAT(RunNms(F32({n, 4}, b), F32({n}, s), 0.3),
              ElementsAreArray({2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 10, 25, 34, 0, 12}));
}

TEST(NmsKernelTest, NanScoresComeFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor boxes = F32({3, 4}, {0, 0, 1, 1, 5, 5, 6, 6, 10, 10, 11, 11});
  EXPECT_THAT(RunNms(boxes, F32({3}, {0.5f, nan, 0.9f}), 0.5), ElementsAre(1, 2, 0));
  // Among NaNs, index order: box 3 (box 0 again) is suppressed by box 0.
  Tensor four = F32({4, 4}, {0, 0, 1, 1, 5, 5, 6, 6, 10, 10, 11, 11, 0, 0, 1, 1});
  EXPECT_THAT(RunNms(four, F32({4}, {nan, 0.3f, nan, nan}), 0.5), ElementsAre(0, 2, 1));
}

TEST(NmsKernelTest, RefusesMismatchedOperands) {
  ir::Attributes attrs;
  attrs.SetFloat("iou_threshold", 0.5);
  Tensor scores64 = Tensor::Zeros(DType::kF64, {2});
  EXPECT_THAT(SingleOpGraph(ir::OpKind::kNms, {F32({2, 4}, std::vector<float>(8)), scores64}, attrs)
                  .Prepare()
                  .message(),
              HasSubstr("same dtype"));
  EXPECT_THAT(SingleOpGraph(ir::OpKind::kNms, {F32({2, 3}, std::vector<float>(6)),
                                               F32({2}, {0, 0})},
                            attrs)
                  .Prepare()
                  .message(),
              HasSubstr("expected boxes [N, 4]"));
}

// A 4x4 map holding 0..15 and three regions: inside, reaching off the left
// edge, and one of zero width.
struct RoiCase {
  bool aligned;
  int64_t sampling_ratio;
  std::vector<float> want;
};

TEST(RoiAlignKernelTest, MatchesTorchvisionAlignedAndNotForEachSamplingRatio) {
  std::vector<float> map(16);
  for (int k = 0; k < 16; ++k) map[k] = static_cast<float>(k);
  Tensor rois = F32({3, 5}, {0, 0.5f, 0.5f, 2.5f, 3.0f, 0, -1.0f, 1.0f, 5.0f, 2.0f,
                             0, 1.2f, 0.3f, 1.2f, 2.9f});
  const RoiCase cases[] = {
      {false, 0, {5.5f, 6.5f, 10.5f, 11.5f, 5.666666507720947f, 5.166666507720947f,
                  7.666666507720947f, 6.5f, 5.250000476837158f, 5.75f, 10.450000762939453f,
                  10.950000762939453f}},
      {false, 2, {5.5f, 6.5f, 10.5f, 11.5f, 5.625f, 3.875f, 7.625f, 4.875f, 5.25f, 5.75f,
                  10.450000762939453f, 10.950000762939453f}},
      {true, 0, {3, 4, 8, 9, 3.3333332538604736f, 5.666666507720947f, 5.333333492279053f,
                 7.666666507720947f, 0, 0, 0, 0}},
      {true, 2, {3, 4, 8, 9, 3.375f, 5.625f, 5.375f, 7.625f, 2.500000238418579f,
                 2.500000238418579f, 7.700001239776611f, 7.700001239776611f}},
  };
  for (const RoiCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "aligned=" << c.aligned << " ratio=" << c.sampling_ratio);
    ir::Attributes attrs = Attrs()
                               .Float("spatial_scale", 1.0)
                               .Int("pooled_height", 2)
                               .Int("pooled_width", 2)
                               .Int("sampling_ratio", c.sampling_ratio)
                               .Bool("aligned", c.aligned);
    SingleOpGraph g(ir::OpKind::kRoiAlign, {F32({1, 1, 4, 4}, map), rois}, attrs);
    auto out = g.Run(2);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dims(), (Dims{3, 1, 2, 2}));
    // Bit for bit: the same float operations in the same order as torchvision.
    EXPECT_THAT(Values((*out)[0]), Pointwise(FloatEq(), c.want));
  }
}

TEST(RoiAlignKernelTest, Float64MatchesTorchvision) {
  Tensor x = Tensor::Zeros(DType::kF64, {1, 1, 4, 4});
  for (int k = 0; k < 16; ++k) x.data<double>()[k] = k;
  Tensor rois = Tensor::Zeros(DType::kF64, {3, 5});
  const double r[] = {0, 0.5, 0.5, 2.5, 3.0, 0, -1.0, 1.0, 5.0, 2.0, 0, 1.2, 0.3, 1.2, 2.9};
  std::copy(r, r + 15, rois.data<double>());
  ir::Attributes attrs = Attrs()
                             .Float("spatial_scale", 0.5)
                             .Int("pooled_height", 2)
                             .Int("pooled_width", 3)
                             .Int("sampling_ratio", -1)
                             .Bool("aligned", true);
  auto out = SingleOpGraph(ir::OpKind::kRoiAlign, {x, rois}, attrs).Run();
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& o = (*out)[0];
  ASSERT_EQ(o.dtype(), DType::kF64);
  const double want[] = {0.25, 0.5, 0.8333333333333331, 2.75, 3.0, 3.333333333333333,
                         0.5,  1.0, 2.0,                1.5,  2.0, 3.0,
                         0,    0,   0,                  0,    0,   0};
  ASSERT_EQ(o.num_elements(), 18);
  for (int k = 0; k < 18; ++k) EXPECT_DOUBLE_EQ(o.data<double>()[k], want[k]) << k;
}

TEST(RoiAlignKernelTest, RefusesABatchIndexOutsideTheInput) {
  ir::Attributes attrs = Attrs().Int("pooled_height", 1).Int("pooled_width", 1);
  auto out = SingleOpGraph(ir::OpKind::kRoiAlign,
                           {F32({1, 1, 2, 2}, {1, 2, 3, 4}), F32({1, 5}, {1, 0, 0, 1, 1})}, attrs)
                 .Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("batch index 1"));
}

TEST(RoiAlignKernelTest, RefusesRoisOfAnotherDType) {
  Tensor rois = Tensor::Zeros(DType::kF64, {1, 5});
  EXPECT_THAT(SingleOpGraph(ir::OpKind::kRoiAlign, {F32({1, 1, 2, 2}, {1, 2, 3, 4}), rois},
                            Attrs().Int("pooled_height", 1).Int("pooled_width", 1))
                  .Prepare()
                  .message(),
              HasSubstr("same dtype"));
}

}  // namespace
}  // namespace kiln::kernels
