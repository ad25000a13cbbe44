// Kiln's promotion rules (engine/common/type_promotion) against libtorch: every
// row of the table gen_promotion_table.py wrote (op x lhs dtype/kind x rhs
// dtype/kind -> result dtype or error) must come out the same, plus a few
// named rules spelled out so a failure reads as the rule that broke.
#include "engine/common/type_promotion.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr PromotionOperand T(DType d) { return {d, OperandKind::kTensor}; }
constexpr PromotionOperand Z(DType d) { return {d, OperandKind::kZeroDim}; }
constexpr PromotionOperand S(DType d) { return {d, OperandKind::kScalar}; }

DType Result(PromotedOp op, PromotionOperand a, PromotionOperand b, bool in_place = false) {
  absl::StatusOr<BinaryTypes> t = BinaryOpTypes(op, a, b, in_place);
  return t.ok() ? t->result : DType::kUnknown;
}

TEST(TypePromotionTest, PromoteTypesFollowsTorchTable) {
  EXPECT_EQ(PromoteTypes(DType::kUInt8, DType::kInt8), DType::kInt16);
  EXPECT_EQ(PromoteTypes(DType::kInt32, DType::kInt64), DType::kInt64);
  EXPECT_EQ(PromoteTypes(DType::kF16, DType::kBF16), DType::kF32);
  EXPECT_EQ(PromoteTypes(DType::kInt64, DType::kF16), DType::kF16);
  EXPECT_EQ(PromoteTypes(DType::kBool, DType::kUInt8), DType::kUInt8);
}

TEST(TypePromotionTest, NamedRules) {
  // int64 tensor + 2.5 -> the default float, not float64.
  EXPECT_EQ(Result(PromotedOp::kAdd, T(DType::kInt64), S(DType::kF64)), DType::kF32);
  // int32 + int64 tensors -> int64; but a 0-dim int64 does not widen an int32 tensor.
  EXPECT_EQ(Result(PromotedOp::kAdd, T(DType::kInt32), T(DType::kInt64)), DType::kInt64);
  EXPECT_EQ(Result(PromotedOp::kAdd, T(DType::kInt32), Z(DType::kInt64)), DType::kInt32);
  // A Python int keeps a uint8 tensor uint8; bool * float gives float.
  EXPECT_EQ(Result(PromotedOp::kAdd, T(DType::kUInt8), S(DType::kInt64)), DType::kUInt8);
  EXPECT_EQ(Result(PromotedOp::kMul, T(DType::kBool), T(DType::kF32)), DType::kF32);
  EXPECT_EQ(Result(PromotedOp::kMul, T(DType::kBool), S(DType::kInt64)), DType::kInt64);
  // A float16 tensor stays float16 with a float64 0-dim tensor or a Python float.
  EXPECT_EQ(Result(PromotedOp::kAdd, T(DType::kF16), Z(DType::kF64)), DType::kF16);
  EXPECT_EQ(Result(PromotedOp::kAdd, T(DType::kF16), S(DType::kF64)), DType::kF16);
  // True division of integers gives the default float; floor division keeps ints.
  EXPECT_EQ(Result(PromotedOp::kTrueDivide, T(DType::kInt64), T(DType::kInt64)), DType::kF32);
  EXPECT_EQ(Result(PromotedOp::kFloorDivide, T(DType::kInt64), S(DType::kInt64)), DType::kInt64);
  // Comparisons compute in the common type and give bool.
  absl::StatusOr<BinaryTypes> lt = BinaryOpTypes(PromotedOp::kCompare, T(DType::kInt32),
                                                 S(DType::kF64));
  ASSERT_TRUE(lt.ok());
  EXPECT_EQ(lt->compute, DType::kF32);
  EXPECT_EQ(lt->result, DType::kBool);
  // In place keeps the destination, and fails where PyTorch fails.
  EXPECT_EQ(Result(PromotedOp::kAdd, T(DType::kF16), T(DType::kF64), true), DType::kF16);
  EXPECT_FALSE(BinaryOpTypes(PromotedOp::kAdd, T(DType::kInt64), S(DType::kF64), true).ok());
  EXPECT_FALSE(BinaryOpTypes(PromotedOp::kSub, T(DType::kBool), T(DType::kBool)).ok());
  EXPECT_FALSE(BinaryOpTypes(PromotedOp::kBitwise, T(DType::kInt32), S(DType::kF64)).ok());
  EXPECT_FALSE(CanCast(DType::kF32, DType::kInt64));
  EXPECT_FALSE(CanCast(DType::kInt8, DType::kBool));
  EXPECT_TRUE(CanCast(DType::kBool, DType::kF16));
}

struct OpRule {
  PromotedOp op;
  bool in_place;
};

const std::map<std::string, OpRule>& OpRules() {
  static const auto* rules = new std::map<std::string, OpRule>{
      {"add", {PromotedOp::kAdd, false}},
      {"sub", {PromotedOp::kSub, false}},
      {"mul", {PromotedOp::kMul, false}},
      {"div", {PromotedOp::kTrueDivide, false}},
      {"floor_divide", {PromotedOp::kFloorDivide, false}},
      {"remainder", {PromotedOp::kFloorDivide, false}},
      {"eq", {PromotedOp::kCompare, false}},
      {"lt", {PromotedOp::kCompare, false}},
      {"bitwise_and", {PromotedOp::kBitwise, false}},
      {"logical_and", {PromotedOp::kLogical, false}},
      {"maximum", {PromotedOp::kMaximum, false}},
      {"where", {PromotedOp::kAdd, false}},
      {"add_", {PromotedOp::kAdd, true}},
  };
  return *rules;
}

OperandKind KindFromName(const std::string& s) {
  if (s == "tensor") return OperandKind::kTensor;
  if (s == "zerodim") return OperandKind::kZeroDim;
  return OperandKind::kScalar;
}

TEST(TypePromotionTest, EveryRowMatchesLibtorch) {
  std::ifstream file(std::string(KILN_PROMOTION_DIR) + "/promotion_table.tsv");
  ASSERT_TRUE(file.good()) << "run the promotion_table target first";
  int rows = 0, errors = 0, mismatches = 0;
  std::map<std::string, int> per_op;
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    std::vector<std::string> f;
    for (std::string cell; std::getline(ss, cell, '\t');) f.push_back(cell);
    ASSERT_EQ(f.size(), 6u) << line;
    auto rule = OpRules().find(f[0]);
    ASSERT_NE(rule, OpRules().end()) << "no rule for op " << f[0];
    const std::optional<DType> lhs = DTypeFromName(f[1]);
    const std::optional<DType> rhs = DTypeFromName(f[3]);
    ASSERT_TRUE(lhs && rhs) << line;
    absl::StatusOr<BinaryTypes> got =
        BinaryOpTypes(rule->second.op, {*lhs, KindFromName(f[2])}, {*rhs, KindFromName(f[4])},
                      rule->second.in_place);
    const std::string kiln = got.ok() ? DTypeName(got->result) : "error";
    ++rows;
    ++per_op[f[0]];
    errors += f[5] == "error";
    if (kiln != f[5]) {
      ++mismatches;
      ADD_FAILURE() << f[0] << "(" << f[1] << " " << f[2] << ", " << f[3] << " " << f[4]
                    << "): libtorch gives " << f[5] << ", Kiln " << kiln
                    << (got.ok() ? "" : " (" + std::string(got.status().message()) + ")");
      if (mismatches > 40) return;
    }
  }
  // The table covers every op, all 10 x 10 dtype pairs and all kinds.
  EXPECT_EQ(per_op.size(), OpRules().size());
  EXPECT_GT(rows, 5000);
  EXPECT_GT(errors, 500);  // the error rows are checked too, not only the happy ones
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace kiln
