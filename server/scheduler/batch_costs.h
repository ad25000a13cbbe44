// What a batch of each size costs a model, measured on the batcher's own
// runs, so that a batch is cut to the size that serves the most rows per
// second of compute.
//
// Why: joining requests pays where the cost of a run is in reading the
// weights (an MLP or a transformer at batch 1: one GEMM serves sixteen rows
// for about the price of one). On a compute-bound model it may not: a
// mobilenet_v2 batch of 8 on one compute thread cost 5.6 ms per row where
// single requests on the two threads cost 4.5, so Triton's rule (take
// whatever waits, up to max_batch_size) made it slower under load than no
// batching at all. No static rule knows which kind a model is, or at which
// size it turns; its runs do.
//
// How: for each signature (BatchKey) and each size a batch ran as (padding
// included), an average of what its runs cost the compute thread (its CPU
// time, joining and splitting included: a wait for a core that the clients
// or another compute thread held is the load's, not the size's), updated on
// every run (the first two: the cheaper, as the first may compile). A planned
// batch (PlanBatch's requests, oldest first) is first cut to this thread's
// share of the queue when other compute threads are free; of its prefixes,
// the one with the most real rows per nanosecond of its padded size runs
// (a larger one only when it serves kBatchMargin more than a smaller one);
// the others stay queued for the next free compute thread. A size is tried
// before it is trusted (kTrustedAfter runs), and forgotten when it has not
// run for kForgetAfterNs of the process's CPU time while its signature ran,
// so that a size judged on a busy moment is tried again (then one run is
// enough to trust it). Until the
// full batch's size is known, it runs whole (Triton's rule); then the
// largest prefix of a size not known yet runs, until all are.
//
// Sizes are measured under the contention their own choice creates: a single
// run beside a batch on the other compute thread costs more than one beside
// another single (mobilenet_v2 at one thread: 10.8 ms per row against under
// 8), so per-size costs can favour batching where singles on every thread
// serve more. So policies are compared as a whole too: once a signature has
// batched for kTrialEveryNs of the process's CPU time (its last window held
// a batch), the next window runs singles only, and the CPU time per row they
// cost the whole process (the scheduler's work and the cores' shared caches
// included) is set against the last window of batching (in a process busy
// with other models or signatures too, both windows see their work).
// Batching goes on only when it served kBatchMargin more rows per second of
// compute; otherwise singles run for kTrialEveryNs, then one window of
// batching and a trial again. A policy that wins again holds twice as long
// (up to kMaxTrialEveryNs).
//
// Windows and policies last a span of CPU time, not a number of runs: a run
// of a compute-bound model's batch of 8 costs eight singles, so counting
// runs held a wrong verdict for batching eight times as long as one for
// singles, and a window of 32 singles (bert_small: 75 ms) was short enough
// for a moment of the machine's noise to decide it (verdicts alternated on a
// model whose two policies cost the same). A trial whose singles cost more
// than kClearFactor times the batched window's per row, or less than its
// 1 / kClearFactor, ends after kWindowMinRuns runs (the MLP of make bench-load
// read 2.11 ms against 1.32 after a whole window of its singles, a tenth of
// its batching's hold; bert_small's two policies read within 15% of each other).
#pragma once

#include <cstddef>
#include <cstdint>
#include <climits>
#include <map>
#include <string>
#include <vector>

namespace kiln::server {

class BatchCosts {
 public:
  // Runs of a size before its average is used.
  static constexpr int kTrustedAfter = 2;
  // The process's CPU time after which a size that has not run is unknown
  // again (as long as batching holds before its first trial, below). Counted
  // in runs (256) it relearned a compute-bound model's batch sizes about
  // every second of CPU under load: batches of 8, 4 and 2 on a model that
  // runs singles (bert_small at c16: about 20 runs in 1150).
  static constexpr uint64_t kForgetAfterNs = 3'200'000'000;
  // How many more rows per second of compute a larger batch must serve than
  // the best smaller one to run instead. A batch costs what its run time
  // does not show: joining and splitting the requests, and the cores the
  // other compute threads no longer share with single requests (mobilenet_v2
  // at one thread measured 6.6 ms per row in a batch of 8 against 7.0 alone,
  // and ran slower batched than not at concurrency 64). A weight-bound model
  // wins far more than this (an MLP: 0.18 ms per row at 64 against 2.4).
  static constexpr double kBatchMargin = 0.10;
  // The singles trial (above): a window's span of the process's CPU time and
  // its fewest runs, how often a trial comes, and the verdict it reaches early.
  static constexpr uint64_t kWindowNs = 400'000'000;
  static constexpr int kWindowMinRuns = 16;
  static constexpr uint64_t kTrialEveryNs = 8 * kWindowNs;
  static constexpr uint64_t kMaxTrialEveryNs = 128 * kWindowNs;
  static constexpr double kClearFactor = 1.5;
  // Signatures remembered at most (a model with a dynamic sequence length
  // has one per length); past it, every average is dropped and relearned.
  static constexpr size_t kMaxKeys = 64;

  // One run of a batch, as the batcher measured it.
  struct Run {
    int64_t size = 1;        // the rows it ran as, padding included
    int64_t real_rows = 1;   // of which requests' rows
    int64_t requests = 1;    // how many requests it joined (1: a single, of any rows)
    uint64_t ns = 0;         // its compute thread's CPU time
    uint64_t process_ns = 0;  // the process's CPU time as it ended
    uint64_t wall_ns = 0;     // a steady clock as it ended
  };
  // A run of signature `key`.
  void Record(const std::string& key, const Run& run);

  // How many requests of a planned batch to run now, at least 1: `rows` are
  // the planned requests' rows in queue order; `padded(r)` the rows a batch
  // of r real rows runs as (PaddedRows). `share`: the rows this compute
  // thread should take when others are free to take the rest (its share of
  // what waits); it applies once the full batch's cost is known, so that an
  // unknown model starts with Triton's batch.
  template <typename Padded>
  size_t Take(const std::string& key, const std::vector<int64_t>& rows, Padded padded,
              int64_t share = INT64_MAX) const {
    std::vector<int64_t> sizes;
    std::vector<int64_t> real;
    int64_t sum = 0;
    for (int64_t r : rows) {
      sum += r;
      real.push_back(sum);
      sizes.push_back(padded(sum));
    }
    return Choose(key, real, sizes, share);
  }

  // Whether `key`'s batches are single requests now: its last singles trial
  // chose singles (until the next window of batching), or every size it has
  // run is trusted and none serves kBatchMargin more rows per nanosecond than
  // a single (until a size is forgotten and learned again).
  bool ChoosesSingles(const std::string& key) const;

  // The average cost per real row (ns of its compute thread's CPU) of a
  // batch of `rows` real rows run as `padded` rows, when that size is
  // trusted; negative otherwise.
  double NsPerRowAt(const std::string& key, int64_t rows, int64_t padded) const;

  // Whether `key` is in a singles trial now (every request runs alone).
  bool OnTrial(const std::string& key) const;

  // The lowest average cost per row (ns of its compute thread's CPU per
  // padded row) of the trusted sizes of `key`; negative when none is trusted.
  double BestNsPerRow(const std::string& key) const;

  // "1: 4.5, 8: 5.6" (ms per real row of each trusted size), for the
  // signature most recently run, then what the last singles trial found;
  // empty before any size is trusted.
  std::string Describe() const;

 private:
  struct Cost {
    double ns = 0;       // running average of a run
    int runs = 0;        // since it was last (re)learned
    uint64_t last_ns = 0;  // the process's CPU time when it last ran
  };
  // Runs taken together: the process's CPU time from the first one's end to
  // the last one's, and the real rows of the runs after the first. Runs of
  // one window follow each other: after a pause longer than kMaxPauseNs plus
  // twice the run (the model was idle, or another one ran), it starts again.
  static constexpr uint64_t kMaxPauseNs = 10'000'000;
  struct Window {
    uint64_t first_ns = 0;
    uint64_t last_ns = 0;
    uint64_t last_wall_ns = 0;
    int64_t rows = 0;
    int runs = 0;
    bool batched = false;  // one of them joined more than one request
    double PerRow() const {
      return rows > 0 ? static_cast<double>(last_ns - first_ns) / static_cast<double>(rows) : 0;
    }
    bool Full() const { return runs >= kWindowMinRuns && last_ns - first_ns >= kWindowNs; }
  };
  enum class Policy { kSizes, kTrial, kSingles };
  struct Signature {
    std::map<int64_t, Cost> sizes;
    uint64_t runs = 0;
    uint64_t now_ns = 0;  // the latest process CPU time a run of it ended at
    Policy policy = Policy::kSizes;
    uint64_t policy_start_ns = 0;  // the process's CPU time when the policy began
    uint64_t batch_for = kTrialEveryNs;    // kSizes: CPU time before the next trial
    uint64_t singles_for = kTrialEveryNs;  // kSingles: CPU time before batching again
    bool decided_singles = false;        // the last trial's verdict
    Window current;       // kSizes: the window filling now
    Window last_batched;  // kSizes: the last full window, if it ran batches
    Window trial;         // kTrial: the singles
    std::string verdict;  // the last trial's, for Describe
  };
  // The singles trial's bookkeeping for one run (Record).
  static void Police(Signature& signature, const Run& run);

  // The number of prefixes to take: `real[k]` and `sizes[k]` are the real
  // and padded rows of the first k + 1 requests.
  size_t Choose(const std::string& key, const std::vector<int64_t>& real,
                const std::vector<int64_t>& sizes, int64_t share) const;
  // Whether `cost` has not run for kForgetAfterNs of the signature's time.
  static bool Stale(const Signature& signature, const Cost& cost);
  // The average run time of `size` when it is trusted, else a negative value.
  double Known(const Signature& signature, int64_t size) const;

  std::map<std::string, Signature> keys_;
  std::string last_key_;
};

}  // namespace kiln::server
