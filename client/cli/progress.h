// The upload progress bar of `kiln upload`, drawn on stderr.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace kiln::cli {

// "model.pt [########------]  52%  23.4/44.7 MB  31.2 MB/s", redrawn in place
// (carriage return) at most ten times a second; once every byte is sent it
// counts the seconds the server spends verifying and loading.
class UploadProgress {
 public:
  UploadProgress(std::string label, FILE* out);
  ~UploadProgress();  // ends the line

  // Thread-safe; `sent` counts from the start of the file (resumed bytes included).
  void Update(uint64_t sent, uint64_t total);

  // Stops redrawing and ends the line.
  void Finish();

 private:
  void Draw(bool force);  // with mutex_ held
  void Tick();

  const std::string label_;
  FILE* const out_;
  const bool terminal_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  uint64_t sent_ = 0;
  uint64_t total_ = 0;
  uint64_t first_sent_ = UINT64_MAX;  // where this run started (a resume)
  std::chrono::steady_clock::time_point last_draw_;
  std::chrono::steady_clock::time_point all_sent_at_;
  bool all_sent_ = false;
  bool finished_ = false;
  std::thread ticker_;
};

// "44.7 MB" (decimal units, as rates are quoted).
std::string HumanBytes(double bytes);

}  // namespace kiln::cli
