// A reader of the zip archives torch writes (torch.export.save, torch.jit.save),
// over bytes already in memory. Kiln reads the central directory itself rather
// than through a zip library because it needs each stored entry's data offset
// (weights are viewed in place) and full control over every size an untrusted
// archive declares: entries must lie inside the bytes, names must stay inside
// the archive (no absolute or ".." paths), and a deflated entry may not expand
// past the limits (a zip bomb). zlib inflates deflated entries; torch stores
// its entries uncompressed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::importer {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint64_t compressed_size = 0;
  uint64_t size = 0;         // uncompressed, as the directory declares it
  uint64_t data_offset = 0;  // of the (compressed) data in the archive bytes
};

struct ZipLimits {
  uint64_t max_entries = 1 << 20;
  // A deflated entry may not inflate past this, nor past max_ratio times its
  // compressed size (a zip bomb). Stored entries cannot expand.
  uint64_t max_inflated_bytes = uint64_t{1} << 30;
  uint64_t max_ratio = 1000;
};

class ZipArchive {
 public:
  // Reads the central directory of `bytes` (which must outlive the archive).
  // InvalidArgument when it is not a zip, or when any entry lies outside the
  // bytes, has an absolute or ".." name, or an unsupported compression method.
  static absl::StatusOr<ZipArchive> Open(std::string_view bytes, ZipLimits limits = {});

  const std::vector<ZipEntry>& entries() const { return entries_; }
  // The entry named exactly `name`, or nullptr.
  const ZipEntry* Find(std::string_view name) const;
  // The entry's bytes: a view into the archive for a stored entry.
  absl::StatusOr<std::string_view> View(const ZipEntry& entry) const;
  // The entry's bytes, inflated when deflated (within the limits).
  absl::StatusOr<std::string> Read(const ZipEntry& entry) const;

 private:
  std::string_view bytes_;
  ZipLimits limits_;
  std::vector<ZipEntry> entries_;
};

// Whether `bytes` start like a zip archive (a local file header).
bool LooksLikeZip(std::string_view bytes);

}  // namespace kiln::importer
