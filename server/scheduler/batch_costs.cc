#include "server/scheduler/batch_costs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::server {
namespace {

// Weight of a new run in the average: a few runs move it, one slow run does not.
constexpr double kNewRunWeight = 0.25;

}  // namespace

void BatchCosts::Record(const std::string& key, int64_t size, uint64_t ns) {
  if (size < 1) return;
  if (keys_.size() >= kMaxKeys && keys_.find(key) == keys_.end()) keys_.clear();
  Signature& signature = keys_[key];
  ++signature.runs;
  Cost& cost = signature.sizes[size];
  const bool stale = cost.runs > 0 && signature.runs - cost.last > kForgetAfter;
  if (cost.runs == 0 || stale) {
    cost.ns = static_cast<double>(ns);
    // A size learned before is trusted again on one run: each run of a size
    // that turns out slow costs the requests in it.
    cost.runs = stale ? kTrustedAfter : 1;
  } else {
    cost.ns += kNewRunWeight * (static_cast<double>(ns) - cost.ns);
    ++cost.runs;
  }
  cost.last = signature.runs;
  last_key_ = key;
}

double BatchCosts::Known(const Signature& signature, int64_t size) const {
  auto it = signature.sizes.find(size);
  if (it == signature.sizes.end()) return -1;
  const Cost& cost = it->second;
  if (cost.runs < kTrustedAfter || signature.runs - cost.last > kForgetAfter) return -1;
  return cost.ns;
}

size_t BatchCosts::Choose(const std::string& key, const std::vector<int64_t>& real,
                          const std::vector<int64_t>& sizes, int64_t share) const {
  size_t n = real.size();
  if (n <= 1) return n == 0 ? 0 : 1;
  auto it = keys_.find(key);
  if (it == keys_.end()) return n;  // nothing known: the full batch first
  const Signature& signature = it->second;
  double full = Known(signature, sizes[n - 1]);
  if (full < 0) return n;
  // This thread's share of what waits, when other compute threads are free.
  const size_t all = n;
  while (n > 1 && real[n - 1] > share) --n;
  if (n != all) {
    full = Known(signature, sizes[n - 1]);
    if (full < 0) return n;
  }
  // The best rows per nanosecond; on a tie the larger batch (less waiting).
  size_t best = n;
  double best_rate = static_cast<double>(real[n - 1]) / full;
  for (size_t k = n - 1; k >= 1; --k) {
    if (sizes[k - 1] == sizes[k]) continue;  // the same run with fewer real rows
    const double ns = Known(signature, sizes[k - 1]);
    if (ns < 0) return k;  // the largest prefix of a size not known yet: learn it
    const double rate = static_cast<double>(real[k - 1]) / ns;
    if (rate > best_rate) {
      best = k;
      best_rate = rate;
    }
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
  return out;
}

}  // namespace kiln::server
