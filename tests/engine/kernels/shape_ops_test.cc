// Identity, Reshape, Flatten (views, any dtype) and Concat (memcpy, any dtype).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Attrs;
using ::testing::ElementsAre;
using testing::F32;
using ::testing::HasSubstr;
using testing::SingleOpGraph;
using testing::Values;

Tensor Int64s(Dims dims, std::vector<int64_t> v) {
  Tensor t = Tensor::Zeros(DType::kInt64, std::move(dims));
  std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

std::vector<int64_t> Int64Values(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.num_elements());
}

absl::StatusOr<Dims> OutDims(ir::OpKind op, Tensor x, ir::Attributes attrs) {
  SingleOpGraph g(op, {std::move(x)}, std::move(attrs));
  auto out = g.Run();
  if (!out.ok()) return out.status();
  return (*out)[0].dims();
}

TEST(ShapeKernelTest, ViewsAliasInputAndAcceptAnyDtype) {
  for (ir::OpKind op : {ir::OpKind::kIdentity, ir::OpKind::kReshape, ir::OpKind::kFlatten}) {
    const KernelDef* k = FindKernel(op, DType::kInt64);
    ASSERT_NE(k, nullptr) << ir::OpName(op);
    EXPECT_TRUE(k->aliases_input0) << ir::OpName(op);
    EXPECT_EQ(k->dtype, DType::kUnknown) << ir::OpName(op);
  }
  EXPECT_FALSE(FindKernel(ir::OpKind::kConcat, DType::kF32)->aliases_input0);
}

TEST(ShapeKernelTest, ReshapeInfersMinusOne) {
  auto dims = OutDims(ir::OpKind::kReshape, Tensor::Zeros(DType::kF32, {2, 3, 4}),
                      Attrs().Ints("shape", {4, -1}));
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(*dims, (Dims{4, 6}));
}

TEST(ShapeKernelTest, ReshapeRejectsWrongCount) {
  SingleOpGraph g(ir::OpKind::kReshape, {Tensor::Zeros(DType::kF32, {7})},
                  Attrs().Ints("shape", {2, -1}));
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("shape '[2, -1]' is invalid for input of size 7"));
}

TEST(ShapeKernelTest, ReshapeRejectsTwoInferredDims) {
  SingleOpGraph g(ir::OpKind::kReshape, {Tensor::Zeros(DType::kF32, {4})},
                  Attrs().Ints("shape", {-1, -1}));
  EXPECT_EQ(g.Prepare().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShapeKernelTest, FlattenFromDimOne) {
  auto dims = OutDims(ir::OpKind::kFlatten, Tensor::Zeros(DType::kF32, {2, 512, 1, 1}),
                      Attrs().Int("start_dim", 1).Int("end_dim", -1));
  ASSERT_TRUE(dims.ok());
  EXPECT_EQ(*dims, (Dims{2, 512}));
}

TEST(ShapeKernelTest, FlattenMiddleDims) {
  auto dims = OutDims(ir::OpKind::kFlatten, Tensor::Zeros(DType::kF32, {2, 3, 4, 5}),
                      Attrs().Int("start_dim", 1).Int("end_dim", -2));
  ASSERT_TRUE(dims.ok());
  EXPECT_EQ(*dims, (Dims{2, 12, 5}));
}

TEST(ShapeKernelTest, FlattenScalarGivesOneElement) {
  auto dims = OutDims(ir::OpKind::kFlatten, F32({}, {3}), Attrs());
  ASSERT_TRUE(dims.ok());
  EXPECT_EQ(*dims, (Dims{1}));
}

TEST(ShapeKernelTest, FlattenRejectsReversedDims) {
  SingleOpGraph g(ir::OpKind::kFlatten, {Tensor::Zeros(DType::kF32, {2, 3, 4})},
                  Attrs().Int("start_dim", 2).Int("end_dim", 1));
  EXPECT_EQ(g.Prepare().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShapeKernelTest, ViewEvalCopiesWhenNotAliased) {
  SingleOpGraph g(ir::OpKind::kReshape, {Int64s({2, 2}, {1, 2, 3, 4})}, Attrs().Ints("shape", {4}));
  auto out = g.Run(1, /*eval_aliases=*/true);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_THAT(Int64Values((*out)[0]), ElementsAre(1, 2, 3, 4));
}

TEST(ShapeKernelTest, ConcatFloatsOnAxisOne) {
  SingleOpGraph g(ir::OpKind::kConcat,
                  {F32({2, 1}, {1, 2}), F32({2, 2}, {3, 4, 5, 6}), F32({2, 0}, {})},
                  Attrs().Int("axis", -1));
  auto out = g.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dims(), (Dims{2, 3}));
  EXPECT_THAT(Values((*out)[0]), ElementsAre(1, 3, 4, 2, 5, 6));
}

TEST(ShapeKernelTest, ConcatInt64OnAxisZero) {
  SingleOpGraph g(ir::OpKind::kConcat, {Int64s({1, 2}, {1, 2}), Int64s({2, 2}, {3, 4, 5, 6})},
                  Attrs().Int("axis", 0));
  auto out = g.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_EQ((*out)[0].dims(), (Dims{3, 2}));
  EXPECT_THAT(Int64Values((*out)[0]), ElementsAre(1, 2, 3, 4, 5, 6));
  auto ref = g.RunReference();
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(Int64Values((*ref)[0]), Int64Values((*out)[0]));
}

TEST(ShapeKernelTest, ConcatSkipsLegacyEmptyVectors) {
  SingleOpGraph g(ir::OpKind::kConcat, {F32({0}, {}), F32({1, 2}, {1, 2})}, Attrs().Int("axis", 0));
  auto out = g.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dims(), (Dims{1, 2}));
}

TEST(ShapeKernelTest, ConcatRejectsMismatchedDims) {
  SingleOpGraph g(ir::OpKind::kConcat, {F32({2, 1}, {1, 2}), F32({3, 1}, {3, 4, 5})},
                  Attrs().Int("axis", 1));
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("input 1 [3, 1] does not match [2, 1]"));
}

TEST(ShapeKernelTest, ConcatPromotesMixedDtypes) {
  // torch.cat([float32 [1.5], int64 [2, 3]]) is float32 [1.5, 2, 3].
  SingleOpGraph g(ir::OpKind::kConcat, {F32({1}, {1.5f}), Int64s({2}, {2, 3})}, Attrs());
  absl::StatusOr<std::vector<Tensor>> out = g.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DType::kF32);
  const float* y = (*out)[0].data<float>();
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(y[2], 3.0f);
}

}  // namespace
}  // namespace kiln::kernels
