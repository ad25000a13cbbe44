// The engine identity that every cache key includes.
#pragma once

#include <string>

namespace kiln::cache {

// "kiln-<version>/cache-<format>/exe-<first 16 hex digits of the SHA-256 of the
// running executable>". The executable's digest makes any rebuild (a changed
// importer mapping, pass or kernel Prepare) a different engine, so a cache
// directory never hands a new binary what an older one produced; the same
// binary on every replica shares entries. Computed once per process.
const std::string& EngineVersion();

}  // namespace kiln::cache
