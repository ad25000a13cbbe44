#include "engine/common/type_promotion.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// promote_skip_undefined: an empty tier does not take part.
DType PromoteSkipUndefined(DType a, DType b) {
  if (a == DType::kUnknown) return b;
  if (b == DType::kUnknown) return a;
  return PromoteTypes(a, b);
}

// PyTorch's combine_categories: the higher tier's dtype, unless the lower one
// is of a higher category (then the two promote).
DType CombineCategories(DType higher, DType lower) {
  if (IsFloatingPoint(higher)) return higher;
  if (higher == DType::kBool || IsFloatingPoint(lower)) return PromoteSkipUndefined(higher, lower);
  if (higher != DType::kUnknown) return higher;
  return lower;
}

bool HasBool(PromotionOperand a, PromotionOperand b) {
  return a.dtype == DType::kBool || b.dtype == DType::kBool;
}

}  // namespace

int DTypeCategory(DType dtype) {
  if (dtype == DType::kBool) return 0;
  if (IsIntegral(dtype)) return 1;
  if (IsFloatingPoint(dtype)) return 2;
  return -1;
}

DType PromoteTypes(DType a, DType b) {
  if (a == DType::kUnknown || b == DType::kUnknown) return DType::kUnknown;
  if (a == b) return a;
  const int ca = DTypeCategory(a);
  const int cb = DTypeCategory(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) {
    // uint8 and int8 share a size but neither holds the other.
    if ((a == DType::kUInt8 && b == DType::kInt8) || (a == DType::kInt8 && b == DType::kUInt8)) {
      return DType::kInt16;
    }
    return DTypeSize(a) >= DTypeSize(b) ? a : b;
  }
  // Floating point: FP16 and BF16 meet in FP32; otherwise the wider one.
  if (DTypeSize(a) == DTypeSize(b)) return DType::kF32;
  return DTypeSize(a) > DTypeSize(b) ? a : b;
}

DType ResultType(std::initializer_list<PromotionOperand> operands) {
  DType dim = DType::kUnknown, zero = DType::kUnknown, wrapped = DType::kUnknown;
  for (const PromotionOperand& o : operands) {
    switch (o.kind) {
      case OperandKind::kTensor: dim = PromoteSkipUndefined(dim, o.dtype); break;
      case OperandKind::kZeroDim: zero = PromoteSkipUndefined(zero, o.dtype); break;
      case OperandKind::kScalar:
        // A Python float is a double, but counts as the default dtype.
        wrapped = PromoteSkipUndefined(wrapped, IsFloatingPoint(o.dtype) ? kDefaultFloat : o.dtype);
        break;
    }
  }
  return CombineCategories(dim, CombineCategories(zero, wrapped));
}

bool CanCast(DType from, DType to) {
  if (IsFloatingPoint(from) && !IsFloatingPoint(to)) return false;
  if (from != DType::kBool && to == DType::kBool) return false;
  return true;
}

absl::StatusOr<BinaryTypes> BinaryOpTypes(PromotedOp op, PromotionOperand a, PromotionOperand b,
                                          bool in_place) {
  if (a.dtype == DType::kUnknown || b.dtype == DType::kUnknown) {
    return absl::InvalidArgumentError("operand of unknown dtype");
  }
  if ((op == PromotedOp::kMaximum || op == PromotedOp::kLogical) &&
      (a.kind == OperandKind::kScalar || b.kind == OperandKind::kScalar)) {
    return absl::InvalidArgumentError(
        "this op takes two tensors; PyTorch has no overload with a Python scalar");
  }
  if (op == PromotedOp::kSub && HasBool(a, b)) {
    return absl::InvalidArgumentError(
        "subtraction with a bool operand is not supported (PyTorch: use ~ or logical_not() to "
        "invert a mask, ^ or logical_xor() for two masks)");
  }
  const DType common = ResultType({a, b});
  BinaryTypes types{common, common};
  switch (op) {
    case PromotedOp::kAdd:
    case PromotedOp::kMul:
    case PromotedOp::kMaximum:
    case PromotedOp::kSub:
      break;
    case PromotedOp::kTrueDivide:
    case PromotedOp::kFloatMath:
      // Integer inputs are converted to the default float before computing.
      if (!IsFloatingPoint(common)) types = {kDefaultFloat, kDefaultFloat};
      break;
    case PromotedOp::kFloorDivide:
      if (common == DType::kBool) {
        return absl::InvalidArgumentError(
            "floor division and remainder are not implemented for BOOL (as in PyTorch)");
      }
      break;
    case PromotedOp::kCompare:
    case PromotedOp::kLogical:
      types.result = DType::kBool;
      break;
    case PromotedOp::kBitwise:
      if (IsFloatingPoint(common)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bitwise operations need integral or BOOL operands; these promote to ",
            DTypeName(common)));
      }
      break;
  }
  if (in_place) {
    if (!CanCast(types.result, a.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("result type ", DTypeName(types.result),
                                                     " can't be cast to the in-place output's ",
                                                     DTypeName(a.dtype)));
    }
    types.result = a.dtype;
  }
  return types;
}

}  // namespace kiln
