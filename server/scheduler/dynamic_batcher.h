// One model version's dynamic batcher (Triton's semantics, configured by
// "max_batch_size" and "dynamic_batching" in the model config): requests wait
// in a per-model queue, the scheduler (batch_scheduler.h) decides when a
// batch is due and hands it to a compute thread (compute_pool.h), which takes
// the queued requests of one signature apart from dim 0 as one batch
// (batch_planner.h), joins their inputs on dim 0, runs the batch (its plan is
// compiled and cached like any other signature's), splits the outputs back
// and answers each request through its callback. No thread waits for any
// one request.
//
// When a model is batched. Kiln batches a model only when its contract says
// dim 0 may be a batch dim: every input has a known rank >= 1 and a dynamic
// dim 0 (not a list, not an int/float/bool argument), and no output has a
// fixed dim 0. That the graph keeps rows apart (no op mixes rows, such as a
// sum over dim 0) is checked, not proven: the first batch of each signature
// also runs its first request alone and compares (1e-4 relative, 1e-5
// absolute, exact for integers); a difference, or an output whose dim 0 is
// not the batch's rows, turns batching off for the model, and its metadata
// property "dynamic_batching" says why. That check run is not counted in the
// statistics' executions. The requests of a batch that turned batching off
// run again one by one, so no response ever comes from a wrong batch.
//
// Queue and timeouts. A request arriving to a full queue (max_queue_size)
// is refused at once with UNAVAILABLE. One still queued at its
// default_timeout_microseconds fails with DEADLINE_EXCEEDED (timeout_action
// REJECT) or moves behind the others (DELAY); its own deadline (the client's,
// --request-timeout-s, the "timeout" parameter) and its cancellation end its
// wait as they do on the direct path. A batch runs until the last deadline of
// its requests and stops only when all of them are cancelled.
//
// Batch size by measured cost (Kiln's extension "adaptive_batch_size", on by
// default). First, what waits is shared among the compute threads free now:
// a batch takes at most its share of the queued rows, so that four requests
// and two idle threads run as two batches at once rather than one batch of
// four beside an idle thread (each thread has its own cores: --threads).
// Then each batch's run time is recorded per size, and the planned batch runs
// cut to the prefix with the most rows per second of compute
// (batch_costs.h); the rest stay queued for the next compute thread. So a
// compute-bound model whose batches cost more per row than single requests
// ends up running singles, and a weight-bound one runs whole batches.
//
// Ordering. With preserve_ordering, a response is returned only after those
// of every request that arrived before it: the thread that finishes the
// oldest outstanding request answers it and every finished one behind it, in
// arrival order.
//
// Threads. Enqueue runs on the caller's thread, Poll on the scheduler's, and
// RunNext on a compute thread; a request's callback runs on whichever thread
// ended it (the caller's for a full queue, the scheduler's for a timeout or a
// cancellation in the queue, a compute thread's otherwise).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/model.h"
#include "server/core/model_config.h"
#include "server/scheduler/batch_costs.h"
#include "server/scheduler/batch_planner.h"

namespace kiln::server {

class DynamicBatcher {
 public:
  // Null when the config has no max_batch_size. When the contract rules
  // batching out, the batcher exists with batching off and says why.
  static std::shared_ptr<DynamicBatcher> Create(const ModelConfig& config,
                                                std::shared_ptr<const runtime::Model> model);

  // "on (max_batch_size 16, preferred [4, 8], max_queue_delay 100 us)" or
  // "off: input 'x' has a fixed dim 0 (4)": ModelMetadata's property.
  std::string Describe() const;

  // Whether requests go through the queue (dynamic batching configured and on).
  bool queues() const;

  // The request's batch size: the dim 0 its inputs share (InvalidArgument
  // when they differ or it exceeds max_batch_size); 1 when the model's dim 0
  // is not a batch dim.
  absl::StatusOr<int64_t> CheckRows(const std::vector<runtime::NamedTensor>& inputs) const;

  struct Result {
    absl::StatusOr<std::vector<runtime::NamedTensor>> outputs =
        absl::InternalError("the request did not run");
    uint64_t queue_ns = 0;  // enqueued until its batch started
    uint64_t infer_ns = 0;  // its batch's run
    // Executions this request is counted for (1 for one request per batch),
    // and that batch's rows.
    uint64_t executions = 0;
    int64_t batch_rows = 0;
  };
  // Gets a queued request's result, exactly once.
  using Done = std::function<void(Result)>;

  // Queues the request and returns at once; `*done` is moved from and later
  // called with its result. A full queue is UNAVAILABLE (`*done` untouched).
  // Requests reach it through the scheduler (batch_scheduler.h), which then
  // polls this batcher. `*look_by` (may be null): when a poll must look at
  // the request at the latest (its queue timeout, its deadline, or soon when
  // it may be cancelled).
  absl::Status Enqueue(std::vector<runtime::NamedTensor> inputs, std::vector<std::string> requested,
                       const runtime::RunOptions& run, Done* done,
                       BatchClock::time_point* look_by = nullptr);

  // Whether any request waits in the queue.
  bool HasQueued() const;

  // What the scheduler learns from a poll.
  struct PollResult {
    bool ready = false;  // a batch is due now: hand RunNext to a compute thread
    bool empty = false;  // nothing is queued
    // When to poll again at the latest: the next queue delay, queue timeout
    // or deadline, or soon when a request may be cancelled.
    BatchClock::time_point wake = BatchClock::time_point::max();
  };

  // On the scheduler's thread: answers the queued requests whose wait is over
  // (queue timeout with REJECT, deadline, cancellation), moves those past a
  // DELAY timeout behind the others, and says whether a batch is due.
  PollResult Poll(BatchClock::time_point now);

  // On a compute thread: takes the batch due now (none when nothing is due
  // any more), calls `taken`, then runs the batch and answers its requests.
  // `threads`: the compute threads free to run this model's batches now,
  // this one included (adaptive_batch_size shares the queue among them).
  // `run_threads`: the threads this batch runs on when a split compute team
  // gave it one (RunOptions::num_threads; compute_pool.h), 0 for the
  // model's; each count keeps costs of its own.
  void RunNext(int threads, const std::function<void()>& taken, int run_threads = 0);

  // Requests queued now.
  int64_t QueuedRequests() const;

  // Whether a request may skip the queue and run as an unbatched one does
  // (InferPipeline::RunDirect), and its signature's key if so: the measured
  // costs choose single requests for its signature (BatchCosts::
  // ChoosesSingles), and nothing in the config needs the queue
  // (preserve_ordering, max_queue_size, a queue timeout). A single then pays
  // no hand-off to the batcher's thread and no queue delay. When the compute
  // team may split (`split_threads`: its threads, 0 when it may not), the
  // singles such a request becomes under load run on one thread each, so the
  // costs at one thread must choose singles, and the whole team's either
  // choose singles too or do not beat `split_threads` single-thread runs
  // (WholeTeamWinsLocked, as SplitPays weighs them): a BERT-shaped encoder's
  // whole-team batch of 8 beat a whole-team single, yet not two singles
  // side by side, and its requests went through the queue to run as singles
  // anyway (make bench-load's bert_small at c4: 0.82-0.93x unbatched).
  // Also, whatever the costs say, a request of one row when `idle_server`
  // (nothing runs or waits on the compute threads), nothing is queued and the
  // config has no queue delay: the batcher would run it at once as a batch of
  // one, after a hand-off to its thread (0.02-0.05 ms more per request on an
  // idle machine). Only when nothing runs: while something does, the
  // hand-off's delay is what lets a weight-bound model's requests meet in a
  // batch (the batched MLP at concurrency 4 served 1.34x unbatched through
  // the queue, 1.07x when a request went around it whenever a team was idle).
  // Never with preserve_ordering.
  // InferAlone runs it and counts its run, so that the next window of
  // batching, the next trial, and the relearning of a size come as they would.
  std::optional<std::string> AloneKey(const std::vector<runtime::NamedTensor>& inputs,
                                      const std::vector<std::string>& requested, int split_threads,
                                      int64_t rows = 1, bool idle_server = false) const;
  // Whether a request of one row arriving now may run at once as a batch of
  // one (AloneKey, given an idle server): nothing queued, no queue delay, no
  // order to keep. InferPipeline then wakes a compute thread while it decodes.
  bool MayRunAtOnce() const;
  // Runs a request of `rows` rows that skipped the queue (AloneKey gave
  // `key`) on the model, on run.num_threads threads (0: the model's count),
  // and records its cost as the batcher records a single's.
  absl::StatusOr<std::vector<runtime::NamedTensor>> InferAlone(
      const std::string& key, int64_t rows, const std::vector<runtime::NamedTensor>& inputs,
      const std::vector<std::string>& requested, const runtime::RunOptions& run);

  // Whether the next batch should be offered to a split compute team (one
  // thread per batch, `team_threads` batches at once: compute_pool.h)
  // rather than run on the whole team: yes while the single-thread costs of
  // the signature at the head of the queue are not known yet, then unless
  // the whole team serves kBatchMargin more rows per second than
  // `team_threads` of them at once (a weight-bound model may: its batch
  // reads the weights once for all its rows). Asked again now and then (kSplitRecheck
  // decisions) to relearn the costs.
  bool SplitPays(int team_threads);
  // Whether `key`'s whole team, running a batch of `rows` rows (what waits
  // now), serves kBatchMargin more rows per second than `team_threads`
  // single-thread runs side by side, by the costs measured (its best size's
  // when that batch's is not known or `rows` is 0); nullopt while either side
  // is unknown (the callers choose what to do until then).
  std::optional<bool> WholeTeamWinsLocked(const std::string& key, int team_threads,
                                          int64_t rows) const;
  // The rows of `key`'s requests in the queue.
  int64_t QueuedRowsLocked(const std::string& key) const;
  static constexpr uint64_t kSplitRecheck = 256;

  // Answers every queued request with `status` (the server stopping);
  // batches already taken still run and answer.
  void FailQueued(const absl::Status& status);

 private:
  struct Item;
  using Items = std::vector<std::shared_ptr<Item>>;

  DynamicBatcher() = default;
  // MayRunAtOnce's answer; under mu_.
  bool RunsAtOnceLocked() const;
  // Removes from the queue the requests whose wait is over into `ended`, and
  // marks those past a DELAY timeout. mu_ held.
  void ExpireLocked(BatchClock::time_point now, Items* ended);
  // The positions in the queue of the batch due at `now` (empty: none). mu_ held.
  std::vector<size_t> PlanLocked(BatchClock::time_point now, BatchClock::time_point* wait_until);
  void Run(const Items& batch);
  // Records a run of `size` rows (`real_rows` of them requests', from
  // `requests` requests) that took `ns` of the compute thread's CPU (costs_).
  void RecordCost(const std::string& key, int64_t size, int64_t real_rows, int64_t requests,
                  uint64_t ns);
  void RunAlone(Item& item);
  void TurnOff(const std::string& reason);
  // Marks `items` done and answers them (in arrival order with
  // preserve_ordering, holding back those behind an unfinished one).
  void Finish(const Items& items);

  std::shared_ptr<const runtime::Model> model_;
  int64_t max_batch_size_ = 0;
  std::string rows_capped_by_;  // why settings_.max_batch_size < max_batch_size_ (or empty)
  bool batch_dim_ = false;  // the contract allows dim 0 to be the batch dim
  std::optional<DynamicBatching> config_;
  BatchSettings settings_;
  // The sizes a joined batch runs as, padded up to (AllowedBatchSizes); empty: its own.
  std::vector<int64_t> allowed_sizes_;

  mutable std::mutex mu_;
  bool on_ = false;
  std::string off_reason_;
  std::deque<std::shared_ptr<Item>> queue_;
  uint64_t next_seq_ = 0;
  // preserve_ordering: every request not yet answered, by arrival.
  std::map<uint64_t, std::shared_ptr<Item>> outstanding_;
  bool delivering_ = false;  // a thread is answering from outstanding_'s front
  std::set<std::string> checked_keys_;  // signatures whose first batch was checked
  // What each batch size cost (adaptive_batch_size): a planned batch runs cut
  // to its cheapest prefix per row.
  BatchCosts costs_;
  uint64_t split_decisions_ = 0;  // SplitPays since it last offered a split to relearn
};

}  // namespace kiln::server
