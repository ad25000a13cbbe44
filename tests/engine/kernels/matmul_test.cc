// MatMul (every torch.matmul rank combination) and Linear; expected values from
// PyTorch 1.13 on the same integer-valued inputs, so they are exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Absent;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::F32;
using ::testing::HasSubstr;
using testing::SingleOpGraph;
using testing::Values;

Tensor Arange(Dims dims, float scale = 1, float offset = 0) {
  std::vector<float> v(NumElements(dims));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i * scale + offset;
  return F32(std::move(dims), v);
}

struct Result {
  Dims dims;
  std::vector<float> values;
};

Result RunOp(ir::OpKind op, std::vector<Tensor> inputs) {
  SingleOpGraph g(op, std::move(inputs));
  auto out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto ref = g.RunReference();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) {
    EXPECT_EQ((*ref)[0].dims(), (*out)[0].dims());
    EXPECT_THAT(Values((*ref)[0]), ElementsAreArray(Values((*out)[0])));
  }
  return {(*out)[0].dims(), Values((*out)[0])};
}

Tensor MatA() { return Arange({2, 3}); }         // [[0, 1, 2], [3, 4, 5]]
Tensor MatB() { return Arange({3, 4}, 1, -5); }  // [[-5..-2], [-1..2], [3..6]]
Tensor Vec() { return F32({3}, {1, -2, 3}); }

TEST(MatMulKernelTest, MatrixTimesMatrix) {
  Result r = RunOp(ir::OpKind::kMatMul, {MatA(), MatB()});
  EXPECT_EQ(r.dims, (Dims{2, 4}));
  EXPECT_THAT(r.values, ElementsAre(5, 8, 11, 14, -4, 8, 20, 32));
}

TEST(MatMulKernelTest, VectorDotVectorIsScalar) {
  Result r = RunOp(ir::OpKind::kMatMul, {Vec(), Vec()});
  EXPECT_EQ(r.dims, Dims{});
  EXPECT_THAT(r.values, ElementsAre(14));
}

TEST(MatMulKernelTest, VectorTimesMatrixDropsRowDim) {
  Result r = RunOp(ir::OpKind::kMatMul, {Vec(), MatB()});
  EXPECT_EQ(r.dims, (Dims{4}));
  EXPECT_THAT(r.values, ElementsAre(6, 8, 10, 12));
}

TEST(MatMulKernelTest, MatrixTimesVectorDropsColumnDim) {
  Result r = RunOp(ir::OpKind::kMatMul, {MatA(), Vec()});
  EXPECT_EQ(r.dims, (Dims{2}));
  EXPECT_THAT(r.values, ElementsAre(4, 10));
}

TEST(MatMulKernelTest, BatchDimsBroadcast) {
  // [2, 1, 2, 3] @ [3, 3, 2] -> [2, 3, 2, 2].
  Result r = RunOp(ir::OpKind::kMatMul, {Arange({2, 1, 2, 3}, 0.5f), Arange({3, 3, 2}, 1, -4)});
  EXPECT_EQ(r.dims, (Dims{2, 3, 2, 2}));
  EXPECT_THAT(r.values, ElementsAre(-1.0, 0.5, -10.0, -4.0, 8.0, 9.5, 26.0, 32.0, 17.0, 18.5, 62.0,
                                    68.0, -19.0, -8.5, -28.0, -13.0, 44.0, 54.5, 62.0, 77.0, 107.0,
                                    117.5, 152.0, 167.0));
}

TEST(MatMulKernelTest, BatchedMatrixTimesVector) {
  Result r = RunOp(ir::OpKind::kMatMul, {Arange({2, 4, 3}), Vec()});
  EXPECT_EQ(r.dims, (Dims{2, 4}));
  EXPECT_THAT(r.values, ElementsAre(4, 10, 16, 22, 28, 34, 40, 46));
}

TEST(MatMulKernelTest, VectorTimesBatchedMatrix) {
  Result r = RunOp(ir::OpKind::kMatMul, {Vec(), Arange({2, 3, 4})});
  EXPECT_EQ(r.dims, (Dims{2, 4}));
  EXPECT_THAT(r.values, ElementsAre(16, 18, 20, 22, 40, 42, 44, 46));
}

TEST(MatMulKernelTest, BatchedTimesSharedMatrixFoldsIntoOneGemm) {
  // [2, 2, 3] @ [3, 4]: same as stacking the batches into rows.
  Tensor a = Arange({2, 2, 3});
  Result r = RunOp(ir::OpKind::kMatMul, {a, MatB()});
  Result flat = RunOp(ir::OpKind::kMatMul, {a.Reshaped({4, 3}), MatB()});
  EXPECT_EQ(r.dims, (Dims{2, 2, 4}));
  EXPECT_EQ(r.values, flat.values);
}

TEST(MatMulKernelTest, RejectsMismatchedInnerDims) {
  SingleOpGraph g(ir::OpKind::kMatMul, {MatA(), MatA()});
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("inner dims do not match: [2, 3] @ [2, 3]"));
}

TEST(MatMulKernelTest, RejectsScalarOperand) {
  SingleOpGraph g(ir::OpKind::kMatMul, {F32({}, {2}), Vec()});
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("both operands need at least 1 dim"));
}

TEST(MatMulKernelTest, EmptyInnerDimGivesZeros) {
  Result r = RunOp(ir::OpKind::kMatMul, {F32({2, 0}, {}), F32({0, 3}, {})});
  EXPECT_EQ(r.dims, (Dims{2, 3}));
  EXPECT_THAT(r.values, ElementsAre(0, 0, 0, 0, 0, 0));
}

Tensor LinearWeight() { return F32({2, 3}, {1, 0, -1, 0.5f, 2, 1}); }
Tensor LinearBias() { return F32({2}, {0.25f, -1}); }

TEST(LinearKernelTest, AddsBias) {
  Result r = RunOp(ir::OpKind::kLinear, {MatA(), LinearWeight(), LinearBias()});
  EXPECT_EQ(r.dims, (Dims{2, 2}));
  EXPECT_THAT(r.values, ElementsAre(-1.75f, 3, -1.75f, 13.5f));
}

TEST(LinearKernelTest, VectorInputUsesGemv) {
  Result r = RunOp(ir::OpKind::kLinear, {Vec(), LinearWeight(), LinearBias()});
  EXPECT_EQ(r.dims, (Dims{2}));
  EXPECT_THAT(r.values, ElementsAre(-1.75f, -1.5f));
}

TEST(LinearKernelTest, NoBiasKeepsLeadingDims) {
  Result r = RunOp(ir::OpKind::kLinear, {Arange({2, 2, 3}), LinearWeight(), Absent()});
  EXPECT_EQ(r.dims, (Dims{2, 2, 2}));
  EXPECT_THAT(r.values, ElementsAre(-2, 4, -2, 14.5f, -2, 25, -2, 35.5f));
}

TEST(LinearKernelTest, RejectsWrongBias) {
  SingleOpGraph g(ir::OpKind::kLinear, {MatA(), LinearWeight(), F32({3}, {1, 2, 3})});
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected bias [2], got [3]"));
}

// Float64 accumulation (accumulate = "float64"): the FP32 op runs its FP64
// kernel on widened operands, rounded once (widen.cc). Values up to 1e3 over
// 64-term sums, where float32 sums differ from the rounded double result.
TEST(MatMulKernelTest, Float64AccumulationIsTheFloat64ProductRounded) {
  std::mt19937 rng(3);
  const Tensor a = testing::RandomF32({2, 5, 64}, rng, -1e3f, 1e3f);
  const Tensor b = testing::RandomF32({64, 7}, rng);
  const Tensor w = testing::RandomF32({7, 64}, rng);
  const Tensor bias = testing::RandomF32({7}, rng);
  EXPECT_EQ(testing::CheckFloat64Accumulation(ir::OpKind::kMatMul, {a, b}, {}, {1}),
            absl::OkStatus());
  EXPECT_EQ(testing::CheckFloat64Accumulation(ir::OpKind::kMatMul, {a, b}, {}, {}),
            absl::OkStatus());
  EXPECT_EQ(testing::CheckFloat64Accumulation(ir::OpKind::kLinear, {a, w, bias}, {}, {1, 2}),
            absl::OkStatus());
  EXPECT_EQ(testing::CheckFloat64Accumulation(ir::OpKind::kEinsum, {a, b},
                                              testing::Attrs().Str("equation", "bik,kj->bij"), {}),
            absl::OkStatus());
}

}  // namespace
}  // namespace kiln::kernels
