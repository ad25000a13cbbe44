#include "server/upload_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/common/sha256.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class UploadStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln-upload-test-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
  const std::string data_ = std::string(1000, 'a') + std::string(1000, 'b');
  const std::string sha_ = Sha256Hex(data_);
};

TEST_F(UploadStoreTest, InterruptedUploadResumesToTheSameBytes) {
  UploadStore store(dir_);
  EXPECT_EQ(store.Received(sha_, data_.size()), 0u);
  {
    auto session = store.Begin(sha_, data_.size(), 0);
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE((*session)->Append(data_.substr(0, 700)).ok());
    auto early = (*session)->Finish();
    EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(early.status().message(), HasSubstr("resume at byte 700"));
  }  // the stream broke: the bytes stay
  EXPECT_EQ(store.Received(sha_, data_.size()), 700u);
  // A resume past what was kept is refused; one before it drops the rest.
  EXPECT_EQ(store.Begin(sha_, data_.size(), 900).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto session = store.Begin(sha_, data_.size(), 500);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Append(data_.substr(500)).ok());
  auto path = (*session)->Finish();
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(Slurp(*path), data_);
}

TEST_F(UploadStoreTest, ChecksumMismatchDiscardsTheBytes) {
  UploadStore store(dir_);
  auto session = store.Begin(sha_, data_.size(), 0);
  ASSERT_TRUE(session.ok());
  std::string corrupted = data_;
  corrupted[1234] ^= 1;
  ASSERT_TRUE((*session)->Append(corrupted).ok());
  auto path = (*session)->Finish();
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(path.status().message(), HasSubstr(sha_));
  session->reset();
  EXPECT_EQ(store.Received(sha_, data_.size()), 0u);
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(UploadStoreTest, MoreThanDeclaredIsRefused) {
  UploadStore store(dir_);
  auto session = store.Begin(sha_, 10, 0);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ((*session)->Append(std::string(11, 'x')).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(UploadStoreTest, OneUploadPerContentAtATime) {
  UploadStore store(dir_);
  auto first = store.Begin(sha_, data_.size(), 0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(store.Begin(sha_, data_.size(), 0).status().code(), absl::StatusCode::kAborted);
  first->reset();
  EXPECT_TRUE(store.Begin(sha_, data_.size(), 0).ok());
}

}  // namespace
}  // namespace kiln::server
