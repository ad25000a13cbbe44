// Crash-safe file primitives shared by the compiled-graph cache and the model
// repository: atomic replacement (temp file in the same directory, fsync,
// rename, fsync of the directory), whole-file reads, and streaming SHA-256.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::cache {

// Temp files start with this prefix so an owner can sweep them after a crash.
inline constexpr char kTempPrefix[] = ".kiln-tmp-";

// Replaces `path` with the concatenation of `pieces`, atomically: a crash
// leaves either the old file or the new one, never a mix. The parent
// directory must exist. Fails with Internal (naming the path and errno's text)
// and leaves no temp file behind.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::vector<absl::string_view>& pieces);
inline absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  return WriteFileAtomically(path, std::vector<absl::string_view>{bytes});
}

// The whole file. NotFound when it does not exist, Internal on other errors.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// fsync()s a directory, so renames and unlinks in it survive a power cut.
absl::Status FsyncDirectory(const std::string& dir);

// Removes temp files (kTempPrefix) directly inside `dir`; returns how many.
int SweepTempFiles(const std::string& dir);

// A random, process-unique suffix for temp names.
std::string UniqueSuffix();

// Incremental SHA-256.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void Update(absl::string_view bytes);
  // Lowercase hex; the hasher cannot be updated afterwards.
  std::string FinishHex();
  // The 32 raw digest bytes.
  std::string FinishRaw();

 private:
  void* ctx_;  // EVP_MD_CTX, kept out of this header
};

// CRC-32C (Castagnoli), continued from `crc` (0 to start). Uses the SSE4.2
// instruction when the CPU has it (about 20x faster than SHA-256 here), so
// checking a cache file costs little next to reading it.
uint32_t Crc32c(absl::string_view bytes, uint32_t crc = 0);

// SHA-256 (lowercase hex) and size of a file, read in chunks.
struct FileDigest {
  std::string sha256;
  uint64_t size = 0;
};
absl::StatusOr<FileDigest> Sha256File(const std::string& path);

// True when `hex` is 64 lowercase hex digits.
bool IsSha256Hex(absl::string_view hex);

}  // namespace kiln::cache
