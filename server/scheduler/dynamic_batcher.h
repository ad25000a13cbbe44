// One model version's dynamic batcher (Triton's semantics, configured by
// "max_batch_size" and "dynamic_batching" in the model config): requests wait
// in a per-model queue, and a compute thread (server/scheduler/compute_pool.h) takes
// those of one signature apart from dim 0 as one batch (batch_planner.h),
// joins their inputs on dim 0, runs the batch (its plan is compiled and
// cached like any other signature's), and splits the outputs back.
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
// Ordering. With preserve_ordering, a response is returned only after those
// of every request that arrived before it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/model.h"
#include "server/scheduler/compute_pool.h"
#include "server/core/model_config.h"
#include "server/scheduler/batch_planner.h"

namespace kiln::server {

class DynamicBatcher : public std::enable_shared_from_this<DynamicBatcher> {
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

  // Queues the request and returns when its batch has run (the gRPC handlers
  // are synchronous). `pool` runs the batches.
  Result Infer(std::vector<runtime::NamedTensor> inputs, std::vector<std::string> requested,
               const runtime::RunOptions& run, ComputePool& pool);

 private:
  struct Item;

  DynamicBatcher() = default;
  // On a compute thread: forms one batch (waiting for it to fill as the
  // rules say) and runs it.
  void FormAndRun();
  // Fails or delays the queued requests past their queue timeout. mu_ held.
  void ExpireLocked(BatchClock::time_point now);
  void RemoveLocked(const Item* item);
  void Run(const std::vector<std::shared_ptr<Item>>& batch);
  void RunAlone(Item& item);
  void TurnOff(const std::string& reason);

  std::shared_ptr<const runtime::Model> model_;
  int64_t max_batch_size_ = 0;
  std::string rows_capped_by_;  // why settings_.max_batch_size < max_batch_size_ (or empty)
  bool batch_dim_ = false;  // the contract allows dim 0 to be the batch dim
  std::optional<DynamicBatching> config_;
  BatchSettings settings_;

  mutable std::mutex mu_;
  bool on_ = false;
  std::string off_reason_;
  std::condition_variable arrived_;  // the queue changed: batch formers re-plan
  std::condition_variable done_;     // a request finished
  std::deque<std::shared_ptr<Item>> queue_;
  uint64_t next_seq_ = 0;
  std::set<uint64_t> outstanding_;      // preserve_ordering: not yet returned
  std::set<std::string> checked_keys_;  // signatures whose first batch was checked
};

}  // namespace kiln::server
