#include "server/compute_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::server {

struct ComputePool::Job {
  const std::function<void()>* task = nullptr;
  std::function<void()> owned;  // Submit's task; `task` points at it
  // Guarded by the pool's mutex.
  enum class State { kQueued, kRunning, kDone, kAbandoned } state = State::kQueued;
  ComputePool::Clock::time_point started;  // set when a compute thread takes it
  std::condition_variable done;
};

ComputePool::ComputePool(int workers) {
  const int n = std::max(1, workers);
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Work(); });
}

ComputePool::~ComputePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int ComputePool::DefaultWorkers(int threads_per_request) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, threads_per_request));
}

void ComputePool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    if (job->state == Job::State::kAbandoned) continue;
    // No wake-up for the caller here: it would contend for the cores with the
    // OpenMP team that is about to start (on a 2-core machine a woken thread
    // can wait milliseconds for a core while both spin). The caller reads
    // `started` once the task is done.
    job->state = Job::State::kRunning;
    job->started = Clock::now();
    lock.unlock();
    (*job->task)();
    lock.lock();
    job->state = Job::State::kDone;
    job->done.notify_all();
  }
}

absl::Status ComputePool::Run(const std::function<void()>& task, Clock::time_point deadline,
                              const std::function<absl::Status()>& stop, uint64_t* queue_ns) {
  const Clock::time_point start = Clock::now();
  auto job = std::make_shared<Job>();
  job->task = &task;
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  queue_.push_back(job);
  ready_.notify_one();
  constexpr auto kPoll = std::chrono::milliseconds(5);
  while (job->state == Job::State::kQueued) {
    job->done.wait_for(lock, kPoll);
    if (job->state != Job::State::kQueued) break;
    absl::Status gone;
    if (stopping_) {
      gone = absl::UnavailableError("the server is shutting down");
    } else if (Clock::now() >= deadline) {
      gone = absl::DeadlineExceededError(absl::StrCat(
          "deadline exceeded while waiting for a compute thread (", threads_.size(),
          " busy; --concurrent-inferences)"));
    } else if (stop) {
      gone = stop();
    }
    if (!gone.ok()) {
      job->state = Job::State::kAbandoned;
      return gone;
    }
  }
  job->done.wait(lock, [&] { return job->state == Job::State::kDone; });
  if (queue_ns != nullptr) {
    *queue_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(job->started - start).count());
  }
  return absl::OkStatus();
}

void ComputePool::Submit(std::function<void()> task) {
  auto job = std::make_shared<Job>();
  job->owned = std::move(task);
  job->task = &job->owned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    queue_.push_back(std::move(job));
  }
  ready_.notify_one();
}

void RunOnShortLivedThread(const std::function<void()>& fn) { std::thread(fn).join(); }

}  // namespace kiln::server
