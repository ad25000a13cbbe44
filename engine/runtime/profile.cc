// Profile: aggregation, the table, JSON and the Chrome trace. No engine code
// here (library kiln_profile, which the CLI links).
#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/json_text.h"
#include "engine/runtime/profiler.h"

namespace kiln::runtime {
namespace {

using nlohmann::json;

// Between merged runs on the trace's timeline.
constexpr int64_t kRunGapNs = 100'000;

std::string EventName(const ProfileNode& n) {
  if (n.kernel.empty() || n.kernel == n.op) return n.op;
  return absl::StrCat(n.op, " ", n.kernel);
}

}  // namespace

std::vector<const ProfileNode*> Profile::Sorted() const {
  std::vector<const ProfileNode*> sorted;
  sorted.reserve(nodes.size());
  for (const ProfileNode& n : nodes) sorted.push_back(&n);
  std::stable_sort(sorted.begin(), sorted.end(), [](const ProfileNode* a, const ProfileNode* b) {
    if (a->self_ns != b->self_ns) return a->self_ns > b->self_ns;
    return a->node < b->node;
  });
  return sorted;
}

double Profile::Share(const ProfileNode& n) const {
  return total_ns > 0 ? static_cast<double>(n.self_ns) / static_cast<double>(total_ns) : 0.0;
}

void Profile::Merge(const Profile& other) {
  if (other.runs == 0) return;
  int64_t offset = 0;
  if (runs > 0) {
    int64_t end = 0;
    for (const ProfileEvent& e : events) end = std::max(end, e.ts_ns + e.dur_ns);
    offset = end + kRunGapNs;
  }
  std::map<int, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i].node] = i;
  for (const ProfileNode& n : other.nodes) {
    auto it = index.find(n.node);
    if (it == index.end()) {
      index[n.node] = nodes.size();
      nodes.push_back(n);
      continue;
    }
    ProfileNode& mine = nodes[it->second];
    mine.self_ns += n.self_ns;
    mine.total_ns += n.total_ns;
    mine.calls += n.calls;
    if (mine.kernel.empty()) mine.kernel = n.kernel;
  }
  for (const ProfileEvent& e : other.events) {
    if (events.size() >= kMaxEvents) {
      ++dropped_events;
      continue;
    }
    ProfileEvent shifted = e;
    shifted.ts_ns += offset;
    shifted.run += runs;
    events.push_back(shifted);
  }
  dropped_events += other.dropped_events;
  runs += other.runs;
  total_ns += other.total_ns;
  wall_ns += other.wall_ns;
}

std::string Profile::FormatTable(size_t max_rows) const {
  const double per_run = runs > 0 ? 1.0 / runs : 0.0;
  std::string out = absl::StrFormat(
      "%d run%s; per run: %.3f ms in %zu nodes (%.3f ms from the first step's start to the last "
      "step's end)\n",
      runs, runs == 1 ? "" : "s", static_cast<double>(total_ns) * per_run / 1e6, nodes.size(),
      static_cast<double>(wall_ns) * per_run / 1e6);
  struct Row {
    std::string share, ms, calls, node, op, kernel, step, outputs, source;
  };
  std::vector<Row> rows;
  rows.push_back({"%", "ms", "calls", "node", "op", "kernel", "step", "outputs", "source op"});
  const std::vector<const ProfileNode*> sorted = Sorted();
  const size_t shown = max_rows > 0 ? std::min(max_rows, sorted.size()) : sorted.size();
  for (size_t i = 0; i < shown; ++i) {
    const ProfileNode& n = *sorted[i];
    std::string calls = n.calls % std::max(runs, 1) == 0
                            ? absl::StrCat(n.calls / std::max(runs, 1))
                            : absl::StrFormat("%.1f", static_cast<double>(n.calls) * per_run);
    rows.push_back({absl::StrFormat("%.1f%%", 100.0 * Share(n)),
                    absl::StrFormat("%.3f", static_cast<double>(n.self_ns) * per_run / 1e6),
                    std::move(calls), absl::StrCat(n.node),
                    std::string(2 * n.depth, ' ') + n.op, n.kernel.empty() ? "-" : n.kernel,
                    n.step, n.outputs, n.source_op.empty() ? "-" : n.source_op});
  }
  size_t w[9] = {};
  for (const Row& r : rows) {
    const std::string* cells[9] = {&r.share, &r.ms,   &r.calls,   &r.node,  &r.op,
                                   &r.kernel, &r.step, &r.outputs, &r.source};
    for (int c = 0; c < 9; ++c) w[c] = std::max(w[c], cells[c]->size());
  }
  for (const Row& r : rows) {
    // Numbers right-aligned, text left-aligned; the last column unpadded.
    absl::StrAppendFormat(&out, "%*s  %*s  %*s  %*s  %-*s  %-*s  %-*s  %-*s  %s\n",
                          static_cast<int>(w[0]), r.share, static_cast<int>(w[1]), r.ms,
                          static_cast<int>(w[2]), r.calls, static_cast<int>(w[3]), r.node,
                          static_cast<int>(w[4]), r.op, static_cast<int>(w[5]), r.kernel,
                          static_cast<int>(w[6]), r.step, static_cast<int>(w[7]), r.outputs,
                          r.source);
  }
  if (shown < sorted.size()) {
    int64_t rest = 0;
    for (size_t i = shown; i < sorted.size(); ++i) rest += sorted[i]->self_ns;
    absl::StrAppendFormat(&out, "(%zu more nodes: %.1f%%, %.3f ms)\n", sorted.size() - shown,
                          total_ns > 0 ? 100.0 * static_cast<double>(rest) / total_ns : 0.0,
                          static_cast<double>(rest) * per_run / 1e6);
  }
  return out;
}

std::string Profile::ToJson() const {
  json j;
  j["runs"] = runs;
  j["total_ns"] = total_ns;
  j["wall_ns"] = wall_ns;
  j["dropped_events"] = dropped_events;
  json& ns = j["nodes"] = json::array();
  for (const ProfileNode& n : nodes) {
    ns.push_back({{"node", n.node},
                  {"op", n.op},
                  {"source_op", n.source_op},
                  {"kernel", n.kernel},
                  {"step", n.step},
                  {"outputs", n.outputs},
                  {"depth", n.depth},
                  {"self_ns", n.self_ns},
                  {"total_ns", n.total_ns},
                  {"calls", n.calls}});
  }
  // Events as [node, ts_ns, dur_ns, depth, run]: there may be many.
  json& es = j["events"] = json::array();
  for (const ProfileEvent& e : events) es.push_back({e.node, e.ts_ns, e.dur_ns, e.depth, e.run});
  return JsonText(j);  // names from the model file may be anything
}

absl::StatusOr<Profile> Profile::FromJson(std::string_view text) {
  const json j = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("the profile is not a JSON object");
  try {
    Profile p;
    p.runs = j.at("runs").get<int>();
    p.total_ns = j.at("total_ns").get<int64_t>();
    p.wall_ns = j.at("wall_ns").get<int64_t>();
    p.dropped_events = j.value("dropped_events", int64_t{0});
    for (const json& n : j.at("nodes")) {
      ProfileNode node;
      node.node = n.at("node").get<int>();
      node.op = n.at("op").get<std::string>();
      node.source_op = n.value("source_op", "");
      node.kernel = n.value("kernel", "");
      node.step = n.value("step", "");
      node.outputs = n.value("outputs", "");
      node.depth = n.value("depth", 0);
      node.self_ns = n.at("self_ns").get<int64_t>();
      node.total_ns = n.at("total_ns").get<int64_t>();
      node.calls = n.at("calls").get<int64_t>();
      p.nodes.push_back(std::move(node));
    }
    for (const json& e : j.value("events", json::array())) {
      p.events.push_back(ProfileEvent{e.at(0).get<int>(), e.at(1).get<int64_t>(),
                                      e.at(2).get<int64_t>(), e.at(3).get<int>(),
                                      e.at(4).get<int>()});
    }
    return p;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed profile: ", e.what()));
  }
}

std::string Profile::ToChromeTrace() const {
  std::map<int, const ProfileNode*> by_id;
  for (const ProfileNode& n : nodes) by_id[n.node] = &n;
  json trace = json::array();
  trace.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "kiln"}}}});
  trace.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", 1},
                   {"tid", 1},
                   {"args", {{"name", "run"}}}});
  for (const ProfileEvent& e : events) {
    auto it = by_id.find(e.node);
    json args = {{"node", e.node}, {"run", e.run}};
    std::string name = absl::StrCat("node ", e.node);
    std::string cat = "step";
    if (it != by_id.end()) {
      const ProfileNode& n = *it->second;
      name = EventName(n);
      cat = n.step;
      args["op"] = n.op;
      args["kernel"] = n.kernel;
      args["source_op"] = n.source_op;
      args["outputs"] = n.outputs;
    }
    trace.push_back({{"name", name},
                     {"cat", cat},
                     {"ph", "X"},
                     {"ts", static_cast<double>(e.ts_ns) / 1e3},
                     {"dur", static_cast<double>(e.dur_ns) / 1e3},
                     {"pid", 1},
                     {"tid", 1},
                     {"args", std::move(args)}});
  }
  json j = {{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}};
  if (dropped_events > 0) j["otherData"] = {{"dropped_events", dropped_events}};
  return JsonText(j);  // names from the model file may be anything
}

}  // namespace kiln::runtime
