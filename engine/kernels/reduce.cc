// Softmax, LogSoftmax, Mean, the other reductions over axes (Sum, Prod,
// ReduceMax/Min, ArgMax/Min, Var, Std, Norm, LogSumExp, ReduceAll/Any) and
// the cumulative CumSum and CumProd.
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
#include "engine/kernels/movement.h"
#include "engine/kernels/safe_softmax.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {
namespace {

// ---------------------------------------------------------------- Softmax

struct SoftmaxPlan {
  int64_t outer = 0, axis = 0, inner = 0;
};

absl::Status PrepareSoftmax(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const DType t = ctx.inputs[0].dtype;  // FP32, or FP64 (its own table row)
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
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
  ctx.outputs = {TensorInfo{t, x}};
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
    if (IsSafeSoftmax(ctx.node)) ZeroFullyMaskedSlices(x, y, p.outer, p.axis, p.inner);
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
  if (IsSafeSoftmax(ctx.node)) ZeroFullyMaskedSlices(x, y, p.outer, p.axis, p.inner);
  return absl::OkStatus();
}

// FP64: one strided pass per (outer, inner) column, all in double, as
// PyTorch's float64 softmax computes.
template <bool kLog>
absl::Status EvalSoftmaxF64(EvalContext& ctx) {
  const SoftmaxPlan& p = StateAs<SoftmaxPlan>(ctx);
  const double* x = ctx.inputs[0]->data<double>();
  double* y = ctx.outputs[0]->data<double>();
  const int64_t work = p.outer * p.axis * p.inner * kExpCost;
  ParallelFor(p.outer * p.inner, ctx.num_threads, work, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t base = (t / p.inner) * p.axis * p.inner + t % p.inner;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t a = 0; a < p.axis; ++a) m = std::max(m, x[base + a * p.inner]);
      double sum = 0.0;
      for (int64_t a = 0; a < p.axis; ++a) sum += std::exp(x[base + a * p.inner] - m);
      for (int64_t a = 0; a < p.axis; ++a) {
        const double v = x[base + a * p.inner] - m;
        y[base + a * p.inner] = kLog ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  });
  if (IsSafeSoftmax(ctx.node)) ZeroFullyMaskedSlices(x, y, p.outer, p.axis, p.inner);
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
  const DType t = ctx.inputs[0].dtype;  // FP32, or FP64 (its own table row)
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
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
  ctx.outputs = {TensorInfo{t, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// A row's sum in double: AccurateSum for float, a plain double sum for FP64.
inline double RowSum(const float* x, int64_t n) { return AccurateSum(x, n); }
inline double RowSum(const double* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

template <typename T>
absl::Status EvalMean(EvalContext& ctx) {
  const MeanPlan& p = StateAs<MeanPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  const int64_t out_n = ctx.outputs[0]->num_elements();
  const int64_t in_n = ctx.inputs[0]->num_elements();
  const double count = static_cast<double>(p.count);
  if (out_n == 0) return absl::OkStatus();
  if (p.rank == 0 || in_n == 0) {
    // Nothing to add up (only size-1 dims), or nothing at all: x / 1 or 0 / 0 = NaN.
    for (int64_t i = 0; i < out_n; ++i) {
      y[i] = static_cast<T>((in_n == 0 ? 0.0 : static_cast<double>(x[i])) / count);
    }
    return absl::OkStatus();
  }
  const int last = p.rank - 1;
  const int64_t len = p.dims[last];
  if (p.rows_only) {
    ParallelFor(out_n, ctx.num_threads, in_n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        y[r] = static_cast<T>(RowSum(x + r * len, len) / count);
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
    const T* row = x + r * len;
    if (p.reduced[last]) {
      acc[out_off] += RowSum(row, len);
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
  for (int64_t i = 0; i < out_n; ++i) y[i] = static_cast<T>(acc[i] / count);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- reductions over axes
//
// Sum, Prod, ReduceMax, ReduceMin, ArgMax, ArgMin, Var, Std, Norm, LogSumExp,
// ReduceAll and ReduceAny share one plan: the kept dims first, the reduced
// dims last, so that every output element reduces one contiguous row. When
// the reduced dims are not already trailing, Eval first permutes the input
// into the workspace (one copy, as cheap as the reduction itself). Float rows
// accumulate in double, as PyTorch's CPU kernels accumulate float in double.

struct AxesPlan;
using RowFn = void (*)(const void* row, int64_t len, void* out, int64_t r, const AxesPlan& p);

struct AxesPlan {
  int64_t rows = 1, len = 1;
  bool permute = false;
  GatherPlan perm;
  RowFn fn = nullptr;
  double correction = 1.0;  // Var, Std
  double p = 2.0;           // Norm
  DType in_dtype = DType::kUnknown;
};

// Reduced-dims flags from attr `axes` (or `axis` for ArgMax/ArgMin; absent or
// empty: every dim) and the output dims.
absl::Status PlanAxes(PrepareContext& ctx, AxesPlan* plan, Dims* out) {
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank > kMaxRank) return Unimplemented(ctx.node, "more than ", kMaxRank, " dims");
  const ir::Attributes& attrs = ctx.node.attrs;
  std::vector<int64_t> axes;
  const bool single = ctx.node.kind == ir::OpKind::kArgMax || ctx.node.kind == ir::OpKind::kArgMin;
  if (single) {
    if (attrs.Has("axis")) axes = {attrs.GetInt("axis")};
  } else {
    axes = attrs.GetInts("axes");
  }
  std::vector<bool> reduce(rank, axes.empty());
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, a, rank));
    if (rank == 0) continue;
    if (reduce[axis]) return InvalidArg(ctx.node, "axis ", a, " appears more than once");
    reduce[axis] = true;
  }
  const bool keepdim = attrs.GetBool("keepdim", false);
  std::vector<int64_t> order;
  out->clear();
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduce[i]) {
      order.push_back(i);
      out->push_back(x[i]);
      plan->rows *= x[i];
    } else if (keepdim) {
      out->push_back(1);
    }
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (reduce[i]) {
      order.push_back(i);
      plan->len *= x[i];
    }
  }
  // No copy needed when the dims that matter (size > 1) are already in order.
  int64_t prev = -1;
  for (int64_t i : order) {
    if (x[i] == 1) continue;
    if (i < prev) plan->permute = true;
    prev = i;
  }
  if (plan->permute) {
    plan->perm = MakePermutePlan(x, order, DTypeSize(ctx.inputs[0].dtype));
    ctx.workspace_bytes = static_cast<size_t>(NumElements(x)) * DTypeSize(ctx.inputs[0].dtype);
  }
  return absl::OkStatus();
}

template <typename T, typename Acc>
void SumRow(const void* row, int64_t len, void* out, int64_t r, const AxesPlan&) {
  const T* x = static_cast<const T*>(row);
  if constexpr (std::is_same_v<T, float>) {
    static_cast<float*>(out)[r] = static_cast<float>(AccurateSum(x, len));
  } else {
    Acc acc = 0;
    for (int64_t i = 0; i < len; ++i) acc += static_cast<Acc>(x[i]);
    static_cast<Acc*>(out)[r] = acc;
  }
}

// Out is T for floats and int64; narrower integers and bool give int64, as
// PyTorch's prod does.
template <typename T, typename Acc, typename Out = T>
void ProdRow(const void* row, int64_t len, void* out, int64_t r, const AxesPlan&) {
  const T* x = static_cast<const T*>(row);
  Acc acc = 1;
  for (int64_t i = 0; i < len; ++i) acc *= static_cast<Acc>(x[i]);
  static_cast<Out*>(out)[r] = static_cast<Out>(acc);
}

// Extremes propagate NaN; the index is the first occurrence (the first NaN if any).
template <typename T, bool kMax>
std::pair<T, int64_t> Extreme(const T* x, int64_t len) {
  T best = x[0];
  int64_t at = 0;
  for (int64_t i = 1; i < len; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (best != best) break;
      if (x[i] != x[i]) {
        best = x[i];
        at = i;
        break;
      }
    }
    if (kMax ? x[i] > best : x[i] < best) {
      best = x[i];
      at = i;
    }
  }
  return {best, at};
}

template <typename T, bool kMax>
void ExtremeRow(const void* row, int64_t len, void* out, int64_t r, const AxesPlan&) {
  static_cast<T*>(out)[r] = Extreme<T, kMax>(static_cast<const T*>(row), len).first;
}

template <typename T, bool kMax>
void ArgRow(const void* row, int64_t len, void* out, int64_t r, const AxesPlan&) {
  static_cast<int64_t*>(out)[r] = Extreme<T, kMax>(static_cast<const T*>(row), len).second;
}

// The sum of a float or double row in double.
template <typename T>
double RowSum(const T* x, int64_t len) {
  if constexpr (std::is_same_v<T, float>) {
    return AccurateSum(x, len);
  } else {
    double acc = 0.0;
    for (int64_t i = 0; i < len; ++i) acc += x[i];
    return acc;
  }
}

// Var, Std, Norm and LogSumExp of float (T = float, accumulated in double) or
// double rows: one row function per type, one SelectRow entry each.

// Two-pass variance in double; n - correction <= 0 gives inf or NaN like PyTorch.
template <typename T, bool kStd>
void VarRow(const void* row, int64_t len, void* out, int64_t r, const AxesPlan& p) {
  const T* x = static_cast<const T*>(row);
  const double mean = RowSum(x, len) / static_cast<double>(len);
  double sq = 0.0;
  for (int64_t i = 0; i < len; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const double var = sq / std::max(0.0, static_cast<double>(len) - p.correction);
  static_cast<T*>(out)[r] = static_cast<T>(kStd ? std::sqrt(var) : var);
}

template <typename T>
void NormRow(const void* row, int64_t len, void* out, int64_t r, const AxesPlan& p) {
  const T* x = static_cast<const T*>(row);
  double acc = 0.0;
  if (std::isinf(p.p)) {
    acc = p.p > 0 ? 0.0 : std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < len; ++i) {
      const double a = std::abs(x[i]);
      if (a != a) {
        acc = a;
        break;
      }
      acc = p.p > 0 ? std::max(acc, a) : std::min(acc, a);
    }
  } else if (p.p == 0) {
    for (int64_t i = 0; i < len; ++i) acc += x[i] != T(0) ? 1.0 : 0.0;
  } else if (p.p == 1) {
    for (int64_t i = 0; i < len; ++i) acc += std::abs(x[i]);
  } else if (p.p == 2) {
    for (int64_t i = 0; i < len; ++i) acc += static_cast<double>(x[i]) * x[i];
    acc = std::sqrt(acc);
  } else {
    for (int64_t i = 0; i < len; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), p.p);
    acc = std::pow(acc, 1.0 / p.p);
  }
  static_cast<T*>(out)[r] = static_cast<T>(acc);
}

// log(sum(exp(x - m))) + m, with an infinite max treated as 0 as PyTorch does.
template <typename T>
void LogSumExpRow(const void* row, int64_t len, void* out, int64_t r, const AxesPlan&) {
  const T* x = static_cast<const T*>(row);
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < len; ++i) m = std::max(m, static_cast<double>(x[i]));
  if (std::isinf(m)) m = 0.0;
  double sum = 0.0;
  for (int64_t i = 0; i < len; ++i) sum += std::exp(x[i] - m);
  static_cast<T*>(out)[r] = static_cast<T>(std::log(sum) + m);
}

template <bool kAll>
void LogicalRow(const void* row, int64_t len, void* out, int64_t r, const AxesPlan& p) {
  const DType dtype = p.in_dtype;
  bool acc = kAll;
  for (int64_t i = 0; i < len; ++i) {
    const bool v = LoadAsDouble(row, dtype, i) != 0.0;
    if (kAll ? !v : v) {
      acc = !kAll;
      break;
    }
  }
  static_cast<uint8_t*>(out)[r] = acc ? 1 : 0;  // BOOL, or UINT8 for a UINT8 input
}

// Sum, prod, max, min, argmax or argmin (`op`) of a float type T: sums and
// products accumulate in double, extremes keep the dtype, arg* give int64.
template <typename T>
std::pair<DType, RowFn> SelectFloatRow(ir::OpKind op, DType t) {
  switch (op) {
    case ir::OpKind::kSum:
      return {t, SumRow<T, double>};
    case ir::OpKind::kProd:
      return {t, ProdRow<T, double>};
    case ir::OpKind::kReduceMax:
      return {t, ExtremeRow<T, true>};
    case ir::OpKind::kReduceMin:
      return {t, ExtremeRow<T, false>};
    case ir::OpKind::kArgMax:
      return {DType::kInt64, ArgRow<T, true>};
    default:
      return {DType::kInt64, ArgRow<T, false>};
  }
}

// Output dtype and row function for the node's op and input dtype; nullptr when unsupported.
std::pair<DType, RowFn> SelectRow(ir::OpKind op, DType t) {
  using K = ir::OpKind;
  const bool f32 = t == DType::kF32;
  const bool f64 = t == DType::kF64;
  switch (op) {
    // Sums and products of integers and bools are int64 (PyTorch's default
    // for integral reductions); extremes keep the dtype; arg* give int64.
#define KILN_INT_REDUCE(TYPE, T)                              \
  case TYPE:                                                  \
    switch (op) {                                             \
      case K::kSum:                                           \
        return {DType::kInt64, SumRow<T, int64_t>};           \
      case K::kProd:                                          \
        return {DType::kInt64, ProdRow<T, int64_t, int64_t>}; \
      case K::kReduceMax:                                     \
        return {t, ExtremeRow<T, true>};                      \
      case K::kReduceMin:                                     \
        return {t, ExtremeRow<T, false>};                     \
      case K::kArgMax:                                        \
        return {DType::kInt64, ArgRow<T, true>};              \
      case K::kArgMin:                                        \
        return {DType::kInt64, ArgRow<T, false>};             \
      default:                                                \
        break;                                                \
    }                                                         \
    break;
    case K::kSum:
    case K::kProd:
    case K::kReduceMax:
    case K::kReduceMin:
    case K::kArgMax:
    case K::kArgMin:
      switch (t) {
        case DType::kF32:
          return SelectFloatRow<float>(op, t);
        case DType::kF64:
          return SelectFloatRow<double>(op, t);
          KILN_INT_REDUCE(DType::kInt64, int64_t)
          KILN_INT_REDUCE(DType::kInt32, int32_t)
          KILN_INT_REDUCE(DType::kInt16, int16_t)
          KILN_INT_REDUCE(DType::kInt8, int8_t)
          KILN_INT_REDUCE(DType::kUInt8, uint8_t)
        case DType::kBool:
          // Sum and prod count. PyTorch's argmax/argmin refuse BOOL on CPU, but
          // max/min over a dim (values and indices) take it, and their indices
          // are these (the first extreme).
          if (op == K::kSum) return {DType::kInt64, SumRow<bool, int64_t>};
          if (op == K::kProd) return {DType::kInt64, ProdRow<bool, int64_t, int64_t>};
          if (op == K::kReduceMax) return {t, ExtremeRow<bool, true>};
          if (op == K::kReduceMin) return {t, ExtremeRow<bool, false>};
          if (op == K::kArgMax) return {DType::kInt64, ArgRow<bool, true>};
          if (op == K::kArgMin) return {DType::kInt64, ArgRow<bool, false>};
          break;
        default:
          break;
      }
      break;
#undef KILN_INT_REDUCE
    case K::kVar:
      if (f32) return {t, VarRow<float, false>};
      if (f64) return {t, VarRow<double, false>};
      break;
    case K::kStd:
      if (f32) return {t, VarRow<float, true>};
      if (f64) return {t, VarRow<double, true>};
      break;
    case K::kNorm:
      if (f32) return {t, NormRow<float>};
      if (f64) return {t, NormRow<double>};
      break;
    case K::kLogSumExp:
      if (f32) return {t, LogSumExpRow<float>};
      if (f64) return {t, LogSumExpRow<double>};
      break;
    // all/any give BOOL, except of UINT8, which stays UINT8 (0 or 1) in
    // PyTorch 1.13; both are one byte of 0 or 1, so one row function.
    case K::kReduceAll:
      if (IsPlainDType(t)) {
        return {t == DType::kUInt8 ? DType::kUInt8 : DType::kBool, LogicalRow<true>};
      }
      break;
    case K::kReduceAny:
      if (IsPlainDType(t)) {
        return {t == DType::kUInt8 ? DType::kUInt8 : DType::kBool, LogicalRow<false>};
      }
      break;
    default:
      break;
  }
  return {DType::kUnknown, nullptr};
}

absl::Status PrepareReduce(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const ir::OpKind op = ctx.node.kind;
  const DType t = ctx.inputs[0].dtype;
  auto [out_dtype, fn] = SelectRow(op, t);
  if (fn == nullptr) {
    return Unimplemented(ctx.node, "input dtype ", DTypeName(t), " is not supported");
  }
  auto plan = std::make_shared<AxesPlan>();
  plan->fn = fn;
  plan->correction = ctx.node.attrs.GetFloat("correction", 1.0);
  plan->p = ctx.node.attrs.GetFloat("p", 2.0);
  plan->in_dtype = t;
  Dims out;
  RETURN_IF_ERROR(PlanAxes(ctx, plan.get(), &out));
  const bool needs_element = op == ir::OpKind::kReduceMax || op == ir::OpKind::kReduceMin ||
                             op == ir::OpKind::kArgMax || op == ir::OpKind::kArgMin;
  if (needs_element && plan->len == 0 && plan->rows > 0) {
    return InvalidArg(ctx.node, "cannot reduce an empty dim of input ",
                      DimsToString(ctx.inputs[0].dims), " to an extreme value");
  }
  ctx.outputs = {TensorInfo{out_dtype, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status EvalReduce(EvalContext& ctx) {
  const AxesPlan& p = StateAs<AxesPlan>(ctx);
  const void* src = ctx.inputs[0]->raw_data();
  if (p.permute) {
    RunGather(p.perm, src, ctx.workspace, ctx.num_threads);
    src = ctx.workspace;
  }
  const size_t elem = DTypeSize(ctx.inputs[0]->dtype());
  const char* base = static_cast<const char*>(src);
  void* out = ctx.outputs[0]->raw_data();
  ParallelFor(p.rows, ctx.num_threads, p.rows * p.len * 2, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) p.fn(base + r * p.len * elem, p.len, out, r, p);
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- CumSum, CumProd

struct ScanPlan {
  int64_t outer = 1, n = 1, inner = 1;
  DType in = DType::kF32;
};

absl::Status PrepareScan(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const DType t = ctx.inputs[0].dtype;
  DType out_dtype;
  if (t == DType::kF32 || t == DType::kF64 || t == DType::kInt64) {
    out_dtype = t;
  } else if (t == DType::kBool || IsIntegral(t)) {
    out_dtype = DType::kInt64;  // integer sums and products widen to int64, as in PyTorch
  } else {
    return Unimplemented(ctx.node, "input dtype ", DTypeName(t), " is not supported");
  }
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0), rank));
  auto p = std::make_shared<ScanPlan>();
  p->in = t;
  if (rank > 0) {
    p->outer = NumElements(Dims(x.begin(), x.begin() + axis));
    p->n = x[axis];
    p->inner = NumElements(Dims(x.begin() + axis + 1, x.end()));
  }
  ctx.outputs = {TensorInfo{out_dtype, x}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// One float or double scan of n elements `stride` apart, accumulated in double.
template <typename T, bool kSum>
void ScanFloat(const T* x, T* y, int64_t n, int64_t stride) {
  double acc = kSum ? 0.0 : 1.0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i * stride;
    acc = kSum ? acc + x[k] : acc * x[k];
    y[k] = static_cast<T>(acc);
  }
}

template <bool kSum>
absl::Status EvalScan(EvalContext& ctx) {
  const ScanPlan& p = StateAs<ScanPlan>(ctx);
  const void* x = ctx.inputs[0]->raw_data();
  void* y = ctx.outputs[0]->raw_data();
  // Float rows accumulate in double (FP32 rounds each running value back).
  const bool is_float = p.in == DType::kF32 || p.in == DType::kF64;
  ParallelFor(p.outer * p.inner, ctx.num_threads, p.outer * p.inner * p.n,
              [&](int64_t begin, int64_t end) {
                for (int64_t c = begin; c < end; ++c) {
                  const int64_t o = c / p.inner, j = c % p.inner;
                  const int64_t base = o * p.n * p.inner + j;
                  if (is_float) {
                    if (p.in == DType::kF32) {
                      ScanFloat<float, kSum>(static_cast<const float*>(x) + base,
                                             static_cast<float*>(y) + base, p.n, p.inner);
                    } else {
                      ScanFloat<double, kSum>(static_cast<const double*>(x) + base,
                                              static_cast<double*>(y) + base, p.n, p.inner);
                    }
                  } else {
                    int64_t acc = kSum ? 0 : 1;
                    for (int64_t i = 0; i < p.n; ++i) {
                      const int64_t k = base + i * p.inner;
                      const int64_t v = LoadAsInt64(x, p.in, k);
                      acc = kSum ? acc + v : acc * v;
                      static_cast<int64_t*>(y)[k] = acc;
                    }
                  }
                }
              });
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> ReduceKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kSoftmax, DType::kF32, PrepareSoftmax, EvalSoftmax</*kLog=*/false>},
      {ir::OpKind::kLogSoftmax, DType::kF32, PrepareSoftmax, EvalSoftmax</*kLog=*/true>},
      {ir::OpKind::kSoftmax, DType::kF64, PrepareSoftmax, EvalSoftmaxF64</*kLog=*/false>},
      {ir::OpKind::kLogSoftmax, DType::kF64, PrepareSoftmax, EvalSoftmaxF64</*kLog=*/true>},
      {ir::OpKind::kMean, DType::kF32, PrepareMean, EvalMean<float>},
      {ir::OpKind::kMean, DType::kF64, PrepareMean, EvalMean<double>},
      // Any dtype: Prepare picks the typed row (see SelectRow).
      {ir::OpKind::kSum, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kProd, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kReduceMax, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kReduceMin, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kArgMax, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kArgMin, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kVar, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kStd, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kNorm, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kLogSumExp, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kReduceAll, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kReduceAny, DType::kUnknown, PrepareReduce, EvalReduce},
      {ir::OpKind::kCumSum, DType::kUnknown, PrepareScan, EvalScan</*kSum=*/true>},
      {ir::OpKind::kCumProd, DType::kUnknown, PrepareScan, EvalScan</*kSum=*/false>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
