// Convolution over 1, 2 or 3 spatial dims (NC[D]HW input, OI[D]HW weight,
// optional bias). 1-D and 2-D are the 3-D case with unit leading dims (a 1-D
// input is one row, a 2-D input one depth slice), so one plan serves all, and
// the 2-D fast paths below apply whenever the depth is trivial. Three
// algorithms, chosen once in Prepare:
//
//   kPointwise  1x1 kernel, stride 1, no padding: the input plane already is the
//               [C, H*W] matrix, so each (image, group) is one GEMM
//               Y[O/g, HW] = W[O/g, C/g] * X[C/g, HW], no copy.
//   kDepthwise  groups == C_in == C_out (mobilenet_v2): a direct kernel, parallel
//               over (image, channel). 3x3 with stride 1 or 2 (mobilenet's
//               shapes) computes each interior pixel's nine taps in registers,
//               vectorised across the row, and only the one-pixel border with
//               bounds checks. Other kernels go tap by tap: for each output row
//               and tap, w * (input row, shifted) is added over the tap's valid
//               output range, a contiguous or strided axpy with no bounds
//               checks, while the output row stays in L1.
//   kIm2col     everything else: per (image, group), im2col into the workspace
//               ([C/g * kD * kH * kW, OD * OH * OW], padding written as zeros)
//               and one GEMM.
//
// Float64 accumulation (the Conv node's attribute accumulate = "float64",
// set from a model's load config): an FP32 convolution that is a GEMM
// (pointwise or im2col) converts each (image, group) input slice to double,
// runs the double im2col and GEMM with weights and bias prepacked in double,
// and rounds the result to float once, before the epilogue. The products and
// sums lose nothing to float32 rounding (a deep network's float32 results
// differ from its float64 result by ~1e-4, most of it accumulated in its
// first convolutions); it costs about twice the GEMM time. Depthwise
// convolutions (nine-term sums) stay in float.
//
// The bias is fused: the output is pre-filled with it and the GEMM accumulates
// with beta = 1 (depthwise starts each row from it). The valid output column
// range of every kernel column is computed in Prepare, so the padding is
// handled by range limits instead of per-element tests.
//
// cblas is only called outside OpenMP regions (OpenBLAS has its own threads);
// im2col and depthwise use ParallelFor.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/conv_epilogue.h"
#include "engine/kernels/gemm.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

enum class ConvAlgo { kPointwise, kDepthwise, kIm2col };

struct ConvPlan {
  ConvAlgo algo = ConvAlgo::kIm2col;
  int64_t n = 0, c = 0, d = 1, h = 0, w = 0;  // input
  int64_t o = 0, kd = 1, kh = 0, kw = 0;      // weight
  int64_t od = 1, oh = 0, ow = 0;             // output
  int64_t sd = 1, pd = 0, dd = 1;             // depth stride, padding, dilation
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t groups = 1, cg = 0, og = 0;  // channels per group
  bool has_bias = false;
  ConvEpilogue epilogue;  // a fused BatchNorm / Relu / Clip (conv_epilogue.h)
  // For kernel column j, the output columns [ow_lo[j], ow_hi[j]) read input
  // columns inside [0, w); the rest of the row reads padding.
  std::vector<int64_t> ow_lo, ow_hi;
  // Depthwise 3x3 fast path: used when set; columns [dw3x3_lo, dw3x3_hi) have
  // all three taps inside the input row.
  bool dw3x3 = false;
  int64_t dw3x3_lo = 0, dw3x3_hi = 0;
  // Float64 accumulation of an FP32 GEMM convolution: the weights and bias in
  // double when they are constants (a copy per plan: twice the float weights'
  // memory), else converted at each run into the workspace, after the slices,
  // at these offsets (in doubles).
  bool wide = false;
  std::vector<double> wide_weights, wide_bias;
  int64_t wide_weights_offset = 0, wide_bias_offset = 0;
};

// Output columns [lo, hi) whose input column ow * stride + offset lies in [0, size).
void ValidRange(int64_t size, int64_t out_size, int64_t stride, int64_t offset, int64_t* lo,
                int64_t* hi) {
  // lo = ceil(-offset / stride), hi = ceil((size - offset) / stride), clamped to [0, out_size].
  auto ceil_div = [](int64_t a, int64_t b) { return a <= 0 ? -((-a) / b) : (a + b - 1) / b; };
  *lo = std::clamp<int64_t>(ceil_div(-offset, stride), 0, out_size);
  *hi = std::clamp<int64_t>(ceil_div(size - offset, stride), *lo, out_size);
}

// The float64-accumulation part of a GEMM convolution's plan: the double
// weights and bias when constant, and the workspace (the input slice, the
// output slice and the im2col columns of one (image, group) in double, then
// the weights and bias when they are not constant).
void PrepareWide(PrepareContext& ctx, ConvPlan& p) {
  p.wide = true;
  const int64_t k = p.cg * p.kd * p.kh * p.kw;
  const int64_t out_plane = p.od * p.oh * p.ow;
  int64_t doubles = p.cg * p.d * p.h * p.w + p.og * out_plane;
  if (p.algo == ConvAlgo::kIm2col) doubles += k * out_plane;
  const Tensor* weights = ctx.inputs[1].constant;
  if (weights != nullptr) {
    const float* w = weights->data<float>();
    p.wide_weights.assign(w, w + weights->num_elements());
  } else {
    p.wide_weights_offset = doubles;
    doubles += p.o * k;
  }
  if (const Tensor* bias = p.has_bias ? ctx.inputs[2].constant : nullptr; bias != nullptr) {
    const float* b = bias->data<float>();
    p.wide_bias.assign(b, b + bias->num_elements());
  } else if (p.has_bias) {
    p.wide_bias_offset = doubles;
    doubles += p.o;
  }
  ctx.workspace_bytes = static_cast<size_t>(doubles) * sizeof(double);
}

absl::Status PrepareConv(PrepareContext& ctx) {
  const ir::Node& node = ctx.node;
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 4));
  const DType t = ctx.inputs[0].dtype;  // FP32, or FP64 (its own table row)
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  RETURN_IF_ERROR(CheckDType(ctx, 1, t));
  const Dims& x = ctx.inputs[0].dims;
  const Dims& w = ctx.inputs[1].dims;
  if (w.size() < 3 || w.size() > 5) {
    return InvalidArg(node, "expected a 3-D, 4-D or 5-D weight, got ", DimsToString(w));
  }
  const size_t spatial = w.size() - 2;
  // Batched [N, C, spatial...] or unbatched [C, spatial...].
  if (x.size() != spatial + 2 && x.size() != spatial + 1) {
    return InvalidArg(node, "expected ", spatial + 2, "-D input, got ", DimsToString(x));
  }
  auto padding_attr = node.attrs.map().find("padding");
  if (padding_attr != node.attrs.map().end() &&
      std::holds_alternative<std::string>(padding_attr->second)) {
    return Unimplemented(node, "string padding is not supported; expected explicit ints");
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, SpatialAttr(node, "stride", spatial, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, SpatialAttr(node, "padding", spatial, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, SpatialAttr(node, "dilation", spatial, 1));
  for (size_t i = 0; i < spatial; ++i) {
    if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0) {
      return InvalidArg(node, "invalid stride [", absl::StrJoin(stride, ", "), "], padding [",
                        absl::StrJoin(padding, ", "), "] or dilation [",
                        absl::StrJoin(dilation, ", "), "]");
    }
  }
  // Lift to 3 spatial dims: missing leading dims have size 1 and trivial windows.
  const size_t lift = 3 - spatial;
  stride.insert(stride.begin(), lift, 1);
  padding.insert(padding.begin(), lift, 0);
  dilation.insert(dilation.begin(), lift, 1);
  const size_t off = x.size() - spatial - 1;  // 1 when batched
  Dims xs(x.begin() + off + 1, x.end());
  Dims ks(w.begin() + 2, w.end());
  xs.insert(xs.begin(), lift, 1);
  ks.insert(ks.begin(), lift, 1);

  auto p = std::make_shared<ConvPlan>();
  p->n = off ? x[0] : 1;
  p->c = x[off];
  p->d = xs[0];
  p->h = xs[1];
  p->w = xs[2];
  p->o = w[0];
  p->kd = ks[0];
  p->kh = ks[1];
  p->kw = ks[2];
  p->groups = node.attrs.GetInt("groups", 1);
  if (p->groups < 1 || p->c % p->groups != 0 || p->o % p->groups != 0 || w[1] * p->groups != p->c) {
    return InvalidArg(node, "input ", DimsToString(x), " and weight ", DimsToString(w),
                      " do not match groups=", p->groups);
  }
  p->cg = p->c / p->groups;
  p->og = p->o / p->groups;
  p->sd = stride[0];
  p->sh = stride[1];
  p->sw = stride[2];
  p->pd = padding[0];
  p->ph = padding[1];
  p->pw = padding[2];
  p->dd = dilation[0];
  p->dh = dilation[1];
  p->dw = dilation[2];
  const int64_t span_d = p->dd * (p->kd - 1) + 1;
  const int64_t span_h = p->dh * (p->kh - 1) + 1;
  const int64_t span_w = p->dw * (p->kw - 1) + 1;
  if (p->kd < 1 || p->kh < 1 || p->kw < 1 || p->d + 2 * p->pd < span_d ||
      p->h + 2 * p->ph < span_h || p->w + 2 * p->pw < span_w) {
    return InvalidArg(node, "kernel ", DimsToString(w), " (dilated) does not fit the padded input ",
                      DimsToString(x));
  }
  p->od = (p->d + 2 * p->pd - span_d) / p->sd + 1;
  p->oh = (p->h + 2 * p->ph - span_h) / p->sh + 1;
  p->ow = (p->w + 2 * p->pw - span_w) / p->sw + 1;
  if (HasInput(ctx, 2)) {
    RETURN_IF_ERROR(CheckDType(ctx, 2, t));
    const Dims& b = ctx.inputs[2].dims;
    if (b.size() != 1 || b[0] != p->o) {
      return InvalidArg(node, "expected bias [", p->o, "], got ", DimsToString(b));
    }
    p->has_bias = true;
  }
  ASSIGN_OR_RETURN(p->epilogue, ConvEpilogueFromAttrs(node, t, p->o));
  for (int64_t j = 0; j < p->kw; ++j) {
    int64_t lo, hi;
    ValidRange(p->w, p->ow, p->sw, j * p->dw - p->pw, &lo, &hi);
    p->ow_lo.push_back(lo);
    p->ow_hi.push_back(hi);
  }

  const bool flat = p->d == 1 && p->kd == 1 && p->pd == 0;  // a single depth slice
  if (p->kd == 1 && p->kh == 1 && p->kw == 1 && p->sd == 1 && p->sh == 1 && p->sw == 1 &&
      p->pd == 0 && p->ph == 0 && p->pw == 0) {
    p->algo = ConvAlgo::kPointwise;
  } else if (flat && p->groups == p->c && p->o == p->c) {
    p->algo = ConvAlgo::kDepthwise;
    // The register-blocked 3x3 path is FP32 only; FP64 goes tap by tap.
    p->dw3x3 = t == DType::kF32 && p->kh == 3 && p->kw == 3 && p->dh == 1 && p->dw == 1 &&
               p->sh == p->sw && (p->sw == 1 || p->sw == 2);
    if (p->dw3x3) {
      p->dw3x3_lo = std::max({p->ow_lo[0], p->ow_lo[1], p->ow_lo[2]});
      p->dw3x3_hi = std::max(p->dw3x3_lo, std::min({p->ow_hi[0], p->ow_hi[1], p->ow_hi[2]}));
      ctx.workspace_bytes = static_cast<size_t>(p->w) * sizeof(float);  // the zero row
    }
  } else {
    p->algo = ConvAlgo::kIm2col;
    ctx.workspace_bytes =
        static_cast<size_t>(p->cg * p->kd * p->kh * p->kw * p->od * p->oh * p->ow) * DTypeSize(t);
  }
  const std::string accumulate = node.attrs.GetString(kAccumulateAttr, "");
  if (!accumulate.empty() && accumulate != kAccumulateFloat64) {
    return InvalidArg(node, "unknown accumulate '", accumulate, "'; expected '", kAccumulateFloat64,
                      "'");
  }
  if (accumulate == kAccumulateFloat64 && t == DType::kF32 && p->algo != ConvAlgo::kDepthwise) {
    PrepareWide(ctx, *p);
  }
  Dims out(x.begin(), x.begin() + off);
  out.push_back(p->o);
  const Dims out_spatial = {p->od, p->oh, p->ow};
  out.insert(out.end(), out_spatial.begin() + lift, out_spatial.end());
  if (HasInput(ctx, 3)) {
    RETURN_IF_ERROR(CheckDType(ctx, 3, t));
    if (ctx.inputs[3].dims != out) {
      return InvalidArg(node, "expected residual ", DimsToString(out), ", got ",
                        DimsToString(ctx.inputs[3].dims));
    }
  }
  ctx.outputs = {TensorInfo{t, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// The residual at the offset of `at` in the output `y` (nullptr without one).
template <typename T>
const T* ResidualAt(const EvalContext& ctx, const T* y, const T* at) {
  if (ctx.inputs.size() < 4 || ctx.inputs[3] == nullptr) return nullptr;
  return ctx.inputs[3]->data<T>() + (at - y);
}

// C[M, N] (+)= A[M, K] * B[K, N], row-major, leading dims K, N, N; float or
// double through the BLAS routines of that type.
template <typename T>
void Gemm(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T beta, T* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // No input channels: OpenBLAS rejects lda = 0, and C = beta * C is the answer.
    if (beta == T(0)) std::fill(c, c + m * n, T(0));
    return;
  }
  if (n == 1) {
    // A 1x1 output plane (squeeze-excite style convs): a matrix-vector product.
    Blas<T>::gemv(CblasRowMajor, CblasNoTrans, m, k, T(1), a, k, b, 1, beta, c, 1);
    return;
  }
  Blas<T>::gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, T(1), a, k, b, n, beta, c, n);
}

// Writes `bias[0..rows)` into each row of `out` ([rows, cols]).
template <typename T>
void FillBias(const T* bias, int64_t rows, int64_t cols, T* out) {
  for (int64_t r = 0; r < rows; ++r) std::fill(out + r * cols, out + (r + 1) * cols, bias[r]);
}

// Where each (image, group) slice lies, for Conv and ConvTranspose alike:
// input channels [c_in] of `in_plane` elements, `w_group` weights per group,
// output channels [c_out] of `out_plane` elements.
struct GroupLayout {
  int64_t n, groups, c_in, cg_in, in_plane, w_group, c_out, og, out_plane;
};

// The batch and group loops around both convolutions' GEMMs: for each image
// and group, pre-fills the group's output planes with the bias (or, with
// `zero_fill`, zeros when there is none, for a body that accumulates), then
// calls body(g, x_g, w_g, y_g) on the group's slices. Sequential, because the
// body calls BLAS, which runs its own threads.
template <typename T, typename Body>
void ForEachImageGroup(const GroupLayout& l, const T* x, const T* w, const T* bias, bool zero_fill,
                       T* y, Body&& body) {
  for (int64_t n = 0; n < l.n; ++n) {
    for (int64_t g = 0; g < l.groups; ++g) {
      T* yg = y + (n * l.c_out + g * l.og) * l.out_plane;
      if (bias != nullptr) {
        FillBias(bias + g * l.og, l.og, l.out_plane, yg);
      } else if (zero_fill) {
        std::fill(yg, yg + l.og * l.out_plane, T(0));
      }
      body(g, x + (n * l.c_in + g * l.cg_in) * l.in_plane, w + g * l.w_group, yg);
    }
  }
}

// col[(c, a, i, j), (z, y, x)] = input[c, z * sd - pd + a * dd, y * sh - ph + i * dh,
// x * sw - pw + j * dw], 0 in the padding.
template <typename T>
void Im2Col(const ConvPlan& p, const T* in, T* col, int num_threads) {
  const int64_t taps = p.kd * p.kh * p.kw;
  const int64_t rows = p.cg * taps;
  const int64_t plane = p.oh * p.ow;
  const int64_t volume = p.od * plane;
  ParallelFor(rows, num_threads, rows * volume, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r / taps;
      const int64_t a = (r / (p.kh * p.kw)) % p.kd;
      const int64_t i = (r / p.kw) % p.kh;
      const int64_t j = r % p.kw;
      const int64_t lo = p.ow_lo[j], hi = p.ow_hi[j];
      const int64_t shift = j * p.dw - p.pw;
      T* dst = col + r * volume;
      for (int64_t z = 0; z < p.od; ++z) {
        const int64_t iz = z * p.sd - p.pd + a * p.dd;
        if (iz < 0 || iz >= p.d) {
          std::fill(dst, dst + plane, T(0));
          dst += plane;
          continue;
        }
        const T* src_plane = in + (c * p.d + iz) * p.h * p.w;
        for (int64_t y = 0; y < p.oh; ++y, dst += p.ow) {
          const int64_t iy = y * p.sh - p.ph + i * p.dh;
          if (iy < 0 || iy >= p.h) {
            std::fill(dst, dst + p.ow, T(0));
            continue;
          }
          std::fill(dst, dst + lo, T(0));
          std::fill(dst + hi, dst + p.ow, T(0));
          if (hi == lo) continue;
          // First valid input column, then every sw-th one.
          const T* src = src_plane + iy * p.w + lo * p.sw + shift;
          T* d = dst + lo;
          const int64_t len = hi - lo;
          if (p.sw == 1) {
            std::memcpy(d, src, len * sizeof(T));
          } else {
            for (int64_t t = 0; t < len; ++t) d[t] = src[t * p.sw];
          }
        }
      }
    }
  });
}

// 3x3 depthwise row kernel for output columns [x_lo, x_hi), whose taps all lie
// inside the input: each pixel's nine taps are summed in registers from three
// input rows and stored once, in loops GCC vectorises across x (one per stride,
// so the stride is a constant in each). target_clones compiles it twice so
// that AVX2/FMA machines get 8-wide FMAs while the library targets x86-64-v2.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void Depthwise3x3Row(
    const float* r0, const float* r1, const float* r2, const float* k, float bias,
    float* __restrict dst, int64_t x_lo, int64_t x_hi, int64_t stride, int64_t pw) {
  const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6],
              k7 = k[7], k8 = k[8];
  auto pixel = [&](int64_t ix) {
    return bias + (k0 * r0[ix] + k1 * r0[ix + 1] + k2 * r0[ix + 2]) +
           (k3 * r1[ix] + k4 * r1[ix + 1] + k5 * r1[ix + 2]) +
           (k6 * r2[ix] + k7 * r2[ix + 1] + k8 * r2[ix + 2]);
  };
  if (stride == 1) {
    for (int64_t x = x_lo; x < x_hi; ++x) dst[x] = pixel(x - pw);
  } else {
    for (int64_t x = x_lo; x < x_hi; ++x) dst[x] = pixel(2 * x - pw);
  }
}

// The mobilenet case: 3x3, no dilation, equal strides 1 or 2. Kernel rows that
// fall in the vertical padding read `zeros` (a zero row from the workspace), so
// every output row takes the same path; only the border columns, whose taps
// leave the row, are summed tap by tap with a bounds check.
void Depthwise3x3Plane(const ConvPlan& p, const float* in, const float* wc, float bias,
                       const float* zeros, float* out) {
  const int64_t x_lo = p.dw3x3_lo, x_hi = p.dw3x3_hi;
  const int64_t s = p.sw;
  for (int64_t y = 0; y < p.oh; ++y) {
    const float* rows[3];
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t iy = y * s - p.ph + i;
      rows[i] = iy >= 0 && iy < p.h ? in + iy * p.w : zeros;
    }
    float* dst = out + y * p.ow;
    auto border = [&](int64_t x) {
      float sum = bias;
      for (int64_t j = 0; j < 3; ++j) {
        const int64_t ix = x * s - p.pw + j;
        if (ix < 0 || ix >= p.w) continue;
        sum += wc[j] * rows[0][ix] + wc[3 + j] * rows[1][ix] + wc[6 + j] * rows[2][ix];
      }
      return sum;
    };
    for (int64_t x = 0; x < x_lo; ++x) dst[x] = border(x);
    Depthwise3x3Row(rows[0], rows[1], rows[2], wc, bias, dst, x_lo, x_hi, s, p.pw);
    for (int64_t x = x_hi; x < p.ow; ++x) dst[x] = border(x);
  }
}

// One depthwise output plane, any kernel: out = bias + sum over taps of w *
// shifted input, accumulated tap by tap over each output row.
template <typename T>
void DepthwisePlane(const ConvPlan& p, const T* in, const T* wc, T bias, T* out) {
  for (int64_t y = 0; y < p.oh; ++y) {
    T* dst = out + y * p.ow;
    std::fill(dst, dst + p.ow, bias);
    for (int64_t i = 0; i < p.kh; ++i) {
      const int64_t iy = y * p.sh - p.ph + i * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      const T* row = in + iy * p.w;
      for (int64_t j = 0; j < p.kw; ++j) {
        const int64_t lo = p.ow_lo[j], hi = p.ow_hi[j];
        if (hi == lo) continue;
        const T wv = wc[i * p.kw + j];
        const T* src = row + lo * p.sw + j * p.dw - p.pw;  // input of output column lo
        T* d = dst + lo;
        const int64_t len = hi - lo;
        if (p.sw == 1) {
          for (int64_t t = 0; t < len; ++t) d[t] += wv * src[t];
        } else if (p.sw == 2) {
          for (int64_t t = 0; t < len; ++t) d[t] += wv * src[2 * t];
        } else {
          for (int64_t t = 0; t < len; ++t) d[t] += wv * src[t * p.sw];
        }
      }
    }
  }
}

// An FP32 GEMM convolution with float64 accumulation (ConvPlan::wide).
absl::Status EvalConvWide(EvalContext& ctx, const ConvPlan& p) {
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t in_plane = p.d * p.h * p.w;
  const int64_t out_plane = p.od * p.oh * p.ow;
  const int64_t k = p.cg * p.kd * p.kh * p.kw;
  double* xd = static_cast<double*>(ctx.workspace);
  double* yd = xd + p.cg * in_plane;
  double* col = yd + p.og * out_plane;
  // Weights and bias: prepacked, or converted now (not constants).
  const double* wd = p.wide_weights.data();
  if (p.wide_weights.empty()) {
    const float* w = ctx.inputs[1]->data<float>();
    std::copy(w, w + p.o * k, xd + p.wide_weights_offset);
    wd = xd + p.wide_weights_offset;
  }
  const double* bias = p.has_bias ? p.wide_bias.data() : nullptr;
  if (p.has_bias && p.wide_bias.empty()) {
    const float* b = ctx.inputs[2]->data<float>();
    std::copy(b, b + p.o, xd + p.wide_bias_offset);
    bias = xd + p.wide_bias_offset;
  }
  auto convert = [&](const auto* from, int64_t count, auto* to) {
    ParallelFor(count, ctx.num_threads, count, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        to[i] = static_cast<std::decay_t<decltype(*to)>>(from[i]);
    });
  };
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      convert(x + (n * p.c + g * p.cg) * in_plane, p.cg * in_plane, xd);
      if (bias != nullptr) FillBias(bias + g * p.og, p.og, out_plane, yd);
      const double* b = xd;
      if (p.algo == ConvAlgo::kIm2col) {
        Im2Col(p, static_cast<const double*>(xd), col, ctx.num_threads);
        b = col;
      }
      Gemm(p.og, out_plane, k, wd + g * p.og * k, b, bias != nullptr ? 1.0 : 0.0, yd);
      float* yg = y + (n * p.o + g * p.og) * out_plane;
      convert(static_cast<const double*>(yd), p.og * out_plane, yg);
      ApplyConvEpilogue(p.epilogue, g * p.og, p.og, out_plane, yg, ResidualAt<float>(ctx, y, yg),
                        ctx.num_threads);
    }
  }
  return absl::OkStatus();
}

// T is float or double (one table row each): the same plan, im2col and GEMM
// (cblas_sgemm or cblas_dgemm), so FP64 accumulates in double throughout.
template <typename T>
absl::Status EvalConv(EvalContext& ctx) {
  const ConvPlan& p = StateAs<ConvPlan>(ctx);
  if constexpr (std::is_same_v<T, float>) {
    if (p.wide) return EvalConvWide(ctx, p);
  }
  const T* x = ctx.inputs[0]->data<T>();
  const T* w = ctx.inputs[1]->data<T>();
  const T* bias =
      ctx.inputs.size() > 2 && ctx.inputs[2] != nullptr ? ctx.inputs[2]->data<T>() : nullptr;
  T* y = ctx.outputs[0]->data<T>();
  // Depthwise runs only with a single depth slice, where these are the planes.
  const int64_t in_plane = p.d * p.h * p.w;
  const int64_t out_plane = p.od * p.oh * p.ow;
  const T beta = p.has_bias ? T(1) : T(0);

  if (p.algo == ConvAlgo::kDepthwise) {
    const int64_t planes = p.n * p.c;
    T* zeros = static_cast<T*>(ctx.workspace);
    if (p.dw3x3) std::fill(zeros, zeros + p.w, T(0));
    ParallelFor(planes, ctx.num_threads, planes * out_plane * p.kh * p.kw,
                [&](int64_t begin, int64_t end) {
                  for (int64_t q = begin; q < end; ++q) {
                    const int64_t c = q % p.c;
                    const T* wc = w + c * p.kh * p.kw;
                    const T b = p.has_bias ? bias[c] : T(0);
                    if constexpr (std::is_same_v<T, float>) {
                      if (p.dw3x3) {  // set in Prepare for FP32 only
                        Depthwise3x3Plane(p, x + q * in_plane, wc, b, zeros, y + q * out_plane);
                        ApplyConvEpilogue(p.epilogue, c, 1, out_plane, y + q * out_plane,
                                          ResidualAt<T>(ctx, y, y + q * out_plane));
                        continue;
                      }
                    }
                    DepthwisePlane(p, x + q * in_plane, wc, b, y + q * out_plane);
                    ApplyConvEpilogue(p.epilogue, c, 1, out_plane, y + q * out_plane,
                                      ResidualAt<T>(ctx, y, y + q * out_plane));
                  }
                });
    return absl::OkStatus();
  }

  T* col = static_cast<T*>(ctx.workspace);
  const int64_t k = p.cg * p.kd * p.kh * p.kw;
  const GroupLayout layout{p.n, p.groups, p.c, p.cg, in_plane, p.og * k, p.o, p.og, out_plane};
  // Without a bias the GEMM writes the output (beta = 0), so there is nothing to clear.
  ForEachImageGroup<T>(
      layout, x, w, bias, /*zero_fill=*/false, y, [&](int64_t g, const T* xg, const T* wg, T* yg) {
        if (p.algo == ConvAlgo::kPointwise) {
          Gemm(p.og, out_plane, p.cg, wg, xg, beta, yg);
        } else {
          Im2Col(p, xg, col, ctx.num_threads);
          Gemm(p.og, out_plane, k, wg, col, beta, yg);
        }
        ApplyConvEpilogue(p.epilogue, g * p.og, p.og, out_plane, yg, ResidualAt<T>(ctx, y, yg),
                          ctx.num_threads);
      });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- ConvTranspose
//
// The adjoint of Conv: per (image, group), one GEMM
// col[Cout/g * taps, D*H*W] = W_g^T [Cout/g * taps, Cin/g] * X_g [Cin/g, D*H*W],
// then col2im scatters each column into the output at
// (z * sd - pd + a * dd, y * sh - ph + i * dh, x * sw - pw + j * dw), skipping
// positions outside it, onto the pre-filled bias. Output channels are
// independent, so col2im runs in parallel over them.

struct ConvTransposePlan {
  int64_t n = 1, c = 0, d = 1, h = 1, w = 1;  // input
  int64_t o = 0, kd = 1, kh = 1, kw = 1;      // output channels, kernel
  int64_t od = 1, oh = 1, ow = 1;             // output
  int64_t sd = 1, sh = 1, sw = 1, pd = 0, ph = 0, pw = 0, dd = 1, dh = 1, dw = 1;
  int64_t groups = 1, cg = 0, og = 0;
  bool has_bias = false;
};

absl::Status PrepareConvTranspose(PrepareContext& ctx) {
  const ir::Node& node = ctx.node;
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 3));
  const DType t = ctx.inputs[0].dtype;  // FP32, or FP64 (its own table row)
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  RETURN_IF_ERROR(CheckDType(ctx, 1, t));
  const Dims& x = ctx.inputs[0].dims;
  const Dims& w = ctx.inputs[1].dims;
  if (w.size() < 3 || w.size() > 5) {
    return InvalidArg(node, "expected a 3-D, 4-D or 5-D weight, got ", DimsToString(w));
  }
  const size_t spatial = w.size() - 2;
  if (x.size() != spatial + 2 && x.size() != spatial + 1) {
    return InvalidArg(node, "expected ", spatial + 2, "-D input, got ", DimsToString(x));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, SpatialAttr(node, "stride", spatial, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, SpatialAttr(node, "padding", spatial, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilation, SpatialAttr(node, "dilation", spatial, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_pad, SpatialAttr(node, "output_padding", spatial, 0));
  for (size_t i = 0; i < spatial; ++i) {
    if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0 || out_pad[i] < 0 ||
        out_pad[i] >= std::max(stride[i], dilation[i])) {
      return InvalidArg(node, "invalid stride [", absl::StrJoin(stride, ", "), "], padding [",
                        absl::StrJoin(padding, ", "), "], dilation [",
                        absl::StrJoin(dilation, ", "), "] or output_padding [",
                        absl::StrJoin(out_pad, ", "), "]");
    }
  }
  const size_t lift = 3 - spatial;
  stride.insert(stride.begin(), lift, 1);
  padding.insert(padding.begin(), lift, 0);
  dilation.insert(dilation.begin(), lift, 1);
  out_pad.insert(out_pad.begin(), lift, 0);
  const size_t off = x.size() - spatial - 1;
  Dims xs(x.begin() + off + 1, x.end());
  Dims ks(w.begin() + 2, w.end());
  xs.insert(xs.begin(), lift, 1);
  ks.insert(ks.begin(), lift, 1);
  auto p = std::make_shared<ConvTransposePlan>();
  p->n = off ? x[0] : 1;
  p->c = x[off];
  p->groups = node.attrs.GetInt("groups", 1);
  if (p->groups < 1 || w[0] != p->c || p->c % p->groups != 0) {
    return InvalidArg(node, "input ", DimsToString(x), " and weight ", DimsToString(w),
                      " do not match groups=", p->groups);
  }
  p->cg = p->c / p->groups;
  p->og = w[1];
  p->o = p->og * p->groups;
  p->d = xs[0], p->h = xs[1], p->w = xs[2];
  p->kd = ks[0], p->kh = ks[1], p->kw = ks[2];
  p->sd = stride[0], p->sh = stride[1], p->sw = stride[2];
  p->pd = padding[0], p->ph = padding[1], p->pw = padding[2];
  p->dd = dilation[0], p->dh = dilation[1], p->dw = dilation[2];
  p->od = (p->d - 1) * p->sd - 2 * p->pd + p->dd * (p->kd - 1) + out_pad[0] + 1;
  p->oh = (p->h - 1) * p->sh - 2 * p->ph + p->dh * (p->kh - 1) + out_pad[1] + 1;
  p->ow = (p->w - 1) * p->sw - 2 * p->pw + p->dw * (p->kw - 1) + out_pad[2] + 1;
  if (p->od < 1 || p->oh < 1 || p->ow < 1) {
    return InvalidArg(node, "padding leaves an empty output for input ", DimsToString(x));
  }
  if (HasInput(ctx, 2)) {
    RETURN_IF_ERROR(CheckDType(ctx, 2, t));
    if (ctx.inputs[2].dims != Dims{p->o}) {
      return InvalidArg(node, "expected bias [", p->o, "], got ", DimsToString(ctx.inputs[2].dims));
    }
    p->has_bias = true;
  }
  ctx.workspace_bytes =
      static_cast<size_t>(p->og * p->kd * p->kh * p->kw * p->d * p->h * p->w) * DTypeSize(t);
  Dims out(x.begin(), x.begin() + off);
  out.push_back(p->o);
  const Dims out_spatial = {p->od, p->oh, p->ow};
  out.insert(out.end(), out_spatial.begin() + lift, out_spatial.end());
  ctx.outputs = {TensorInfo{t, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// Adds col [og * taps, D*H*W] into the output planes [og, OD*OH*OW].
template <typename T>
void Col2Im(const ConvTransposePlan& p, const T* col, T* out, int num_threads) {
  const int64_t taps = p.kd * p.kh * p.kw;
  const int64_t in_volume = p.d * p.h * p.w;
  const int64_t out_volume = p.od * p.oh * p.ow;
  ParallelFor(p.og, num_threads, p.og * taps * in_volume, [&](int64_t begin, int64_t end) {
    for (int64_t co = begin; co < end; ++co) {
      T* dst = out + co * out_volume;
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t a = t / (p.kh * p.kw), i = (t / p.kw) % p.kh, j = t % p.kw;
        const T* src = col + (co * taps + t) * in_volume;
        for (int64_t z = 0; z < p.d; ++z) {
          const int64_t oz = z * p.sd - p.pd + a * p.dd;
          if (oz < 0 || oz >= p.od) continue;
          for (int64_t y = 0; y < p.h; ++y) {
            const int64_t oy = y * p.sh - p.ph + i * p.dh;
            if (oy < 0 || oy >= p.oh) continue;
            const T* row = src + (z * p.h + y) * p.w;
            T* drow = dst + (oz * p.oh + oy) * p.ow;
            for (int64_t x = 0; x < p.w; ++x) {
              const int64_t ox = x * p.sw - p.pw + j * p.dw;
              if (ox >= 0 && ox < p.ow) drow[ox] += row[x];
            }
          }
        }
      }
    }
  });
}

// T is float or double (one table row each): GEMM through Blas<T>.
template <typename T>
absl::Status EvalConvTranspose(EvalContext& ctx) {
  const ConvTransposePlan& p = StateAs<ConvTransposePlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  const T* w = ctx.inputs[1]->data<T>();
  const T* bias = p.has_bias ? ctx.inputs[2]->data<T>() : nullptr;
  T* y = ctx.outputs[0]->data<T>();
  T* col = static_cast<T*>(ctx.workspace);
  const int64_t taps = p.kd * p.kh * p.kw;
  const int64_t in_volume = p.d * p.h * p.w;
  const int64_t out_volume = p.od * p.oh * p.ow;
  const int64_t m = p.og * taps;
  const GroupLayout layout{p.n, p.groups, p.c, p.cg, in_volume, p.cg * m, p.o, p.og, out_volume};
  // col2im accumulates, so an output without a bias starts from zeros.
  ForEachImageGroup<T>(layout, x, w, bias, /*zero_fill=*/true, y,
                       [&](int64_t, const T* xg, const T* wg, T* yg) {
                         if (m == 0 || in_volume == 0) return;
                         if (p.cg == 0) {
                           std::fill(col, col + m * in_volume, T(0));
                         } else {
                           // wg is [cg, og * taps]: col = wg^T * xg.
                           Blas<T>::gemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, in_volume,
                                         p.cg, T(1), wg, m, xg, in_volume, T(0), col, in_volume);
                         }
                         Col2Im(p, col, yg, ctx.num_threads);
                       });
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> ConvKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kConv, DType::kF32, PrepareConv, EvalConv<float>},
      {ir::OpKind::kConv, DType::kF64, PrepareConv, EvalConv<double>},
      {ir::OpKind::kConvTranspose, DType::kF32, PrepareConvTranspose, EvalConvTranspose<float>},
      {ir::OpKind::kConvTranspose, DType::kF64, PrepareConvTranspose, EvalConvTranspose<double>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
