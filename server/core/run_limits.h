// Server-wide bounds of what a request or a load runs: the per-request memory
// limit (--max-request-memory-mb), the request and load time limits
// (--request-timeout-s, --load-timeout-s, tightened by a client's deadline),
// and the server's own stop: once Shutdown's grace period has passed, every
// run still going ends with Cancelled.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/runtime/executable.h"

namespace kiln::server {

// Half of the machine's physical memory (8 GiB when it cannot be read).
uint64_t DefaultMaxRequestMemoryBytes();

struct RunLimits {
  int request_timeout_s = 300;
  int load_timeout_s = 600;
  uint64_t max_request_memory_bytes = DefaultMaxRequestMemoryBytes();
  // Set when the server stops cancelling what still runs; shared with Server.
  std::shared_ptr<std::atomic<bool>> stopping = std::make_shared<std::atomic<bool>>(false);

  // One request's bounds: its own memory budget, the earlier of
  // `client_deadline` (gRPC's; system_clock max when the client set none) and
  // --request-timeout-s, Cancelled when `client_cancelled` says so (may be
  // empty) or the server stops.
  runtime::RunOptions ForRequest(std::chrono::system_clock::time_point client_deadline,
                                 std::function<bool()> client_cancelled) const;

  // The bounds of the runs a load makes (the verified import's samples),
  // ending at `deadline`, the load's.
  runtime::RunOptions ForLoad(std::chrono::steady_clock::time_point deadline) const;

  // What --load-timeout-s gives a load starting now.
  std::chrono::steady_clock::time_point LoadDeadline() const {
    return std::chrono::steady_clock::now() + std::chrono::seconds(load_timeout_s);
  }
  // "the load's time limit of 600 s (--load-timeout-s)"
  std::string LoadDeadlineName() const;
};

}  // namespace kiln::server
