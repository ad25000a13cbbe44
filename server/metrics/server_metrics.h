// What kilnd's /metrics answers: Triton's per-model metric names and labels
// (model="NAME", version="V"), so that dashboards made for Triton read Kiln,
// plus Kiln's own (kiln_*) and the process's CPU and memory. Every value is
// read at scrape time from what the server already counts — the per-version
// statistics the KServe statistics RPC answers with (ModelRegistry::
// Statistics), the compiled-graph cache's totals, /proc — so nothing is
// counted twice and a scrape costs nothing between scrapes.
#pragma once

#include <string>

namespace kiln::server {

class ModelRegistry;
struct ComputeTotals;

// The Content-Type of the text exposition format.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// The text exposition of every metric (server/metrics/prometheus_text.h);
// the compute threads' counts when `compute` is given.
std::string ScrapeMetrics(const ModelRegistry& registry, const ComputeTotals* compute = nullptr);

}  // namespace kiln::server
