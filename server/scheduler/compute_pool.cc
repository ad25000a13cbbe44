#include "server/scheduler/compute_pool.h"

#include <algorithm>

#include "server/core/thread_name.h"

namespace kiln::server {

ComputePool::ComputePool(int workers, std::function<void(int worker)> on_start,
                         std::function<void(int worker)> on_prewake)
    : on_prewake_(std::move(on_prewake)) {
  const int n = std::max(1, workers);
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i, on_start] {
      NameThisThread("kiln-compute");
      if (on_start) on_start(i);
      Work(i);
    });
}

ComputePool::~ComputePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ComputePool::Work(int worker) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++waiting_;
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty() || prewake_; });
    if (!stopping_ && queue_.empty()) {
      // Prewoken: a task is on its way. Still counted as waiting (idle()),
      // the thread readies its team and watches the queue; a Submit that
      // notified nobody (this thread does not wait on `ready_` now) is seen
      // here or, past the watch, by the predicate above.
      prewake_ = false;
      watching_ = true;
      lock.unlock();
      if (on_prewake_) on_prewake_(worker);
      const auto until = std::chrono::steady_clock::now() + kPrewakeWatch;
      while (queued_.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();  // a thread decoding on this CPU goes first
      }
      lock.lock();
      watching_ = false;
      --waiting_;
      continue;
    }
    --waiting_;
    if (stopping_) return;  // what is still queued goes with the pool
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_release);
    lock.unlock();
    task();
    task = nullptr;  // what it holds goes before the next one starts
    lock.lock();
  }
}

int ComputePool::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::max(0, waiting_ - static_cast<int>(queue_.size()));
}

void ComputePool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;  // `task` is destroyed unrun
    queue_.push_back(std::move(task));
    queued_.store(queue_.size(), std::memory_order_release);
  }
  ready_.notify_one();
}

void ComputePool::Prewake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Nobody idle, or one already woken for this: nothing to do.
    if (stopping_ || prewake_ || watching_ || waiting_ <= static_cast<int>(queue_.size())) return;
    prewake_ = true;
  }
  ready_.notify_one();
}

void RunOnShortLivedThread(const std::function<void()>& fn) {
  std::thread([&fn] {
    NameThisThread("kiln-load");
    fn();
  }).join();
}

}  // namespace kiln::server
