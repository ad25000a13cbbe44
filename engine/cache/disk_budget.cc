#include "engine/cache/disk_budget.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "engine/cache/file_io.h"

namespace kiln::cache {
namespace fs = std::filesystem;

namespace {

// The entry files of a cache directory: what the bound counts. Temp files of
// a write in progress (maybe another process's) and the digest memos (a few
// dozen bytes each) are not entries.
constexpr const char* kEntryDirs[] = {"graphs", "plans", "packed"};

bool IsEntry(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  return !absl::StartsWith(name, kTempPrefix) &&
         (absl::EndsWith(name, ".graph") || absl::EndsWith(name, ".plan") ||
          absl::EndsWith(name, ".packed"));
}

}  // namespace

DiskBudget::DiskBudget(std::string dir, uint64_t limit_bytes)
    : dir_(std::move(dir)), limit_(limit_bytes) {}

void DiskBudget::Touch(const std::string& path) {
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
}

void DiskBudget::Added(uint64_t bytes) {
  const uint64_t now = bytes_.fetch_add(bytes) + bytes;
  if (limit_ > 0 && now > limit_) Enforce();
}

void DiskBudget::AddedFile(const std::string& path) {
  std::error_code ec;
  const uint64_t bytes = fs::file_size(path, ec);
  if (!ec) Added(bytes);
}

int DiskBudget::Enforce() {
  std::lock_guard<std::mutex> lock(enforce_mu_);
  struct File {
    fs::file_time_type used;
    uint64_t bytes;
    fs::path path;
  };
  std::vector<File> files;
  uint64_t total = 0;
  for (const char* sub : kEntryDirs) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(fs::path(dir_) / sub, ec)) {
      std::error_code entry_ec;
      if (!IsEntry(e) || !e.is_regular_file(entry_ec)) continue;
      const uint64_t size = e.file_size(entry_ec);
      if (entry_ec) continue;
      const fs::file_time_type used = e.last_write_time(entry_ec);
      if (entry_ec) continue;
      files.push_back({used, size, e.path()});
      total += size;
    }
  }
  int removed = 0;
  uint64_t freed = 0;
  if (limit_ > 0 && total > limit_) {
    const uint64_t target = limit_ / 10 * 9;
    std::sort(files.begin(), files.end(),
              [](const File& a, const File& b) { return a.used < b.used; });
    for (const File& f : files) {
      if (total - freed <= target) break;
      std::error_code ec;
      if (fs::remove(f.path, ec)) {
        freed += f.bytes;
        ++removed;
      }
    }
    evictions_ += static_cast<uint64_t>(removed);
    spdlog::info("cache: {} entr{} ({} bytes) removed from {}: the disk cache held {} bytes, "
                 "over its bound of {} (--cache-disk-bytes)",
                 removed, removed == 1 ? "y" : "ies", freed, dir_, total, limit_);
  }
  bytes_ = total - freed;
  return removed;
}

}  // namespace kiln::cache
