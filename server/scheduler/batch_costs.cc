#include "server/scheduler/batch_costs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::server {
namespace {

// Weight of a new run in the average: a few runs move it, one slow run does not.
constexpr double kNewRunWeight = 0.25;

}  // namespace

void BatchCosts::Record(const std::string& key, const Run& run) {
  if (run.size < 1) return;
  const uint64_t ns = run.ns;
  if (keys_.size() >= kMaxKeys && keys_.find(key) == keys_.end()) keys_.clear();
  Signature& signature = keys_[key];
  ++signature.runs;
  signature.now_ns = std::max(signature.now_ns, run.process_ns);
  Cost& cost = signature.sizes[run.size];
  const bool stale = cost.runs > 0 && Stale(signature, cost);
  if (cost.runs == 0 || stale) {
    cost.ns = static_cast<double>(ns);
    // A size learned before is trusted again on one run: each run of a size
    // that turns out slow costs the requests in it.
    cost.runs = stale ? kTrustedAfter : 1;
  } else if (cost.runs == 1) {
    // The first run of a size may have compiled its plan: the cheaper of two.
    cost.ns = std::min(cost.ns, static_cast<double>(ns));
    ++cost.runs;
  } else {
    cost.ns += kNewRunWeight * (static_cast<double>(ns) - cost.ns);
    ++cost.runs;
  }
  cost.last_ns = signature.now_ns;
  last_key_ = key;
  Police(signature, run);
}

void BatchCosts::Police(Signature& signature, const Run& run) {
  auto add = [&](Window& w) {
    if (w.runs > 0 && run.wall_ns > w.last_wall_ns + kMaxPauseNs + 2 * run.ns) w = Window();
    w.last_wall_ns = std::max(w.last_wall_ns, run.wall_ns);
    if (w.runs == 0) {
      w.first_ns = run.process_ns;
    } else {
      w.rows += run.real_rows;
    }
    w.last_ns = std::max(w.last_ns, run.process_ns);
    ++w.runs;
    w.batched = w.batched || run.requests > 1;
  };
  auto begin = [&](Policy policy) {
    signature.policy = policy;
    signature.policy_start_ns = run.process_ns;
  };
  if (signature.runs == 1) signature.policy_start_ns = run.process_ns;  // its first run
  // Runs end on several threads: one may be recorded after a later one.
  const uint64_t elapsed =
      run.process_ns > signature.policy_start_ns ? run.process_ns - signature.policy_start_ns : 0;
  switch (signature.policy) {
    case Policy::kSizes:
      add(signature.current);
      if (signature.current.Full()) {
        // Only a policy that batches now is put on trial.
        signature.last_batched = signature.current.batched ? signature.current : Window();
        signature.current = Window();
      }
      if (elapsed >= signature.batch_for && signature.last_batched.runs > 0) {
        begin(Policy::kTrial);
        signature.trial = Window();
      }
      return;
    case Policy::kTrial: {
      // Every run counts (a request of several rows is a single too); a batch
      // that started before the trial and ends in it is at most one per
      // compute thread.
      add(signature.trial);
      if (signature.trial.runs < kWindowMinRuns || signature.trial.rows == 0) return;
      const double singles = signature.trial.PerRow();
      const double batched = signature.last_batched.PerRow();
      const bool clear = singles > kClearFactor * batched || singles * kClearFactor < batched;
      if (!signature.trial.Full() && !clear) return;
      const bool batching_wins = batched * (1 + kBatchMargin) < singles;
      signature.verdict = absl::StrFormat(
          "; singles %.2f ms per row against %.2f batched (a trial of %d runs, %.0f ms of CPU): %s",
          singles / 1e6, batched / 1e6, signature.trial.runs,
          static_cast<double>(signature.trial.last_ns - signature.trial.first_ns) / 1e6,
          batching_wins ? "batching" : "singles");
      // The policy that won holds longer each time it wins again; after
      // singles, one window of batching is enough to compare.
      if (batching_wins) {
        signature.batch_for = signature.decided_singles
                                  ? kTrialEveryNs
                                  : std::min(signature.batch_for * 2, kMaxTrialEveryNs);
        signature.singles_for = kTrialEveryNs;
      } else {
        signature.singles_for = signature.decided_singles
                                    ? std::min(signature.singles_for * 2, kMaxTrialEveryNs)
                                    : kTrialEveryNs;
        signature.batch_for = 0;
      }
      signature.decided_singles = !batching_wins;
      begin(batching_wins ? Policy::kSizes : Policy::kSingles);
      signature.current = Window();
      signature.last_batched = Window();
      return;
    }
    case Policy::kSingles:
      if (elapsed >= signature.singles_for) begin(Policy::kSizes);
      return;
  }
}

bool BatchCosts::Stale(const Signature& signature, const Cost& cost) {
  return signature.now_ns > cost.last_ns && signature.now_ns - cost.last_ns > kForgetAfterNs;
}

double BatchCosts::Known(const Signature& signature, int64_t size) const {
  auto it = signature.sizes.find(size);
  if (it == signature.sizes.end()) return -1;
  const Cost& cost = it->second;
  if (cost.runs < kTrustedAfter || Stale(signature, cost)) return -1;
  return cost.ns;
}

size_t BatchCosts::Choose(const std::string& key, const std::vector<int64_t>& real,
                          const std::vector<int64_t>& sizes, int64_t share) const {
  size_t n = real.size();
  if (n <= 1) return n == 0 ? 0 : 1;
  auto it = keys_.find(key);
  if (it == keys_.end()) return n;  // nothing known: the full batch first
  const Signature& signature = it->second;
  if (signature.policy != Policy::kSizes) return 1;  // a singles trial, or singles won one
  double full = Known(signature, sizes[n - 1]);
  if (full < 0) return n;
  // This thread's share of what waits, when other compute threads are free.
  const size_t all = n;
  while (n > 1 && real[n - 1] > share) --n;
  if (n != all) {
    full = Known(signature, sizes[n - 1]);
    if (full < 0) return n;
  }
  // Every candidate's size known first: the largest prefix of each padded
  // size (fewer real rows in the same run only cost more per row).
  std::vector<size_t> candidates = {n};
  for (size_t k = n - 1; k >= 1; --k) {
    if (sizes[k - 1] == sizes[k]) continue;
    if (Known(signature, sizes[k - 1]) < 0) return k;  // the largest not known yet: learn it
    candidates.push_back(k);
  }
  // From the smallest up, a larger batch must serve kBatchMargin more rows
  // per nanosecond than the best smaller one.
  size_t best = 0;
  double best_rate = 0;
  for (auto k = candidates.rbegin(); k != candidates.rend(); ++k) {
    const double ns = *k == n ? full : Known(signature, sizes[*k - 1]);
    const double rate = static_cast<double>(real[*k - 1]) / ns;
    if (best == 0 || rate > best_rate * (1 + kBatchMargin)) {
      best = *k;
      best_rate = rate;
    }
  }
  return best;
}

bool BatchCosts::ChoosesSingles(const std::string& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end()) return false;
  const Signature& signature = it->second;
  if (signature.policy == Policy::kSingles) return true;
  if (signature.policy != Policy::kSizes) return false;
  const double one = Known(signature, 1);
  if (one < 0) return false;
  bool compared = false;
  for (const auto& [size, cost] : signature.sizes) {
    if (size == 1) continue;
    const double ns = Known(signature, size);
    if (ns < 0) return false;  // still learning it
    if (static_cast<double>(size) / ns > (1 + kBatchMargin) / one) return false;
    compared = true;
  }
  return compared;
}

double BatchCosts::NsPerRowAt(const std::string& key, int64_t rows, int64_t padded) const {
  auto it = keys_.find(key);
  if (it == keys_.end() || rows < 1) return -1;
  const double ns = Known(it->second, padded);
  return ns < 0 ? -1 : ns / static_cast<double>(rows);
}

bool BatchCosts::OnTrial(const std::string& key) const {
  auto it = keys_.find(key);
  return it != keys_.end() && it->second.policy == Policy::kTrial;
}

double BatchCosts::BestNsPerRow(const std::string& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end()) return -1;
  double best = -1;
  for (const auto& [size, cost] : it->second.sizes) {
    const double ns = Known(it->second, size);
    if (ns < 0 || size < 1) continue;
    const double per_row = ns / static_cast<double>(size);
    if (best < 0 || per_row < best) best = per_row;
  }
  return best;
}

std::string BatchCosts::Describe() const {
  auto it = keys_.find(last_key_);
  if (it == keys_.end()) return "";
  std::string out;
  for (const auto& [size, cost] : it->second.sizes) {
    const double ns = Known(it->second, size);
    if (ns < 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", size, ": ",
                    absl::StrFormat("%.2f", ns / 1e6 / static_cast<double>(size)));
  }
  if (!out.empty()) out += it->second.verdict;
  return out;
}

}  // namespace kiln::server
