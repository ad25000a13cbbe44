#include "server/core/upload_store.h"

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

// A content's SHA-256 for the n-th fake upload (the store checks it only at Finish).
std::string FakeSha(int n) {
  std::string sha = Sha256Hex(std::to_string(n));
  return sha;
}

TEST_F(UploadStoreTest, NewUploadsPastTheCountLimitAreResourceExhausted) {
  UploadLimits limits;
  limits.max_partial_uploads = 3;
  UploadStore store(dir_, limits);
  // Two abandoned (kept on disk) and one running: the limit is reached.
  for (int i = 0; i < 2; ++i) {
    auto s = store.Begin(FakeSha(i), 100, 0);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Append("abc").ok());
  }
  auto running = store.Begin(FakeSha(2), 100, 0);
  ASSERT_TRUE(running.ok()) << running.status();
  auto refused = store.Begin(FakeSha(3), 100, 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("3 partial uploads are already kept or in progress, the server's limit "
                        "(--max-partial-uploads 3)"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--partial-upload-ttl-s"));
  // A kept one resumes: it is counted already.
  auto resumed = store.Begin(FakeSha(0), 100, 3);
  EXPECT_TRUE(resumed.ok()) << resumed.status();
}

TEST_F(UploadStoreTest, DeclaredBytesPastTheByteLimitAreResourceExhausted) {
  UploadLimits limits;
  limits.max_partial_bytes = 1000;
  UploadStore store(dir_, limits);
  { ASSERT_TRUE(store.Begin(FakeSha(0), 600, 0).ok()); }  // abandoned, 600 declared
  auto refused = store.Begin(FakeSha(1), 401, 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("cannot start an upload of 401 bytes: partial uploads already hold 600 "
                        "of the 1000 bytes they may declare together "
                        "(--max-partial-upload-bytes)"));
  EXPECT_TRUE(store.Begin(FakeSha(1), 400, 0).ok());
  // One declaring more than the whole budget never fits.
  EXPECT_EQ(store.Begin(FakeSha(2), 1001, 0).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(UploadStoreTest, AbandonedPartsExpireAfterTheTtlButRunningOnesStay) {
  UploadLimits limits;
  limits.ttl = std::chrono::seconds(60);
  limits.max_partial_uploads = 2;
  UploadStore store(dir_, limits);
  {
    auto s = store.Begin(FakeSha(0), 100, 0);
    ASSERT_TRUE((*s)->Append("abc").ok());
  }
  auto running = store.Begin(FakeSha(1), 100, 0);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(store.SweepExpired(), 0);  // both fresh
  // Both last written two minutes ago.
  const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(2);
  fs::last_write_time(store.PartPath(FakeSha(0), 100), old);
  fs::last_write_time(store.PartPath(FakeSha(1), 100), old);
  EXPECT_EQ(store.SweepExpired(), 1);  // the running one is kept
  EXPECT_FALSE(fs::exists(store.PartPath(FakeSha(0), 100)));
  EXPECT_TRUE(fs::exists(store.PartPath(FakeSha(1), 100)));
  // The expired one no longer counts against the limit.
  EXPECT_TRUE(store.Begin(FakeSha(2), 100, 0).ok());
}

TEST_F(UploadStoreTest, ABeginSweepsExpiredPartsBeforeCounting) {
  UploadLimits limits;
  limits.ttl = std::chrono::seconds(60);
  limits.max_partial_uploads = 1;
  UploadStore store(dir_, limits);
  { ASSERT_TRUE(store.Begin(FakeSha(0), 100, 0).ok()); }
  EXPECT_EQ(store.Begin(FakeSha(1), 100, 0).status().code(),
            absl::StatusCode::kResourceExhausted);
  fs::last_write_time(store.PartPath(FakeSha(0), 100),
                      fs::file_time_type::clock::now() - std::chrono::minutes(2));
  EXPECT_TRUE(store.Begin(FakeSha(1), 100, 0).ok());
}

}  // namespace
}  // namespace kiln::server
