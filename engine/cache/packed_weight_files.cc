#include "engine/cache/packed_weight_files.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/cache/cache_file.h"
#include "engine/cache/engine_version.h"
#include "engine/common/sha256.h"

namespace kiln::cache {
namespace {

constexpr char kPackedKind[] = "packed";

std::string FullKey(const std::string& key) {
  return absl::StrCat(key, ";engine=", EngineVersion());
}

}  // namespace

std::string PackedWeightFiles::PathFor(const std::string& key) const {
  return (std::filesystem::path(dir_) / (Sha256Hex(FullKey(key)) + ".packed")).string();
}

std::shared_ptr<const void> PackedWeightFiles::GetOrPack(const std::string& key, size_t bytes,
                                                        const std::function<void(void*)>& pack) {
  const std::string full_key = FullKey(key);
  const std::string path = PathFor(key);
  auto map = [&]() -> absl::StatusOr<std::shared_ptr<const void>> {
    absl::StatusOr<Payload> payload = ReadCacheFile(path, kPackedKind, full_key);
    if (!payload.ok()) return payload.status();
    if (payload->size() != bytes) {
      return absl::DataLossError(absl::StrCat("cache file '", path, "' holds ", payload->size(),
                                              " packed bytes, expected ", bytes));
    }
    return std::shared_ptr<const void>(payload->owner(), payload->data());
  };
  absl::StatusOr<std::shared_ptr<const void>> stored = map();
  if (stored.ok()) {
    hits_++;
    DiskBudget::Touch(path);
    return *std::move(stored);
  }
  if (!absl::IsNotFound(stored.status())) {
    corrupt_++;
    std::error_code ec;
    std::filesystem::remove(path, ec);
    spdlog::warn("cache: {}; entry removed, packing the weight again",
                 std::string(stored.status().message()));
  }

  // 64-byte aligned, zeroed (what a format pads stays zero, so the file's
  // bytes depend on the weights only).
  const size_t allocated = (bytes + 63) / 64 * 64;
  std::shared_ptr<char> buffer(static_cast<char*>(std::aligned_alloc(64, allocated)), std::free);
  std::memset(buffer.get(), 0, allocated);
  pack(buffer.get());
  packs_++;
  absl::Status written =
      WriteCacheFile(path, kPackedKind, full_key, absl::string_view(buffer.get(), bytes));
  if (!written.ok()) {
    spdlog::warn("cache: cannot store a packed weight: {}", std::string(written.message()));
    return buffer;
  }
  writes_++;
  if (disk_ != nullptr) disk_->AddedFile(path);
  // This process too runs on the file's pages, shared with every other
  // process that maps it, rather than on a private copy.
  stored = map();
  if (!stored.ok()) return buffer;
  return *std::move(stored);
}

}  // namespace kiln::cache
