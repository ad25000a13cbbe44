// PyTorch's type promotion, in one place: which dtype an elementwise op
// computes in and returns, given its operands' dtypes and kinds. Kernels'
// Prepare calls these instead of deciding types themselves, and the test table
// in tests/engine/common checks every rule against libtorch.
//
// PyTorch ranks operands in three tiers (ResultTypeState in
// aten/native/TypeProperties): dimensioned tensors, 0-dim tensors, and Python
// numbers ("wrapped numbers"). Within a tier dtypes promote normally
// (PromoteTypes); a lower tier changes the result only when it is of a higher
// category (bool < integral < floating point). A Python float counts as the
// default dtype (float32), a Python int as int64, a Python bool as bool.
#pragma once

#include <initializer_list>

#include "absl/status/statusor.h"
#include "engine/common/dtype.h"

namespace kiln {

// PyTorch's default floating dtype (torch.get_default_dtype()).
inline constexpr DType kDefaultFloat = DType::kF32;

// How an operand takes part in promotion.
enum class OperandKind : uint8_t {
  kTensor,   // a tensor with at least one dim
  kZeroDim,  // a 0-dim tensor
  kScalar,   // a Python int/float/bool (Kiln holds them as INT64, FP64, BOOL)
};

struct PromotionOperand {
  DType dtype;
  OperandKind kind;
};

// bool < integral < floating point: 0, 1, 2 (kUnknown: -1).
int DTypeCategory(DType dtype);

// torch.promote_types: the smallest dtype both convert to without losing
// category or range (uint8 with int8 gives int16, FP16 with BF16 gives FP32).
// kUnknown when either is kUnknown.
DType PromoteTypes(DType a, DType b);

// torch.result_type over operands of mixed kinds (see the file comment).
DType ResultType(std::initializer_list<PromotionOperand> operands);

// torch.can_cast: false from floating point to integral or bool, and from any
// non-bool to bool; what in-place ops and `out=` check.
bool CanCast(DType from, DType to);

// The elementwise ops whose types PyTorch decides by promotion.
enum class PromotedOp : uint8_t {
  kAdd,          // add, mul, where's two values: the result type
  kMul,
  kMaximum,      // maximum, minimum: like kAdd, tensors only (no Scalar overload)
  kSub,          // like kAdd; a bool operand is an error
  kTrueDivide,   // div: integral and bool results become the default float
  kFloatMath,    // atan2, pow with a float: like kTrueDivide
  kFloorDivide,  // floor_divide, remainder, fmod: like kAdd; bool has no kernel
  kCompare,      // eq, ne, lt, le, gt, ge: computed in the result type, gives bool
  kBitwise,      // bitwise and/or/xor: integral or bool only
  kLogical,      // logical and/or/xor: any dtypes, tensors only, gives bool
};

// What a binary op computes in (`compute`, the dtype both operands are
// converted to) and returns (`result`).
struct BinaryTypes {
  DType compute;
  DType result;
};

// The types of `a op b`, or of the in-place `a op= b` when `in_place` (the
// result keeps a's dtype). InvalidArgument, worded like PyTorch's error, where
// PyTorch raises: a bool operand to subtraction, bitwise ops on floats, an
// in-place result that cannot be cast to the destination (an int tensor += a
// float), floor division of bools, a Python scalar to an op without a Scalar
// overload.
absl::StatusOr<BinaryTypes> BinaryOpTypes(PromotedOp op, PromotionOperand a, PromotionOperand b,
                                          bool in_place = false);

}  // namespace kiln
