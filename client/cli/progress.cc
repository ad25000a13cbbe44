#include "client/cli/progress.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_format.h"

namespace kiln::cli {
namespace {

constexpr int kBarWidth = 24;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

std::string HumanBytes(double bytes) {
  if (bytes >= 1e9) return absl::StrFormat("%.2f GB", bytes / 1e9);
  if (bytes >= 1e6) return absl::StrFormat("%.1f MB", bytes / 1e6);
  if (bytes >= 1e3) return absl::StrFormat("%.1f kB", bytes / 1e3);
  return absl::StrFormat("%.0f B", bytes);
}

UploadProgress::UploadProgress(std::string label, FILE* out)
    : label_(std::move(label)),
      out_(out),
      terminal_(::isatty(::fileno(out)) == 1),
      start_(std::chrono::steady_clock::now()) {
  // The server's verify-and-load phase sends no bytes; a ticker keeps the
  // elapsed time moving so the wait does not look like a hang.
  ticker_ = std::thread([this] { Tick(); });
}

UploadProgress::~UploadProgress() { Finish(); }

void UploadProgress::Update(uint64_t sent, uint64_t total) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  if (first_sent_ == UINT64_MAX) first_sent_ = sent;
  sent_ = sent;
  total_ = total;
  if (sent >= total && !all_sent_) {
    all_sent_ = true;
    all_sent_at_ = std::chrono::steady_clock::now();
    Draw(/*force=*/true);
    return;
  }
  Draw(/*force=*/false);
}

void UploadProgress::Finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    // Piped, the last line printed stands; a terminal shows the final state.
    if (terminal_) Draw(/*force=*/true);
    finished_ = true;
    if (terminal_) std::fputc('\n', out_);
    std::fflush(out_);
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void UploadProgress::Tick() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!finished_) {
    wake_.wait_for(lock, std::chrono::milliseconds(500));
    if (!finished_ && all_sent_) Draw(/*force=*/false);
  }
}

void UploadProgress::Draw(bool force) {
  const auto now = std::chrono::steady_clock::now();
  // Piped output gets a line a second, not ten.
  const auto interval = terminal_ ? kRedrawInterval : std::chrono::seconds(1);
  if (!force && now - last_draw_ < interval) return;
  last_draw_ = now;
  const double fraction = total_ == 0 ? 1.0 : static_cast<double>(sent_) / total_;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(filled, '#');
  bar.append(kBarWidth - filled, '-');
  const auto send_end = all_sent_ ? all_sent_at_ : now;
  const double elapsed = std::max(Seconds(send_end - start_), 1e-3);
  const uint64_t moved = first_sent_ == UINT64_MAX ? 0 : sent_ - std::min(sent_, first_sent_);
  std::string line;
  if (all_sent_ && first_sent_ >= total_) {
    line = absl::StrFormat("%s: the server already holds these %s, nothing to send", label_,
                           HumanBytes(total_));
  } else {
    line = absl::StrFormat("%s [%s] %3d%%  %s/%s  %s/s", label_, bar,
                           static_cast<int>(fraction * 100), HumanBytes(sent_),
                           HumanBytes(total_), HumanBytes(moved / elapsed));
  }
  if (all_sent_) {
    absl::StrAppendFormat(&line, "  server verifying and loading %.0f s",
                          Seconds(now - all_sent_at_));
  }
  // On a terminal \r and clear-to-end redraw one line; piped (--progress),
  // each redraw is its own line, so logs stay readable.
  if (terminal_) {
    std::fprintf(out_, "\r%s\x1b[K", line.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace kiln::cli
