// Pooling over 1, 2 or 3 spatial dims of NC[D][H]W (or unbatched C[D][H]W)
// inputs: MaxPool, MaxPoolWithIndices, AvgPool, AdaptiveAvgPool and
// AdaptiveMaxPool, matching PyTorch's CPU kernels. The number of spatial dims
// is the length of attr kernel (output_size for the adaptive pools); 1-D and
// 2-D pools run as 3-D pools with unit leading dims, so the 2-D inner loops
// below serve all three.
//
//   Output size: floor((in + 2p - d(k-1) - 1 [+ s-1 with ceil_mode]) / s) + 1,
//     and with ceil_mode the last window must start inside the input or the
//     left padding, else it is dropped (PyTorch's pooling_output_shape).
//   MaxPool: padding never wins (taps outside the input are skipped) and NaN
//     propagates. Each output slice is the max over the depth taps of 2-D
//     maxima computed row by row: for each kernel tap, a max over the tap's
//     valid output column range (precomputed), so the inner loop has no bounds
//     tests. MaxPoolWithIndices also returns the argmax as a flat index into
//     the input's spatial volume, from a plain window loop.
//   AvgPool: the window is clipped to input + padding for count_include_pad's
//     divisor and to the input for the sum; divisor_override replaces both.
//   Adaptive pools: window [floor(i*In/Out), ceil((i+1)*In/Out)) per dim,
//     bounds precomputed in Prepare; a 1x1 average is a plain plane mean.
//     AdaptiveMaxPool returns values and flat argmax indices.
// All run in parallel over planes, in the input's dtype (FP32 or FP64: one
// template instance and table row each).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

struct PoolPlan {
  int64_t planes = 0;  // N * C
  int64_t d = 1, h = 1, w = 1, od = 1, oh = 1, ow = 1;
  int64_t kd = 1, kh = 1, kw = 1, sd = 1, sh = 1, sw = 1, pd = 0, ph = 0, pw = 0;
  int64_t dd = 1, dh = 1, dw = 1;
  // MaxPool: valid output column range per kernel column (see conv.cc).
  std::vector<int64_t> ow_lo, ow_hi;
  // AvgPool.
  bool count_include_pad = true;
  int64_t divisor_override = 0;
  // Adaptive pools: window bounds per output index of each dim.
  std::vector<int64_t> d_start, d_end, h_start, h_end, w_start, w_end;
};

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// PyTorch's pooling_output_shape (symmetric padding).
int64_t PoolOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                       bool ceil_mode) {
  int64_t out =
      FloorDiv(in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  // The last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Reads the input as [planes, D, H, W] for `spatial` (1..3) spatial dims.
absl::Status PrepareInput(PrepareContext& ctx, PoolPlan* p, size_t spatial) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  // FP32, or FP64 (its own table rows); the output has the input's dtype.
  if (ctx.inputs[0].dtype != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  const Dims& x = ctx.inputs[0].dims;
  if (x.size() != spatial + 2 && x.size() != spatial + 1) {
    return InvalidArg(ctx.node, "expected ", spatial + 2, "-D input, got ", DimsToString(x));
  }
  p->planes = NumElements(Dims(x.begin(), x.end() - spatial));
  Dims s(x.end() - spatial, x.end());
  s.insert(s.begin(), 3 - spatial, 1);
  p->d = s[0];
  p->h = s[1];
  p->w = s[2];
  return absl::OkStatus();
}

// The output: the input's leading dims and the pooled spatial dims.
void SetOutputs(PrepareContext& ctx, std::shared_ptr<PoolPlan> p, size_t spatial,
                bool with_indices) {
  Dims out = ctx.inputs[0].dims;
  const int64_t sizes[3] = {p->od, p->oh, p->ow};
  for (size_t i = 0; i < spatial; ++i) out[out.size() - spatial + i] = sizes[3 - spatial + i];
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, out}};
  if (with_indices) ctx.outputs.push_back(TensorInfo{DType::kInt64, out});
  ctx.state = std::move(p);
}

// Kernel, stride, padding and dilation attributes of the windowed pools plus
// the output size, validated as PyTorch's pool shape checks do.
absl::Status PrepareWindow(PrepareContext& ctx, PoolPlan* p, bool with_dilation, size_t* spatial) {
  const ir::Node& node = ctx.node;
  const std::vector<int64_t> kernel_attr = node.attrs.GetInts("kernel");
  if (kernel_attr.empty() || kernel_attr.size() > 3) {
    return InvalidArg(node, "attribute 'kernel' must have 1 to 3 values, got ",
                      kernel_attr.size());
  }
  const size_t s = kernel_attr.size();
  *spatial = s;
  RETURN_IF_ERROR(PrepareInput(ctx, p, s));
  std::vector<int64_t> kernel = kernel_attr;
  // An empty stride means stride = kernel (PyTorch's default).
  std::vector<int64_t> stride = kernel;
  if (!node.attrs.GetInts("stride").empty()) {
    ASSIGN_OR_RETURN(stride, SpatialAttr(node, "stride", s, 1));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, SpatialAttr(node, "padding", s, 0));
  std::vector<int64_t> dilation(s, 1);
  if (with_dilation) {
    ASSIGN_OR_RETURN(dilation, SpatialAttr(node, "dilation", s, 1));
  }
  const bool ceil_mode = node.attrs.GetBool("ceil_mode", false);
  for (size_t i = 0; i < s; ++i) {
    if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1) {
      return InvalidArg(node, "kernel, stride and dilation must be positive, got kernel [",
                        absl::StrJoin(kernel, ", "), "], stride [", absl::StrJoin(stride, ", "),
                        "], dilation [", absl::StrJoin(dilation, ", "), "]");
    }
    if (padding[i] < 0 || padding[i] > kernel[i] / 2) {
      return InvalidArg(node, "padding [", absl::StrJoin(padding, ", "),
                        "] must be non-negative and at most half of kernel [",
                        absl::StrJoin(kernel, ", "), "]");
    }
  }
  const size_t lift = 3 - s;
  kernel.insert(kernel.begin(), lift, 1);
  stride.insert(stride.begin(), lift, 1);
  padding.insert(padding.begin(), lift, 0);
  dilation.insert(dilation.begin(), lift, 1);
  p->kd = kernel[0], p->kh = kernel[1], p->kw = kernel[2];
  p->sd = stride[0], p->sh = stride[1], p->sw = stride[2];
  p->pd = padding[0], p->ph = padding[1], p->pw = padding[2];
  p->dd = dilation[0], p->dh = dilation[1], p->dw = dilation[2];
  p->od = PoolOutputSize(p->d, p->kd, p->pd, p->sd, p->dd, ceil_mode);
  p->oh = PoolOutputSize(p->h, p->kh, p->ph, p->sh, p->dh, ceil_mode);
  p->ow = PoolOutputSize(p->w, p->kw, p->pw, p->sw, p->dw, ceil_mode);
  if (p->od < 1 || p->oh < 1 || p->ow < 1) {
    return InvalidArg(node, "input ", DimsToString(ctx.inputs[0].dims),
                      " is too small for the pooling window: output would be ", p->od, "x", p->oh,
                      "x", p->ow);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- MaxPool

absl::Status PrepareMaxPoolPlan(PrepareContext& ctx, bool with_indices) {
  auto p = std::make_shared<PoolPlan>();
  size_t spatial = 0;
  RETURN_IF_ERROR(PrepareWindow(ctx, p.get(), /*with_dilation=*/true, &spatial));
  for (int64_t j = 0; j < p->kw; ++j) {
    // Output columns x with 0 <= x * sw - pw + j * dw < w.
    const int64_t offset = j * p->dw - p->pw;
    auto ceil_div = [](int64_t a, int64_t b) { return a <= 0 ? -((-a) / b) : (a + b - 1) / b; };
    const int64_t lo = std::clamp<int64_t>(ceil_div(-offset, p->sw), 0, p->ow);
    const int64_t hi = std::clamp<int64_t>(ceil_div(p->w - offset, p->sw), lo, p->ow);
    p->ow_lo.push_back(lo);
    p->ow_hi.push_back(hi);
  }
  SetOutputs(ctx, std::move(p), spatial, with_indices);
  return absl::OkStatus();
}

absl::Status PrepareMaxPool(PrepareContext& ctx) { return PrepareMaxPoolPlan(ctx, false); }
absl::Status PrepareMaxPoolWithIndices(PrepareContext& ctx) {
  return PrepareMaxPoolPlan(ctx, true);
}

// max that lets NaN through, as PyTorch's max pooling does.
template <typename T>
inline T MaxNan(T acc, T v) { return (v > acc || v != v) ? v : acc; }

// Accumulates the 2-D max pool of input plane `in` into output plane `out`.
template <typename T>
void MaxPoolPlane(const PoolPlan& p, const T* in, T* out) {
  for (int64_t y = 0; y < p.oh; ++y) {
    T* dst = out + y * p.ow;
    for (int64_t i = 0; i < p.kh; ++i) {
      const int64_t iy = y * p.sh - p.ph + i * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      const T* row = in + iy * p.w;
      for (int64_t j = 0; j < p.kw; ++j) {
        const int64_t lo = p.ow_lo[j], hi = p.ow_hi[j];
        if (hi == lo) continue;
        const T* src = row + lo * p.sw + j * p.dw - p.pw;
        T* d = dst + lo;
        const int64_t len = hi - lo;
        if (p.sw == 1) {
          for (int64_t t = 0; t < len; ++t) d[t] = MaxNan(d[t], src[t]);
        } else {
          for (int64_t t = 0; t < len; ++t) d[t] = MaxNan(d[t], src[t * p.sw]);
        }
      }
    }
  }
}

template <typename T>
absl::Status EvalMaxPool(EvalContext& ctx) {
  const PoolPlan& p = StateAs<PoolPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  const int64_t in_plane = p.h * p.w, out_plane = p.oh * p.ow;
  const int64_t in_volume = p.d * in_plane, out_volume = p.od * out_plane;
  ParallelFor(p.planes, ctx.num_threads, p.planes * out_volume * p.kd * p.kh * p.kw,
              [&](int64_t begin, int64_t end) {
                for (int64_t q = begin; q < end; ++q) {
                  for (int64_t z = 0; z < p.od; ++z) {
                    T* dst = y + q * out_volume + z * out_plane;
                    std::fill(dst, dst + out_plane, -std::numeric_limits<T>::infinity());
                    for (int64_t a = 0; a < p.kd; ++a) {
                      const int64_t iz = z * p.sd - p.pd + a * p.dd;
                      if (iz < 0 || iz >= p.d) continue;
                      MaxPoolPlane(p, x + q * in_volume + iz * in_plane, dst);
                    }
                  }
                }
              });
  return absl::OkStatus();
}

// Values and flat spatial indices, one window at a time (PyTorch's rule: a
// larger value or a NaN takes over).
template <typename T>
absl::Status EvalMaxPoolWithIndices(EvalContext& ctx) {
  const PoolPlan& p = StateAs<PoolPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  int64_t* idx = ctx.outputs[1]->data<int64_t>();
  const int64_t in_volume = p.d * p.h * p.w, out_volume = p.od * p.oh * p.ow;
  ParallelFor(p.planes, ctx.num_threads, p.planes * out_volume * p.kd * p.kh * p.kw,
              [&](int64_t begin, int64_t end) {
                for (int64_t q = begin; q < end; ++q) {
                  const T* in = x + q * in_volume;
                  int64_t o = q * out_volume;
                  for (int64_t z = 0; z < p.od; ++z) {
                    for (int64_t yy = 0; yy < p.oh; ++yy) {
                      for (int64_t xx = 0; xx < p.ow; ++xx, ++o) {
                        T best = -std::numeric_limits<T>::infinity();
                        int64_t at = -1;
                        for (int64_t a = 0; a < p.kd; ++a) {
                          const int64_t iz = z * p.sd - p.pd + a * p.dd;
                          if (iz < 0 || iz >= p.d) continue;
                          for (int64_t i = 0; i < p.kh; ++i) {
                            const int64_t iy = yy * p.sh - p.ph + i * p.dh;
                            if (iy < 0 || iy >= p.h) continue;
                            for (int64_t j = 0; j < p.kw; ++j) {
                              const int64_t ix = xx * p.sw - p.pw + j * p.dw;
                              if (ix < 0 || ix >= p.w) continue;
                              const int64_t k = (iz * p.h + iy) * p.w + ix;
                              if (at < 0 || in[k] > best || in[k] != in[k]) {
                                best = in[k];
                                at = k;
                              }
                            }
                          }
                        }
                        y[o] = best;
                        idx[o] = at;
                      }
                    }
                  }
                }
              });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- AvgPool

absl::Status PrepareAvgPool(PrepareContext& ctx) {
  auto p = std::make_shared<PoolPlan>();
  size_t spatial = 0;
  RETURN_IF_ERROR(PrepareWindow(ctx, p.get(), /*with_dilation=*/false, &spatial));
  p->count_include_pad = ctx.node.attrs.GetBool("count_include_pad", true);
  p->divisor_override = ctx.node.attrs.GetInt("divisor_override", 0);
  if (p->divisor_override < 0) {
    return InvalidArg(ctx.node, "divisor_override must be positive (0 = none), got ",
                      p->divisor_override);
  }
  SetOutputs(ctx, std::move(p), spatial, false);
  return absl::OkStatus();
}

// Window [lo, hi) of output index `o` along a dim, clipped to input + padding
// (its length is the padded window size), then to the input.
struct Window {
  int64_t lo, hi, padded;
};
inline Window ClipWindow(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t n) {
  int64_t lo = o * stride - pad;
  int64_t hi = std::min(lo + k, n + pad);
  const int64_t padded = hi - lo;
  return {std::max<int64_t>(lo, 0), std::min(hi, n), padded};
}

template <typename T>
void AvgPoolVolume(const PoolPlan& p, const T* in, T* out) {
  for (int64_t z = 0; z < p.od; ++z) {
    const Window wz = ClipWindow(z, p.sd, p.pd, p.kd, p.d);
    for (int64_t y = 0; y < p.oh; ++y) {
      const Window wy = ClipWindow(y, p.sh, p.ph, p.kh, p.h);
      for (int64_t x = 0; x < p.ow; ++x) {
        const Window wx = ClipWindow(x, p.sw, p.pw, p.kw, p.w);
        T* dst = out + (z * p.oh + y) * p.ow + x;
        if (wz.lo >= wz.hi || wy.lo >= wy.hi || wx.lo >= wx.hi) {
          *dst = T(0);  // the window lies entirely in the padding
          continue;
        }
        T sum = T(0);
        for (int64_t iz = wz.lo; iz < wz.hi; ++iz) {
          for (int64_t iy = wy.lo; iy < wy.hi; ++iy) {
            const T* row = in + (iz * p.h + iy) * p.w;
            for (int64_t ix = wx.lo; ix < wx.hi; ++ix) sum += row[ix];
          }
        }
        const int64_t divisor =
            p.divisor_override != 0 ? p.divisor_override
            : p.count_include_pad   ? wz.padded * wy.padded * wx.padded
                                    : (wz.hi - wz.lo) * (wy.hi - wy.lo) * (wx.hi - wx.lo);
        *dst = sum / static_cast<T>(divisor);
      }
    }
  }
}

template <typename T>
absl::Status EvalAvgPool(EvalContext& ctx) {
  const PoolPlan& p = StateAs<PoolPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  const int64_t in_volume = p.d * p.h * p.w, out_volume = p.od * p.oh * p.ow;
  ParallelFor(p.planes, ctx.num_threads, p.planes * out_volume * p.kd * p.kh * p.kw,
              [&](int64_t begin, int64_t end) {
                for (int64_t q = begin; q < end; ++q) {
                  AvgPoolVolume(p, x + q * in_volume, y + q * out_volume);
                }
              });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- adaptive pools

absl::Status PrepareAdaptive(PrepareContext& ctx, bool with_indices) {
  auto p = std::make_shared<PoolPlan>();
  std::vector<int64_t> size = ctx.node.attrs.GetInts("output_size");
  if (size.empty() || size.size() > 3) {
    return InvalidArg(ctx.node, "attribute 'output_size' must have 1 to 3 values, got ",
                      size.size());
  }
  const size_t spatial = size.size();
  RETURN_IF_ERROR(PrepareInput(ctx, p.get(), spatial));
  size.insert(size.begin(), 3 - spatial, 1);
  const int64_t in[3] = {p->d, p->h, p->w};
  for (int i = 0; i < 3; ++i) {
    if (size[i] == -1) size[i] = in[i];  // -1 stands for PyTorch's None: keep the input size
    if (size[i] < 1) {
      return InvalidArg(ctx.node, "output_size must be positive, got [",
                        absl::StrJoin(ctx.node.attrs.GetInts("output_size"), ", "), "]");
    }
    if (in[i] < 1) {
      return InvalidArg(ctx.node, "expected non-empty spatial dims, got ",
                        DimsToString(ctx.inputs[0].dims));
    }
  }
  p->od = size[0];
  p->oh = size[1];
  p->ow = size[2];
  auto windows = [](int64_t n, int64_t out, std::vector<int64_t>& start, std::vector<int64_t>& end) {
    for (int64_t i = 0; i < out; ++i) {
      start.push_back(i * n / out);
      end.push_back(((i + 1) * n + out - 1) / out);
    }
  };
  windows(p->d, p->od, p->d_start, p->d_end);
  windows(p->h, p->oh, p->h_start, p->h_end);
  windows(p->w, p->ow, p->w_start, p->w_end);
  SetOutputs(ctx, std::move(p), spatial, with_indices);
  return absl::OkStatus();
}

absl::Status PrepareAdaptiveAvgPool(PrepareContext& ctx) { return PrepareAdaptive(ctx, false); }
absl::Status PrepareAdaptiveMaxPool(PrepareContext& ctx) { return PrepareAdaptive(ctx, true); }

// A plane's sum in double: AccurateSum for float, a plain double sum for FP64.
inline double PlaneSum(const float* x, int64_t n) { return AccurateSum(x, n); }
inline double PlaneSum(const double* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

template <typename T>
absl::Status EvalAdaptiveAvgPool(EvalContext& ctx) {
  const PoolPlan& p = StateAs<PoolPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  const int64_t in_volume = p.d * p.h * p.w, out_volume = p.od * p.oh * p.ow;
  if (out_volume == 1) {
    // Global average pooling (resnet, mobilenet heads): one mean per plane.
    ParallelFor(p.planes, ctx.num_threads, p.planes * in_volume, [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) {
        y[q] = static_cast<T>(PlaneSum(x + q * in_volume, in_volume) / in_volume);
      }
    });
    return absl::OkStatus();
  }
  ParallelFor(p.planes, ctx.num_threads, p.planes * in_volume, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const T* src = x + q * in_volume;
      T* dst = y + q * out_volume;
      for (int64_t a = 0; a < p.od; ++a) {
        for (int64_t i = 0; i < p.oh; ++i) {
          for (int64_t j = 0; j < p.ow; ++j) {
            T sum = T(0);
            for (int64_t iz = p.d_start[a]; iz < p.d_end[a]; ++iz) {
              for (int64_t iy = p.h_start[i]; iy < p.h_end[i]; ++iy) {
                const T* row = src + (iz * p.h + iy) * p.w;
                for (int64_t ix = p.w_start[j]; ix < p.w_end[j]; ++ix) sum += row[ix];
              }
            }
            const int64_t count = (p.d_end[a] - p.d_start[a]) * (p.h_end[i] - p.h_start[i]) *
                                  (p.w_end[j] - p.w_start[j]);
            dst[(a * p.oh + i) * p.ow + j] = sum / static_cast<T>(count);
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

template <typename T>
absl::Status EvalAdaptiveMaxPool(EvalContext& ctx) {
  const PoolPlan& p = StateAs<PoolPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  int64_t* idx = ctx.outputs[1]->data<int64_t>();
  const int64_t in_volume = p.d * p.h * p.w, out_volume = p.od * p.oh * p.ow;
  ParallelFor(p.planes, ctx.num_threads, p.planes * in_volume, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const T* src = x + q * in_volume;
      for (int64_t a = 0; a < p.od; ++a) {
        for (int64_t i = 0; i < p.oh; ++i) {
          for (int64_t j = 0; j < p.ow; ++j) {
            T best = -std::numeric_limits<T>::infinity();
            int64_t at = -1;
            for (int64_t iz = p.d_start[a]; iz < p.d_end[a]; ++iz) {
              for (int64_t iy = p.h_start[i]; iy < p.h_end[i]; ++iy) {
                for (int64_t ix = p.w_start[j]; ix < p.w_end[j]; ++ix) {
                  const int64_t k = (iz * p.h + iy) * p.w + ix;
                  if (at < 0 || src[k] > best || src[k] != src[k]) {
                    best = src[k];
                    at = k;
                  }
                }
              }
            }
            const int64_t o = q * out_volume + (a * p.oh + i) * p.ow + j;
            y[o] = best;
            idx[o] = at;
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> PoolKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kMaxPool, DType::kF32, PrepareMaxPool, EvalMaxPool<float>},
      {ir::OpKind::kMaxPool, DType::kF64, PrepareMaxPool, EvalMaxPool<double>},
      {ir::OpKind::kMaxPoolWithIndices, DType::kF32, PrepareMaxPoolWithIndices,
       EvalMaxPoolWithIndices<float>},
      {ir::OpKind::kMaxPoolWithIndices, DType::kF64, PrepareMaxPoolWithIndices,
       EvalMaxPoolWithIndices<double>},
      {ir::OpKind::kAvgPool, DType::kF32, PrepareAvgPool, EvalAvgPool<float>},
      {ir::OpKind::kAvgPool, DType::kF64, PrepareAvgPool, EvalAvgPool<double>},
      {ir::OpKind::kAdaptiveAvgPool, DType::kF32, PrepareAdaptiveAvgPool,
       EvalAdaptiveAvgPool<float>},
      {ir::OpKind::kAdaptiveAvgPool, DType::kF64, PrepareAdaptiveAvgPool,
       EvalAdaptiveAvgPool<double>},
      {ir::OpKind::kAdaptiveMaxPool, DType::kF32, PrepareAdaptiveMaxPool,
       EvalAdaptiveMaxPool<float>},
      {ir::OpKind::kAdaptiveMaxPool, DType::kF64, PrepareAdaptiveMaxPool,
       EvalAdaptiveMaxPool<double>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
