// The elementwise family on dtypes other than float32: integer arithmetic with
// Python's rounding, true division of integers giving float, comparisons and
// logical ops giving bool, bitwise ops on integers, operands of different
// run-time dtypes promoted as PyTorch promotes them, FP16/BF16 computed in
// float32 and rounded back, in-place results kept in the destination's dtype.
// Expected values are PyTorch's (torch 1.13, CPU) for the same inputs.
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/kernels/convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using ::testing::ElementsAre;
using ir::OpKind;
using testing::Attrs;
using testing::SingleOpGraph;

template <typename T>
Tensor Make(DType dtype, std::vector<T> values) {
  Tensor t = Tensor::Zeros(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) static_cast<T*>(t.raw_data())[i] = values[i];
  return t;
}

template <typename T>
std::vector<T> Get(const Tensor& t) {
  const T* p = static_cast<const T*>(t.raw_data());
  return std::vector<T>(p, p + t.num_elements());
}

Tensor Run1(OpKind op, std::vector<Tensor> inputs, ir::Attributes attrs = {}) {
  SingleOpGraph g(op, std::move(inputs), std::move(attrs));
  absl::StatusOr<std::vector<Tensor>> out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

TEST(ElementwiseDTypeTest, IntegerFloorDivisionAndRemainderRoundLikePython) {
  Tensor a = Make<int64_t>(DType::kInt64, {7, -7, 7, -7, 0});
  Tensor b = Make<int64_t>(DType::kInt64, {2, 2, -2, -2, 3});
  Tensor q = Run1(OpKind::kFloorDiv, {a, b});
  ASSERT_EQ(q.dtype(), DType::kInt64);
  EXPECT_THAT(Get<int64_t>(q), ElementsAre(3, -4, -4, 3, 0));
  Tensor r = Run1(OpKind::kRemainder, {a, b});
  EXPECT_THAT(Get<int64_t>(r), ElementsAre(1, 1, -1, -1, 0));
  // int8 keeps its dtype.
  Tensor r8 = Run1(OpKind::kRemainder, {Make<int8_t>(DType::kInt8, {-5}), Make<int8_t>(DType::kInt8, {3})});
  ASSERT_EQ(r8.dtype(), DType::kInt8);
  EXPECT_THAT(Get<int8_t>(r8), ElementsAre(1));
}

TEST(ElementwiseDTypeTest, TruncDivisionKeepsIntegersAndRoundsTowardZero) {
  // torch.div(a, b, rounding_mode="trunc"): [-7, 7, -8] / [2, 2, 3] -> [-3, 3, -2], int64.
  Tensor q = Run1(OpKind::kTruncDiv, {Make<int64_t>(DType::kInt64, {-7, 7, -8}),
                                      Make<int64_t>(DType::kInt64, {2, 2, 3})});
  ASSERT_EQ(q.dtype(), DType::kInt64);
  EXPECT_THAT(Get<int64_t>(q), ElementsAre(-3, 3, -2));
  // int32 with an int64 operand promotes to int64; floats truncate the quotient.
  Tensor mixed = Run1(OpKind::kTruncDiv, {Make<int32_t>(DType::kInt32, {-9}),
                                          Make<int64_t>(DType::kInt64, {4})});
  ASSERT_EQ(mixed.dtype(), DType::kInt64);
  EXPECT_THAT(Get<int64_t>(mixed), ElementsAre(-2));
  Tensor f = Run1(OpKind::kTruncDiv, {Make<float>(DType::kF32, {-7.5f, 7.5f}),
                                      Make<float>(DType::kF32, {2.0f, 2.0f})});
  EXPECT_THAT(Get<float>(f), ElementsAre(-3.0f, 3.0f));
  // PyTorch: "div_trunc_cpu" not implemented for 'Bool'.
  SingleOpGraph bools(OpKind::kTruncDiv, {Make<bool>(DType::kBool, {true}),
                                          Make<bool>(DType::kBool, {true})});
  EXPECT_FALSE(bools.Run().ok());
  SingleOpGraph zero(OpKind::kTruncDiv, {Make<int64_t>(DType::kInt64, {1}),
                                         Make<int64_t>(DType::kInt64, {0})});
  EXPECT_FALSE(zero.Run().ok());
}

TEST(ElementwiseDTypeTest, UnaryFloatOpsPromoteIntegersAndRoundingOpsKeepThem) {
  // torch.sqrt(int64) and torch.sigmoid(bool) are float32; floor and relu of int64 stay int64.
  Tensor r = Run1(OpKind::kSqrt, {Make<int64_t>(DType::kInt64, {4, 9, 2})});
  ASSERT_EQ(r.dtype(), DType::kF32);
  EXPECT_THAT(Get<float>(r), ElementsAre(2.0f, 3.0f, std::sqrt(2.0f)));
  Tensor s = Run1(OpKind::kSigmoid, {Make<bool>(DType::kBool, {true, false})});
  ASSERT_EQ(s.dtype(), DType::kF32);
  EXPECT_THAT(Get<float>(s), ElementsAre(::testing::FloatNear(0.7310586f, 1e-6f), 0.5f));
  Tensor f = Run1(OpKind::kFloor, {Make<int32_t>(DType::kInt32, {-3, 7})});
  ASSERT_EQ(f.dtype(), DType::kInt32);
  EXPECT_THAT(Get<int32_t>(f), ElementsAre(-3, 7));
  Tensor relu = Run1(OpKind::kRelu, {Make<int64_t>(DType::kInt64, {-3, 7})});
  ASSERT_EQ(relu.dtype(), DType::kInt64);
  EXPECT_THAT(Get<int64_t>(relu), ElementsAre(0, 7));
  // PyTorch has no integer gelu or frac either: a clean error, not a silent cast.
  EXPECT_FALSE(SingleOpGraph(OpKind::kGelu, {Make<int64_t>(DType::kInt64, {1})}).Run().ok());
  EXPECT_FALSE(SingleOpGraph(OpKind::kFrac, {Make<int64_t>(DType::kInt64, {1})}).Run().ok());
}

TEST(ElementwiseDTypeTest, IsNanTakesEveryDTypeAndUint8NegWraps) {
  // torch.isnan of an integer tensor is all False; of float64, computed in double.
  Tensor i = Run1(OpKind::kIsNan, {Make<int64_t>(DType::kInt64, {-1, 0, 5})});
  ASSERT_EQ(i.dtype(), DType::kBool);
  EXPECT_THAT(Get<bool>(i), ElementsAre(false, false, false));
  Tensor d = Run1(OpKind::kIsNan, {Make<double>(DType::kF64, {1.0, std::nan(""), -2.0})});
  EXPECT_THAT(Get<bool>(d), ElementsAre(false, true, false));
  // torch.neg(uint8 [0, 1, 3]) == [0, 255, 253]; abs is the identity, sign 0 or 1.
  Tensor n = Run1(OpKind::kNeg, {Make<uint8_t>(DType::kUInt8, {0, 1, 3})});
  ASSERT_EQ(n.dtype(), DType::kUInt8);
  EXPECT_THAT(Get<uint8_t>(n), ElementsAre(0, 255, 253));
  EXPECT_THAT(Get<uint8_t>(Run1(OpKind::kSign, {Make<uint8_t>(DType::kUInt8, {0, 1, 3})})),
              ElementsAre(0, 1, 1));
}

TEST(ElementwiseDTypeTest, IntegerPowersStayIntegersAndWrap) {
  Tensor p = Run1(OpKind::kPow, {Make<int64_t>(DType::kInt64, {-3, 2, 5, 0}),
                                 Make<int64_t>(DType::kInt64, {3, 10, 0, 0})});
  ASSERT_EQ(p.dtype(), DType::kInt64);
  EXPECT_THAT(Get<int64_t>(p), ElementsAre(-27, 1024, 1, 1));
  // uint8 2 ** 9 wraps to 0 and int32 2 ** 31 to INT32_MIN, as PyTorch's do.
  Tensor u = Run1(OpKind::kPow, {Make<uint8_t>(DType::kUInt8, {2}), Make<uint8_t>(DType::kUInt8, {9})});
  EXPECT_THAT(Get<uint8_t>(u), ElementsAre(0));
  Tensor w = Run1(OpKind::kPow, {Make<int32_t>(DType::kInt32, {2}), Make<int32_t>(DType::kInt32, {31})});
  EXPECT_THAT(Get<int32_t>(w), ElementsAre(std::numeric_limits<int32_t>::min()));
}

TEST(ElementwiseDTypeTest, IntegerPowersToNegativeExponentsAsLibtorch) {
  // torch.pow(int tensor, int tensor) with negative exponents (libtorch's powi):
  // 1 stays 1, -1 alternates by parity, every other base truncates to 0.
  Tensor p = Run1(OpKind::kPow, {Make<int8_t>(DType::kInt8, {-3, -2, -1, 0, 1, 2, -1}),
                                 Make<int8_t>(DType::kInt8, {-1, -2, -3, -1, -5, -1, -2})});
  ASSERT_EQ(p.dtype(), DType::kInt8);
  EXPECT_THAT(Get<int8_t>(p), ElementsAre(0, 0, -1, 0, 1, 0, 1));
  // A constant negative exponent: a Python number makes libtorch raise
  // ("Integers to negative integer powers are not allowed"), a tensor does
  // not; Prepare leaves it to the libtorch fallback.
  SingleOpGraph constant(OpKind::kPow, {Make<int64_t>(DType::kInt64, {2}),
                                        Make<int64_t>(DType::kInt64, {-1})},
                         {}, /*constant_inputs=*/{1});
  EXPECT_EQ(constant.Prepare().code(), absl::StatusCode::kUnimplemented);
}

TEST(ElementwiseDTypeTest, IntegerDivisionByZeroFailsTheRequest) {
  SingleOpGraph g(OpKind::kFloorDiv, {Make<int32_t>(DType::kInt32, {1, 2}),
                                      Make<int32_t>(DType::kInt32, {1, 0})});
  absl::StatusOr<std::vector<Tensor>> out = g.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("division by zero"));
}

TEST(ElementwiseDTypeTest, TrueDivisionOfIntegersGivesFloat32) {
  Tensor q = Run1(OpKind::kDiv, {Make<int64_t>(DType::kInt64, {7, -7}),
                                 Make<int32_t>(DType::kInt32, {2, 4})});
  ASSERT_EQ(q.dtype(), DType::kF32);
  EXPECT_THAT(Get<float>(q), ElementsAre(3.5f, -1.75f));
}

TEST(ElementwiseDTypeTest, MixedRunTimeDTypesPromote) {
  // int32 + int64 -> int64; uint8 + int8 -> int16; bool * float -> float.
  Tensor s = Run1(OpKind::kAdd, {Make<int32_t>(DType::kInt32, {2147483647}),
                                 Make<int64_t>(DType::kInt64, {1})});
  ASSERT_EQ(s.dtype(), DType::kInt64);
  EXPECT_THAT(Get<int64_t>(s), ElementsAre(2147483648LL));
  Tensor u = Run1(OpKind::kAdd, {Make<uint8_t>(DType::kUInt8, {200}), Make<int8_t>(DType::kInt8, {-100})});
  ASSERT_EQ(u.dtype(), DType::kInt16);
  EXPECT_THAT(Get<int16_t>(u), ElementsAre(100));
  Tensor m = Run1(OpKind::kMul, {Make<bool>(DType::kBool, {true, false}), Make<float>(DType::kF32, {2.5f, 3.0f})});
  ASSERT_EQ(m.dtype(), DType::kF32);
  EXPECT_THAT(Get<float>(m), ElementsAre(2.5f, 0.0f));
}

TEST(ElementwiseDTypeTest, ComparisonsAndLogicalOpsGiveBool) {
  Tensor lt = Run1(OpKind::kLess, {Make<int16_t>(DType::kInt16, {1, 5}), Make<double>(DType::kF64, {1.5, 4.0})});
  ASSERT_EQ(lt.dtype(), DType::kBool);
  EXPECT_THAT(Get<bool>(lt), ElementsAre(true, false));
  Tensor land = Run1(OpKind::kLogicalAnd, {Make<int32_t>(DType::kInt32, {0, 3}), Make<float>(DType::kF32, {1.0f, 0.5f})});
  ASSERT_EQ(land.dtype(), DType::kBool);
  EXPECT_THAT(Get<bool>(land), ElementsAre(false, true));
}

TEST(ElementwiseDTypeTest, BitwiseOpsOnIntegers) {
  Tensor a = Make<int32_t>(DType::kInt32, {12, -1});
  Tensor b = Make<int32_t>(DType::kInt32, {10, 6});
  Tensor r = Run1(OpKind::kLogicalAnd, {a, b}, Attrs().Bool("bitwise", true));
  ASSERT_EQ(r.dtype(), DType::kInt32);
  EXPECT_THAT(Get<int32_t>(r), ElementsAre(8, 6));
  Tensor x = Run1(OpKind::kLogicalXor, {a, b}, Attrs().Bool("bitwise", true));
  EXPECT_THAT(Get<int32_t>(x), ElementsAre(6, -7));
  // bitwise_not (~x in the tensor's dtype): torch.bitwise_not(int32 [12, -1]) is
  // [-13, 0], of uint8 [0, 5] [255, 250].
  Tensor n = Run1(OpKind::kLogicalNot, {a}, Attrs().Bool("bitwise", true));
  ASSERT_EQ(n.dtype(), DType::kInt32);
  EXPECT_THAT(Get<int32_t>(n), ElementsAre(-13, 0));
  Tensor u = Run1(OpKind::kLogicalNot, {Make<uint8_t>(DType::kUInt8, {0, 5})},
                  Attrs().Bool("bitwise", true));
  EXPECT_THAT(Get<uint8_t>(u), ElementsAre(255, 250));
  // On floats PyTorch raises; so does Prepare, naming the node.
  SingleOpGraph f(OpKind::kLogicalAnd, {Make<float>(DType::kF32, {1}), Make<float>(DType::kF32, {1})},
                  Attrs().Bool("bitwise", true));
  absl::Status s = f.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("node (LogicalAnd"));
}

TEST(ElementwiseDTypeTest, Float16ComputesInFloat32AndRoundsBack) {
  // 2049 is not a float16 value: 2048 + 1 rounds to even (2048); 0.1 + 0.2
  // rounds once, like PyTorch's CPU kernel.
  auto half = [](std::vector<float> v) {
    std::vector<uint16_t> h;
    for (float f : v) h.push_back(FloatToHalf(f));
    return Make<uint16_t>(DType::kF16, h);
  };
  Tensor r = Run1(OpKind::kAdd, {half({2048.0f, 0.1f}), half({1.0f, 0.2f})});
  ASSERT_EQ(r.dtype(), DType::kF16);
  std::vector<uint16_t> got = Get<uint16_t>(r);
  EXPECT_EQ(HalfToFloat(got[0]), 2048.0f);
  EXPECT_EQ(got[1], FloatToHalf(HalfToFloat(FloatToHalf(0.1f)) + HalfToFloat(FloatToHalf(0.2f))));
  // FP16 with BF16 meets in FP32.
  Tensor bf = Make<uint16_t>(DType::kBF16, {FloatToBF16(1.5f)});
  Tensor m = Run1(OpKind::kMul, {half({2.0f}), bf});
  ASSERT_EQ(m.dtype(), DType::kF32);
  EXPECT_THAT(Get<float>(m), ElementsAre(3.0f));
}

TEST(ElementwiseDTypeTest, InPlaceKeepsTheDestinationDTypeOrFails) {
  // int32 += int64 stays int32; int64 += float fails as in PyTorch.
  Tensor r = Run1(OpKind::kAdd, {Make<int32_t>(DType::kInt32, {5}), Make<int64_t>(DType::kInt64, {7})},
                  Attrs().Bool("in_place", true));
  ASSERT_EQ(r.dtype(), DType::kInt32);
  EXPECT_THAT(Get<int32_t>(r), ElementsAre(12));
  SingleOpGraph g(OpKind::kAdd, {Make<int64_t>(DType::kInt64, {5}), Make<float>(DType::kF32, {0.5f})},
                  Attrs().Bool("in_place", true));
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("can't be cast"));
}

TEST(ElementwiseDTypeTest, WhereKeepsFloat16AndPromotesValues) {
  Tensor cond = Make<bool>(DType::kBool, {true, false});
  Tensor r = Run1(OpKind::kWhere, {cond, Make<int32_t>(DType::kInt32, {1, 2}),
                                   Make<int64_t>(DType::kInt64, {-3, -4})});
  ASSERT_EQ(r.dtype(), DType::kInt64);
  EXPECT_THAT(Get<int64_t>(r), ElementsAre(1, -4));
}

TEST(ElementwiseDTypeTest, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);       // overflows to inf
  EXPECT_EQ(FloatToHalf(5.9604645e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x0001), 5.9604645e-08f);
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // tie to even
  EXPECT_EQ(FloatToBF16(1.0f + 1.0f / 256), 0x3f80);   // tie to even
  EXPECT_EQ(BF16ToFloat(0x3fc0), 1.5f);
}

}  // namespace
}  // namespace kiln::kernels
