#include "server/core/histogram.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace kiln::server {

HistogramCounts::HistogramCounts(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), buckets(bounds.size() + 1, 0) {
  if (!std::is_sorted(bounds.begin(), bounds.end()) ||
      std::adjacent_find(bounds.begin(), bounds.end()) != bounds.end()) {
    std::fprintf(stderr, "metrics: histogram bounds must be strictly ascending\n");
    std::abort();
  }
}

void HistogramCounts::Observe(double value) {
  const size_t i = static_cast<size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  buckets[i] += 1;
  sum += value;
  count += 1;
}

std::vector<double> LatencyBoundsUs() {
  return {100,    250,    500,     1000,    2500,    5000,     10000,    25000,   50000,
          100000, 250000, 500000,  1000000, 2500000, 5000000,  10000000, 30000000, 60000000};
}

}  // namespace kiln::server
