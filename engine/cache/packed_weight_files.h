// The compiled-graph cache's store of prepacked weights
// (kernels/packed_weight_store.h): one cache file per packed weight in the
// cache directory's packed/, named by the SHA-256 of its key (which the
// kernel makes from where the source bytes lie in a cache file, the transform
// and the packed format; the engine version is added here). Files are written
// atomically with a checksum (cache_file.h) and mapped read-only, so a
// restart maps the packed bytes instead of reordering every weight again, and
// replicas sharing the directory share their pages through the page cache.
// A corrupt or stale file is logged, removed and packed again, never an
// error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/cache/disk_budget.h"
#include "engine/kernels/packed_weight_store.h"

namespace kiln::cache {

class PackedWeightFiles final : public kernels::PackedWeightStore {
 public:
  // Keeps its files in `dir`, which must exist; `disk` (optional) bounds them
  // with the cache's other entries.
  explicit PackedWeightFiles(std::string dir, std::shared_ptr<DiskBudget> disk = nullptr)
      : dir_(std::move(dir)), disk_(std::move(disk)) {}

  std::shared_ptr<const void> GetOrPack(const std::string& key, size_t bytes,
                                        const std::function<void(void*)>& pack) override;

  // The file for `key` (for tests).
  std::string PathFor(const std::string& key) const;

  uint64_t hits() const { return hits_; }        // mapped from a file
  uint64_t packs() const { return packs_; }      // packed here
  uint64_t writes() const { return writes_; }    // files written
  uint64_t corrupt() const { return corrupt_; }  // bad files removed

 private:
  const std::string dir_;
  const std::shared_ptr<DiskBudget> disk_;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> packs_{0};
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> corrupt_{0};
};

}  // namespace kiln::cache
