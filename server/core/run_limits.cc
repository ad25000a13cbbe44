#include "server/core/run_limits.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace kiln::server {

uint64_t DefaultMaxRequestMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 8ull << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 2;
}

namespace {

constexpr char kStopping[] = "kilnd is shutting down (its --shutdown-grace-s has passed)";
constexpr char kClientDeadline[] = "the client's deadline";
constexpr auto kDeadlineSlack = std::chrono::milliseconds(500);

std::shared_ptr<MemoryBudget> NewBudget(uint64_t bytes) {
  return std::make_shared<MemoryBudget>(bytes, "--max-request-memory-mb");
}

}  // namespace

runtime::RunOptions RunLimits::ForRequest(std::chrono::system_clock::time_point client_deadline,
                                          std::function<bool()> client_cancelled) const {
  runtime::RunOptions run;
  const auto now = std::chrono::steady_clock::now();
  run.deadline = now + std::chrono::seconds(request_timeout_s);
  run.deadline_name = absl::StrCat("the server's request time limit of ", request_timeout_s,
                                   " s (--request-timeout-s)");
  const auto client_left = client_deadline - std::chrono::system_clock::now();
  if (client_left < std::chrono::seconds(request_timeout_s)) {
    run.deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             client_left);
    run.deadline_name = kClientDeadline;
  }
  const bool client_deadline_first = run.deadline_name == kClientDeadline;
  run.stop = [client_cancelled = std::move(client_cancelled), client_deadline_first,
              client_deadline, deadline_name = run.deadline_name, stopping = stopping] {
    if (stopping->load()) return absl::CancelledError(kStopping);
    if (!client_cancelled || !client_cancelled()) return absl::OkStatus();
    // gRPC also cancels a call when the client's deadline passes, and the
    // client's cancellation can arrive a little before the server's copy of
    // that deadline (taken when the call arrived): one so close to it is the
    // deadline's.
    if (client_deadline_first &&
        std::chrono::system_clock::now() + kDeadlineSlack >= client_deadline) {
      return absl::DeadlineExceededError(absl::StrCat("ran past ", deadline_name));
    }
    return absl::CancelledError("the client cancelled the request");
  };
  run.memory = NewBudget(max_request_memory_bytes);
  return run;
}

runtime::RunOptions RunLimits::ForLoad(std::chrono::steady_clock::time_point deadline) const {
  runtime::RunOptions run;
  run.deadline = deadline;
  run.deadline_name = LoadDeadlineName();
  run.stop = [stopping = stopping] {
    return stopping->load() ? absl::CancelledError(kStopping) : absl::OkStatus();
  };
  run.memory = NewBudget(max_request_memory_bytes);
  return run;
}

std::string RunLimits::LoadDeadlineName() const {
  return absl::StrCat("the load's time limit of ", load_timeout_s, " s (--load-timeout-s)");
}

}  // namespace kiln::server
