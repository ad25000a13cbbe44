// The bounds of a libtorch worker child (import_worker.h): its memory, its
// time, when to stop it, and its sandbox. Plain data, apart from the worker's
// machinery, so that what configures the worker (the registry's options,
// server/core/model_registry.h) need not include it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace kiln::server {

struct ImportLimits {
  // Address space the child may add to what it maps at start-up.
  uint64_t memory_bytes = 8ull << 30;
  // Wall-clock limit for the whole import: what is left of the load's
  // (--load-timeout-s).
  int timeout_s = 600;
  // Polled while the child runs: a non-OK status kills it and fails the
  // import with it (RunOptions::stop). May be empty.
  std::function<absl::Status()> stop;
  // Run the import in the sandbox of server/security/sandbox.h (--import-sandbox),
  // chrooted into `sandbox_root`, an empty directory.
  bool sandbox = true;
  std::string sandbox_root;
};

}  // namespace kiln::server
