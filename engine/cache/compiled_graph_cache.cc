#include "engine/cache/compiled_graph_cache.h"

#include <spdlog/spdlog.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cache/cache_file.h"
#include "engine/cache/engine_version.h"
#include "engine/cache/file_io.h"
#include "engine/cache/graph_serializer.h"
#include "engine/common/sha256.h"
#include "engine/common/status_macros.h"
#include "engine/passes/pass.h"
#include "kiln/v1/graph.pb.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kGraphKind[] = "graph";
constexpr char kPlanKind[] = "plan";

uint64_t NsSince(Clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string SignatureString(const std::vector<kernels::TensorInfo>& signature) {
  std::vector<std::string> parts;
  for (const auto& t : signature)
    parts.push_back(absl::StrCat(DTypeName(t.dtype), DimsToString(t.dims)));
  return absl::StrJoin(parts, ", ");
}

// The pass pipeline, as it goes into plan keys. Fixed at build time, and
// asked for on every request, so computed once.
const std::string& PassesText() {
  static const std::string* text =
      new std::string(absl::StrJoin(passes::PipelinePassNames(), ","));
  return *text;
}

// Hands a model's requests to the shared cache with its key and counters.
class CachedExecutables final : public runtime::ExecutableProvider {
 public:
  CachedExecutables(std::shared_ptr<CompiledGraphCache> cache, std::string model_key,
                    std::string label, std::shared_ptr<PlanCounters> counters)
      : cache_(std::move(cache)),
        model_key_(std::move(model_key)),
        label_(std::move(label)),
        counters_(std::move(counters)) {}

  absl::StatusOr<std::shared_ptr<const runtime::Executable>> Get(
      const ir::Graph& graph, const std::vector<kernels::TensorInfo>& signature,
      const runtime::CompileOptions& options) const override {
    return cache_->GetOrCompile(model_key_, label_, counters_, graph, signature, options);
  }

 private:
  std::shared_ptr<CompiledGraphCache> cache_;
  std::string model_key_;
  std::string label_;
  std::shared_ptr<PlanCounters> counters_;
};

}  // namespace

uint64_t PlanBytes(const runtime::Executable& exe, const ir::Graph& graph) {
  std::unordered_set<const void*> shared;
  for (const ir::Node& n : graph.nodes()) {
    if (n.kind != ir::OpKind::kConstant) continue;
    if (const Tensor* t = n.attrs.GetTensor("value")) shared.insert(t->raw_data());
  }
  uint64_t bytes = exe.arena_bytes();
  for (const ir::Node& n : exe.graph().nodes()) {
    if (n.kind != ir::OpKind::kConstant) continue;
    const Tensor* t = n.attrs.GetTensor("value");
    if (t != nullptr && shared.count(t->raw_data()) == 0) bytes += t->byte_size();
  }
  return bytes;
}

absl::StatusOr<std::shared_ptr<CompiledGraphCache>> CompiledGraphCache::Create(
    CacheOptions options) {
  if (!options.dir.empty()) {
    for (const char* sub : {"graphs", "plans", "packed", "digests"}) {
      const fs::path dir = fs::path(options.dir) / sub;
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) {
        return absl::InternalError(
            absl::StrCat("cannot create cache directory '", dir.string(), "': ", ec.message()));
      }
      const int swept = SweepTempFiles(dir.string());
      if (swept > 0)
        spdlog::info("cache: removed {} unfinished write(s) in {}", swept, dir.string());
    }
    SweepStaleEntries(options.dir);
  }
  spdlog::info("compiled-graph cache: {} bytes in memory, {}", options.memory_bytes,
               options.dir.empty() ? std::string("no disk cache")
                                   : absl::StrCat("disk cache in ", options.dir));
  return std::shared_ptr<CompiledGraphCache>(new CompiledGraphCache(std::move(options)));
}

CompiledGraphCache::CompiledGraphCache(CacheOptions options) : options_(std::move(options)) {
  if (!options_.dir.empty()) {
    disk_ = std::make_shared<DiskBudget>(options_.dir, options_.disk_bytes);
    disk_->Enforce();  // counts what is there, and applies a bound lowered since
    packed_ = std::make_shared<PackedWeightFiles>((fs::path(options_.dir) / "packed").string(),
                                                  disk_);
  }
}

namespace {

// The identity of a file's current contents, short of reading them.
absl::StatusOr<std::string> FileIdentity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot stat '", path, "': ", std::strerror(errno)));
  }
  std::error_code ec;
  const std::string absolute = fs::absolute(path, ec).string();
  return absl::StrCat("digest;path=", absolute, ";dev=", st.st_dev, ";ino=", st.st_ino,
                      ";size=", st.st_size, ";mtime=", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec,
                      ";ctime=", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec);
}

}  // namespace

std::string CompiledGraphCache::DigestMemoPath(const std::string& identity) const {
  return (fs::path(options_.dir) / "digests" / (Sha256Hex(identity) + ".digest")).string();
}

void CompiledGraphCache::RememberDigest(const std::string& path, const FileDigest& digest) {
  if (!has_disk()) return;
  absl::StatusOr<std::string> identity = FileIdentity(path);
  if (!identity.ok()) return;
  absl::Status s = WriteCacheFile(DigestMemoPath(*identity), "digest", *identity,
                                  absl::StrCat(digest.sha256, " ", digest.size));
  if (!s.ok()) spdlog::debug("cache: cannot remember a digest: {}", std::string(s.message()));
}

absl::StatusOr<FileDigest> CompiledGraphCache::DigestFile(const std::string& path) {
  if (!has_disk()) return Sha256File(path);
  ASSIGN_OR_RETURN(const std::string identity, FileIdentity(path));
  const std::string memo = DigestMemoPath(identity);
  absl::StatusOr<Payload> known = ReadCacheFile(memo, "digest", identity);
  if (known.ok()) {
    const std::string text(known->view());
    const size_t space = text.find(' ');
    uint64_t size = 0;
    if (space != std::string::npos && IsSha256Hex(text.substr(0, space)) &&
        absl::SimpleAtoi(text.substr(space + 1), &size)) {
      return FileDigest{text.substr(0, space), size};
    }
  }
  ASSIGN_OR_RETURN(FileDigest digest, Sha256File(path));
  // Remember it only if the file did not change while it was read.
  absl::StatusOr<std::string> after = FileIdentity(path);
  if (after.ok() && *after == identity) RememberDigest(path, digest);
  return digest;
}

void CompiledGraphCache::SweepStaleEntries(const std::string& dir) {
  // Entries of another engine version are never read (the version is part of
  // every key, hence of every file name), so they would pile up after each
  // upgrade. Those untouched for a day go; a replica still running the old
  // version during a rolling upgrade keeps its fresh ones.
  const auto now = fs::file_time_type::clock::now();
  const std::string current = absl::StrCat(";engine=", EngineVersion());
  int removed = 0;
  for (const char* sub : {"graphs", "plans", "packed"}) {
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(dir) / sub, ec)) {
      std::error_code entry_ec;
      const auto age = now - fs::last_write_time(entry.path(), entry_ec);
      if (entry_ec || age < std::chrono::hours(24)) continue;
      absl::StatusOr<std::string> key = PeekCacheFileKey(entry.path().string());
      if (key.ok() && absl::EndsWith(*key, current)) continue;
      if (fs::remove(entry.path(), entry_ec)) ++removed;
    }
  }
  // Remembered digests of files that were replaced or removed since.
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(dir) / "digests", ec)) {
    absl::StatusOr<std::string> key = PeekCacheFileKey(entry.path().string());
    bool keep = false;
    if (key.ok()) {
      const size_t from = key->find(";path=");
      const size_t to = key->find(";dev=");
      if (from != std::string::npos && to != std::string::npos && to > from) {
        absl::StatusOr<std::string> now_identity =
            FileIdentity(key->substr(from + 6, to - from - 6));
        keep = now_identity.ok() && *now_identity == *key;
      }
    }
    std::error_code entry_ec;
    if (!keep && fs::remove(entry.path(), entry_ec)) ++removed;
  }
  if (removed > 0)
    spdlog::info("cache: removed {} stale entr{} from {}", removed, removed == 1 ? "y" : "ies",
                 dir);
}

std::string CompiledGraphCache::GraphId(const std::string& model_sha256,
                                       const std::string& settings) {
  return settings.empty() ? model_sha256 : absl::StrCat(model_sha256, ";", settings);
}

std::string CompiledGraphCache::GraphKey(const std::string& graph_id) const {
  return absl::StrCat("graph;model-sha256=", graph_id, ";engine=", EngineVersion());
}

std::string CompiledGraphCache::GraphPath(const std::string& graph_id) const {
  return (fs::path(options_.dir) / "graphs" / (Sha256Hex(GraphKey(graph_id)) + ".graph"))
      .string();
}

std::string CompiledGraphCache::PlanPath(const std::string& plan_key) const {
  return (fs::path(options_.dir) / "plans" / (Sha256Hex(plan_key) + ".plan")).string();
}

std::string CompiledGraphCache::PlanKey(const std::string& model_key,
                                        const std::vector<kernels::TensorInfo>& signature,
                                        const runtime::CompileOptions& options) {
  return absl::StrCat("plan;model=", model_key, ";signature=", SignatureString(signature),
                      ";threads=", options.num_threads,
                      options.graph_variant.empty() ? "" : ";variant=", options.graph_variant,
                      options.use_providers ? "" : ";native",
                      options.precision == Precision::kFp32 ? "" : ";precision=",
                      options.precision == Precision::kFp32 ? "" : PrecisionName(options.precision),
                      ";passes=", PassesText(),
                      options.disabled_passes.empty() ? "" : ";disabled=",
                      absl::StrJoin(options.disabled_passes, ","),
                      ";engine=", EngineVersion());
}

void CompiledGraphCache::DropBadEntry(const std::string& path, const absl::Status& why) {
  disk_corrupt_++;
  std::error_code ec;
  fs::remove(path, ec);
  spdlog::warn("cache: {}; entry removed, recompiling", std::string(why.message()));
}

std::optional<ir::Graph> CompiledGraphCache::LoadGraph(const std::string& graph_id) {
  if (!has_disk()) return std::nullopt;
  const std::string path = GraphPath(graph_id);
  absl::StatusOr<Payload> payload = ReadCacheFile(path, kGraphKind, GraphKey(graph_id));
  if (!payload.ok()) {
    disk_graph_misses_++;
    if (payload.status().code() != absl::StatusCode::kNotFound)
      DropBadEntry(path, payload.status());
    return std::nullopt;
  }
  // The weights stay where they were read; the graph keeps the buffer.
  absl::StatusOr<ir::Graph> graph = ParseGraph(payload->view(), payload->owner());
  if (!graph.ok()) {
    disk_graph_misses_++;
    DropBadEntry(path, Annotate(graph.status(), absl::StrCat("cache file '", path, "': ")));
    return std::nullopt;
  }
  disk_graph_hits_++;
  DiskBudget::Touch(path);
  return *std::move(graph);
}

std::string CompiledGraphCache::GraphDir() const {
  return (fs::path(options_.dir) / "graphs").string();
}

void CompiledGraphCache::AdoptGraphFile(const std::string& graph_id, const std::string& path) {
  if (!has_disk()) return;
  if (::rename(path.c_str(), GraphPath(graph_id).c_str()) != 0) {
    spdlog::warn("cache: cannot move '{}' into the cache: {}", path, std::strerror(errno));
    ::unlink(path.c_str());
    return;
  }
  disk_writes_++;
  disk_->AddedFile(GraphPath(graph_id));
  absl::Status s = FsyncDirectory(GraphDir());
  if (!s.ok()) spdlog::warn("cache: {}", std::string(s.message()));
}

void CompiledGraphCache::StoreGraph(const std::string& graph_id,
                                    const std::vector<absl::string_view>& serialized_graph) {
  if (!has_disk()) return;
  absl::Status s =
      WriteCacheFile(GraphPath(graph_id), kGraphKind, GraphKey(graph_id), serialized_graph);
  if (s.ok()) {
    disk_writes_++;
    disk_->AddedFile(GraphPath(graph_id));
  } else {
    spdlog::warn("cache: cannot store the imported graph: {}", std::string(s.message()));
  }
}

std::shared_ptr<const runtime::ExecutableProvider> CompiledGraphCache::Provider(
    std::string model_key, std::string label, std::shared_ptr<PlanCounters> counters) {
  return std::make_shared<CachedExecutables>(shared_from_this(), std::move(model_key),
                                             std::move(label), std::move(counters));
}

std::optional<std::shared_ptr<const runtime::Executable>> CompiledGraphCache::LoadPlan(
    const std::string& key, const std::string& label, const ir::Graph& graph,
    const std::vector<kernels::TensorInfo>& signature, const runtime::CompileOptions& options) {
  const std::string path = PlanPath(key);
  absl::StatusOr<Payload> payload = ReadCacheFile(path, kPlanKind, key);
  if (!payload.ok()) {
    if (payload.status().code() != absl::StatusCode::kNotFound)
      DropBadEntry(path, payload.status());
    return std::nullopt;
  }
  // An intact file whose plan does not load (refers to constants the model
  // lacks, no longer prepares) is as unusable as a corrupt one.
  auto bad = [&](const absl::Status& s) {
    DropBadEntry(path, Annotate(s, absl::StrCat("cache file '", path, "' for ", label, ": ")));
    return std::nullopt;
  };
  v1::CompiledPlan plan;
  if (payload->size() > static_cast<size_t>(INT32_MAX) ||
      !plan.ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
    return bad(absl::DataLossError("plan does not parse"));
  }
  absl::StatusOr<ir::Graph> optimized = GraphFromProto(plan.graph(), &graph);
  if (!optimized.ok()) return bad(optimized.status());
  runtime::CompileOptions prepared = options;
  prepared.run_passes = false;
  absl::StatusOr<std::unique_ptr<runtime::Executable>> exe =
      runtime::Executable::Compile(*optimized, signature, prepared);
  if (!exe.ok()) return bad(exe.status());
  DiskBudget::Touch(path);
  return std::shared_ptr<const runtime::Executable>(*std::move(exe));
}

void CompiledGraphCache::StorePlan(const std::string& key, const std::string& label,
                                   const ir::Graph& graph,
                                   const std::vector<kernels::TensorInfo>& signature,
                                   const runtime::Executable& exe) {
  v1::CompiledPlan plan;
  absl::Status s = GraphToProto(exe.graph(), plan.mutable_graph(), &graph);
  if (absl::IsUnimplemented(s)) {
    // Passes may leave a numbering the replay cannot reproduce; the compacted
    // copy computes the same thing with canonical ids.
    s = GraphToProto(exe.graph().Compacted(), plan.mutable_graph(), &graph);
  }
  if (!s.ok()) {
    spdlog::info("cache: plan of {} is not cacheable on disk: {}", label, std::string(s.message()));
    return;
  }
  for (const kernels::TensorInfo& t : signature) {
    v1::TensorType* st = plan.add_signature();
    st->set_dtype(DTypeName(t.dtype));
    st->set_has_dims(true);
    for (int64_t d : t.dims) st->add_dims(d);
  }
  for (const std::string& pass : passes::PipelinePassNames()) plan.add_passes(pass);
  std::string bytes;
  if (!plan.SerializeToString(&bytes)) {
    spdlog::info("cache: plan of {} is too large to store", label);
    return;
  }
  s = WriteCacheFile(PlanPath(key), kPlanKind, key, bytes);
  if (s.ok()) {
    disk_writes_++;
    disk_->AddedFile(PlanPath(key));
  } else {
    spdlog::warn("cache: cannot store the plan of {}: {}", label, std::string(s.message()));
  }
}

absl::StatusOr<std::shared_ptr<const runtime::Executable>> CompiledGraphCache::GetOrCompile(
    const std::string& model_key, const std::string& label,
    const std::shared_ptr<PlanCounters>& counters, const ir::Graph& graph,
    const std::vector<kernels::TensorInfo>& signature, const runtime::CompileOptions& options) {
  const Clock::time_point start = Clock::now();
  const std::string key = PlanKey(model_key, signature, options);
  std::promise<Result> promise;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      std::shared_ptr<const runtime::Executable> exe = it->second->exe;
      lock.unlock();
      counters->memory_hits++;
      counters->hit_ns += NsSince(start);
      return exe;
    }
    auto flight = inflight_.find(key);
    if (flight != inflight_.end()) {
      // Someone is compiling this very plan: wait for theirs (single flight).
      std::shared_future<Result> future = flight->second;
      lock.unlock();
      Result result = future.get();
      if (result.ok()) {
        counters->memory_hits++;
        counters->hit_ns += NsSince(start);
      }
      return result;
    }
    inflight_.emplace(key, promise.get_future().share());
  }

  const std::string sig = SignatureString(signature);
  // The kernels keep what they prepack from the model's cached weights in
  // packed/, and a plan loaded here maps what an earlier process packed.
  runtime::CompileOptions packing = options;
  if (packed_ != nullptr) packing.packed_weights = packed_;
  Result result = absl::UnknownError("unset");
  bool from_disk = false;
  if (has_disk()) {
    std::optional<std::shared_ptr<const runtime::Executable>> loaded =
        LoadPlan(key, label, graph, signature, packing);
    if (loaded.has_value()) {
      result = *std::move(loaded);
      from_disk = true;
      disk_plan_hits_++;
    } else {
      disk_plan_misses_++;
    }
  }
  if (!from_disk) {
    absl::StatusOr<std::unique_ptr<runtime::Executable>> compiled =
        runtime::Executable::Compile(graph, signature, packing);
    if (compiled.ok()) {
      result = std::shared_ptr<const runtime::Executable>(*std::move(compiled));
      if (has_disk()) StorePlan(key, label, graph, signature, **result);
    } else {
      result = compiled.status();
    }
  }
  const uint64_t ns = NsSince(start);
  if (result.ok()) {
    (from_disk ? counters->disk_hits : counters->misses)++;
    counters->compile_count++;
    counters->compile_ns += ns;
    spdlog::info("{} {} for [{}] in {:.1f} ms", from_disk ? "loaded the plan of" : "compiled",
                 label, sig, Ms(ns));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_.erase(key);
    if (result.ok() && index_.count(key) == 0) {
      Insert(Entry{key, *result, PlanBytes(**result, graph), counters, label});
    }
  }
  promise.set_value(result);
  return result;
}

void CompiledGraphCache::Insert(Entry entry) {
  entry.owner->bytes_held += static_cast<int64_t>(entry.bytes);
  memory_bytes_ += entry.bytes;
  const std::string key = entry.key;
  lru_.push_front(std::move(entry));
  index_[key] = lru_.begin();
  while (memory_bytes_ > options_.memory_bytes && !lru_.empty()) {
    EvictOne(std::prev(lru_.end()), /*evicted=*/true);
  }
}

void CompiledGraphCache::EvictOne(std::list<Entry>::iterator it, bool evicted) {
  Entry& e = *it;
  e.owner->bytes_held -= static_cast<int64_t>(e.bytes);
  memory_bytes_ -= e.bytes;
  if (evicted) {
    e.owner->evictions++;
    evictions_++;
    spdlog::info(
        "cache: evicted the least recently used plan, of {} ({} bytes); {} of {} bytes "
        "in use",
        e.label, e.bytes, memory_bytes_, options_.memory_bytes);
  }
  index_.erase(e.key);
  lru_.erase(it);
}

void CompiledGraphCache::Forget(const std::shared_ptr<PlanCounters>& counters) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (it->owner == counters) EvictOne(it, /*evicted=*/false);
    it = next;
  }
}

CacheTotals CompiledGraphCache::Totals() const {
  CacheTotals t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t.memory_bytes = memory_bytes_;
    t.memory_entries = lru_.size();
    t.evictions = evictions_;
  }
  t.memory_limit_bytes = options_.memory_bytes;
  t.disk_dir = options_.dir;
  t.disk_graph_hits = disk_graph_hits_;
  t.disk_graph_misses = disk_graph_misses_;
  t.disk_plan_hits = disk_plan_hits_;
  t.disk_plan_misses = disk_plan_misses_;
  t.disk_corrupt = disk_corrupt_;
  t.disk_writes = disk_writes_;
  if (disk_ != nullptr) {
    t.disk_bytes = disk_->bytes();
    t.disk_limit_bytes = disk_->limit_bytes();
    t.disk_evictions = disk_->evictions();
  }
  if (packed_ != nullptr) {
    t.disk_corrupt += packed_->corrupt();
    t.packed_hits = packed_->hits();
    t.packed_writes = packed_->writes();
  }
  return t;
}

}  // namespace kiln::cache
