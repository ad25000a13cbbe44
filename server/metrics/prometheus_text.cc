#include "server/metrics/prometheus_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kiln::server::metrics {
namespace {

bool ValidName(absl::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

void CheckOrDie(bool ok, absl::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "metrics: %s\n", std::string(what).c_str());
  std::abort();
}

// Integers print as integers (counters in the billions stay exact); other
// values with enough digits to read back the same double.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  // The shortest of %.15g..%.17g that reads back as `v` (60873352.651, not
  // 60873352.651000001).
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendLabels(std::string& out, const Labels& labels, const char* le = nullptr) {
  if (labels.empty() && le == nullptr) return;
  out += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out += ',';
    first = false;
    absl::StrAppend(&out, name, "=\"", EscapeLabelValue(value), "\"");
  }
  if (le != nullptr) absl::StrAppend(&out, first ? "" : ",", "le=\"", le, "\"");
  out += '}';
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Registry::Family& Registry::FamilyOf(absl::string_view name, absl::string_view help,
                                     MetricType type) {
  auto it = index_.find(name);
  if (it != index_.end()) {
    Family& family = families_[it->second];
    CheckOrDie(family.type == type, absl::StrCat(name, " declared with another type"));
    return family;
  }
  CheckOrDie(ValidName(name, /*allow_colon=*/true), absl::StrCat("bad metric name '", name, "'"));
  index_.emplace(std::string(name), families_.size());
  families_.push_back(Family{std::string(name), std::string(help), type, {}});
  return families_.back();
}

void Registry::Declare(absl::string_view name, absl::string_view help, MetricType type) {
  FamilyOf(name, help, type);
}

void Registry::Counter(absl::string_view name, absl::string_view help, Labels labels,
                       double value) {
  Family& family = FamilyOf(name, help, MetricType::kCounter);
  family.samples.push_back(Sample{std::move(labels), value, HistogramCounts()});
}

void Registry::Gauge(absl::string_view name, absl::string_view help, Labels labels,
                     double value) {
  Family& family = FamilyOf(name, help, MetricType::kGauge);
  family.samples.push_back(Sample{std::move(labels), value, HistogramCounts()});
}

void Registry::Histogram(absl::string_view name, absl::string_view help, Labels labels,
                         const HistogramCounts& counts) {
  CheckOrDie(counts.buckets.size() == counts.bounds.size() + 1, "histogram buckets/bounds");
  for (const auto& label : labels) CheckOrDie(label.first != "le", "'le' is a histogram's own label");
  Family& family = FamilyOf(name, help, MetricType::kHistogram);
  family.samples.push_back(Sample{std::move(labels), 0, counts});
}

std::string Registry::Render() const {
  std::string out;
  for (const Family& family : families_) {
    absl::StrAppend(&out, "# HELP ", family.name, " ", EscapeHelp(family.help), "\n");
    absl::StrAppend(&out, "# TYPE ", family.name, " ", TypeName(family.type), "\n");
    for (const Sample& sample : family.samples) {
      for (const auto& label : sample.labels) {
        CheckOrDie(ValidName(label.first, /*allow_colon=*/false) && label.first.rfind("__", 0) != 0,
                   absl::StrCat("bad label name '", label.first, "'"));
      }
      if (family.type != MetricType::kHistogram) {
        out += family.name;
        AppendLabels(out, sample.labels);
        absl::StrAppend(&out, " ", FormatValue(sample.value), "\n");
        continue;
      }
      const HistogramCounts& h = sample.histogram;
      uint64_t cumulative = 0;
      for (size_t i = 0; i < h.buckets.size(); ++i) {
        cumulative += h.buckets[i];
        const std::string le = i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf";
        absl::StrAppend(&out, family.name, "_bucket");
        AppendLabels(out, sample.labels, le.c_str());
        absl::StrAppend(&out, " ", cumulative, "\n");
      }
      absl::StrAppend(&out, family.name, "_sum");
      AppendLabels(out, sample.labels);
      absl::StrAppend(&out, " ", FormatValue(h.sum), "\n");
      absl::StrAppend(&out, family.name, "_count");
      AppendLabels(out, sample.labels);
      absl::StrAppend(&out, " ", h.count, "\n");
    }
  }
  return out;
}

}  // namespace kiln::server::metrics
