#include "server/scheduler/compute_pool.h"

#include <algorithm>

#include "server/core/thread_name.h"

namespace kiln::server {

ComputePool::ComputePool(int workers, std::function<void(int worker)> on_start,
                         std::function<void(int worker)> on_prewake)
    : ComputePool(ComputePoolOptions{
          workers, 1, false,
          on_start ? std::function<void(int, int)>([on_start](int team, int slot) {
            if (slot < 0) on_start(team);
          })
                   : nullptr,
          std::move(on_prewake)}) {}

ComputePool::ComputePool(ComputePoolOptions options)
    : team_threads_(std::max(1, options.team_threads)),
      split_(options.split && options.team_threads >= 2),
      on_prewake_(std::move(options.on_prewake)) {
  const int n = std::max(1, options.teams);
  for (int i = 0; i < n; ++i) teams_.push_back(std::make_unique<Team>());
  auto on_start = std::move(options.on_start);
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this, i, on_start] {
      NameThisThread("kiln-compute");
      if (on_start) on_start(i, -1);
      Lead(i);
    });
    if (!split_) continue;
    for (int slot = 0; slot < team_threads_; ++slot) {
      threads_.emplace_back([this, i, slot, on_start] {
        NameThisThread("kiln-compute");
        if (on_start) on_start(i, slot);
        Narrow(i);
      });
    }
  }
}

ComputePool::~ComputePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& team : teams_) {
      team->ready.notify_all();
      team->narrow_ready.notify_all();
    }
  }
  for (std::thread& t : threads_) t.join();
}

bool ComputePool::LeaderCanStartLocked(const Team& team) const {
  return team.mode == Mode::kIdle && !queue_.empty();
}

bool ComputePool::NarrowCanTakeLocked(const Team& team) const {
  // A narrow thread starts a request when another narrow run keeps the
  // team's other CPUs busy, or when enough wait for two; a lone request
  // with the team otherwise idle goes back to the whole team (WakeForHead).
  return team.mode == Mode::kNarrow && team.narrow_busy < team_threads_ && !queue_.empty() &&
         queue_.front().splittable && (team.narrow_busy > 0 || queued_demand_ >= 2);
}

ComputePool::Task ComputePool::PopLocked() {
  Task task = std::move(queue_.front());
  queue_.pop_front();
  queued_demand_ -= task.demand;
  queued_.store(queue_.size(), std::memory_order_release);
  return task;
}

void ComputePool::WakeForHeadLocked() {
  // A split team with nothing it may take is whole again.
  for (auto& team : teams_) {
    if (team->mode == Mode::kNarrow && team->narrow_busy == 0 && !NarrowCanTakeLocked(*team)) {
      team->mode = Mode::kIdle;
    }
  }
  if (queue_.empty()) return;
  for (auto& team : teams_) {
    if (NarrowCanTakeLocked(*team)) {
      team->narrow_ready.notify_one();
      return;
    }
  }
  for (auto& team : teams_) {
    if (team->waiting && LeaderCanStartLocked(*team)) {
      team->ready.notify_one();
      return;
    }
  }
}

void ComputePool::Lead(int index) {
  Team& team = *teams_[index];
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    team.waiting = true;
    team.ready.wait(lock, [&] {
      return stopping_ || LeaderCanStartLocked(team) || (prewake_ && team.mode == Mode::kIdle);
    });
    if (stopping_) return;  // what is still queued goes with the pool
    if (!LeaderCanStartLocked(team)) {
      // Prewoken: a task is on its way. Still counted as waiting (idle()),
      // the thread readies its team and watches the queue; a Submit that
      // notified nobody (this thread does not wait on `ready` now) is seen
      // here or, past the watch, by the predicate above.
      prewake_ = false;
      watching_ = true;
      lock.unlock();
      if (on_prewake_) on_prewake_(index);
      const auto until = std::chrono::steady_clock::now() + kPrewakeWatch;
      while (queued_.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();  // a thread decoding on this CPU goes first
      }
      lock.lock();
      watching_ = false;
      continue;
    }
    team.waiting = false;
    if (split_ && queue_.front().splittable && queued_demand_ >= 2 + IdleTeamsLocked()) {
      // More wait than the idle teams take whole (this one included): the
      // team's narrow threads take them, one each.
      team.mode = Mode::kNarrow;
      splits_.fetch_add(1, std::memory_order_relaxed);
      team.narrow_ready.notify_all();
      continue;
    }
    Task task = PopLocked();
    team.mode = Mode::kWide;
    WakeForHeadLocked();  // the next one may go to another team
    lock.unlock();
    task.run(team_threads_);
    task = Task();  // what it holds goes before the next one starts
    lock.lock();
    team.mode = Mode::kIdle;
    WakeForHeadLocked();
  }
}

void ComputePool::Narrow(int index) {
  Team& team = *teams_[index];
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    team.narrow_ready.wait(lock, [&] { return stopping_ || NarrowCanTakeLocked(team); });
    if (stopping_) return;
    Task task = PopLocked();
    ++team.narrow_busy;
    WakeForHeadLocked();  // another narrow thread of this team may take the next
    lock.unlock();
    task.run(1);
    narrow_runs_.fetch_add(1, std::memory_order_relaxed);
    task = Task();
    lock.lock();
    --team.narrow_busy;
    WakeForHeadLocked();
  }
}

int ComputePool::IdleTeamsLocked() const {
  int waiting = 0;
  for (const auto& team : teams_) waiting += team->waiting && team->mode == Mode::kIdle;
  return waiting;
}

int ComputePool::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::max(0, IdleTeamsLocked() - static_cast<int>(queue_.size()));
}

bool ComputePool::all_idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && IdleTeamsLocked() == static_cast<int>(teams_.size());
}

void ComputePool::Submit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;  // `task` is destroyed unrun
  queue_.push_back(Task{[task = std::move(task)](int) { task(); }, false, 1});
  ++queued_demand_;
  queued_.store(queue_.size(), std::memory_order_release);
  WakeForHeadLocked();
}

void ComputePool::SubmitSplittable(std::function<void(int threads)> task, int demand) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  queue_.push_back(Task{std::move(task), true, std::max(1, demand)});
  queued_demand_ += queue_.back().demand;
  queued_.store(queue_.size(), std::memory_order_release);
  WakeForHeadLocked();
}

void ComputePool::Prewake() {
  std::lock_guard<std::mutex> lock(mu_);
  // Nobody idle, or one already woken for this: nothing to do.
  if (stopping_ || prewake_ || watching_) return;
  if (IdleTeamsLocked() <= static_cast<int>(queue_.size())) return;
  prewake_ = true;
  for (auto& team : teams_) {
    if (team->waiting && team->mode == Mode::kIdle) {
      team->ready.notify_one();
      return;
    }
  }
}

void RunOnShortLivedThread(const std::function<void()>& fn) {
  std::thread([&fn] {
    NameThisThread("kiln-load");
    fn();
  }).join();
}

}  // namespace kiln::server
