// The compiled-graph cache: what compiling a model costs is paid once per model
// content and input signature, across requests, model reloads, restarts and
// replicas.
//
// Two kinds of entries:
//  - Imported graphs, on disk only (a loaded model holds its own graph), keyed
//    by the SHA-256 of the model file, the load settings that shape the graph
//    served (the verified import's, which may move ops onto the fallback) and
//    the engine version. A hit skips libtorch entirely.
//  - Compiled plans (runtime::Executable), one per model graph, input
//    signature, compile options and pass pipeline: in memory, in an LRU bounded
//    in bytes, and on disk as the optimized, typed graph (kiln.v1.CompiledPlan)
//    whose weights refer to the model's own constants. A disk hit skips the
//    passes; the kernels' Prepare and the memory planner run again at load.
//  - Prepacked weights, on disk only (packed_weight_files.h): what the
//    kernels' Prepare reorders from a constant that lies in a cache file is
//    kept in packed/, so a plan loaded in another process maps the packed
//    weights instead of reordering them.
// Disk entries are written atomically with a checksum (cache_file.h). A
// corrupt or stale entry is logged, removed and recompiled, never served and
// never an error. Concurrent requests for the same missing plan compile it
// once (single flight); two processes sharing the directory may both compile
// it, and the last rename wins with an equivalent file.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/cache/file_io.h"
#include "engine/cache/disk_budget.h"
#include "engine/cache/packed_weight_files.h"
#include "engine/ir/graph.h"
#include "engine/runtime/model.h"

namespace kiln::cache {

struct CacheOptions {
  // Bound on the bytes of compiled plans kept in memory (arena plus any
  // constants a plan does not share with its model). A plan larger than the
  // bound is used for the request that compiled it and not kept.
  uint64_t memory_bytes = 1ull << 30;
  // Directory for the disk cache (created if missing); empty: memory only.
  std::string dir;
  // Bound on the bytes of the disk cache's entries (disk_budget.h); 0: none.
  uint64_t disk_bytes = 0;
};

// One model version's use of the cache. The cache writes, statistics read.
struct PlanCounters {
  std::atomic<uint64_t> memory_hits{0};
  std::atomic<uint64_t> disk_hits{0};
  std::atomic<uint64_t> misses{0};
  std::atomic<uint64_t> evictions{0};
  std::atomic<uint64_t> compile_count{0};
  std::atomic<uint64_t> compile_ns{0};  // compiling, and loading plans from disk
  std::atomic<uint64_t> hit_ns{0};      // time to answer memory hits
  std::atomic<int64_t> bytes_held{0};   // this version's plans in memory now
};

struct CacheTotals {
  uint64_t memory_limit_bytes = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_entries = 0;
  uint64_t evictions = 0;
  std::string disk_dir;
  uint64_t disk_graph_hits = 0;
  uint64_t disk_graph_misses = 0;
  uint64_t disk_plan_hits = 0;
  uint64_t disk_plan_misses = 0;
  uint64_t disk_corrupt = 0;  // graphs, plans and packed weights
  uint64_t disk_writes = 0;   // graphs and plans
  uint64_t packed_hits = 0;   // packed weights mapped from packed/
  uint64_t packed_writes = 0;
  uint64_t disk_bytes = 0;        // entries on disk, as last counted plus writes since
  uint64_t disk_limit_bytes = 0;  // 0: no bound
  uint64_t disk_evictions = 0;    // entries removed by the bound
};

class CompiledGraphCache : public std::enable_shared_from_this<CompiledGraphCache> {
 public:
  // Creates the cache; with a directory, creates graphs/, plans/, packed/ and digests/
  // in it and sweeps temp files an interrupted write left, entries of other
  // engine versions unused for a day, and digests of files that changed.
  // Internal when the directory cannot be created.
  static absl::StatusOr<std::shared_ptr<CompiledGraphCache>> Create(CacheOptions options);

  bool has_disk() const { return !options_.dir.empty(); }
  const CacheOptions& options() const { return options_; }

  // ---- model files

  // The SHA-256 and size of the model file at `path`. With a disk cache, the
  // digest is remembered under the file's identity (absolute path, device,
  // inode, size, modification and change times; writing to a file always
  // changes its change time), so a restart does not read every model twice.
  // Errors as cache::Sha256File.
  absl::StatusOr<FileDigest> DigestFile(const std::string& path);

  // Records a digest the caller has just verified for the file now at
  // `path` (an upload moved into place). Best effort.
  void RememberDigest(const std::string& path, const FileDigest& digest);

  // ---- imported graphs

  // What identifies the graph a model is served with: the SHA-256 of its file
  // and `settings`, the text of the load settings that decide the graph beyond
  // the file (empty when none do). The methods below take this id.
  static std::string GraphId(const std::string& model_sha256, const std::string& settings);
  // The key text of a graph entry.
  std::string GraphKey(const std::string& graph_id) const;
  std::string GraphPath(const std::string& graph_id) const;

  // The graph stored under `graph_id`, or nullopt on a miss (no disk cache, no
  // entry, or a corrupt or stale entry, which is logged and removed).
  std::optional<ir::Graph> LoadGraph(const std::string& graph_id);

  // The directory of the graph entries (temp files for AdoptGraphFile go
  // there, so adopting one is a rename).
  std::string GraphDir() const;

  // Moves a complete cache file (kind "graph", key GraphKey(graph_id)) into
  // place as the graph entry of `graph_id`. Best effort: on failure the file
  // is removed and the error logged.
  void AdoptGraphFile(const std::string& graph_id, const std::string& path);

  // Stores a graph in SerializeGraph()'s format, given as pieces to write one
  // after another. Best effort: a failure is logged and only costs a later
  // import.
  void StoreGraph(const std::string& graph_id,
                  const std::vector<absl::string_view>& serialized_graph);

  // ---- compiled plans

  // The executables of one model version. `model_key` identifies its graph
  // exactly (content and input/output names); `label` names it in logs
  // ("resnet50:2"); `counters` receive its events.
  std::shared_ptr<const runtime::ExecutableProvider> Provider(
      std::string model_key, std::string label, std::shared_ptr<PlanCounters> counters);

  // Drops from memory every plan whose events go to `counters` (the version
  // was unloaded: its plans would otherwise keep its weights alive).
  void Forget(const std::shared_ptr<PlanCounters>& counters);

  // Path of the plan file for a key, and the key a provider uses (for tests).
  std::string PlanPath(const std::string& plan_key) const;
  static std::string PlanKey(const std::string& model_key,
                             const std::vector<kernels::TensorInfo>& signature,
                             const runtime::CompileOptions& options);

  CacheTotals Totals() const;

  // Returns the executable for `signature`, from memory, disk or a compile.
  absl::StatusOr<std::shared_ptr<const runtime::Executable>> GetOrCompile(
      const std::string& model_key, const std::string& label,
      const std::shared_ptr<PlanCounters>& counters, const ir::Graph& graph,
      const std::vector<kernels::TensorInfo>& signature, const runtime::CompileOptions& options);

 private:
  using Result = absl::StatusOr<std::shared_ptr<const runtime::Executable>>;
  struct Entry {
    std::string key;
    std::shared_ptr<const runtime::Executable> exe;
    uint64_t bytes = 0;
    std::shared_ptr<PlanCounters> owner;
    std::string label;
  };

  explicit CompiledGraphCache(CacheOptions options);

  // Removes entries of other engine versions not written for a day, and
  // remembered digests of files that changed or went away.
  static void SweepStaleEntries(const std::string& dir);

  // Reads a plan from disk; nullopt on a miss. Corrupt entries are removed.
  std::optional<std::shared_ptr<const runtime::Executable>> LoadPlan(
      const std::string& key, const std::string& label, const ir::Graph& graph,
      const std::vector<kernels::TensorInfo>& signature, const runtime::CompileOptions& options);
  void StorePlan(const std::string& key, const std::string& label, const ir::Graph& graph,
                 const std::vector<kernels::TensorInfo>& signature, const runtime::Executable& exe);
  std::string DigestMemoPath(const std::string& identity) const;
  // Logs, removes and counts a bad disk entry.
  void DropBadEntry(const std::string& path, const absl::Status& why);
  void Insert(Entry entry);  // mu_ held
  // Drops an entry; `evicted` counts and logs it as an eviction.  mu_ held.
  void EvictOne(std::list<Entry>::iterator it, bool evicted);

  const CacheOptions options_;
  // The bound on the disk entries; null without a disk cache.
  std::shared_ptr<DiskBudget> disk_;
  // The store of prepacked weights under packed/; null without a disk cache.
  std::shared_ptr<PackedWeightFiles> packed_;

  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::unordered_map<std::string, std::shared_future<Result>> inflight_;
  uint64_t memory_bytes_ = 0;
  uint64_t evictions_ = 0;

  std::atomic<uint64_t> disk_graph_hits_{0};
  std::atomic<uint64_t> disk_graph_misses_{0};
  std::atomic<uint64_t> disk_plan_hits_{0};
  std::atomic<uint64_t> disk_plan_misses_{0};
  std::atomic<uint64_t> disk_corrupt_{0};
  std::atomic<uint64_t> disk_writes_{0};
};

// Bytes a plan holds beyond what it shares with `graph`: its arena (the
// block a run of it takes from runtime::ArenaPool) and any constant the
// passes made.
uint64_t PlanBytes(const runtime::Executable& exe, const ir::Graph& graph);

}  // namespace kiln::cache
