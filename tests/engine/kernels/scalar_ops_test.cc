// Metadata, Python int/float/bool arithmetic and scalar lists (scalar_ops.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Attrs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SingleOpGraph;

Tensor Int(int64_t v) {
  Tensor t = Tensor::Zeros(DType::kInt64, {});
  *t.data<int64_t>() = v;
  return t;
}

Tensor Float(double v) {
  Tensor t = Tensor::Zeros(DType::kF64, {});
  *t.data<double>() = v;
  return t;
}

Tensor Bool(bool v) {
  Tensor t = Tensor::Zeros(DType::kBool, {});
  *t.data<bool>() = v;
  return t;
}

// Runs one scalar op; returns its single output.
absl::StatusOr<Tensor> RunOne(ir::OpKind op, std::vector<Tensor> inputs, ir::Attributes attrs = {},
                              std::vector<int> constants = {}) {
  SingleOpGraph g(op, std::move(inputs), std::move(attrs), std::move(constants));
  auto out = g.Run();
  if (!out.ok()) return out.status();
  return (*out)[0];
}

absl::StatusOr<Tensor> Binary(const char* op, Tensor a, Tensor b) {
  return RunOne(ir::OpKind::kScalarBinary, {std::move(a), std::move(b)}, Attrs().Str("op", op));
}

int64_t AsInt(const absl::StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kInt64);
  return *t->data<int64_t>();
}

double AsFloat(const absl::StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kF64);
  return *t->data<double>();
}

bool AsBool(const absl::StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kBool);
  return *t->data<bool>();
}

TEST(ScalarKernelTest, IntArithmeticFollowsPython) {
  EXPECT_EQ(AsInt(Binary("floordiv", Int(-7), Int(2))), -4);
  EXPECT_EQ(AsInt(Binary("floordiv", Int(7), Int(2))), 3);
  EXPECT_EQ(AsInt(Binary("mod", Int(-7), Int(3))), 2);
  EXPECT_EQ(AsInt(Binary("mod", Int(7), Int(-3))), -2);
  EXPECT_EQ(AsInt(Binary("mul", Int(6), Int(7))), 42);
  EXPECT_EQ(AsInt(Binary("max", Int(6), Int(7))), 7);
  EXPECT_DOUBLE_EQ(AsFloat(Binary("truediv", Int(7), Int(2))), 3.5);
  EXPECT_DOUBLE_EQ(AsFloat(Binary("pow", Int(2), Int(10))), 1024.0);
  // Beyond 2^53 ints stay exact.
  EXPECT_EQ(AsInt(Binary("add", Int(int64_t{1} << 60), Int(1))), (int64_t{1} << 60) + 1);
}

TEST(ScalarKernelTest, MixedAndFloatArithmetic) {
  EXPECT_DOUBLE_EQ(AsFloat(Binary("add", Int(1), Float(0.5))), 1.5);
  EXPECT_DOUBLE_EQ(AsFloat(Binary("floordiv", Float(-7.5), Int(2))), -4.0);
  EXPECT_DOUBLE_EQ(AsFloat(Binary("mod", Float(-1.0), Float(3.0))), 2.0);
  EXPECT_EQ(AsInt(Binary("add", Bool(true), Int(1))), 2);  // True + 1
}

// torch.div(rounding_mode="trunc") rounds toward zero, "floor" (floordiv)
// toward -inf; ints stay ints. The values are what torch 1.13 gives for 0-dim
// tensors (importer_numerics_test compares the imported op with at::div).
TEST(ScalarKernelTest, TruncDivRoundsTowardZeroFloorDivTowardMinusInf) {
  EXPECT_EQ(AsInt(Binary("truncdiv", Int(-7), Int(2))), -3);
  EXPECT_EQ(AsInt(Binary("floordiv", Int(-7), Int(2))), -4);
  EXPECT_EQ(AsInt(Binary("truncdiv", Int(7), Int(-2))), -3);
  EXPECT_EQ(AsInt(Binary("floordiv", Int(7), Int(-2))), -4);
  EXPECT_EQ(AsInt(Binary("truncdiv", Int(-7), Int(-2))), 3);
  EXPECT_EQ(AsInt(Binary("truncdiv", Int(-6), Int(3))), -2);
  EXPECT_EQ(AsInt(Binary("truncdiv", Int(16), Int(4))), 4);  // MHA's head_dim
  EXPECT_DOUBLE_EQ(AsFloat(Binary("truncdiv", Float(-7.5), Float(2.0))), -3.0);
  EXPECT_DOUBLE_EQ(AsFloat(Binary("floordiv", Float(-7.5), Float(2.0))), -4.0);
  EXPECT_DOUBLE_EQ(AsFloat(Binary("truncdiv", Float(7.5), Int(-2))), -3.0);
  // Float tensors divide by zero to inf, as in torch; ints raise.
  EXPECT_EQ(AsFloat(Binary("truncdiv", Float(1.0), Float(0.0))),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(Binary("truncdiv", Int(1), Int(0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ScalarKernelTest, ComparisonsAndLogic) {
  EXPECT_TRUE(AsBool(Binary("lt", Int(1), Float(1.5))));
  EXPECT_FALSE(AsBool(Binary("eq", Int(1), Int(2))));
  EXPECT_TRUE(AsBool(Binary("and", Bool(true), Bool(true))));
  EXPECT_FALSE(AsBool(Binary("xor", Bool(true), Bool(true))));
  EXPECT_EQ(AsInt(Binary("or", Int(4), Int(1))), 5);
}

TEST(ScalarKernelTest, DivisionByZeroIsAnError) {
  auto r = Binary("floordiv", Int(1), Int(0));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("division by zero"));
}

TEST(ScalarKernelTest, UnaryOps) {
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kScalarUnary, {Int(3)}, Attrs().Str("op", "neg"))), -3);
  EXPECT_TRUE(AsBool(RunOne(ir::OpKind::kScalarUnary, {Int(0)}, Attrs().Str("op", "not"))));
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kScalarUnary, {Float(-2.5)}, Attrs().Str("op", "floor"))),
            -3);
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kScalarUnary, {Float(2.1)}, Attrs().Str("op", "ceil"))), 3);
}

TEST(ScalarKernelTest, ToScalarTruncatesAndTests) {
  Tensor f = Tensor::Zeros(DType::kF32, {1, 1});
  *f.data<float>() = -2.7f;
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kToScalar, {f}, Attrs().Str("type", "int"))), -2);
  EXPECT_TRUE(AsBool(RunOne(ir::OpKind::kToScalar, {f}, Attrs().Str("type", "bool"))));
  EXPECT_NEAR(AsFloat(RunOne(ir::OpKind::kToScalar, {f}, Attrs().Str("type", "float"))), -2.7,
              1e-6);
  auto r = RunOne(ir::OpKind::kToScalar, {Tensor::Zeros(DType::kF32, {2})},
                  Attrs().Str("type", "int"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("only one-element tensors"));
}

TEST(ScalarKernelTest, SizeRankNumelPublishConstants) {
  SingleOpGraph g(ir::OpKind::kSize, {Tensor::Zeros(DType::kF32, {2, 3, 4})},
                  Attrs().Int("dim", -1));
  auto out = g.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].data<int64_t>(), 4);
  auto shape = RunOne(ir::OpKind::kSize, {Tensor::Zeros(DType::kF32, {2, 3, 4})});
  ASSERT_TRUE(shape.ok());
  EXPECT_THAT(std::vector<int64_t>(shape->data<int64_t>(), shape->data<int64_t>() + 3),
              ElementsAre(2, 3, 4));
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kRank, {Tensor::Zeros(DType::kF32, {2, 3, 4})})), 3);
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kNumel, {Tensor::Zeros(DType::kF32, {2, 3, 4})})), 24);
  // The dim may be an operand computed at run time.
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kSize, {Tensor::Zeros(DType::kF32, {2, 3, 4}), Int(1)})), 3);
  EXPECT_EQ(RunOne(ir::OpKind::kSize, {Tensor::Zeros(DType::kF32, {2}), Int(3)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ScalarKernelTest, ScalarLists) {
  auto list = RunOne(ir::OpKind::kListConstruct, {Int(2), Int(-1), Int(5)});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->dims(), (Dims{3}));
  EXPECT_EQ(list->dtype(), DType::kInt64);
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kListGetItem, {*list, Int(-1)})), 5);
  EXPECT_EQ(AsInt(RunOne(ir::OpKind::kListLen, {*list})), 3);
  auto longer = RunOne(ir::OpKind::kListAppend, {*list, Int(7)});
  ASSERT_TRUE(longer.ok());
  EXPECT_THAT(std::vector<int64_t>(longer->data<int64_t>(), longer->data<int64_t>() + 4),
              ElementsAre(2, -1, 5, 7));
  EXPECT_EQ(RunOne(ir::OpKind::kListGetItem, {*list, Int(3)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto floats = RunOne(ir::OpKind::kListConstruct, {Float(0.5), Int(2)});
  ASSERT_TRUE(floats.ok());
  EXPECT_EQ(floats->dtype(), DType::kF64);
  auto empty = RunOne(ir::OpKind::kListConstruct, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->dims(), (Dims{0}));
}

TEST(ScalarKernelTest, ReshapeTakesARunTimeShape) {
  Tensor shape = Tensor::Zeros(DType::kInt64, {2});
  shape.data<int64_t>()[0] = 3;
  shape.data<int64_t>()[1] = -1;
  SingleOpGraph g(ir::OpKind::kReshape, {Tensor::Zeros(DType::kF32, {2, 6}), shape}, {},
                  /*constant_inputs=*/{1});
  auto out = g.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dims(), (Dims{3, 4}));
  SingleOpGraph unknown(ir::OpKind::kReshape, {Tensor::Zeros(DType::kF32, {2, 6}), shape});
  EXPECT_THAT(std::string(unknown.Prepare().message()), HasSubstr("must be a known int list"));
}

}  // namespace
}  // namespace kiln::kernels
