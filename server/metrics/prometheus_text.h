// Prometheus's text exposition format (version 0.0.4), the format /metrics
// answers in: a registry of metric families — counters, gauges, histograms —
// filled with one scrape's values and rendered as text. It knows nothing of
// Kiln; server_metrics.h fills it from the model statistics.
//
// Families render in the order they were first declared, each as
//   # HELP name help text
//   # TYPE name counter|gauge|histogram
//   name{label="value",...} 12
// a histogram as cumulative name_bucket{...,le="..."} samples ending with
// le="+Inf", then name_sum and name_count. Label values are escaped (\\, \",
// \n); help text escapes \\ and \n.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/core/histogram.h"

namespace kiln::server::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// HistogramCounts and LatencyBoundsUs() are the core's (server/core/histogram.h):
// the model statistics record them, Registry::Histogram renders them.

// "a\"b" for a"b: the escaping of a label value.
std::string EscapeLabelValue(absl::string_view value);

class Registry {
 public:
  // Adds one sample to the family `name` (declared on first use with `help`
  // and `type`). Names and label names must match Prometheus's grammar
  // ([a-zA-Z_:][a-zA-Z0-9_:]*, labels without ':'); a family keeps the type it
  // was declared with. Violations are programming errors: they abort.
  void Counter(absl::string_view name, absl::string_view help, Labels labels, double value);
  void Gauge(absl::string_view name, absl::string_view help, Labels labels, double value);
  void Histogram(absl::string_view name, absl::string_view help, Labels labels,
                 const HistogramCounts& counts);
  // Declares a family with no sample yet (its HELP and TYPE still render).
  void Declare(absl::string_view name, absl::string_view help, MetricType type);

  std::string Render() const;

 private:
  struct Sample {
    Labels labels;
    double value = 0;
    HistogramCounts histogram;
  };
  struct Family {
    std::string name;
    std::string help;
    MetricType type = MetricType::kCounter;
    std::vector<Sample> samples;
  };
  Family& FamilyOf(absl::string_view name, absl::string_view help, MetricType type);

  std::vector<Family> families_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace kiln::server::metrics
