#include "server/metrics/server_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/runtime/arena_pool.h"
#include "server/metrics/prometheus_text.h"
#include "server/core/model_registry.h"
#include "server/scheduler/compute_pool.h"

namespace kiln::server {
namespace {

using metrics::Labels;
using metrics::MetricType;
using metrics::Registry;

double Us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

// Triton's per-model families, in Triton's words.
void AddInferenceMetrics(Registry& r, const VersionStatistics& v) {
  const Labels labels = {{"model", v.name}, {"version", std::to_string(v.version)}};
  const StatsSnapshot& s = v.infer;
  r.Counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes",
            labels, static_cast<double>(s.success.count));
  for (int reason = 0; reason < kNumFailureReasons; ++reason) {
    r.Counter("nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
              {{"model", v.name}, {"reason", kFailureReasonNames[reason]},
               {"version", std::to_string(v.version)}},
              static_cast<double>(s.fail_by_reason[reason]));
  }
  r.Counter("nv_inference_count", "Number of inferences performed (does not include cached requests)",
            labels, static_cast<double>(s.inference_count));
  r.Counter("nv_inference_exec_count",
            "Number of model executions performed (does not include cached requests)", labels,
            static_cast<double>(s.execution_count));
  r.Counter("nv_inference_request_duration_us",
            "Cumulative inference request duration in microseconds (successful requests)", labels,
            Us(s.success.ns));
  r.Counter("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds",
            labels, Us(s.queue.ns));
  r.Counter("nv_inference_compute_input_duration_us",
            "Cumulative compute input duration in microseconds", labels, Us(s.compute_input.ns));
  r.Counter("nv_inference_compute_infer_duration_us",
            "Cumulative compute inference duration in microseconds", labels, Us(s.compute_infer.ns));
  r.Counter("nv_inference_compute_output_duration_us",
            "Cumulative inference compute output duration in microseconds", labels,
            Us(s.compute_output.ns));
  r.Gauge("nv_inference_pending_request_count",
          "Instantaneous number of pending requests awaiting execution per-model.", labels,
          static_cast<double>(s.pending));
  r.Histogram("kiln_inference_request_duration_us",
              "Duration of successful inference requests in microseconds, decode to encode",
              labels, s.success_us);
}

// Kiln's own: the compiled-plan cache as this version used it, its load, the
// libtorch fallback.
void AddKilnMetrics(Registry& r, const VersionStatistics& v) {
  const std::string version = std::to_string(v.version);
  const Labels labels = {{"model", v.name}, {"version", version}};
  const PlanStats& p = v.plans;
  r.Counter("kiln_plan_cache_hits_total",
            "Compiled plans found in the cache: in memory, or on disk (loaded, not compiled)",
            {{"model", v.name}, {"version", version}, {"tier", "memory"}},
            static_cast<double>(p.memory_hits));
  r.Counter("kiln_plan_cache_hits_total", "",
            {{"model", v.name}, {"version", version}, {"tier", "disk"}},
            static_cast<double>(p.disk_hits));
  r.Counter("kiln_plan_cache_misses_total", "Signatures compiled because no cache held their plan",
            labels, static_cast<double>(p.misses));
  r.Counter("kiln_plan_cache_evictions_total", "This version's plans evicted from memory", labels,
            static_cast<double>(p.evictions));
  r.Counter("kiln_plan_compile_duration_us",
            "Cumulative time compiling plans and loading them from disk, in microseconds", labels,
            Us(p.compile_ns));
  r.Gauge("kiln_plan_cache_bytes", "Bytes of this version's plans held in memory", labels,
          static_cast<double>(p.bytes_held));
  r.Gauge("kiln_model_ready", "1 while the version is READY, else 0", labels,
          v.state == ModelState::kReady ? 1 : 0);
  r.Gauge("kiln_model_load_duration_us",
          "Duration of the version's last load in microseconds (hash, graph, checks, warm-up)",
          labels, Us(v.load.load_ns));
  r.Gauge("kiln_model_warmup_duration_us",
          "Part of the last load spent running the config's model_warmup samples, in microseconds",
          labels, Us(v.load.warmup_ns));
  r.Gauge("kiln_model_weight_bytes", "Bytes of the version's weights", labels,
          static_cast<double>(v.weight_bytes));
  if (v.batched || v.infer.batcher_queued + v.infer.batcher_around > 0) {
    r.Counter("kiln_batcher_requests_total",
              "Successful requests of a dynamically batched model, by their way to a compute "
              "thread: through the batcher's queue, or around it (its measured costs chose single "
              "requests, or an idle server ran a one-row request at once)",
              {{"model", v.name}, {"route", "queue"}, {"version", version}},
              static_cast<double>(v.infer.batcher_queued));
    r.Counter("kiln_batcher_requests_total", "",
              {{"model", v.name}, {"route", "around"}, {"version", version}},
              static_cast<double>(v.infer.batcher_around));
  }
  r.Gauge("kiln_fallback_ops",
          "Distinct source ops the version runs through the libtorch fallback", labels,
          static_cast<double>(v.fallback_ops));
}

void AddCacheTotals(Registry& r, const cache::CacheTotals& t) {
  r.Gauge("kiln_plan_cache_entries", "Compiled plans held in memory, every model", {},
          static_cast<double>(t.memory_entries));
  r.Gauge("kiln_plan_cache_memory_bytes", "Bytes of compiled plans held in memory, every model", {},
          static_cast<double>(t.memory_bytes));
  r.Gauge("kiln_plan_cache_memory_limit_bytes", "The memory bound of the compiled-plan cache", {},
          static_cast<double>(t.memory_limit_bytes));
  r.Counter("kiln_plan_cache_disk_hits_total", "Reads from the disk cache that found their entry",
            {{"kind", "graph"}}, static_cast<double>(t.disk_graph_hits));
  r.Counter("kiln_plan_cache_disk_hits_total", "", {{"kind", "plan"}},
            static_cast<double>(t.disk_plan_hits));
  r.Counter("kiln_plan_cache_disk_misses_total", "Reads from the disk cache that found nothing",
            {{"kind", "graph"}}, static_cast<double>(t.disk_graph_misses));
  r.Counter("kiln_plan_cache_disk_misses_total", "", {{"kind", "plan"}},
            static_cast<double>(t.disk_plan_misses));
  r.Counter("kiln_plan_cache_disk_hits_total", "", {{"kind", "packed_weight"}},
            static_cast<double>(t.packed_hits));
  r.Counter("kiln_plan_cache_disk_writes_total", "Entries written to the disk cache",
            {{"kind", "graph_or_plan"}}, static_cast<double>(t.disk_writes));
  r.Counter("kiln_plan_cache_disk_writes_total", "", {{"kind", "packed_weight"}},
            static_cast<double>(t.packed_writes));
  r.Gauge("kiln_plan_cache_disk_bytes", "Bytes of the disk cache's entries", {},
          static_cast<double>(t.disk_bytes));
  r.Gauge("kiln_plan_cache_disk_limit_bytes", "The bound on the disk cache (0: none)", {},
          static_cast<double>(t.disk_limit_bytes));
  r.Counter("kiln_plan_cache_disk_evictions_total",
            "Disk cache entries removed by --cache-disk-bytes", {},
            static_cast<double>(t.disk_evictions));
}

// The value of "Key:   123 kB" in /proc/meminfo, in bytes; -1 when absent.
double MeminfoBytes(const std::string& meminfo, const std::string& key) {
  const size_t at = meminfo.find(key + ":");
  if (at == std::string::npos) return -1;
  std::istringstream in(meminfo.substr(at + key.size() + 1));
  double kb = -1;
  in >> kb;
  return kb < 0 ? -1 : kb * 1024;
}

// The machine's CPU utilization, 0 to 1, over all its CPUs, as Triton's
// nv_cpu_utilization: the share of non-idle time in /proc/stat's first line
// since the previous scrape (since boot at the first). -1 when unreadable.
double CpuUtilization() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  // user nice system idle iowait irq softirq steal (guest time is in user).
  uint64_t t[8] = {};
  if (!(stat >> cpu) || cpu != "cpu") return -1;
  for (uint64_t& v : t) {
    if (!(stat >> v)) return -1;
  }
  uint64_t total = 0;
  for (uint64_t v : t) total += v;
  const uint64_t idle = t[3] + t[4];
  static std::mutex mu;
  static uint64_t last_total = 0, last_idle = 0;
  static double last_value = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (total > last_total && idle >= last_idle) {
    const double d_total = static_cast<double>(total - last_total);
    const double d_idle = static_cast<double>(idle - last_idle);
    last_value = std::clamp(1.0 - d_idle / d_total, 0.0, 1.0);
    last_total = total;
    last_idle = idle;
  }
  return last_value;
}

void AddProcessMetrics(Registry& r) {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) {
    const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    r.Counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds", {},
              cpu);
  }
  // /proc/self/statm: size resident shared ... in pages.
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0, resident_pages = 0;
  if (statm >> size_pages >> resident_pages) {
    const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
    r.Gauge("process_resident_memory_bytes", "Resident memory size in bytes", {},
            static_cast<double>(resident_pages) * page);
    r.Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes", {},
            static_cast<double>(size_pages) * page);
  }
  // Triton's host memory gauges (the machine's, not the process's).
  std::ifstream meminfo_file("/proc/meminfo");
  std::stringstream meminfo;
  meminfo << meminfo_file.rdbuf();
  const double total = MeminfoBytes(meminfo.str(), "MemTotal");
  const double available = MeminfoBytes(meminfo.str(), "MemAvailable");
  if (total >= 0 && available >= 0) {
    r.Gauge("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", {}, total);
    r.Gauge("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", {}, total - available);
  }
  if (const double utilization = CpuUtilization(); utilization >= 0) {
    r.Gauge("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", {}, utilization);
  }
}

}  // namespace

std::string ScrapeMetrics(const ModelRegistry& registry, const ComputeTotals* compute) {
  Registry r;
  // Every version ever loaded (its counters keep counting across reloads of
  // other versions); an empty repository still declares the families.
  absl::StatusOr<std::vector<VersionStatistics>> stats = registry.Statistics("");
  const std::vector<VersionStatistics> versions = stats.ok() ? *stats : std::vector<VersionStatistics>();
  for (const VersionStatistics& v : versions) AddInferenceMetrics(r, v);
  for (const VersionStatistics& v : versions) AddKilnMetrics(r, v);
  AddCacheTotals(r, registry.cache().Totals());
  if (compute != nullptr) {
    r.Counter("kiln_compute_split_runs_total",
              "Inferences (or batches) run on one thread of a compute team split while requests "
              "waited (--split-teams)",
              {}, static_cast<double>(compute->narrow_runs));
    r.Counter("kiln_compute_splits_total", "Times a compute team split into single-thread runs",
              {}, static_cast<double>(compute->splits));
  }
  const runtime::ArenaPool::Stats arenas = runtime::ArenaPool::Global().stats();
  r.Gauge("kiln_arena_bytes",
          "Bytes of plan arenas (activations and scratch): held by runs in flight, or free for "
          "the next run of any plan",
          {{"state", "in_use"}}, static_cast<double>(arenas.in_use_bytes));
  r.Gauge("kiln_arena_bytes", "", {{"state", "free"}}, static_cast<double>(arenas.free_bytes));
  r.Counter("kiln_arena_allocations_total",
            "Arena blocks allocated because no free one was large enough", {},
            static_cast<double>(arenas.allocations));
  AddProcessMetrics(r);
  return r.Render();
}

}  // namespace kiln::server
