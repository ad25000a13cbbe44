// Add/Sub/Mul/Div: broadcasting cases checked by hand (and against PyTorch).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::F32;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using testing::SingleOpGraph;
using testing::Values;

std::vector<float> RunOne(ir::OpKind op, Tensor a, Tensor b, Dims* dims = nullptr) {
  SingleOpGraph g(op, {std::move(a), std::move(b)});
  auto out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  if (dims != nullptr) *dims = (*out)[0].dims();
  // The reference must agree exactly for these exactly representable cases.
  auto ref = g.RunReference();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) {
    EXPECT_THAT(Values((*ref)[0]), ElementsAreArray(Values((*out)[0])));
  }
  return Values((*out)[0]);
}

TEST(ElementwiseKernelTest, AddSameShape) {
  Dims dims;
  EXPECT_THAT(RunOne(ir::OpKind::kAdd, F32({2, 3}, {1, 2, 3, 4, 5, 6}),
                     F32({2, 3}, {10, 20, 30, 40, 50, 60}), &dims),
              ElementsAre(11, 22, 33, 44, 55, 66));
  EXPECT_EQ(dims, (Dims{2, 3}));
}

TEST(ElementwiseKernelTest, SubBroadcastsPerChannel) {
  // x[1, 2, 2, 2] - b[2, 1, 1]: each channel minus its own value.
  Dims dims;
  EXPECT_THAT(RunOne(ir::OpKind::kSub, F32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
                     F32({2, 1, 1}, {1, 10}), &dims),
              ElementsAre(0, 1, 2, 3, -5, -4, -3, -2));
  EXPECT_EQ(dims, (Dims{1, 2, 2, 2}));
}

TEST(ElementwiseKernelTest, MulByZeroDimScalar) {
  Dims dims;
  EXPECT_THAT(RunOne(ir::OpKind::kMul, F32({2, 2}, {1, -2, 3, -4}), F32({}, {0.5f}), &dims),
              ElementsAre(0.5f, -1, 1.5f, -2));
  EXPECT_EQ(dims, (Dims{2, 2}));
}

TEST(ElementwiseKernelTest, ScalarOnTheLeft) {
  EXPECT_THAT(RunOne(ir::OpKind::kSub, F32({}, {1}), F32({3}, {1, 2, 3})), ElementsAre(0, -1, -2));
}

TEST(ElementwiseKernelTest, DivIsTrueDivision) {
  EXPECT_THAT(RunOne(ir::OpKind::kDiv, F32({3}, {1, 2, 3}), F32({1}, {2})),
              ElementsAre(0.5f, 1.0f, 1.5f));
}

TEST(ElementwiseKernelTest, BroadcastsBothOperands) {
  // [3, 1] + [1, 4] -> [3, 4] (an outer sum).
  Dims dims;
  EXPECT_THAT(RunOne(ir::OpKind::kAdd, F32({3, 1}, {0, 10, 20}), F32({1, 4}, {1, 2, 3, 4}), &dims),
              ElementsAre(1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24));
  EXPECT_EQ(dims, (Dims{3, 4}));
}

TEST(ElementwiseKernelTest, BroadcastsLowerRankOnTheRight) {
  // [2, 2, 3] * [3]: each row scaled elementwise.
  EXPECT_THAT(RunOne(ir::OpKind::kMul, F32({2, 2, 3}, {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}),
                     F32({3}, {1, 0, -1})),
              ElementsAre(1, 0, -1, 2, 0, -2, 3, 0, -3, 4, 0, -4));
}

TEST(ElementwiseKernelTest, MiddleDimBroadcast) {
  // [2, 3, 2] + [2, 1, 2]: the middle dim is broadcast, so rows repeat.
  EXPECT_THAT(RunOne(ir::OpKind::kAdd, F32({2, 3, 2}, {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}),
                     F32({2, 1, 2}, {1, 2, 3, 4})),
              ElementsAre(1, 2, 1, 2, 1, 2, 4, 5, 4, 5, 4, 5));
}

TEST(ElementwiseKernelTest, ParallelBroadcastMatchesSerial) {
  // Large enough to cross the parallel threshold; rows split mid-odometer.
  std::mt19937 rng(7);
  Tensor a = testing::RandomF32({3, 37, 29, 31}, rng);
  Tensor b = testing::RandomF32({37, 1, 31}, rng);
  SingleOpGraph g(ir::OpKind::kMul, {a, b});
  auto serial = g.Run(1);
  auto parallel = g.Run(2);
  ASSERT_TRUE(serial.ok() && parallel.ok());
  EXPECT_THAT(Values((*parallel)[0]), ElementsAreArray(Values((*serial)[0])));
  auto ref = g.RunReference();
  ASSERT_TRUE(ref.ok());
  EXPECT_THAT(Values((*serial)[0]), Pointwise(FloatNear(0), Values((*ref)[0])));
}

TEST(ElementwiseKernelTest, LongSingleRowSplitsAcrossThreads) {
  // Same-shape and scalar operands collapse to one row; it is split by element.
  std::mt19937 rng(11);
  Tensor a = testing::RandomF32({1, 64, 56, 56}, rng);
  for (Tensor b : {testing::RandomF32({1, 64, 56, 56}, rng), F32({}, {0.25f})}) {
    SingleOpGraph g(ir::OpKind::kSub, {a, b});
    auto two = g.Run(2);
    auto ref = g.RunReference();
    ASSERT_TRUE(two.ok() && ref.ok());
    EXPECT_THAT(Values((*two)[0]), ElementsAreArray(Values((*ref)[0])));
  }
}

TEST(ElementwiseKernelTest, RejectsIncompatibleShapes) {
  SingleOpGraph g(ir::OpKind::kAdd, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({4}, {1, 2, 3, 4})});
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("node (Add, test): cannot broadcast [2, 3] with [4]"));
}

TEST(ElementwiseKernelTest, PromotesMixedDtypesLikePyTorch) {
  // FP32 + INT64 computes in FP32 (type_promotion_test.cc checks the rules).
  Tensor i64 = Tensor::Zeros(DType::kInt64, {3});
  i64.data<int64_t>()[2] = 5;
  SingleOpGraph g(ir::OpKind::kAdd, {F32({3}, {1, 2, 3}), i64});
  auto out = g.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kF32);
  EXPECT_THAT(Values((*out)[0]), ElementsAre(1, 2, 8));
}

}  // namespace
}  // namespace kiln::kernels
