// The dynamic batcher's decisions, apart from its threads and the engine, so
// that they can be tested alone: which queued requests form the next batch
// (PlanBatch, Triton's rules), and how requests' tensors are joined on dim 0
// and the batch's outputs split back (ConcatRows, SplitRows).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/tensor.h"
#include "engine/runtime/model.h"

namespace kiln::server {

using BatchClock = std::chrono::steady_clock;

// One queued request as the planner sees it.
struct PlanItem {
  // Requests batch together only when their keys are equal: the same input
  // names, dtypes and dims apart from dim 0, the same outputs asked for
  // (BatchKey).
  std::string key;
  int64_t rows = 1;  // its dim 0
  BatchClock::time_point enqueued;
  // Past its queue timeout with timeout_action DELAY: it goes after every
  // request that is not.
  bool delayed = false;
};

struct BatchSettings {
  int64_t max_batch_size = 1;
  std::vector<int64_t> preferred_batch_size;
  BatchClock::duration max_queue_delay{0};
};

struct BatchPlan {
  // Positions in the queue of the requests to run now, oldest first; empty:
  // nothing to run before `wait_until` unless another request arrives.
  std::vector<size_t> take;
  BatchClock::time_point wait_until = BatchClock::time_point::max();
};

// Triton's dynamic batcher rules. The batch starts from the oldest request
// (the oldest not delayed, if any) and takes, in queue order, every request
// with its key while the rows fit in max_batch_size. It runs at once when it
// is full (max_batch_size rows, or the next request with its key does not
// fit); else, when the oldest has waited max_queue_delay, it runs as it is;
// else, when a prefix of it has exactly a preferred size, the largest such
// prefix runs; else it waits for more until the oldest's delay is over. With
// no preferred sizes, max_batch_size is the one preferred size.
BatchPlan PlanBatch(const std::vector<PlanItem>& queue, const BatchSettings& settings,
                    BatchClock::time_point now);

// The most rows a joined batch may have: max_batch_size, or less where the
// model declares a range for some input's dim 0 (a .pt2's Dim("batch",
// max=64)); a batch above it would be refused by the model. `why` (may be
// null) says which range capped it; untouched when none did.
int64_t BatchRowsBound(const std::vector<runtime::TensorSpec>& inputs, int64_t max_batch_size,
                       std::string* why = nullptr);

// The key of a request's inputs (names sorted) and requested outputs.
std::string BatchKey(const std::vector<runtime::NamedTensor>& inputs,
                     const std::vector<std::string>& requested);

// Joins on dim 0 the tensors of each request; every request must have the
// same names in the same order (equal BatchKey). Allocated against `budget`.
// With `padded_rows` above the requests' rows, the batch has that many: its
// last row is repeated (values the model has been given for
// real, so a padded row cannot fail where the real one did not), and the
// caller drops the outputs' extra rows (SplitRows with a last part for them).
absl::StatusOr<std::vector<runtime::NamedTensor>> ConcatRows(
    const std::vector<const std::vector<runtime::NamedTensor>*>& requests,
    const std::shared_ptr<MemoryBudget>& budget, int64_t padded_rows = 0);

// Writes `out_rows` rows of `row_bytes` each to `out`: the `src_rows` rows at
// `src` in turn, from the first again past the last (the padding of a batch,
// a warm-up sample resized to an allowed batch size).
void CopyRowsCycling(const void* src, int64_t src_rows, size_t row_bytes, int64_t out_rows,
                     void* out);

// The batch sizes a model's joined batches run as (Kiln's extension
// "allowed_batch_sizes", after TensorFlow Serving's batching option): every
// size is one compiled plan, so a batcher that ran each size it reached would
// compile up to max_batch_size plans, inside the requests' time. `configured`
// as the config gives it (nullopt: absent) and `bound`, the most rows a batch
// may have (BatchRowsBound). Absent: powers of two below the bound, the
// preferred sizes, and the bound. Sizes above the bound are dropped and the
// bound added, so every batch has a size to run as. An empty list configured:
// no padding (the result is empty).
std::vector<int64_t> AllowedBatchSizes(const std::optional<std::vector<int64_t>>& configured,
                                       const std::vector<int64_t>& preferred, int64_t bound);

// The rows a batch of `rows` runs as: the smallest allowed size >= rows, or
// `rows` itself when `allowed` is empty or has none that large.
int64_t PaddedRows(int64_t rows, const std::vector<int64_t>& allowed);

// Splits each output of a batch on dim 0 into `rows.size()` parts of
// rows[i] rows each. FailedPrecondition when an output has no dim 0 or its
// dim 0 is not the sum of `rows`: the model does not keep the batch dim.
absl::StatusOr<std::vector<std::vector<runtime::NamedTensor>>> SplitRows(const std::vector<runtime::NamedTensor>& batch,
                                                              const std::vector<int64_t>& rows);

}  // namespace kiln::server
