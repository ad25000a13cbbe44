// The dynamic batchers' scheduler (Triton's shape): one thread that watches
// the queues of every batched model, and hands each batch, when it is due,
// to the compute pool; requests are answered through callbacks, so no thread
// blocks for any one request, however many wait.
//
// The thread polls each model with queued requests (DynamicBatcher::Poll):
// that answers the requests whose wait is over and says whether a batch is
// due by the model's rules (batch_planner.h: full, preferred size, queue
// delay). When one is, it submits one task to the compute pool; the task
// takes the batch as it starts (so requests that arrived while it waited for
// a compute thread join it) and runs it. Each model has at most one such task
// waiting for a compute thread at a time, and any number running: the batch
// grows while the compute threads are busy instead of queueing as many small
// ones. Between polls the thread sleeps until the earliest delay, timeout or
// deadline of the queues (every few milliseconds while a request may be
// cancelled by its client), or until something needs it: a request arrives
// for a model with no task waiting in the pool (one that is waiting takes
// the request when it starts), or one that must be looked at before the
// thread wakes anyway; a task takes its batch and leaves requests queued (a
// next task is due); a model's last task ends (it may leave the watch list).
// Under load that is about one wake-up per batch instead of three per
// request, each of which took a core from a compute thread
// (docs/performance.md: kilnd's CPU by thread).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/scheduler/compute_pool.h"
#include "server/scheduler/dynamic_batcher.h"

namespace kiln::server {

class BatchScheduler {
 public:
  // Batches run on `pool`, which must outlive the scheduler. The thread
  // starts with the first request.
  explicit BatchScheduler(ComputePool* pool);
  // Answers the requests still queued UNAVAILABLE ("the server is shutting
  // down"), lets the batches already handed to the pool finish, and joins.
  ~BatchScheduler();
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Queues a request of `batcher`'s model (DynamicBatcher::Enqueue) and
  // returns at once. `done` is called exactly once: before Enqueue returns
  // when the queue is full (UNAVAILABLE) or the scheduler is stopping, else on
  // the thread that ends the request.
  void Enqueue(std::shared_ptr<DynamicBatcher> batcher, std::vector<runtime::NamedTensor> inputs,
               std::vector<std::string> requested, const runtime::RunOptions& run,
               DynamicBatcher::Done done);

 private:
  struct Model {
    std::shared_ptr<DynamicBatcher> batcher;
    bool starting = false;  // a task waits in the pool to take its next batch
    int tasks = 0;          // its tasks submitted and not ended
    bool arrived = false;   // a request came since the last poll began
  };

  void Loop();
  void Submit(Model& model);

  ComputePool* pool_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool dirty_ = false;  // something changed since the last poll began
  bool stopping_ = false;
  // The thread sleeps (until wake_at_ at the latest); when it does not, it
  // polls again before it sleeps if dirty_.
  bool waiting_ = false;
  BatchClock::time_point wake_at_ = BatchClock::time_point::max();
  std::map<const DynamicBatcher*, Model> models_;  // those with queued or running requests
  int tasks_ = 0;
  std::thread thread_;
};

}  // namespace kiln::server
