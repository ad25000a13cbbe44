// The profiler: where a run's time goes, per node of the compiled graph.
//
// Profiler is a RunObserver (engine/runtime/observer.h): pass it in
// RunOptions::observer and it times every step of the run. It gives a Profile:
// per node its op, source op, kernel ("onednn.conv", or the op's name for
// Kiln's own), output types with layouts ("FP32[1, 64, 56, 56]{nhwc}"), self
// time (an If's or Loop's own time, less the steps of its blocks, so the
// shares add up to 100%), calls and share of the total; plus one trace event
// per step run, which ToChromeTrace writes in the Chrome/Perfetto trace-event
// format (chrome://tracing, ui.perfetto.dev).
//
// Profile is plain data with its JSON form, so the server sends it (the
// ModelInfer response parameter "profile") and the CLI merges several runs,
// prints the table and writes the trace without any engine code (library
// kiln_profile); Profiler itself is in kiln_runtime.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/observer.h"

namespace kiln::runtime {

struct ProfileNode {
  int node = -1;           // node id in the compiled graph
  std::string op;          // "Conv"
  std::string source_op;   // "aten::_convolution"; empty when made by a pass
  std::string kernel;      // "onednn.conv"; the op's name for Kiln's own; "" for If, Loop, ...
  std::string step;        // StepKindName: "static", "dynamic", "if", "loop", ...
  std::string outputs;     // output types, comma separated
  int depth = 0;           // 0: the main block; 1: inside an If or Loop; ...
  int64_t self_ns = 0;     // summed over calls; an If/Loop's own time only
  int64_t total_ns = 0;    // summed over calls, nested steps included
  int64_t calls = 0;
};

// One step as it ran: a complete event ("ph": "X") of the trace.
struct ProfileEvent {
  int node = -1;
  int64_t ts_ns = 0;   // from the start of the profile's first run
  int64_t dur_ns = 0;
  int depth = 0;
  int run = 0;         // 0-based
};

struct Profile {
  int runs = 0;
  // Sum of the top-level steps' times (= sum of every node's self_ns).
  int64_t total_ns = 0;
  // From the first step's start to the last step's end, summed over runs.
  int64_t wall_ns = 0;
  std::vector<ProfileNode> nodes;    // in the order they first ran
  std::vector<ProfileEvent> events;  // in the order they started
  int64_t dropped_events = 0;        // past kMaxEvents

  static constexpr size_t kMaxEvents = 200000;

  // Nodes by self time, longest first (ties: node id).
  std::vector<const ProfileNode*> Sorted() const;
  // self_ns / total_ns, 0 when nothing was timed.
  double Share(const ProfileNode& n) const;
  // Adds the runs of `other` (a profile of the same compiled graph, e.g. the
  // next request's): nodes matched by id, times and calls summed, its events
  // placed after this profile's.
  void Merge(const Profile& other);

  // The sorted table, per run: %, ms, calls, node, op, kernel, output types,
  // source op; `max_rows` > 0 keeps that many rows (and says how many more).
  std::string FormatTable(size_t max_rows = 0) const;
  // {"runs": 1, "total_ns": ..., "wall_ns": ..., "nodes": [...], "events": [...]}.
  std::string ToJson() const;
  static absl::StatusOr<Profile> FromJson(std::string_view json);
  // The Chrome/Perfetto trace-event JSON: one complete event per step run,
  // named "op kernel" with node, source op, outputs in args; ts/dur in µs.
  std::string ToChromeTrace() const;
};

// Times the steps of one run: pass it in RunOptions::observer, run, then
// Finish. To profile several runs, Merge their profiles. Not thread-safe.
class Profiler : public RunObserver {
 public:
  void OnStepBegin(const StepInfo& step) override;
  void OnStepEnd(const StepInfo& step) override;

  // The run observed (runs = 1; 0 when no step ran). Resets the profiler.
  Profile Finish();

 private:
  using Clock = std::chrono::steady_clock;
  struct Open {
    Clock::time_point start;
    int64_t child_ns = 0;
  };
  int64_t Ns(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  }

  Profile profile_;
  std::vector<Open> stack_;
  std::unordered_map<int, size_t> index_;  // node id -> profile_.nodes
  Clock::time_point origin_;
  bool started_ = false;
  int64_t end_ns_ = 0;  // of the last top-level step
};

}  // namespace kiln::runtime
