// The threads inferences run on: a fixed set of compute threads, each with
// the OpenMP team (Kiln's loops, oneDNN, the GEMMs) it keeps for its whole
// life, and a queue in front of them.
//
// Why: gRPC serves each call on whichever of its threads is free. Run there,
// every serving thread grows an OpenMP team of its own, which lives as long
// as that thread. libgomp counts every team's threads, and once they
// outnumber the cores it stops spinning at barriers and sleeps in the kernel
// at each of the hundreds of parallel regions of a request: through kilnd a
// transformer ran 35% slower than the same engine in process. So inferences
// run here, and the other OpenMP work (compiling and verifying a model at
// load) runs on a short-lived thread whose team ends with it
// (RunOnShortLivedThread). With the work handed to `workers` compute threads (kilnd's
// default: as many as its usable CPUs, kernels::UsableCpus, hold requests of
// --threads threads), there are never
// more OpenMP threads than cores, and requests past that wait in the queue
// instead of fighting for the cores. The wait counts against the request's
// deadline: one still queued when its deadline passes, or whose client has
// gone, never runs (infer_pipeline.cc checks as it starts).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::server {

// How a pool is laid out: `teams` compute threads, each with an OpenMP team
// of `team_threads` threads (one request at a time on all of them: the
// lowest latency), and, with `split`, `team_threads` more threads per team
// of one thread each that take its place while requests queue up.
//
// Why split: two cores running one request together lose to two cores each
// running a request of their own, by 15-30% (barriers between the
// operators, GEMMs and convolutions split across cores too finely:
// docs/performance.md, mobilenet_v2 at concurrency 16 through kilnd 227-255
// requests/s with --threads 2 against 304 with --threads 1). One request
// alone is faster on the whole team (3.8 against 6.5 ms), so a team runs
// wide while at most one request waits for it, and splits into single-thread
// runs while two or more do, the way OpenVINO's throughput streams or a
// Triton instance group of one-thread instances would, but without choosing
// ahead for the load. With several teams, a team splits only when more wait
// than the idle teams would take whole. A task that must run on the whole
// team (a profiled request, a batch the batcher keeps whole) waits for the
// narrow runs to end.
struct ComputePoolOptions {
  int teams = 1;
  int team_threads = 1;
  bool split = false;  // ignored when team_threads < 2
  // Runs first on each compute thread, before it takes a task, with its team
  // and its slot: -1 for the team's own thread (the wide one: where it pins
  // its OpenMP team, infer_pipeline.cc), 0 .. team_threads-1 for a narrow
  // one (which pins itself to its team's CPU `slot`).
  std::function<void(int team, int slot)> on_start;
  // Runs on a team's own thread when Prewake woke it (waking its OpenMP team).
  std::function<void(int team)> on_prewake;
};

// What a pool did so far (/metrics: server/metrics/server_metrics.h).
struct ComputeTotals {
  uint64_t narrow_runs = 0;  // tasks run on one thread of a split team
  uint64_t splits = 0;       // times a team split
};

class ComputePool {
 public:
  // `workers` teams, none split. `on_start(i)`, when given, runs first on
  // compute thread i (0 <= i < workers), before it takes a task: where the
  // thread sets up what it keeps for its life (its OpenMP team pinned to
  // CPUs: infer_pipeline.cc). `on_prewake(i)`, when given, runs on compute
  // thread i when Prewake woke it (waking its OpenMP team).
  explicit ComputePool(int workers, std::function<void(int worker)> on_start = nullptr,
                       std::function<void(int worker)> on_prewake = nullptr);
  explicit ComputePool(ComputePoolOptions options);
  ~ComputePool();  // finishes the running tasks; queued ones are destroyed unrun
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // Queues `task` to run on a team's own thread, with the whole team, and
  // returns at once; tasks start in order of arrival. A task still queued
  // when the pool stops is destroyed unrun (what it holds may answer its
  // caller then: infer_pipeline.h). Tasks watch their own deadlines (the
  // engine checks them between nodes).
  void Submit(std::function<void()> task);

  // As Submit, for a task that may run on one thread of a split team: it is
  // called with the number of threads it has (team_threads, or 1). `demand`:
  // the requests it stands for (a batch task: its model's queue); a team
  // splits while the queued tasks' demand is two or more.
  void SubmitSplittable(std::function<void(int threads)> task, int demand = 1);

  // Says a task is about to be submitted (a request being decoded): wakes one
  // idle compute thread now, if there is one and none is awake for this
  // already, so that its wake-up (and its team's, `on_prewake`) overlaps the
  // decoding instead of following it. The woken thread runs `on_prewake`,
  // then watches the queue for up to kPrewakeWatch before it sleeps again.
  // On a 2-vCPU guest a thread woken after a few milliseconds idle starts
  // 0.05-0.15 ms later (docs/performance.md), against about 0.2 ms
  // of decoding a 600 KB input.
  void Prewake();
  static constexpr std::chrono::microseconds kPrewakeWatch{1000};

  int workers() const { return static_cast<int>(teams_.size()); }  // teams
  int team_threads() const { return team_threads_; }
  bool splits_teams() const { return split_; }

  // Teams with nothing to do now: waiting, with no task queued for them.
  // The batcher shares what is queued among them (dynamic_batcher.h).
  int idle() const;
  // Whether nothing runs or waits here: every team idle, no task queued.
  bool all_idle() const;

  // Tasks that ran on one thread of a split team, and times a team split.
  uint64_t narrow_runs() const { return narrow_runs_.load(std::memory_order_relaxed); }
  uint64_t splits() const { return splits_.load(std::memory_order_relaxed); }

 private:
  struct Task {
    std::function<void(int threads)> run;
    bool splittable = false;
    int demand = 1;
  };
  enum class Mode { kIdle, kWide, kNarrow };
  struct Team {
    Mode mode = Mode::kIdle;
    int narrow_busy = 0;     // narrow runs in progress
    bool waiting = false;    // its own thread waits for a task (or watches, prewoken)
    std::condition_variable ready;         // its own thread
    std::condition_variable narrow_ready;  // its narrow threads
  };

  void Lead(int team);
  void Narrow(int team);
  // Wakes whoever can take the head of the queue now. Under mu_.
  void WakeForHeadLocked();
  // A team's own thread may start the head task (wide or by splitting).
  bool LeaderCanStartLocked(const Team& team) const;
  // A narrow thread of `team` may take the head task.
  bool NarrowCanTakeLocked(const Team& team) const;
  // Takes the head task off the queue. Under mu_.
  Task PopLocked();
  // Teams whose own thread waits with the team whole and idle. Under mu_.
  int IdleTeamsLocked() const;

  const int team_threads_;
  const bool split_;
  const std::function<void(int team)> on_prewake_;
  mutable std::mutex mu_;
  std::deque<Task> queue_;
  int64_t queued_demand_ = 0;  // the queued tasks' demand
  std::atomic<size_t> queued_{0};  // queue_.size(), for the thread that watches it unlocked
  bool prewake_ = false;           // a Prewake not yet taken by a thread
  bool watching_ = false;          // a prewoken thread watches the queue
  bool stopping_ = false;
  std::vector<std::unique_ptr<Team>> teams_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> narrow_runs_{0};
  std::atomic<uint64_t> splits_{0};
};

// Runs `fn` on a new thread and waits for it: OpenMP work done there leaves no
// team behind.
void RunOnShortLivedThread(const std::function<void()>& fn);

}  // namespace kiln::server
