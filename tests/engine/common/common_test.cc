#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kiln
