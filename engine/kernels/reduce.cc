// Softmax, LogSoftmax and Mean.
//
// Softmax views the input as [outer, axis, inner]. It is numerically stable:
// it subtracts the maximum along the axis before exp, so no exp overflows and
// a row of -inf gives NaN exactly like PyTorch. With inner == 1 (the usual
// last-axis case) each row is contiguous; otherwise a task handles a chunk of
// up to kChunk inner columns of one outer index with running max and sum
// arrays on the stack, so every loop still streams along contiguous memory.
//
// Mean collapses the input into alternating runs of kept and reduced dims.
// When it ends in one reduced run after at most one kept run (mean over the
// trailing dims, the common case) each output element is the mean of one
// contiguous row, computed in parallel; otherwise rows are accumulated into a
// double workspace under an odometer over the outer dims.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

// ---------------------------------------------------------------- Softmax

struct SoftmaxPlan {
  int64_t outer = 0, axis = 0, inner = 0;
};

absl::Status PrepareSoftmax(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", -1), rank));
  auto p = std::make_shared<SoftmaxPlan>();
  if (rank == 0) {
    p->outer = p->axis = p->inner = 1;
  } else {
    p->outer = NumElements(Dims(x.begin(), x.begin() + axis));
    p->axis = x[axis];
    p->inner = NumElements(Dims(x.begin() + axis + 1, x.end()));
  }
  ctx.outputs = {TensorInfo{DType::kF32, x}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

constexpr int64_t kChunk = 256;  // inner columns per task: 2 KiB of max + 2 KiB of sum
constexpr int kExpCost = 20;     // rough cost of exp in simple float ops

template <bool kLog>
void SoftmaxRow(const float* src, float* dst, int64_t len) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < len; ++i) m = std::max(m, src[i]);
  if constexpr (kLog) {
    double sum = 0.0;
    for (int64_t i = 0; i < len; ++i) sum += std::exp(src[i] - m);
    // (x - max) - log(sum), not x - (max + log(sum)): the latter rounds the
    // shift at max's magnitude (1e-5 absolute error for inputs near 1000).
    const float log_sum = static_cast<float>(std::log(sum));
    for (int64_t i = 0; i < len; ++i) dst[i] = (src[i] - m) - log_sum;
  } else {
    for (int64_t i = 0; i < len; ++i) dst[i] = std::exp(src[i] - m);
    const float inv = static_cast<float>(1.0 / AccurateSum(dst, len));
    for (int64_t i = 0; i < len; ++i) dst[i] *= inv;
  }
}

// Softmax along the middle dim of src[axis, inner] for columns [c0, c0 + n).
template <bool kLog>
void SoftmaxColumns(const float* src, float* dst, int64_t axis, int64_t inner, int64_t c0,
                    int64_t n) {
  float m[kChunk], s[kChunk];
  std::fill(m, m + n, -std::numeric_limits<float>::infinity());
  std::fill(s, s + n, 0.0f);
  for (int64_t a = 0; a < axis; ++a) {
    const float* row = src + a * inner + c0;
    for (int64_t j = 0; j < n; ++j) m[j] = std::max(m[j], row[j]);
  }
  for (int64_t a = 0; a < axis; ++a) {
    const float* row = src + a * inner + c0;
    float* out = dst + a * inner + c0;
    if constexpr (kLog) {
      for (int64_t j = 0; j < n; ++j) s[j] += std::exp(row[j] - m[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) {
        out[j] = std::exp(row[j] - m[j]);
        s[j] += out[j];
      }
    }
  }
  if constexpr (kLog) {
    for (int64_t j = 0; j < n; ++j) s[j] = std::log(s[j]);  // now log(sum)
  } else {
    for (int64_t j = 0; j < n; ++j) s[j] = 1.0f / s[j];  // now the scale
  }
  for (int64_t a = 0; a < axis; ++a) {
    const float* row = src + a * inner + c0;
    float* out = dst + a * inner + c0;
    if constexpr (kLog) {
      for (int64_t j = 0; j < n; ++j) out[j] = (row[j] - m[j]) - s[j];
    } else {
      for (int64_t j = 0; j < n; ++j) out[j] *= s[j];
    }
  }
}

template <bool kLog>
absl::Status EvalSoftmax(EvalContext& ctx) {
  const SoftmaxPlan& p = StateAs<SoftmaxPlan>(ctx);
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t work = p.outer * p.axis * p.inner * kExpCost;
  if (p.inner == 1) {
    ParallelFor(p.outer, ctx.num_threads, work, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        SoftmaxRow<kLog>(x + r * p.axis, y + r * p.axis, p.axis);
    });
    return absl::OkStatus();
  }
  const int64_t chunks = (p.inner + kChunk - 1) / kChunk;
  ParallelFor(p.outer * chunks, ctx.num_threads, work, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / chunks;
      const int64_t c0 = (t % chunks) * kChunk;
      const int64_t base = o * p.axis * p.inner;
      SoftmaxColumns<kLog>(x + base, y + base, p.axis, p.inner, c0, std::min(kChunk, p.inner - c0));
    }
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Mean

constexpr int kMaxRank = 16;

struct MeanPlan {
  int rank = 0;  // collapsed rank
  int64_t dims[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  int64_t out_strides[kMaxRank] = {};  // 0 for reduced dims
  int64_t count = 1;                   // elements averaged per output
  bool rows_only = false;              // pattern [kept?, reduced]: one row per output
};

absl::Status PrepareMean(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<bool> reduce(std::max<int64_t>(rank, 1), false);
  const std::vector<int64_t> axes = ctx.node.attrs.GetInts("axes");
  if (axes.empty()) std::fill(reduce.begin(), reduce.end(), true);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, a, rank));
    if (reduce[axis]) return InvalidArg(ctx.node, "axis ", a, " appears more than once");
    reduce[axis] = true;
  }
  const bool keepdim = ctx.node.attrs.GetBool("keepdim", false);
  auto p = std::make_shared<MeanPlan>();
  Dims out;
  std::vector<int64_t> dims;
  std::vector<bool> red;
  for (int64_t i = 0; i < rank; ++i) {
    if (reduce[i]) {
      p->count *= x[i];
      if (keepdim) out.push_back(1);
    } else {
      out.push_back(x[i]);
    }
    if (x[i] == 1) continue;  // size-1 dims change no addressing
    if (!dims.empty() && red.back() == reduce[i]) {
      dims.back() *= x[i];
    } else {
      dims.push_back(x[i]);
      red.push_back(reduce[i]);
    }
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return Unimplemented(ctx.node, "mean over ", DimsToString(x), " needs too many loop dims");
  }
  p->rank = static_cast<int>(dims.size());
  int64_t stride = 1;
  for (int i = p->rank - 1; i >= 0; --i) {
    p->dims[i] = dims[i];
    p->reduced[i] = red[i];
    p->out_strides[i] = red[i] ? 0 : stride;
    if (!red[i]) stride *= dims[i];
  }
  p->rows_only = p->rank >= 1 && p->reduced[p->rank - 1] && p->rank <= 2;
  ctx.workspace_bytes = static_cast<size_t>(NumElements(out)) * sizeof(double);
  ctx.outputs = {TensorInfo{DType::kF32, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

absl::Status EvalMean(EvalContext& ctx) {
  const MeanPlan& p = StateAs<MeanPlan>(ctx);
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t out_n = ctx.outputs[0]->num_elements();
  const int64_t in_n = ctx.inputs[0]->num_elements();
  const double count = static_cast<double>(p.count);
  if (out_n == 0) return absl::OkStatus();
  if (p.rank == 0 || in_n == 0) {
    // Nothing to add up (only size-1 dims), or nothing at all: x / 1 or 0 / 0 = NaN.
    for (int64_t i = 0; i < out_n; ++i) {
      y[i] = static_cast<float>((in_n == 0 ? 0.0 : static_cast<double>(x[i])) / count);
    }
    return absl::OkStatus();
  }
  const int last = p.rank - 1;
  const int64_t len = p.dims[last];
  if (p.rows_only) {
    ParallelFor(out_n, ctx.num_threads, in_n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        y[r] = static_cast<float>(AccurateSum(x + r * len, len) / count);
      }
    });
    return absl::OkStatus();
  }
  double* acc = static_cast<double*>(ctx.workspace);
  std::fill(acc, acc + out_n, 0.0);
  int64_t idx[kMaxRank] = {};
  int64_t out_off = 0;
  const int64_t rows = in_n / len;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * len;
    if (p.reduced[last]) {
      acc[out_off] += AccurateSum(row, len);
    } else {
      double* dst = acc + out_off;
      for (int64_t j = 0; j < len; ++j) dst[j] += row[j];
    }
    for (int d = last - 1; d >= 0; --d) {
      out_off += p.out_strides[d];
      if (++idx[d] < p.dims[d]) break;
      out_off -= p.out_strides[d] * p.dims[d];
      idx[d] = 0;
    }
  }
  for (int64_t i = 0; i < out_n; ++i) y[i] = static_cast<float>(acc[i] / count);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> ReduceKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kSoftmax, DType::kF32, PrepareSoftmax, EvalSoftmax</*kLog=*/false>},
      {ir::OpKind::kLogSoftmax, DType::kF32, PrepareSoftmax, EvalSoftmax</*kLog=*/true>},
      {ir::OpKind::kMean, DType::kF32, PrepareMean, EvalMean},
  };
  return kKernels;
}

}  // namespace kiln::kernels
