#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "engine/common/sha256.h"
#include "engine/common/tensor.h"

namespace kiln {
namespace {

TEST(Sha256Test, MatchesKnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TensorTest, ZerosIsAlignedAndZeroFilled) {
  Tensor t = Tensor::Zeros(DType::kF32, {3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_EQ(t.byte_size(), 60u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
}

TEST(TensorTest, ReshapedSharesStorageAndCloneDoesNot) {
  Tensor t = Tensor::Zeros(DType::kInt64, {2, 3});
  Tensor r = t.Reshaped({6});
  Tensor c = t.Clone();
  t.data<int64_t>()[4] = 7;
  EXPECT_EQ(r.data<int64_t>()[4], 7);
  EXPECT_EQ(c.data<int64_t>()[4], 0);
  EXPECT_EQ(DimsToString(r.dims()), "[6]");
  EXPECT_EQ(NumElements({}), 1);
}

TEST(TensorTest, SizesThatOverflowAreErrorsNotWraparound) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(NumElements({big, big}), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*CheckedByteSize(DType::kF32, {3, 5}, "t"), 60u);
  absl::StatusOr<size_t> over = CheckedByteSize(DType::kF32, {big, big}, "%y");
  ASSERT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(),
            "%y: shape [1099511627776, 1099511627776] of FP32 is too large (its size overflows)");
  EXPECT_EQ(CheckedByteSize(DType::kF32, {2, -1}, "%y").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::Allocate(DType::kF32, {big, big}, "%y").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, AllocateFailsInsteadOfAborting) {
  // 2^62 bytes: no allocator gives that.
  absl::StatusOr<Tensor> huge = Tensor::Allocate(DType::kF32, {int64_t{1} << 60}, "%huge");
  ASSERT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.status().message(), "%huge: cannot allocate 4294967296.0 GiB for FP32[1152921504606846976]");
}

TEST(TensorTest, MemoryBudgetCountsTensorsWhileTheyLive) {
  auto budget = std::make_shared<MemoryBudget>(1000, "--limit");
  absl::StatusOr<Tensor> a = Tensor::Allocate(DType::kF32, {100}, "%a", budget);  // 400 bytes
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(budget->used(), 448u);  // rounded up to 64 bytes
  absl::StatusOr<Tensor> b = Tensor::Allocate(DType::kF32, {150}, "%b", budget);
  ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(b.status().message(),
            "%b needs 640 bytes with 448 bytes already held, more than the per-request memory "
            "limit of 1000 bytes (--limit)");
  *a = Tensor();
  EXPECT_EQ(budget->used(), 0u);
  EXPECT_TRUE(Tensor::Allocate(DType::kF32, {150}, "%b", budget).ok());
}

}  // namespace
}  // namespace kiln
