// SharedMemoryRegistry and SharedMemoryRegion: a registered range reads and
// writes its object's bytes; a range outside the region is refused; and when
// the client shrinks its object after registering, the pages past the new end
// fail the copy with a status instead of killing the process (SIGBUS), on any
// number of threads copying while it shrinks and grows, while a SIGBUS
// anywhere else still does.
#include "server/core/shared_memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace kiln::server {
namespace {

class SharedMemoryTest : public ::testing::Test {
 protected:
  static constexpr size_t kBytes = 4 * 4096;
  void SetUp() override {
    key_ = "/kiln-shm-test-" + std::to_string(getpid());
    fd_ = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd_, 0) << std::strerror(errno);
    ASSERT_EQ(ftruncate(fd_, kBytes), 0);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    shm_unlink(key_.c_str());
  }
  std::string key_;
  int fd_ = -1;
};

TEST_F(SharedMemoryTest, ReadsAndWritesTheRegisteredRange) {
  SharedMemoryRegistry registry;
  // The region starts one page and 16 bytes into the object.
  ASSERT_TRUE(registry.Register("r", key_, 4096 + 16, 8192).ok());
  auto region = registry.Find("r");
  ASSERT_TRUE(region.ok());
  const std::vector<char> in = {'k', 'i', 'l', 'n'};
  ASSERT_TRUE((*region)->Write(100, in.data(), in.size(), "output 'y'").ok());
  char seen[4] = {};
  ASSERT_EQ(pread(fd_, seen, 4, 4096 + 16 + 100), 4);
  EXPECT_EQ(std::string(seen, 4), "kiln");
  std::vector<char> out(4);
  ASSERT_TRUE((*region)->Read(100, out.data(), out.size(), "input 'x'").ok());
  EXPECT_EQ(out, in);
  absl::Status outside = (*region)->Read(8190, out.data(), 4, "input 'x'");
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outside.message().find("outside shared-memory region 'r'"), std::string::npos)
      << outside.message();
}

TEST_F(SharedMemoryTest, AnObjectShrunkAfterRegistrationFailsTheCopyNotTheProcess) {
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", key_, 0, kBytes).ok());
  auto region = registry.Find("r");
  ASSERT_TRUE(region.ok());
  ASSERT_EQ(ftruncate(fd_, 100), 0);  // the client's doing
  std::vector<char> buffer(8192, 'x');
  for (int attempt = 0; attempt < 3; ++attempt) {  // the handler stays armed
    absl::Status read = (*region)->Read(4096, buffer.data(), buffer.size(), "input 'x'");
    EXPECT_EQ(read.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(read.message().find("input 'x': shared-memory object '" + key_),
              std::string::npos)
        << read.message();
    EXPECT_NE(read.message().find("no longer holds 12288 bytes"), std::string::npos)
        << read.message();
    absl::Status write = (*region)->Write(4096, buffer.data(), buffer.size(), "output 'y'");
    EXPECT_EQ(write.code(), absl::StatusCode::kInvalidArgument) << write.message();
  }
  // What the first page still holds reads as ever.
  EXPECT_TRUE((*region)->Read(0, buffer.data(), 64, "input 'x'").ok());
  // Grown back, the region serves again.
  ASSERT_EQ(ftruncate(fd_, kBytes), 0);
  EXPECT_TRUE((*region)->Write(4096, buffer.data(), buffer.size(), "output 'y'").ok());
  EXPECT_TRUE((*region)->Read(4096, buffer.data(), buffer.size(), "input 'x'").ok());
}

TEST_F(SharedMemoryTest, CopiesOnManyThreadsWhileTheObjectShrinksAndGrows) {
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", key_, 0, kBytes).ok());
  auto region = registry.Find("r");
  ASSERT_TRUE(region.ok());
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, shrunk{0}, other{0};
  std::vector<std::thread> copiers;
  for (int t = 0; t < 4; ++t) {
    copiers.emplace_back([&, t] {
      std::vector<char> buffer(kBytes - 4096);
      while (!stop.load()) {
        absl::Status s = t % 2 == 0
                             ? (*region)->Read(4096, buffer.data(), buffer.size(), "input 'x'")
                             : (*region)->Write(4096, buffer.data(), buffer.size(), "output 'y'");
        if (s.ok()) {
          ok++;
        } else if (s.code() == absl::StatusCode::kInvalidArgument &&
                   s.message().find("no longer holds") != std::string::npos) {
          shrunk++;
        } else {
          other++;
        }
      }
    });
  }
  // Until the copiers have met both states many times (bounded in time).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int i = 0; (i < 200 || ok.load() < 20 || shrunk.load() < 20) &&
                  std::chrono::steady_clock::now() < give_up;
       ++i) {
    ASSERT_EQ(ftruncate(fd_, i % 2 == 0 ? 100 : kBytes), 0);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_EQ(ftruncate(fd_, kBytes), 0);
  stop = true;
  for (std::thread& t : copiers) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GE(ok.load(), 20);
  EXPECT_GE(shrunk.load(), 20);
}

TEST_F(SharedMemoryTest, ASigbusOutsideACopyStillKillsTheProcess) {
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", key_, 0, kBytes).ok());  // installs the handler
  EXPECT_EXIT(
      {
        auto* p = static_cast<volatile char*>(
            mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0));
        if (ftruncate(fd_, 0) != 0) _exit(3);
        p[8192] = 1;  // SIGBUS, not in a copy of the registry's
        _exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace kiln::server
