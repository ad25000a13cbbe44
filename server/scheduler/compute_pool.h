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

class ComputePool {
 public:
  // `on_start(i)`, when given, runs first on compute thread i (0 <= i <
  // workers), before it takes a task: where the thread sets up what it keeps
  // for its life (its OpenMP team pinned to CPUs: infer_pipeline.cc).
  // `on_prewake(i)`, when given, runs on compute thread i when Prewake woke
  // it (waking its OpenMP team).
  explicit ComputePool(int workers, std::function<void(int worker)> on_start = nullptr,
                       std::function<void(int worker)> on_prewake = nullptr);
  ~ComputePool();  // finishes the running tasks; queued ones are destroyed unrun
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // Queues `task` to run on a compute thread and returns at once, in order
  // of arrival. A task still queued when the pool stops is destroyed unrun
  // (what it holds may answer its caller then: infer_pipeline.h). Tasks watch
  // their own deadlines (the engine checks them between nodes).
  void Submit(std::function<void()> task);

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

  int workers() const { return static_cast<int>(threads_.size()); }

  // Compute threads with nothing to do now: waiting, with no task queued
  // for them. The batcher shares what is queued among them (dynamic_batcher.h).
  int idle() const;

 private:
  void Work(int worker);

  mutable std::mutex mu_;
  std::condition_variable ready_;
  int waiting_ = 0;  // threads waiting for a task (watching the queue after a Prewake included)
  std::deque<std::function<void()>> queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), for the thread that watches it unlocked
  bool prewake_ = false;           // a Prewake not yet taken by a thread
  bool watching_ = false;          // a prewoken thread watches the queue
  bool stopping_ = false;
  const std::function<void(int worker)> on_prewake_;
  std::vector<std::thread> threads_;
};

// Runs `fn` on a new thread and waits for it: OpenMP work done there leaves no
// team behind.
void RunOnShortLivedThread(const std::function<void()>& fn);

}  // namespace kiln::server
