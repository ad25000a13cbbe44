#include "server/scheduler/batch_scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "server/core/thread_name.h"

namespace kiln::server {

BatchScheduler::BatchScheduler(ComputePool* pool) : pool_(pool) {}

BatchScheduler::~BatchScheduler() {
  std::vector<std::shared_ptr<DynamicBatcher>> batchers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (const auto& [key, model] : models_) batchers.push_back(model.batcher);
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const auto& batcher : batchers) {
    batcher->FailQueued(absl::UnavailableError("the server is shutting down"));
  }
  // The tasks in the pool hold this scheduler: they end before it does.
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return tasks_ == 0; });
}

void BatchScheduler::Enqueue(std::shared_ptr<DynamicBatcher> batcher,
                             std::vector<runtime::NamedTensor> inputs,
                             std::vector<std::string> requested, const runtime::RunOptions& run,
                             DynamicBatcher::Done done) {
  absl::Status refused;
  bool wake = false;
  {
    // Held while queueing, so that the destructor, once it has seen
    // stopping_, finds every queued request's model in models_.
    std::lock_guard<std::mutex> lock(mu_);
    BatchClock::time_point look_by = BatchClock::time_point::max();
    if (stopping_) {
      refused = absl::UnavailableError("the server is shutting down");
    } else {
      refused = batcher->Enqueue(std::move(inputs), std::move(requested), run, &done, &look_by);
    }
    if (refused.ok()) {
      Model& model = models_[batcher.get()];
      if (model.batcher == nullptr) model.batcher = std::move(batcher);
      model.arrived = true;
      dirty_ = true;
      // A task waiting in the pool takes this request when it starts; the
      // thread is needed only to submit one, or to look at the request
      // before it wakes anyway.
      wake = waiting_ && (!model.starting || look_by < wake_at_);
      if (!thread_.joinable()) thread_ = std::thread([this] {
          NameThisThread("kiln-batcher");
          Loop();
        });
    }
  }
  if (!refused.ok()) {
    DynamicBatcher::Result result;
    result.outputs = std::move(refused);
    done(std::move(result));
    return;
  }
  if (wake) changed_.notify_all();
}

void BatchScheduler::Submit(Model& model) {
  model.starting = true;
  ++model.tasks;
  ++tasks_;
  std::shared_ptr<DynamicBatcher> batcher = model.batcher;
  // Splittable when that pays (DynamicBatcher::SplitPays): while its queue
  // holds two or more requests, a split team runs this model's batches one
  // thread each, side by side (compute_pool.h).
  const int64_t demand = batcher->QueuedRequests();
  const bool split = batcher->SplitPays(pool_->team_threads());
  auto task = [this, batcher](int threads) {
    // This thread and the idle ones may share what is queued.
    batcher->RunNext(pool_->idle() + 1, [&] {
      bool wake = false;
      {
        // What is left queued needs a next task. Asked under mu_ (the order
        // Enqueue takes the two locks in): a request queued as this task
        // stops counting as the one that takes it is seen either here or by
        // Enqueue, which then finds no task waiting.
        std::lock_guard<std::mutex> lock(mu_);
        models_[batcher.get()].starting = false;
        dirty_ = true;
        wake = waiting_ && batcher->HasQueued();
      }
      if (wake) changed_.notify_all();
    }, threads == pool_->team_threads() ? 0 : threads);
    std::lock_guard<std::mutex> lock(mu_);
    Model& model = models_[batcher.get()];
    --model.tasks;
    --tasks_;
    dirty_ = true;
    // The destructor waits for the last task; a model with no task left may
    // leave the watch list (and release its batcher). Notified under mu_: once
    // mu_ is released with tasks_ at 0 the destructor may return and take
    // changed_ with it (ThreadSanitizer saw the notify race the destruction).
    if (stopping_ || (waiting_ && model.tasks == 0 && !model.starting)) changed_.notify_all();
  };
  if (split) {
    pool_->SubmitSplittable(std::move(task), static_cast<int>(std::max<int64_t>(1, demand)));
  } else {
    pool_->Submit([task = std::move(task), threads = pool_->team_threads()] { task(threads); });
  }
}

void BatchScheduler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    dirty_ = false;
    std::vector<std::shared_ptr<DynamicBatcher>> batchers;
    for (auto& [key, model] : models_) {
      model.arrived = false;
      batchers.push_back(model.batcher);
    }
    // Polled without mu_: a poll answers requests, and their callbacks may
    // take time or queue more.
    lock.unlock();
    std::vector<DynamicBatcher::PollResult> polls;
    polls.reserve(batchers.size());
    for (const auto& batcher : batchers) polls.push_back(batcher->Poll(BatchClock::now()));
    lock.lock();
    BatchClock::time_point wake = BatchClock::time_point::max();
    for (size_t i = 0; i < batchers.size(); ++i) {
      auto it = models_.find(batchers[i].get());
      Model& model = it->second;
      const DynamicBatcher::PollResult& poll = polls[i];
      if (poll.ready && !model.starting && !stopping_) Submit(model);
      // A model leaves the watch list once nothing of it is queued or running.
      if (poll.empty && !model.arrived && model.tasks == 0) {
        models_.erase(it);
        continue;
      }
      wake = std::min(wake, poll.wake);
    }
    if (dirty_) continue;
    auto woken = [this] { return dirty_ || stopping_; };
    waiting_ = true;
    wake_at_ = wake;
    if (wake == BatchClock::time_point::max()) {
      changed_.wait(lock, woken);
    } else {
      changed_.wait_until(lock, wake, woken);
    }
    waiting_ = false;
  }
}

}  // namespace kiln::server
