// A bound on the bytes of the disk cache (--cache-disk-bytes).
//
// Every entry (imported graphs, compiled plans, prepacked weights) is one
// file named by its key. Reading an entry marks it used (its modification
// time), writing one adds its bytes, and when the files pass the bound the
// least recently used go until they fill at most 90% of it. Prepacked weights
// whose plans went are never read again, so they age out like any other
// entry. Removing a file a process has mapped is safe on Linux: the mapping
// keeps the bytes until it goes; the next process just misses and compiles.
// Several processes may share the directory and each enforce the bound.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace kiln::cache {

class DiskBudget {
 public:
  // `limit_bytes` 0: no bound (the bytes are still counted for statistics).
  DiskBudget(std::string dir, uint64_t limit_bytes);

  // Marks the entry at `path` used now. Best effort.
  static void Touch(const std::string& path);

  // After an entry of `bytes` was written: enforces the bound when passed.
  void Added(uint64_t bytes);
  // The same for the entry just written at `path` (its size on disk). Best effort.
  void AddedFile(const std::string& path);

  // Counts the entries' bytes and, over the bound, removes the least
  // recently used until at most 90% of it is held. Returns how many went.
  int Enforce();

  uint64_t limit_bytes() const { return limit_; }
  uint64_t bytes() const { return bytes_.load(); }        // as last counted, plus writes since
  uint64_t evictions() const { return evictions_.load(); }

 private:
  const std::string dir_;
  const uint64_t limit_;
  std::mutex enforce_mu_;  // one scan at a time in this process
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace kiln::cache
