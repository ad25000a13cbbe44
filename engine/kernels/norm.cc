// Normalisation: BatchNorm (inference, running statistics), LayerNorm and
// GroupNorm (also instance norm).
//
// BatchNorm folds each channel into y = x * scale + shift with
// scale = weight / sqrt(var + eps) and shift = bias - mean * scale, computed in
// the input's dtype (float or double) exactly as PyTorch's batch_norm_cpu
// does, into the workspace at each
// Eval (the statistics may be graph inputs, so they are not baked in Prepare).
// LayerNorm normalises each row of the trailing normalized_shape dims with a
// two-pass mean and biased variance accumulated in double, then applies the
// optional elementwise weight and bias.
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

// ---------------------------------------------------------------- BatchNorm

struct BatchNormPlan {
  int64_t n = 0, c = 0, inner = 0;  // x viewed as [n, c, inner]
  double eps = 1e-5;  // rounded to float in the FP32 kernel, as PyTorch does
};

// FP32 or FP64 (one table row each); all five inputs share the input's dtype.
absl::Status PrepareBatchNorm(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 5, 5));
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  for (size_t i = 1; i < 5; ++i) RETURN_IF_ERROR(CheckDType(ctx, i, t));
  const Dims& x = ctx.inputs[0].dims;
  if (x.size() < 2) {
    return InvalidArg(ctx.node, "expected input with at least 2 dims [N, C, ...], got ",
                      DimsToString(x));
  }
  auto p = std::make_shared<BatchNormPlan>();
  p->n = x[0];
  p->c = x[1];
  p->inner = NumElements(Dims(x.begin() + 2, x.end()));
  p->eps = ctx.node.attrs.GetFloat("eps", 1e-5);
  static constexpr const char* kNames[] = {"", "weight", "bias", "running_mean", "running_var"};
  for (size_t i = 1; i < 5; ++i) {
    const Dims& d = ctx.inputs[i].dims;
    if (d.size() != 1 || d[0] != p->c) {
      return InvalidArg(ctx.node, "expected ", kNames[i], " [", p->c, "], got ", DimsToString(d));
    }
  }
  ctx.workspace_bytes = 2 * static_cast<size_t>(p->c) * DTypeSize(t);
  ctx.outputs = {TensorInfo{t, x}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// T is float or double: the per-channel scale and shift are computed in T, as
// PyTorch's batch_norm_cpu does for each dtype.
template <typename T>
absl::Status EvalBatchNorm(EvalContext& ctx) {
  const BatchNormPlan& p = StateAs<BatchNormPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  const T* weight = ctx.inputs[1]->data<T>();
  const T* bias = ctx.inputs[2]->data<T>();
  const T* mean = ctx.inputs[3]->data<T>();
  const T* var = ctx.inputs[4]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  T* scale = static_cast<T*>(ctx.workspace);
  T* shift = scale + p.c;
  const T eps = static_cast<T>(p.eps);
  for (int64_t c = 0; c < p.c; ++c) {
    const T invstd = T(1) / std::sqrt(var[c] + eps);
    scale[c] = invstd * weight[c];
    shift[c] = bias[c] - mean[c] * scale[c];
  }
  const int64_t planes = p.n * p.c;
  ParallelFor(planes, ctx.num_threads, planes * p.inner, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const int64_t c = q % p.c;
      const T a = scale[c], b = shift[c];
      const T* src = x + q * p.inner;
      T* dst = y + q * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) dst[i] = src[i] * a + b;
    }
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- LayerNorm

struct LayerNormPlan {
  int64_t rows = 0, cols = 0;  // x viewed as [rows, cols]
  float eps = 1e-5f;
  double eps_d = 1e-5;  // unrounded, for FP64
  bool has_weight = false, has_bias = false;
};

absl::Status PrepareLayerNorm(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 3));
  const DType t = ctx.inputs[0].dtype;  // FP32, or FP64 (its own table row)
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  const Dims& x = ctx.inputs[0].dims;
  const std::vector<int64_t> shape = ctx.node.attrs.GetInts("normalized_shape");
  if (shape.empty()) return InvalidArg(ctx.node, "missing attribute 'normalized_shape'");
  const Dims trailing(x.end() - std::min(x.size(), shape.size()), x.end());
  if (trailing != shape) {
    return InvalidArg(ctx.node, "normalized_shape [", absl::StrJoin(shape, ", "),
                      "] does not match the trailing dims of input ", DimsToString(x));
  }
  auto p = std::make_shared<LayerNormPlan>();
  p->cols = NumElements(shape);
  p->rows = NumElements(Dims(x.begin(), x.end() - shape.size()));
  p->eps = static_cast<float>(p->eps_d = ctx.node.attrs.GetFloat("eps", 1e-5));
  for (size_t i = 1; i < 3; ++i) {
    if (!HasInput(ctx, i)) continue;
    RETURN_IF_ERROR(CheckDType(ctx, i, t));
    if (ctx.inputs[i].dims != shape) {
      return InvalidArg(ctx.node, "expected ", i == 1 ? "weight" : "bias", " ", DimsToString(shape),
                        ", got ", DimsToString(ctx.inputs[i].dims));
    }
  }
  p->has_weight = HasInput(ctx, 1);
  p->has_bias = HasInput(ctx, 2);
  ctx.outputs = {TensorInfo{t, x}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// FP64: two passes in double per row (mean, then biased variance), as
// PyTorch's float64 layer_norm.
absl::Status EvalLayerNormF64(EvalContext& ctx) {
  const LayerNormPlan& p = StateAs<LayerNormPlan>(ctx);
  const double* x = ctx.inputs[0]->data<double>();
  const double* weight = p.has_weight ? ctx.inputs[1]->data<double>() : nullptr;
  const double* bias = p.has_bias ? ctx.inputs[2]->data<double>() : nullptr;
  double* y = ctx.outputs[0]->data<double>();
  const int64_t d = p.cols;
  if (d == 0) return absl::OkStatus();
  ParallelFor(p.rows, ctx.num_threads, p.rows * d * 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const double* src = x + r * d;
      double* dst = y + r * d;
      double sum = 0.0;
      for (int64_t i = 0; i < d; ++i) sum += src[i];
      const double mean = sum / d;
      double sq = 0.0;
      for (int64_t i = 0; i < d; ++i) sq += (src[i] - mean) * (src[i] - mean);
      const double rstd = 1.0 / std::sqrt(sq / d + p.eps_d);
      for (int64_t i = 0; i < d; ++i) {
        double v = (src[i] - mean) * rstd;
        if (weight != nullptr) v *= weight[i];
        if (bias != nullptr) v += bias[i];
        dst[i] = v;
      }
    }
  });
  return absl::OkStatus();
}

absl::Status EvalLayerNorm(EvalContext& ctx) {
  const LayerNormPlan& p = StateAs<LayerNormPlan>(ctx);
  const float* x = ctx.inputs[0]->data<float>();
  const float* weight = p.has_weight ? ctx.inputs[1]->data<float>() : nullptr;
  const float* bias = p.has_bias ? ctx.inputs[2]->data<float>() : nullptr;
  float* y = ctx.outputs[0]->data<float>();
  const int64_t d = p.cols;
  if (d == 0) return absl::OkStatus();
  ParallelFor(p.rows, ctx.num_threads, p.rows * d * 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* src = x + r * d;
      float* dst = y + r * d;
      const float mean = static_cast<float>(AccurateSum(src, d) / d);
      // Second pass: centred values go to dst, and their squares are summed.
      for (int64_t i = 0; i < d; ++i) dst[i] = src[i] - mean;
      double sq = 0.0;
      for (int64_t i = 0; i < d; ++i) sq += static_cast<double>(dst[i]) * dst[i];
      const float rstd = static_cast<float>(1.0 / std::sqrt(sq / d + p.eps));
      if (weight != nullptr && bias != nullptr) {
        for (int64_t i = 0; i < d; ++i) dst[i] = dst[i] * rstd * weight[i] + bias[i];
      } else if (weight != nullptr) {
        for (int64_t i = 0; i < d; ++i) dst[i] = dst[i] * rstd * weight[i];
      } else if (bias != nullptr) {
        for (int64_t i = 0; i < d; ++i) dst[i] = dst[i] * rstd + bias[i];
      } else {
        for (int64_t i = 0; i < d; ++i) dst[i] *= rstd;
      }
    }
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- GroupNorm

// x [N, C, *] in G groups of C/G channels: each (image, group) is one
// contiguous block, normalised with its own mean and biased variance (two
// passes in double), then scaled per channel. instance_norm is GroupNorm with
// one group per channel.
struct GroupNormPlan {
  int64_t n = 0, c = 0, groups = 1, inner = 1;
  double eps = 1e-5;  // rounded to float in the FP32 kernel
  bool has_weight = false, has_bias = false;
};

absl::Status PrepareGroupNorm(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 3));
  const DType t = ctx.inputs[0].dtype;  // FP32, or FP64 (its own table row)
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  const Dims& x = ctx.inputs[0].dims;
  if (x.size() < 2) {
    return InvalidArg(ctx.node, "expected input with at least 2 dims [N, C, ...], got ",
                      DimsToString(x));
  }
  auto p = std::make_shared<GroupNormPlan>();
  p->n = x[0];
  p->c = x[1];
  p->inner = NumElements(Dims(x.begin() + 2, x.end()));
  p->groups = ctx.node.attrs.GetInt("groups", 1);
  if (p->groups == -1) p->groups = p->c;  // instance norm: one group per channel
  p->eps = ctx.node.attrs.GetFloat("eps", 1e-5);
  if (p->groups < 1 || p->c % p->groups != 0) {
    return InvalidArg(ctx.node, "channels ", p->c, " are not divisible into ", p->groups, " groups");
  }
  for (size_t i = 1; i < 3; ++i) {
    if (!HasInput(ctx, i)) continue;
    RETURN_IF_ERROR(CheckDType(ctx, i, t));
    if (ctx.inputs[i].dims != Dims{p->c}) {
      return InvalidArg(ctx.node, "expected ", i == 1 ? "weight" : "bias", " [", p->c, "], got ",
                        DimsToString(ctx.inputs[i].dims));
    }
  }
  p->has_weight = HasInput(ctx, 1);
  p->has_bias = HasInput(ctx, 2);
  ctx.outputs = {TensorInfo{t, x}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// A block's sum in double: AccurateSum for float, a plain double sum for FP64.
inline double BlockSum(const float* x, int64_t n) { return AccurateSum(x, n); }
inline double BlockSum(const double* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

// T is float or double; the statistics are accumulated in double either way
// and the affine step runs in T.
template <typename T>
absl::Status EvalGroupNorm(EvalContext& ctx) {
  const GroupNormPlan& p = StateAs<GroupNormPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  const T* weight = p.has_weight ? ctx.inputs[1]->data<T>() : nullptr;
  const T* bias = p.has_bias ? ctx.inputs[2]->data<T>() : nullptr;
  T* y = ctx.outputs[0]->data<T>();
  const int64_t cg = p.c / p.groups;
  const int64_t block = cg * p.inner;
  const int64_t blocks = p.n * p.groups;
  if (block == 0) return absl::OkStatus();
  ParallelFor(blocks, ctx.num_threads, blocks * block * 4, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const T* src = x + b * block;
      T* dst = y + b * block;
      const double mean = BlockSum(src, block) / static_cast<double>(block);
      double sq = 0.0;
      for (int64_t i = 0; i < block; ++i) sq += (src[i] - mean) * (src[i] - mean);
      const T rstd = static_cast<T>(1.0 / std::sqrt(sq / block + static_cast<T>(p.eps)));
      const T m = static_cast<T>(mean);
      const int64_t c0 = (b % p.groups) * cg;
      for (int64_t c = 0; c < cg; ++c) {
        const T scale = rstd * (weight ? weight[c0 + c] : T(1));
        const T shift = (bias ? bias[c0 + c] : T(0)) - m * scale;
        const T* s = src + c * p.inner;
        T* d = dst + c * p.inner;
        for (int64_t i = 0; i < p.inner; ++i) d[i] = s[i] * scale + shift;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> NormKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kBatchNorm, DType::kF32, PrepareBatchNorm, EvalBatchNorm<float>},
      {ir::OpKind::kBatchNorm, DType::kF64, PrepareBatchNorm, EvalBatchNorm<double>},
      {ir::OpKind::kLayerNorm, DType::kF32, PrepareLayerNorm, EvalLayerNorm},
      {ir::OpKind::kLayerNorm, DType::kF64, PrepareLayerNorm, EvalLayerNormF64},
      {ir::OpKind::kGroupNorm, DType::kF32, PrepareGroupNorm, EvalGroupNorm<float>},
      {ir::OpKind::kGroupNorm, DType::kF64, PrepareGroupNorm, EvalGroupNorm<double>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
