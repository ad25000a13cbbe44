// ZipArchive: the central directory (with zip64 sizes and offsets), checked
// entry by entry against the bytes it describes.
#include "engine/importer/export/pt2_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln::importer {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;

uint16_t U16(std::string_view b, uint64_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) |
                               (static_cast<uint8_t>(b[at + 1]) << 8));
}
uint32_t U32(std::string_view b, uint64_t at) {
  return static_cast<uint32_t>(U16(b, at)) | (static_cast<uint32_t>(U16(b, at + 2)) << 16);
}
uint64_t U64(std::string_view b, uint64_t at) {
  return static_cast<uint64_t>(U32(b, at)) | (static_cast<uint64_t>(U32(b, at + 4)) << 32);
}

// Whether [at, at + n) lies inside a buffer of `size` bytes, without overflow.
bool Inside(uint64_t size, uint64_t at, uint64_t n) { return at <= size && n <= size - at; }

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("not a valid zip archive: ", what));
}

// Absolute paths, drive letters, backslashes and ".." components would name
// files outside the archive's root if anything ever extracted them.
bool SafeName(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.find('\\') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos ||
      (name.size() > 1 && name[1] == ':')) {
    return false;
  }
  for (absl::string_view part : absl::StrSplit(absl::string_view(name.data(), name.size()), '/')) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

bool LooksLikeZip(std::string_view bytes) {
  return bytes.size() >= 4 && U32(bytes, 0) == kLocalHeader;
}

absl::StatusOr<ZipArchive> ZipArchive::Open(std::string_view bytes, ZipLimits limits) {
  const uint64_t size = bytes.size();
  if (size < 22) return Bad("too short");
  // The end-of-directory record: the last 22 bytes, or earlier by a comment of
  // up to 64 KiB.
  uint64_t eocd = size;
  for (uint64_t at = size - 22 + 1; at-- > 0 && size - at <= 22 + 0xFFFF;) {
    if (U32(bytes, at) == kEndOfDirectory) {
      eocd = at;
      break;
    }
  }
  if (eocd == size) return Bad("no end-of-directory record");
  uint64_t count = U16(bytes, eocd + 10);
  uint64_t dir_size = U32(bytes, eocd + 12);
  uint64_t dir_offset = U32(bytes, eocd + 16);
  if (count == 0xFFFF || dir_size == 0xFFFFFFFF || dir_offset == 0xFFFFFFFF) {
    // zip64: a locator just before the record points at the zip64 record.
    if (eocd < 20 || U32(bytes, eocd - 20) != kZip64Locator) return Bad("no zip64 locator");
    const uint64_t z64 = U64(bytes, eocd - 20 + 8);
    if (!Inside(size, z64, 56) || U32(bytes, z64) != kZip64EndOfDirectory) {
      return Bad("zip64 end-of-directory record out of range");
    }
    count = U64(bytes, z64 + 32);
    dir_size = U64(bytes, z64 + 40);
    dir_offset = U64(bytes, z64 + 48);
  }
  if (!Inside(size, dir_offset, dir_size)) return Bad("central directory out of range");
  if (count > limits.max_entries) {
    return Bad(absl::StrCat(count, " entries (the limit is ", limits.max_entries, ")"));
  }

  ZipArchive archive;
  archive.bytes_ = bytes;
  archive.limits_ = limits;
  archive.entries_.reserve(count);
  uint64_t at = dir_offset;
  const uint64_t end = dir_offset + dir_size;
  for (uint64_t k = 0; k < count; ++k) {
    if (!Inside(end, at, 46) || U32(bytes, at) != kCentralHeader) {
      return Bad(absl::StrCat("directory entry ", k, " is malformed"));
    }
    ZipEntry e;
    e.method = U16(bytes, at + 10);
    e.compressed_size = U32(bytes, at + 20);
    e.size = U32(bytes, at + 24);
    const uint64_t name_len = U16(bytes, at + 28);
    const uint64_t extra_len = U16(bytes, at + 30);
    const uint64_t comment_len = U16(bytes, at + 32);
    uint64_t local = U32(bytes, at + 42);
    if (!Inside(end, at + 46, name_len + extra_len + comment_len)) {
      return Bad(absl::StrCat("directory entry ", k, " runs past the directory"));
    }
    e.name = std::string(bytes.substr(at + 46, name_len));
    // zip64 extra field: the 64-bit values of the fields that read 0xFFFFFFFF, in order.
    for (uint64_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const uint16_t id = U16(bytes, x);
      const uint64_t len = U16(bytes, x + 2);
      if (x + 4 + len > at + 46 + name_len + extra_len) break;
      if (id == 0x0001) {
        uint64_t f = x + 4;
        auto next = [&](uint64_t& field) {
          if (f + 8 <= x + 4 + len) {
            field = U64(bytes, f);
            f += 8;
          }
        };
        if (e.size == 0xFFFFFFFF) next(e.size);
        if (e.compressed_size == 0xFFFFFFFF) next(e.compressed_size);
        if (local == 0xFFFFFFFF) next(local);
      }
      x += 4 + len;
    }
    at += 46 + name_len + extra_len + comment_len;

    if (!SafeName(e.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("zip entry '", e.name, "' has an absolute or '..' path"));
    }
    if (e.method != 0 && e.method != 8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zip entry '", e.name, "' uses compression method ", e.method,
          " (Kiln reads stored and deflated entries)"));
    }
    if (!Inside(size, local, 30) || U32(bytes, local) != kLocalHeader) {
      return absl::InvalidArgumentError(
          absl::StrCat("zip entry '", e.name, "': local header out of range"));
    }
    e.data_offset = local + 30 + U16(bytes, local + 26) + U16(bytes, local + 28);
    if (!Inside(size, e.data_offset, e.compressed_size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zip entry '", e.name, "' declares ", e.compressed_size,
          " bytes that lie outside the archive"));
    }
    if (e.method == 0 && e.size != e.compressed_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("zip entry '", e.name, "' is stored but declares two sizes"));
    }
    if (e.method == 8 && (e.size > limits.max_inflated_bytes ||
                          e.size > std::max<uint64_t>(e.compressed_size, 1) * limits.max_ratio)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zip entry '", e.name, "' would inflate ", e.compressed_size, " bytes to ", e.size,
          " (a zip bomb?)"));
    }
    archive.entries_.push_back(std::move(e));
  }
  return archive;
}

const ZipEntry* ZipArchive::Find(std::string_view name) const {
  for (const ZipEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

absl::StatusOr<std::string_view> ZipArchive::View(const ZipEntry& entry) const {
  if (entry.method != 0) {
    return absl::InvalidArgumentError(absl::StrCat("zip entry '", entry.name, "' is compressed"));
  }
  return bytes_.substr(entry.data_offset, entry.size);
}

absl::StatusOr<std::string> ZipArchive::Read(const ZipEntry& entry) const {
  if (entry.method == 0) return std::string(bytes_.substr(entry.data_offset, entry.size));
  // Inflate into exactly the declared size; more output than declared, or a
  // stream that ends early, is an error (never a larger buffer).
  std::string out(entry.size, '\0');
  z_stream z;
  std::memset(&z, 0, sizeof(z));
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return absl::InternalError("inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes_.data() + entry.data_offset));
  z.avail_in = static_cast<uInt>(std::min<uint64_t>(entry.compressed_size, UINT32_MAX));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(std::min<uint64_t>(entry.size, UINT32_MAX));
  int rc = inflate(&z, Z_FINISH);
  const uint64_t produced = z.total_out;
  unsigned char spare;
  if (rc == Z_BUF_ERROR && z.avail_out == 0) {
    // Output full: the stream must end here.
    z.next_out = &spare;
    z.avail_out = 1;
    rc = inflate(&z, Z_FINISH);
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != entry.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zip entry '", entry.name, "' does not inflate to its declared ", entry.size, " bytes"));
  }
  return out;
}

}  // namespace kiln::importer
