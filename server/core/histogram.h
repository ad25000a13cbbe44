// A histogram as the model statistics record it (ModelStats in
// model_registry.h): plain counts that the metrics room renders
// (server/metrics/prometheus_text.h). It lives with its recorder, so the core
// needs nothing of the rooms that read it.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::server {

// Counts of observations per bucket, as a recorder keeps them: `buckets[i]`
// counts the values <= bounds[i] (and > bounds[i-1]); the last entry those
// above every bound. Rendering makes them cumulative. Not thread-safe: its
// owner locks.
struct HistogramCounts {
  std::vector<double> bounds;     // ascending upper bounds; +Inf is implied
  std::vector<uint64_t> buckets;  // bounds.size() + 1 entries
  double sum = 0;
  uint64_t count = 0;

  // Aborts unless `upper_bounds` is strictly ascending (a programming error).
  explicit HistogramCounts(std::vector<double> upper_bounds = {});
  void Observe(double value);
};

// Upper bounds in microseconds for request latencies: 100 us to 60 s.
std::vector<double> LatencyBoundsUs();

}  // namespace kiln::server
