#include "server/scheduler/batch_planner.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::server {

BatchPlan PlanBatch(const std::vector<PlanItem>& queue, const BatchSettings& settings,
                    BatchClock::time_point now) {
  BatchPlan plan;
  if (queue.empty()) return plan;
  // Queue order, with the delayed requests moved behind the others.
  std::vector<size_t> order;
  order.reserve(queue.size());
  for (size_t i = 0; i < queue.size(); ++i) {
    if (!queue[i].delayed) order.push_back(i);
  }
  for (size_t i = 0; i < queue.size(); ++i) {
    if (queue[i].delayed) order.push_back(i);
  }
  const PlanItem& head = queue[order.front()];
  std::vector<int64_t> preferred = settings.preferred_batch_size;
  if (preferred.empty()) preferred.push_back(settings.max_batch_size);

  int64_t rows = 0;
  bool full = false;
  size_t preferred_prefix = 0;  // members in the largest prefix of a preferred size
  std::vector<size_t> members;
  for (size_t i : order) {
    const PlanItem& item = queue[i];
    if (item.key != head.key) continue;
    if (rows + item.rows > settings.max_batch_size && !members.empty()) {
      full = true;
      break;
    }
    members.push_back(i);
    rows += item.rows;
    if (std::find(preferred.begin(), preferred.end(), rows) != preferred.end()) {
      preferred_prefix = members.size();
    }
    if (rows >= settings.max_batch_size) {
      full = true;
      break;
    }
  }
  const BatchClock::time_point due = head.enqueued + settings.max_queue_delay;
  if (full || now >= due) {
    plan.take = std::move(members);
  } else if (preferred_prefix > 0) {
    members.resize(preferred_prefix);
    plan.take = std::move(members);
  } else {
    plan.wait_until = due;
  }
  std::sort(plan.take.begin(), plan.take.end());
  return plan;
}

int64_t BatchRowsBound(const std::vector<runtime::TensorSpec>& inputs, int64_t max_batch_size,
                       std::string* why) {
  int64_t bound = max_batch_size;
  for (const runtime::TensorSpec& input : inputs) {
    for (const ir::DimRange& range : input.dim_ranges) {
      if (range.dim != 0 || range.max >= bound) continue;
      bound = std::max<int64_t>(range.max, 1);
      if (why != nullptr) {
        // (runtime::DimRangeString's words, without linking the runtime here)
        *why = absl::StrCat("input '", input.name, "' declares dim 0 in [", range.min, ", ",
                            range.max, "]",
                            range.symbol.empty() ? "" : absl::StrCat(" (", range.symbol, ")"));
      }
    }
  }
  return bound;
}

std::string BatchKey(const std::vector<runtime::NamedTensor>& inputs,
                     const std::vector<std::string>& requested) {
  std::vector<std::string> parts;
  for (const runtime::NamedTensor& input : inputs) {
    Dims rest;
    if (input.tensor.rank() > 0) rest.assign(input.tensor.dims().begin() + 1, input.tensor.dims().end());
    parts.push_back(absl::StrCat(input.name.size(), ":", input.name, " ",
                                 DTypeName(input.tensor.dtype()), " ", input.tensor.rank(), " ",
                                 DimsToString(rest)));
  }
  std::sort(parts.begin(), parts.end());
  std::string key;
  for (const std::string& part : parts) absl::StrAppend(&key, part, ";");
  absl::StrAppend(&key, "->");
  for (const std::string& name : requested) absl::StrAppend(&key, name.size(), ":", name, ";");
  return key;
}

absl::StatusOr<std::vector<runtime::NamedTensor>> ConcatRows(
    const std::vector<const std::vector<runtime::NamedTensor>*>& requests,
    const std::shared_ptr<MemoryBudget>& budget, int64_t padded_rows) {
  std::vector<runtime::NamedTensor> batch;
  if (requests.empty()) return batch;
  const std::vector<runtime::NamedTensor>& first = *requests.front();
  for (size_t i = 0; i < first.size(); ++i) {
    const Tensor& t = first[i].tensor;
    if (t.rank() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", first[i].name, "' has no dim 0 to batch on"));
    }
    Dims dims = t.dims();
    dims[0] = 0;
    for (const auto* request : requests) {
      const runtime::NamedTensor& part = (*request)[i];
      if (part.name != first[i].name || part.tensor.dtype() != t.dtype() ||
          part.tensor.rank() != t.rank() ||
          !std::equal(part.tensor.dims().begin() + 1, part.tensor.dims().end(),
                      t.dims().begin() + 1)) {
        return absl::InternalError(
            absl::StrCat("input '", first[i].name, "' differs between the batched requests"));
      }
      dims[0] += part.tensor.dim(0);
    }
    const int64_t real_rows = dims[0];
    // The last row of the batch: the last request's, or an earlier one's if it has none.
    const Tensor* last = nullptr;
    for (const auto* request : requests) {
      if ((*request)[i].tensor.dim(0) > 0) last = &(*request)[i].tensor;
    }
    if (padded_rows > real_rows && last != nullptr) dims[0] = padded_rows;
    absl::StatusOr<Tensor> joined =
        Tensor::Allocate(t.dtype(), dims, absl::StrCat("batched input '", first[i].name, "'"), budget);
    if (!joined.ok()) return joined.status();
    char* out = static_cast<char*>(joined->raw_data());
    for (const auto* request : requests) {
      const Tensor& part = (*request)[i].tensor;
      if (part.byte_size() > 0) std::memcpy(out, part.raw_data(), part.byte_size());
      out += part.byte_size();
    }
    if (dims[0] > real_rows) {
      const size_t row_bytes = last->byte_size() / static_cast<size_t>(last->dim(0));
      const char* row = static_cast<const char*>(last->raw_data()) + last->byte_size() - row_bytes;
      CopyRowsCycling(row, 1, row_bytes, dims[0] - real_rows, out);
    }
    batch.push_back({first[i].name, *std::move(joined)});
  }
  return batch;
}

absl::StatusOr<std::vector<std::vector<runtime::NamedTensor>>> SplitRows(
    const std::vector<runtime::NamedTensor>& batch, const std::vector<int64_t>& rows) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  std::vector<std::vector<runtime::NamedTensor>> parts(rows.size());
  for (const runtime::NamedTensor& output : batch) {
    const Tensor& t = output.tensor;
    if (t.rank() == 0 || t.dim(0) != total) {
      return absl::FailedPreconditionError(absl::StrCat(
          "output '", output.name, "' has shape ", DimsToString(t.dims()), " for a batch of ",
          total, " rows: its dim 0 is not the batch dim"));
    }
    const size_t row_bytes = total == 0 ? 0 : t.byte_size() / static_cast<size_t>(total);
    const char* in = static_cast<const char*>(t.raw_data());
    for (size_t i = 0; i < rows.size(); ++i) {
      Dims dims = t.dims();
      dims[0] = rows[i];
      absl::StatusOr<Tensor> part =
          Tensor::Allocate(t.dtype(), dims, absl::StrCat("output '", output.name, "'"));
      if (!part.ok()) return part.status();
      const size_t bytes = row_bytes * static_cast<size_t>(rows[i]);
      if (bytes > 0) std::memcpy(part->raw_data(), in, bytes);
      in += bytes;
      parts[i].push_back({output.name, *std::move(part)});
    }
  }
  return parts;
}

void CopyRowsCycling(const void* src, int64_t src_rows, size_t row_bytes, int64_t out_rows,
                     void* out) {
  if (src_rows <= 0 || row_bytes == 0) return;
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(out);
  for (int64_t r = 0; r < out_rows; ++r, to += row_bytes) {
    std::memcpy(to, from + static_cast<size_t>(r % src_rows) * row_bytes, row_bytes);
  }
}

std::vector<int64_t> AllowedBatchSizes(const std::optional<std::vector<int64_t>>& configured,
                                       const std::vector<int64_t>& preferred, int64_t bound) {
  std::vector<int64_t> sizes;
  if (configured.has_value()) {
    if (configured->empty()) return sizes;
    sizes = *configured;
  } else {
    for (int64_t s = 1; s < bound; s *= 2) sizes.push_back(s);
    sizes.insert(sizes.end(), preferred.begin(), preferred.end());
  }
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(),
                             [bound](int64_t s) { return s < 1 || s > bound; }),
              sizes.end());
  sizes.push_back(bound);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

int64_t PaddedRows(int64_t rows, const std::vector<int64_t>& allowed) {
  auto it = std::lower_bound(allowed.begin(), allowed.end(), rows);
  return it == allowed.end() ? rows : *it;
}

}  // namespace kiln::server
