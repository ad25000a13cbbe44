#include "server/scheduler/compute_pool.h"

#include <algorithm>

#include "server/core/thread_name.h"

namespace kiln::server {

ComputePool::ComputePool(int workers, std::function<void(int worker)> on_start) {
  const int n = std::max(1, workers);
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i, on_start] {
      NameThisThread("kiln-compute");
      if (on_start) on_start(i);
      Work();
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

int ComputePool::DefaultWorkers(int threads_per_request) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, threads_per_request));
}

void ComputePool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++waiting_;
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --waiting_;
    if (stopping_ || queue_.empty()) return;  // what is still queued goes with the pool
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
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
