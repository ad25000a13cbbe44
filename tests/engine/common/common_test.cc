#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>

#include "engine/common/huge_pages.h"
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

TEST(HugePagesTest, AdvisesOnlyWholeAlignedExtentsInside) {
  EXPECT_EQ(AdviseHugePages(nullptr, 0), 0u);
  constexpr size_t kMiB = size_t{1} << 20;
  std::unique_ptr<char, decltype(&std::free)> buffer(
      static_cast<char*>(std::aligned_alloc(kHugePageBytes, 6 * kMiB)), std::free);
  ASSERT_NE(buffer, nullptr);
  // No whole extent: shorter than one, or straddling a boundary.
  EXPECT_EQ(AdviseHugePages(buffer.get(), kMiB), 0u);
  EXPECT_EQ(AdviseHugePages(buffer.get() + kMiB, 2 * kMiB), 0u);
  // [4 KiB, 4 MiB + 4 KiB) holds exactly one, [2 MiB, 4 MiB); with the
  // kernel's transparent huge pages built in, the advice is taken.
  const size_t advised = AdviseHugePages(buffer.get() + 4096, 4 * kMiB);
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    EXPECT_EQ(advised, kHugePageBytes);
  } else {
    EXPECT_EQ(advised, 0u);
  }
}

TEST(HugePagesTest, LargeTensorBuffersStartOnAnExtent) {
  EXPECT_EQ(BufferAlignment(kHugePageBytes - 64, 64), 64u);
  EXPECT_EQ(BufferAlignment(kHugePageBytes, 64), kHugePageBytes);
  Tensor big = Tensor::Zeros(DType::kF32, {3, 1 << 20});  // 12 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.raw_data()) % kHugePageBytes, 0u);
  EXPECT_EQ(big.data<float>()[(3 << 20) - 1], 0.0f);
  Tensor small = Tensor::Zeros(DType::kF32, {1000});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.raw_data()) % 64, 0u);
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
