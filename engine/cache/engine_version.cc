#include "engine/cache/engine_version.h"

#include "absl/strings/str_cat.h"
#include "engine/cache/cache_file.h"
#include "engine/cache/file_io.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::cache {

const std::string& EngineVersion() {
  static const std::string* version = [] {
    absl::StatusOr<FileDigest> exe = Sha256File("/proc/self/exe");
    // Without /proc the digest is unknown; a per-process value then keeps
    // entries from being shared rather than risking stale ones.
    const std::string build =
        exe.ok() ? exe->sha256.substr(0, 16) : absl::StrCat("pid", UniqueSuffix());
    return new std::string(
        absl::StrCat("kiln-", KILN_VERSION, "/cache-", kCacheFormat, "/exe-", build));
  }();
  return *version;
}

}  // namespace kiln::cache
