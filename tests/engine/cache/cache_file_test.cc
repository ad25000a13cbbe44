#include "engine/cache/cache_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "engine/cache/file_io.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Damages a file in place (no fsync: hundreds of variants are tried).
void Overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class CacheFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln-cache-file-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    path_ = dir_ + "/entry";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  std::string path_;
};

TEST_F(CacheFileTest, RoundTripsAndLeavesNoTempFiles) {
  const std::string payload(100000, 'p');
  ASSERT_TRUE(WriteCacheFile(path_, "plan", "key-1", payload).ok());
  auto read = ReadCacheFile(path_, "plan", "key-1");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->view(), payload);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(read->data()) % 64, 0u);  // tensors may point into it
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(CacheFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadCacheFile(path_, "plan", "k").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CacheFileTest, OtherKeyKindOrFormatIsStale) {
  ASSERT_TRUE(WriteCacheFile(path_, "plan", "key-1", "payload").ok());
  auto other_key = ReadCacheFile(path_, "plan", "key-2");
  EXPECT_EQ(other_key.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_key.status().message(), HasSubstr("stale"));
  EXPECT_EQ(ReadCacheFile(path_, "graph", "key-1").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(CacheFileTest, EveryTruncationIsDetected) {
  const std::string payload = "0123456789abcdef0123456789abcdef";
  ASSERT_TRUE(WriteCacheFile(path_, "graph", "k", payload).ok());
  auto whole = ReadFileToString(path_);
  ASSERT_TRUE(whole.ok());
  for (size_t n = 0; n < whole->size(); ++n) {
    Overwrite(path_, whole->substr(0, n));
    auto read = ReadCacheFile(path_, "graph", "k");
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << "truncated to " << n;
  }
}

TEST_F(CacheFileTest, EveryBitFlipIsDetected) {
  ASSERT_TRUE(WriteCacheFile(path_, "graph", "model-key", "payload bytes here").ok());
  auto whole = ReadFileToString(path_);
  ASSERT_TRUE(whole.ok());
  for (size_t byte = 0; byte < whole->size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = *whole;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      Overwrite(path_, flipped);
      auto read = ReadCacheFile(path_, "graph", "model-key");
      EXPECT_FALSE(read.ok()) << "flip of bit " << bit << " in byte " << byte << " went unnoticed";
    }
  }
}

TEST(FileIoTest, Sha256FileMatchesKnownDigest) {
  std::string tmpl = (fs::temp_directory_path() / "kiln-sha-XXXXXX").string();
  const std::string dir = ::mkdtemp(tmpl.data());
  ASSERT_TRUE(WriteFileAtomically(dir + "/f", "abc").ok());
  auto digest = Sha256File(dir + "/f");
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(digest->sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest->size, 3u);
  EXPECT_TRUE(IsSha256Hex(digest->sha256));
  EXPECT_FALSE(IsSha256Hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::cache
