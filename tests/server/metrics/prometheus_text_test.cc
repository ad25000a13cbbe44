// The text exposition format as Prometheus parses it: HELP/TYPE once per
// family, escaped label values, cumulative histogram buckets ending in +Inf,
// _sum and _count.
#include "server/metrics/prometheus_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::server::metrics {
namespace {

TEST(PrometheusText, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\"b"), "a\\\"b");
  EXPECT_EQ(EscapeLabelValue("back\\slash"), "back\\\\slash");
  EXPECT_EQ(EscapeLabelValue("two\nlines"), "two\\nlines");
}

TEST(PrometheusText, CountersAndGaugesGroupedByFamilyInDeclarationOrder) {
  Registry r;
  r.Counter("requests_total", "Requests\nserved \\ counted", {{"model", "m\"1"}, {"version", "1"}},
            3);
  r.Gauge("in_flight", "Requests now", {}, 0.5);
  r.Gauge("load_us", "Shortest round-trip digits", {}, 60873352.651);
  r.Gauge("third", "Needs 17 digits", {}, 0.1 + 0.2);
  r.Counter("requests_total", "ignored: declared above", {{"model", "m2"}, {"version", "7"}},
            12345678901);
  r.Declare("never_seen", "No sample yet", MetricType::kGauge);
  EXPECT_EQ(r.Render(),
            "# HELP requests_total Requests\\nserved \\\\ counted\n"
            "# TYPE requests_total counter\n"
            "requests_total{model=\"m\\\"1\",version=\"1\"} 3\n"
            "requests_total{model=\"m2\",version=\"7\"} 12345678901\n"
            "# HELP in_flight Requests now\n"
            "# TYPE in_flight gauge\n"
            "in_flight 0.5\n"
            "# HELP load_us Shortest round-trip digits\n"
            "# TYPE load_us gauge\n"
            "load_us 60873352.651\n"
            "# HELP third Needs 17 digits\n"
            "# TYPE third gauge\n"
            "third 0.30000000000000004\n"
            "# HELP never_seen No sample yet\n"
            "# TYPE never_seen gauge\n");
}

TEST(PrometheusText, HistogramBucketsAreCumulativeEndingWithInf) {
  HistogramCounts h({1, 2.5, 10});
  for (double v : {0.5, 1.0, 2.0, 3.0, 100.0, 200.0}) h.Observe(v);
  EXPECT_THAT(h.buckets, ::testing::ElementsAre(2, 1, 1, 2));  // 1.0 falls in le="1"
  EXPECT_EQ(h.count, 6u);
  Registry r;
  r.Histogram("latency_us", "Latency", {{"model", "m"}}, h);
  EXPECT_EQ(r.Render(),
            "# HELP latency_us Latency\n"
            "# TYPE latency_us histogram\n"
            "latency_us_bucket{model=\"m\",le=\"1\"} 2\n"
            "latency_us_bucket{model=\"m\",le=\"2.5\"} 3\n"
            "latency_us_bucket{model=\"m\",le=\"10\"} 4\n"
            "latency_us_bucket{model=\"m\",le=\"+Inf\"} 6\n"
            "latency_us_sum{model=\"m\"} 306.5\n"
            "latency_us_count{model=\"m\"} 6\n");
}

TEST(PrometheusText, EmptyHistogramWithoutLabels) {
  Registry r;
  r.Histogram("h", "Empty", {}, HistogramCounts({5}));
  EXPECT_EQ(r.Render(),
            "# HELP h Empty\n# TYPE h histogram\nh_bucket{le=\"5\"} 0\nh_bucket{le=\"+Inf\"} 0\n"
            "h_sum 0\nh_count 0\n");
}

TEST(PrometheusText, LatencyBoundsAscend) {
  const std::vector<double> bounds = LatencyBoundsUs();
  ASSERT_FALSE(bounds.empty());
  for (size_t i = 1; i < bounds.size(); ++i) EXPECT_LT(bounds[i - 1], bounds[i]);
}

TEST(PrometheusTextDeathTest, RefusesBadNamesAndTypeChanges) {
  EXPECT_DEATH(Registry().Counter("bad-name", "", {}, 1), "bad metric name");
  EXPECT_DEATH(
      {
        Registry r;
        r.Counter("x", "", {}, 1);
        r.Gauge("x", "", {}, 1);
      },
      "another type");
  EXPECT_DEATH(
      {
        Registry r;
        r.Gauge("x", "", {{"bad-label", "v"}}, 1);
        r.Render();
      },
      "bad label name");
}

}  // namespace
}  // namespace kiln::server::metrics
