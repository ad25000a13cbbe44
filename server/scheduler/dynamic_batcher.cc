#include "server/scheduler/dynamic_batcher.h"

#include <spdlog/spdlog.h>

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::server {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(5);
constexpr double kRelTolerance = 1e-4;
constexpr double kAbsTolerance = 1e-5;

// CPU time by `clock`: CLOCK_THREAD_CPUTIME_ID, what a run costs the compute
// thread, without the time it waited for a core the clients or other compute
// threads held (which wall time counts, and which swings with the load, not
// with the batch size); CLOCK_PROCESS_CPUTIME_ID, the whole process's (the
// singles trial: batch_costs.h).
uint64_t CpuNs(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

uint64_t NsBetween(BatchClock::time_point from, BatchClock::time_point to) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
}

// Why dim 0 of this contract cannot be a batch dim; empty when it can.
std::string WhyNotBatched(const runtime::Model& model) {
  if (model.inputs().empty()) return "the model has no inputs";
  for (const runtime::TensorSpec& spec : model.inputs()) {
    if (!spec.list.empty()) return absl::StrCat("input '", spec.list, "' is a tensor list");
    if (spec.dtype_source == "argument") {
      return absl::StrCat("input '", spec.name, "' is an int/float/bool argument");
    }
    if (!spec.dims.has_value()) return absl::StrCat("input '", spec.name, "' has no fixed rank");
    if (spec.dims->empty()) return absl::StrCat("input '", spec.name, "' has no dims");
    if ((*spec.dims)[0] != -1) {
      return absl::StrCat("input '", spec.name, "' has a fixed dim 0 (", (*spec.dims)[0], ")");
    }
  }
  for (const runtime::TensorSpec& spec : model.outputs()) {
    if (!spec.dims.has_value()) continue;  // known once run: checked on every batch
    if (spec.dims->empty()) return absl::StrCat("output '", spec.name, "' has no dims");
    if ((*spec.dims)[0] != -1) {
      return absl::StrCat("output '", spec.name, "' has a fixed dim 0 (", (*spec.dims)[0], ")");
    }
  }
  return "";
}

template <typename T>
bool CloseAs(const Tensor& a, const Tensor& b) {
  const T* x = a.data<T>();
  const T* y = b.data<T>();
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const double u = static_cast<double>(x[i]);
    const double v = static_cast<double>(y[i]);
    if (std::isnan(u) && std::isnan(v)) continue;
    if (!(std::fabs(u - v) <= kAbsTolerance + kRelTolerance * std::fabs(v))) return false;
  }
  return true;
}

// Whether the batch's slice `batched` equals the request's own result.
std::string Differs(const std::vector<runtime::NamedTensor>& batched,
                    const std::vector<runtime::NamedTensor>& alone) {
  if (batched.size() != alone.size()) return "the batch returned other outputs";
  for (size_t i = 0; i < batched.size(); ++i) {
    const Tensor& a = batched[i].tensor;
    const Tensor& b = alone[i].tensor;
    bool same = a.dtype() == b.dtype() && a.dims() == b.dims();
    if (same && a.dtype() == DType::kF32) {
      same = CloseAs<float>(a, b);
    } else if (same && a.dtype() == DType::kF64) {
      same = CloseAs<double>(a, b);
    } else if (same && a.byte_size() > 0) {
      same = std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
    }
    if (!same) {
      return absl::StrCat("output '", batched[i].name,
                          "' of a request differs when run in a batch: the model mixes rows");
    }
  }
  return "";
}

}  // namespace

struct DynamicBatcher::Item {
  std::vector<runtime::NamedTensor> inputs;
  std::vector<std::string> requested;
  runtime::RunOptions run;
  Done done;
  std::string key;
  int64_t rows = 1;
  BatchClock::time_point enqueued;
  BatchClock::time_point timeout_at = BatchClock::time_point::max();
  bool delayed = false;
  uint64_t seq = 0;
  bool finished = false;  // mu_: its result is set (preserve_ordering holds it back)
  Result result;

  // When a poll must look at it at the latest: its queue timeout (unless
  // already delayed), its deadline, and soon when it may be cancelled (that
  // is only seen by asking).
  BatchClock::time_point LookBy(BatchClock::time_point now) const {
    BatchClock::time_point by = std::min(delayed ? BatchClock::time_point::max() : timeout_at,
                                         run.deadline);
    if (run.stop) by = std::min(by, now + kPoll);
    return by;
  }
};

std::shared_ptr<DynamicBatcher> DynamicBatcher::Create(
    const ModelConfig& config, std::shared_ptr<const runtime::Model> model) {
  if (config.max_batch_size <= 0) return nullptr;
  std::shared_ptr<DynamicBatcher> batcher(new DynamicBatcher());
  batcher->max_batch_size_ = config.max_batch_size;
  batcher->config_ = config.dynamic_batching;
  batcher->off_reason_ = WhyNotBatched(*model);
  batcher->on_ = batcher->off_reason_.empty();
  batcher->batch_dim_ = batcher->on_;
  batcher->model_ = std::move(model);
  // Joined batches stay inside the model's declared range of dim 0.
  batcher->settings_.max_batch_size =
      BatchRowsBound(batcher->model_->inputs(), config.max_batch_size, &batcher->rows_capped_by_);
  if (config.dynamic_batching.has_value()) {
    batcher->settings_.preferred_batch_size = config.dynamic_batching->preferred_batch_size;
    batcher->settings_.max_queue_delay =
        std::chrono::microseconds(config.dynamic_batching->max_queue_delay_us);
    batcher->allowed_sizes_ = AllowedBatchSizes(config.dynamic_batching->allowed_batch_sizes,
                                                config.dynamic_batching->preferred_batch_size,
                                                batcher->settings_.max_batch_size);
  }
  return batcher;
}

std::string DynamicBatcher::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!on_) return absl::StrCat("off: ", off_reason_);
  if (!config_.has_value()) {
    return absl::StrCat("off: no \"dynamic_batching\" in the config (max_batch_size ",
                        max_batch_size_, " bounds each request's dim 0)");
  }
  const std::string costs = config_->adaptive_batch_size ? costs_.Describe() : std::string();
  const std::string capped =
      rows_capped_by_.empty()
          ? std::string()
          : absl::StrCat(", batches joined up to ", settings_.max_batch_size, " rows: ",
                         rows_capped_by_);
  return absl::StrCat("on (max_batch_size ", max_batch_size_, capped, ", preferred [",
                      absl::StrJoin(config_->preferred_batch_size, ", "), "], max_queue_delay ",
                      config_->max_queue_delay_us, " us",
                      config_->preserve_ordering ? ", preserve_ordering" : "",
                      allowed_sizes_.empty()
                          ? std::string(", batches run at their own size")
                          : absl::StrCat(", batches padded to [", absl::StrJoin(allowed_sizes_, ", "),
                                         "]"),
                      !config_->adaptive_batch_size ? std::string()
                      : costs.empty()
                          ? std::string(", batch size by measured cost")
                          : absl::StrCat(", batch size by measured cost: ms per row at ", costs),
                      ")");
}

bool DynamicBatcher::queues() const {
  std::lock_guard<std::mutex> lock(mu_);
  return on_ && config_.has_value();
}

absl::StatusOr<int64_t> DynamicBatcher::CheckRows(
    const std::vector<runtime::NamedTensor>& inputs) const {
  // A model whose dim 0 is not a batch dim has no batch size to check.
  if (!batch_dim_) return 1;
  int64_t rows = -1;
  std::string first;
  for (const runtime::NamedTensor& input : inputs) {
    if (input.tensor.rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input.name, "' has no dims; the model batches on dim 0 (max_batch_size ",
          max_batch_size_, ")"));
    }
    if (rows < 0) {
      rows = input.tensor.dim(0);
      first = input.name;
    } else if (input.tensor.dim(0) != rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "inputs '", first, "' and '", input.name, "' have different batch sizes (dim 0: ", rows,
          " and ", input.tensor.dim(0), ")"));
    }
  }
  if (rows > max_batch_size_) {
    return absl::InvalidArgumentError(absl::StrCat("the request's batch size ", rows,
                                                   " (dim 0) exceeds the model's max_batch_size ",
                                                   max_batch_size_));
  }
  return std::max<int64_t>(rows, 1);
}

absl::Status DynamicBatcher::Enqueue(std::vector<runtime::NamedTensor> inputs,
                                     std::vector<std::string> requested,
                                     const runtime::RunOptions& run, Done* done,
                                     BatchClock::time_point* look_by) {
  auto item = std::make_shared<Item>();
  item->key = BatchKey(inputs, requested);
  item->rows = inputs.empty() || inputs[0].tensor.rank() == 0 ? 1 : inputs[0].tensor.dim(0);
  item->inputs = std::move(inputs);
  item->requested = std::move(requested);
  item->run = run;
  item->enqueued = BatchClock::now();
  const QueuePolicy& policy = config_->default_queue_policy;
  if (policy.default_timeout_us > 0) {
    item->timeout_at = item->enqueued + std::chrono::microseconds(policy.default_timeout_us);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (policy.max_queue_size > 0 && queue_.size() >= policy.max_queue_size) {
    return absl::UnavailableError(absl::StrCat(
        "the model's queue is full: ", queue_.size(), " requests wait (max_queue_size ",
        policy.max_queue_size, "); retry later"));
  }
  if (look_by != nullptr) *look_by = item->LookBy(item->enqueued);
  item->done = std::move(*done);
  item->seq = next_seq_++;
  if (config_->preserve_ordering) outstanding_.emplace(item->seq, item);
  queue_.push_back(std::move(item));
  return absl::OkStatus();
}

bool DynamicBatcher::HasQueued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !queue_.empty();
}

void DynamicBatcher::ExpireLocked(BatchClock::time_point now, Items* ended) {
  const QueuePolicy& policy = config_->default_queue_policy;
  for (auto it = queue_.begin(); it != queue_.end();) {
    Item& item = **it;
    absl::Status gone;
    if (now >= item.run.deadline) {
      gone = absl::DeadlineExceededError(absl::StrCat(
          "ran past ", item.run.deadline_name, " while waiting in the model's batch queue"));
    } else if (now >= item.timeout_at) {
      if (policy.timeout_action == QueuePolicy::TimeoutAction::kDelay) {
        item.delayed = true;
      } else {
        gone = absl::DeadlineExceededError(
            absl::StrCat("waited in the model's batch queue past its timeout of ",
                         policy.default_timeout_us, " us (default_timeout_microseconds)"));
      }
    }
    if (gone.ok() && item.run.stop) gone = item.run.stop();
    if (gone.ok()) {
      ++it;
      continue;
    }
    item.result.outputs = gone;
    item.result.queue_ns = NsBetween(item.enqueued, now);
    ended->push_back(std::move(*it));
    it = queue_.erase(it);
  }
}

std::vector<size_t> DynamicBatcher::PlanLocked(BatchClock::time_point now,
                                               BatchClock::time_point* wait_until) {
  *wait_until = BatchClock::time_point::max();
  if (queue_.empty()) return {};
  // Batching turned off: one request at a time, in arrival order.
  if (!on_) return {0};
  std::vector<PlanItem> items;
  items.reserve(queue_.size());
  for (const auto& item : queue_) {
    items.push_back({item->key, item->rows, item->enqueued, item->delayed});
  }
  BatchPlan plan = PlanBatch(items, settings_, now);
  *wait_until = plan.wait_until;
  return std::move(plan.take);
}

DynamicBatcher::PollResult DynamicBatcher::Poll(BatchClock::time_point now) {
  PollResult result;
  Items ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLocked(now, &ended);
    BatchClock::time_point due;
    result.ready = !PlanLocked(now, &due).empty();
    result.empty = queue_.empty();
    if (!result.ready) result.wake = due;
    for (const auto& item : queue_) result.wake = std::min(result.wake, item->LookBy(now));
  }
  Finish(ended);
  return result;
}

int64_t DynamicBatcher::QueuedRequests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

static std::string SplitCostPrefix(int run_threads) {
  return run_threads > 0 ? absl::StrCat("threads=", run_threads, ";") : "";
}

bool DynamicBatcher::RunsAtOnceLocked() const {
  return on_ && config_.has_value() && !config_->preserve_ordering &&
         config_->max_queue_delay_us == 0 && queue_.empty();
}

bool DynamicBatcher::MayRunAtOnce() const {
  std::lock_guard<std::mutex> lock(mu_);
  return RunsAtOnceLocked();
}

std::optional<std::string> DynamicBatcher::AloneKey(
    const std::vector<runtime::NamedTensor>& inputs, const std::vector<std::string>& requested,
    int split_threads, int64_t rows, bool idle_server) const {
  if (!config_.has_value() || config_->preserve_ordering) return std::nullopt;
  const bool one_row_idle = idle_server && rows == 1;
  const bool needs_queue = !config_->adaptive_batch_size ||
                           config_->default_queue_policy.max_queue_size > 0 ||
                           config_->default_queue_policy.default_timeout_us > 0;
  if (!one_row_idle && needs_queue) return std::nullopt;
  std::string key = BatchKey(inputs, requested);
  std::lock_guard<std::mutex> lock(mu_);
  // The batch of one the batcher would run now.
  if (one_row_idle && RunsAtOnceLocked()) return key;
  if (!on_ || needs_queue) return std::nullopt;
  if (split_threads < 2) {
    if (!costs_.ChoosesSingles(key)) return std::nullopt;
    return key;
  }
  // A team that may split runs single requests one thread each under load:
  // those are what a batch must beat, at one thread or on the whole team.
  if (!costs_.ChoosesSingles(SplitCostPrefix(1) + key)) return std::nullopt;
  // Against the whole team's best batch (a request that joins the queue
  // waits for others to join it); while costs are unknown, as if it may win.
  if (!costs_.ChoosesSingles(key) && WholeTeamWinsLocked(key, split_threads, 0).value_or(true)) {
    return std::nullopt;
  }
  return key;
}

absl::StatusOr<std::vector<runtime::NamedTensor>> DynamicBatcher::InferAlone(
    const std::string& key, int64_t rows, const std::vector<runtime::NamedTensor>& inputs,
    const std::vector<std::string>& requested, const runtime::RunOptions& run) {
  const uint64_t cpu_start = CpuNs(CLOCK_THREAD_CPUTIME_ID);
  absl::StatusOr<std::vector<runtime::NamedTensor>> outputs = model_->Infer(inputs, requested, run);
  if (outputs.ok()) {
    RecordCost(SplitCostPrefix(run.num_threads) + key, rows, rows, 1,
               CpuNs(CLOCK_THREAD_CPUTIME_ID) - cpu_start);
  }
  return outputs;
}

std::optional<bool> DynamicBatcher::WholeTeamWinsLocked(const std::string& key, int team_threads,
                                                        int64_t rows) const {
  const double narrow = costs_.BestNsPerRow(SplitCostPrefix(1) + key);
  // The whole team's cost of the batch it would run now (`rows` of the
  // signature, as many as a batch may hold): at two or four rows a team
  // splits its GEMMs finer than at eight. Its best size's when not known,
  // or when `rows` is 0.
  const int64_t now = std::min(rows, settings_.max_batch_size);
  double whole = now < 1 ? -1 : costs_.NsPerRowAt(key, now, PaddedRows(now, allowed_sizes_));
  if (whole < 0) whole = costs_.BestNsPerRow(key);
  if (narrow < 0 || whole < 0) return std::nullopt;
  // The whole team must win by BatchCosts::kBatchMargin, as a larger batch
  // must: its costs are the leader's CPU alone, and a batch waits for its
  // rows (a BERT-shaped encoder measured 1.83 ms per row whole against 3.2-3.5
  // at one thread, yet served more split).
  return narrow / team_threads >= whole * (1 + BatchCosts::kBatchMargin);
}

int64_t DynamicBatcher::QueuedRowsLocked(const std::string& key) const {
  int64_t rows = 0;
  for (const auto& item : queue_) {
    if (item->key == key) rows += item->rows;
  }
  return rows;
}

bool DynamicBatcher::SplitPays(int team_threads) {
  std::lock_guard<std::mutex> lock(mu_);
  if (team_threads < 2) return false;
  if (queue_.empty()) return true;
  const std::string& key = queue_.front()->key;
  // Costs not known yet: split, and learn the single-thread ones (a whole
  // team's run comes at low load).
  if (!WholeTeamWinsLocked(key, team_threads, QueuedRowsLocked(key)).value_or(false)) return true;
  // The whole team wins; a split now and then relearns the single-thread costs.
  if (++split_decisions_ >= kSplitRecheck) {
    split_decisions_ = 0;
    return true;
  }
  return false;
}

void DynamicBatcher::RunNext(int threads, const std::function<void()>& taken, int run_threads) {
  Items batch;
  Items ended;
  // Runs on fewer threads cost more per row: their costs are kept apart.
  const std::string cost_prefix = SplitCostPrefix(run_threads);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The batch is taken as a compute thread starts it, so that requests that
    // arrived while it waited for the thread join it.
    const BatchClock::time_point now = BatchClock::now();
    ExpireLocked(now, &ended);
    BatchClock::time_point unused;
    std::vector<size_t> take = PlanLocked(now, &unused);
    if (on_ && take.size() > 1 && config_->adaptive_batch_size) {
      // This thread's share of what waits, at least one request.
      int64_t waiting = 0;
      for (const auto& item : queue_) waiting += item->rows;
      const int64_t share = (waiting + threads - 1) / std::max(threads, 1);
      std::vector<int64_t> rows;
      for (size_t i : take) rows.push_back(queue_[i]->rows);
      take.resize(costs_.Take(cost_prefix + queue_[take[0]]->key, rows,
                              [this](int64_t r) { return PaddedRows(r, allowed_sizes_); }, share));
    }
    for (size_t i : take) {
      batch.push_back(queue_[i]);
      batch.back()->run.num_threads = run_threads;
    }
    for (auto it = take.rbegin(); it != take.rend(); ++it) {
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(*it));
    }
    for (const auto& item : batch) item->result.queue_ns = NsBetween(item->enqueued, now);
  }
  taken();
  Finish(ended);
  if (batch.empty()) return;
  Run(batch);
  Finish(batch);
}

void DynamicBatcher::FailQueued(const absl::Status& status) {
  Items ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const BatchClock::time_point now = BatchClock::now();
    for (auto& item : queue_) {
      item->result.outputs = status;
      item->result.queue_ns = NsBetween(item->enqueued, now);
      ended.push_back(std::move(item));
    }
    queue_.clear();
  }
  Finish(ended);
}

void DynamicBatcher::Finish(const Items& items) {
  if (items.empty()) return;
  auto answer = [](Item& item) {
    Done done = std::move(item.done);
    // What the request holds goes with its answer, not with the batch.
    item.inputs.clear();
    done(std::move(item.result));
  };
  if (!config_->preserve_ordering) {
    for (const auto& item : items) answer(*item);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (const auto& item : items) item->finished = true;
  // One thread answers at a time, so that answers leave in arrival order;
  // the one answering takes whatever others finish meanwhile.
  if (delivering_) return;
  delivering_ = true;
  for (;;) {
    Items next;
    while (!outstanding_.empty() && outstanding_.begin()->second->finished) {
      next.push_back(std::move(outstanding_.begin()->second));
      outstanding_.erase(outstanding_.begin());
    }
    if (next.empty()) break;
    lock.unlock();
    for (const auto& item : next) answer(*item);
    lock.lock();
  }
  delivering_ = false;
}

void DynamicBatcher::RunAlone(Item& item) {
  const BatchClock::time_point start = BatchClock::now();
  item.result.outputs = model_->Infer(item.inputs, item.requested, item.run);
  item.result.infer_ns = NsBetween(start, BatchClock::now());
  item.result.executions = 1;
  item.result.batch_rows = item.rows;
}

void DynamicBatcher::TurnOff(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!on_) return;
  on_ = false;
  off_reason_ = reason;
  spdlog::warn("dynamic batching turned off for a model: {}", reason);
}

void DynamicBatcher::RecordCost(const std::string& key, int64_t size, int64_t real_rows,
                                int64_t requests, uint64_t ns) {
  BatchCosts::Run run;
  run.size = size;
  run.real_rows = real_rows;
  run.requests = requests;
  run.ns = ns;
  run.process_ns = CpuNs(CLOCK_PROCESS_CPUTIME_ID);
  run.wall_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(BatchClock::now().time_since_epoch())
          .count());
  std::lock_guard<std::mutex> lock(mu_);
  costs_.Record(key, run);
}

void DynamicBatcher::Run(const std::vector<std::shared_ptr<Item>>& batch) {
  const uint64_t cpu_start = CpuNs(CLOCK_THREAD_CPUTIME_ID);
  // RunNext gave every request of the batch its thread count.
  const std::string cost_prefix = SplitCostPrefix(batch[0]->run.num_threads);
  if (batch.size() == 1) {
    RunAlone(*batch[0]);
    if (batch[0]->result.outputs.ok()) {
      RecordCost(cost_prefix + batch[0]->key, batch[0]->rows, batch[0]->rows, 1,
                 CpuNs(CLOCK_THREAD_CPUTIME_ID) - cpu_start);
    }
    return;
  }
  // The batch's cost, joining and splitting included, against single runs'.
  auto one_by_one = [&](size_t from) {
    for (size_t i = from; i < batch.size(); ++i) RunAlone(*batch[i]);
  };
  // The batch's bounds: the last deadline, a stop when every request stops,
  // and the requests' memory budgets together.
  runtime::RunOptions run = batch[0]->run;
  std::vector<const std::vector<runtime::NamedTensor>*> inputs;
  std::vector<int64_t> rows;
  uint64_t memory = 0;
  for (const auto& item : batch) {
    if (item->run.deadline > run.deadline) {
      run.deadline = item->run.deadline;
      run.deadline_name = item->run.deadline_name;
    }
    if (item->run.memory != nullptr) memory += item->run.memory->limit();
    inputs.push_back(&item->inputs);
    rows.push_back(item->rows);
  }
  if (batch[0]->run.memory != nullptr) {
    run.memory = std::make_shared<MemoryBudget>(memory, batch[0]->run.memory->limit_name());
  }
  run.stop = [&batch]() -> absl::Status {
    absl::Status first;
    for (const auto& item : batch) {
      absl::Status s = item->run.stop ? item->run.stop() : absl::OkStatus();
      if (s.ok()) return s;
      if (first.ok()) first = s;
    }
    return first;
  };
  // Padded up to an allowed size (its last row repeated), so that a few plans
  // serve every batch; the padding's outputs are split off and dropped.
  const int64_t real_rows = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  const int64_t run_rows = real_rows > 0 ? PaddedRows(real_rows, allowed_sizes_) : real_rows;
  absl::StatusOr<std::vector<runtime::NamedTensor>> joined =
      ConcatRows(inputs, run.memory, run_rows);
  if (!joined.ok()) return one_by_one(0);
  const BatchClock::time_point start = BatchClock::now();
  absl::StatusOr<std::vector<runtime::NamedTensor>> outputs =
      model_->Infer(*joined, batch[0]->requested, run);
  const uint64_t infer_ns = NsBetween(start, BatchClock::now());
  if (!outputs.ok()) {
    const absl::StatusCode code = outputs.status().code();
    if (code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kCancelled ||
        code == absl::StatusCode::kResourceExhausted) {
      for (const auto& item : batch) {
        item->result.outputs = outputs.status();
        item->result.infer_ns = infer_ns;
      }
      return;
    }
    // Each request's own error, with its own shapes in the message.
    return one_by_one(0);
  }
  absl::StatusOr<std::vector<std::vector<runtime::NamedTensor>>> parts =
      SplitRows(*outputs, run_rows > real_rows ? [&] {
        std::vector<int64_t> with_padding = rows;
        with_padding.push_back(run_rows - real_rows);
        return with_padding;
      }() : rows);
  if (!parts.ok()) {
    TurnOff(std::string(parts.status().message()));
    return one_by_one(0);
  }
  RecordCost(cost_prefix + batch[0]->key, run_rows, real_rows, static_cast<int64_t>(batch.size()),
             CpuNs(CLOCK_THREAD_CPUTIME_ID) - cpu_start);
  bool check = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    check = checked_keys_.insert(batch[0]->key).second;
  }
  if (check) {
    Item& first = *batch[0];
    runtime::RunOptions alone = first.run;
    absl::StatusOr<std::vector<runtime::NamedTensor>> own =
        model_->Infer(first.inputs, first.requested, alone);
    if (!own.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      checked_keys_.erase(first.key);  // check the next batch instead
    } else {
      const std::string differs = Differs((*parts)[0], *own);
      if (!differs.empty()) {
        TurnOff(differs);
        RunAlone(first);
        return one_by_one(1);
      }
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Result& result = batch[i]->result;
    result.outputs = std::move((*parts)[i]);
    result.infer_ns = infer_ns;
    result.executions = i == 0 ? 1 : 0;
    result.batch_rows = run_rows;  // the size that ran (Triton's batch_stats key)
  }
}

}  // namespace kiln::server
