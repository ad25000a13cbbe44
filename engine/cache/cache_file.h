// One cache file: a checksummed envelope around a serialized payload (a graph,
// a compiled plan, or the import child's answer). Layout:
//
//   bytes 0..7    magic "KILNCF02"
//   bytes 8..15   body size N, little-endian
//   bytes 16..19  CRC-32C of the body, little-endian
//   bytes 20..23  zero
//   bytes 24..    body: header size H (4 bytes, little-endian), H bytes of
//                 kiln.v1.CacheFileHeader (format, kind, key, payload size),
//                 zeros up to a multiple of 64 bytes from the file's start,
//                 then the payload
//
// The checksum covers the header too, so a flipped bit anywhere is caught; a
// truncated file fails the size check. CRC-32C rather than a cryptographic
// hash: it guards against torn writes and bit rot in a directory the server
// owns, and at several GB/s it keeps a restart from being bound by checking. The key text inside
// the header is compared with the caller's, so a file that is intact but was written for another
// key or format (a stale entry) is never taken for this one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::cache {

// Bumped whenever the layout or the meaning of a payload changes.
inline constexpr uint32_t kCacheFormat = 3;

// A payload read from a cache file: the file is mapped (engine/common/
// mapped_file.h) and the payload is 64-byte aligned in it, so tensors can
// point into it (graph_serializer.h). Copies share the mapping.
class Payload {
 public:
  Payload() = default;
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  absl::string_view view() const { return absl::string_view(data_, size_); }
  // Keeps the buffer alive; hand it to whatever points into it.
  const std::shared_ptr<const char>& owner() const { return owner_; }

 private:
  friend absl::StatusOr<Payload> ReadCacheFile(const std::string&, absl::string_view,
                                               absl::string_view);
  std::shared_ptr<const char> owner_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// Writes the file atomically (file_io.h) with the concatenation of
// `payload` as its payload. Internal on I/O errors.
absl::Status WriteCacheFile(const std::string& path, absl::string_view kind, absl::string_view key,
                            const std::vector<absl::string_view>& payload);
inline absl::Status WriteCacheFile(const std::string& path, absl::string_view kind,
                                   absl::string_view key, absl::string_view payload) {
  return WriteCacheFile(path, kind, key, std::vector<absl::string_view>{payload});
}

// Writes the same bytes to the open descriptor `fd` (at its offset) and
// syncs it: for a writer that may not open files (the sandboxed import
// child); whoever opened the file sees it complete only once the writer is
// done. Internal on I/O errors.
absl::Status WriteCacheFileTo(int fd, absl::string_view kind, absl::string_view key,
                              const std::vector<absl::string_view>& payload);

// Reads and checks the file; returns its payload. NotFound when there is no
// file, DataLoss when it is corrupt (bad magic, size or checksum, unreadable
// header), FailedPrecondition when it is intact but stale (other format, kind
// or key). Every message names the file.
absl::StatusOr<Payload> ReadCacheFile(const std::string& path, absl::string_view kind,
                                      absl::string_view key);

// The key in the file's header, read without checking the payload (for
// sweeping old entries; never to serve one). DataLoss when unreadable.
absl::StatusOr<std::string> PeekCacheFileKey(const std::string& path);

}  // namespace kiln::cache
