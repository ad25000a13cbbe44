// Imports TorchScript files in a short-lived child process, so a hostile or
// broken file that crashes, hangs or exhausts memory inside libtorch takes
// down only the child. kilnd starts itself again in a hidden mode,
//   kilnd --import-worker MODEL_FILE OUTPUT_FILE KEY MEMORY_BYTES
// (fork + exec, so the child starts clean instead of inheriting the daemon's
// threads). The worker limits its own address space (RLIMIT_AS) to what it
// uses at start-up plus MEMORY_BYTES, imports, and writes the serialized graph
// (or the importer's error) as a checksummed cache file (engine/cache) with
// the given key; given the compiled-graph cache's own path and key for the
// file, the imported graph lands in the cache without being written twice.
// The daemon enforces the time limit with SIGKILL, reads the answer, and turns
// a crash or a limit into a clear error for the client.
//
// Test-only hook: with KILN_TEST_IMPORT_FAULT=crash|hang|oom in its
// environment, the worker segfaults, sleeps forever, or allocates until its
// memory limit stops it, instead of importing. Tests use it to check the
// daemon's handling of each failure; it has no other use.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/cache/cache_file.h"

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
};

// Where the child writes its answer: a cache file at `path` with `key`. On
// success it stays there when `keep` (it is the cache's entry); otherwise it
// is removed once read.
struct ImportAnswer {
  std::string path;
  std::string key;
  bool keep = false;
};

// Imports `model_path` by running `worker_binary --import-worker ...`; returns
// the serialized graph (cache::SerializeGraph's format), read into an aligned
// buffer that cache::ParseGraph can leave the weights in. Fails with the
// importer's own error (InvalidArgument, Unimplemented), with InvalidArgument
// when the child crashes, with ResourceExhausted when it exceeds the memory
// limit, DeadlineExceeded when it exceeds the time limit, and with
// limits.stop's status when that says to stop. When the graph imported but cannot be serialized,
// the status is Unimplemented and IsNotSerializable() is true: the caller may
// import in process instead.
absl::StatusOr<cache::Payload> ImportInChildProcess(const std::string& worker_binary,
                                                    const std::string& model_path,
                                                    const ImportAnswer& answer,
                                                    const ImportLimits& limits);

bool IsNotSerializable(const absl::Status& status);

// kilnd's --import-worker mode; argv as above. Returns the exit status.
int ImportWorkerMain(int argc, char** argv);

}  // namespace kiln::server
