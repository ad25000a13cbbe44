// MappedFile and ReleaseResidentPages: a mapped file reads as its bytes;
// giving its pages back drops them from the process's resident set and leaves
// the bytes readable; memory outside a live mapping is never touched.
#include "engine/common/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Pages of the mapping starting at `data` resident in this process (its Rss
// in /proc/self/smaps: mincore would tell the page cache's state instead).
size_t ResidentPages(const char* data, size_t) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash < 17 && line.find(' ') > dash) {
      in = std::strtoull(line.substr(0, dash).c_str(), nullptr, 16) ==
           reinterpret_cast<uintptr_t>(data);
    } else if (in && line.rfind("Rss:", 0) == 0) {
      return std::strtoull(line.c_str() + 4, nullptr, 10) * 1024 /
             static_cast<size_t>(sysconf(_SC_PAGESIZE));
    }
  }
  return 0;
}

class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln-mapped-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/weights.bin";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(MappedFileTest, ReleasedPagesLeaveTheResidentSetAndStillRead) {
  std::string bytes(4 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + i / 4096);
  std::ofstream(path_, std::ios::binary) << bytes;
  auto mapped = MappedFile::Open(path_);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  const MappedFile& file = **mapped;
  ASSERT_EQ(file.size(), bytes.size());
  ASSERT_EQ(std::string(file.data(), file.size()), bytes);  // reads every page
  const size_t pages = bytes.size() / static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(ResidentPages(file.data(), file.size()), pages);

  // A range inside: its whole pages go (the kernel may drop a little more
  // where the file sits in huge pages).
  EXPECT_EQ(ReleaseResidentPages(file.data() + 100, 1 << 20), (1u << 20) - 4096);
  EXPECT_LE(ResidentPages(file.data(), file.size()), pages - 255);
  EXPECT_EQ(ReleaseAllResidentPages() >= file.size(), true);
  EXPECT_EQ(ResidentPages(file.data(), file.size()), 0u);
  EXPECT_EQ(std::string(file.data(), file.size()), bytes);  // faults back, same bytes
}

TEST_F(MappedFileTest, MemoryOutsideALiveMappingIsNeverReleased) {
  std::vector<char> heap(1 << 20, 'h');
  EXPECT_EQ(ReleaseResidentPages(heap.data(), heap.size()), 0u);
  EXPECT_EQ(std::string(heap.begin(), heap.end()), std::string(1 << 20, 'h'));

  std::ofstream(path_, std::ios::binary) << std::string(1 << 16, 'm');
  const char* where = nullptr;
  {
    auto mapped = MappedFile::Open(path_);
    ASSERT_TRUE(mapped.ok());
    where = (*mapped)->data();
    // A range running past the mapping's end is not released.
    EXPECT_EQ(ReleaseResidentPages(where, (1 << 16) + 4096), 0u);
  }
  // Unmapped: the address is not a mapping any more.
  EXPECT_EQ(ReleaseResidentPages(where, 4096), 0u);
}

TEST_F(MappedFileTest, MissingAndEmptyFiles) {
  EXPECT_EQ(MappedFile::Open(path_).status().code(), absl::StatusCode::kNotFound);
  std::ofstream(path_, std::ios::binary).flush();
  auto empty = MappedFile::Open(path_);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->size(), 0u);
}

}  // namespace
}  // namespace kiln
