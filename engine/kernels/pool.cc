// 2-D pooling over NCHW (or unbatched CHW) planes: MaxPool, AvgPool and
// AdaptiveAvgPool, matching PyTorch's CPU kernels:
//
//   Output size: floor((in + 2p - d(k-1) - 1 [+ s-1 with ceil_mode]) / s) + 1,
//     and with ceil_mode the last window must start inside the input or the
//     left padding, else it is dropped (PyTorch's pooling_output_shape).
//   MaxPool: padding never wins (taps outside the input are skipped) and NaN
//     propagates. Computed row by row: for each kernel tap, a max over the
//     tap's valid output column range (precomputed), so the inner loop has no
//     bounds tests.
//   AvgPool: the window is clipped to input + padding for count_include_pad's
//     divisor and to the input for the sum; divisor_override replaces both.
//   AdaptiveAvgPool: window [floor(i*In/Out), ceil((i+1)*In/Out)), bounds
//     precomputed in Prepare; 1x1 output is a plain plane mean.
// All three run in parallel over planes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

struct PoolPlan {
  int64_t planes = 0;  // N * C
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  // MaxPool: valid output column range per kernel column (see conv.cc).
  std::vector<int64_t> ow_lo, ow_hi;
  // AvgPool.
  bool count_include_pad = true;
  int64_t divisor_override = 0;
  // AdaptiveAvgPool: window bounds per output row / column.
  std::vector<int64_t> h_start, h_end, w_start, w_end;
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

// Reads the input as [planes, H, W] and fills the shared part of the plan.
absl::Status PrepareInput(PrepareContext& ctx, PoolPlan* p) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  const Dims& x = ctx.inputs[0].dims;
  if (x.size() != 4 && x.size() != 3) {
    return InvalidArg(ctx.node, "expected 4-D input, got ", DimsToString(x));
  }
  p->planes = NumElements(Dims(x.begin(), x.end() - 2));
  p->h = x[x.size() - 2];
  p->w = x[x.size() - 1];
  return absl::OkStatus();
}

// Kernel, stride, padding and dilation attributes of MaxPool / AvgPool plus
// the output size, validated as PyTorch's pool2d_shape_check does.
absl::Status PrepareWindow(PrepareContext& ctx, PoolPlan* p, bool with_dilation) {
  const ir::Node& node = ctx.node;
  const std::vector<int64_t> kernel_attr = node.attrs.GetInts("kernel");
  if (kernel_attr.size() != 2 && kernel_attr.size() != 1) {
    if (kernel_attr.empty()) return InvalidArg(node, "missing attribute 'kernel'");
    return Unimplemented(node, "only 2-D pooling is implemented, kernel has ", kernel_attr.size(),
                         " dims");
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, SpatialAttr(node, "kernel", 2, 1));
  // An empty stride means stride = kernel (PyTorch's default).
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, SpatialAttr(node, "stride", 2, 0));
  if (node.attrs.GetInts("stride").empty()) stride = kernel;
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, SpatialAttr(node, "padding", 2, 0));
  std::vector<int64_t> dilation = {1, 1};
  if (with_dilation) {
    ASSIGN_OR_RETURN(dilation, SpatialAttr(node, "dilation", 2, 1));
  }
  const bool ceil_mode = node.attrs.GetBool("ceil_mode", false);
  for (int i = 0; i < 2; ++i) {
    if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1) {
      return InvalidArg(node, "kernel, stride and dilation must be positive, got kernel [",
                        kernel[0], ", ", kernel[1], "], stride [", stride[0], ", ", stride[1],
                        "], dilation [", dilation[0], ", ", dilation[1], "]");
    }
    if (padding[i] < 0 || padding[i] > kernel[i] / 2) {
      return InvalidArg(node, "padding [", padding[0], ", ", padding[1],
                        "] must be non-negative and at most half of kernel [", kernel[0], ", ",
                        kernel[1], "]");
    }
  }
  p->kh = kernel[0];
  p->kw = kernel[1];
  p->sh = stride[0];
  p->sw = stride[1];
  p->ph = padding[0];
  p->pw = padding[1];
  p->dh = dilation[0];
  p->dw = dilation[1];
  p->oh = PoolOutputSize(p->h, p->kh, p->ph, p->sh, p->dh, ceil_mode);
  p->ow = PoolOutputSize(p->w, p->kw, p->pw, p->sw, p->dw, ceil_mode);
  if (p->oh < 1 || p->ow < 1) {
    return InvalidArg(node, "input ", DimsToString(ctx.inputs[0].dims),
                      " is too small for the pooling window: output would be ", p->oh, "x", p->ow);
  }
  return absl::OkStatus();
}

void SetOutput(PrepareContext& ctx, std::shared_ptr<PoolPlan> p) {
  Dims out = ctx.inputs[0].dims;
  out[out.size() - 2] = p->oh;
  out[out.size() - 1] = p->ow;
  ctx.outputs = {TensorInfo{DType::kF32, out}};
  ctx.state = std::move(p);
}

// ---------------------------------------------------------------- MaxPool

absl::Status PrepareMaxPool(PrepareContext& ctx) {
  auto p = std::make_shared<PoolPlan>();
  RETURN_IF_ERROR(PrepareInput(ctx, p.get()));
  RETURN_IF_ERROR(PrepareWindow(ctx, p.get(), /*with_dilation=*/true));
  for (int64_t j = 0; j < p->kw; ++j) {
    // Output columns x with 0 <= x * sw - pw + j * dw < w.
    const int64_t offset = j * p->dw - p->pw;
    auto ceil_div = [](int64_t a, int64_t b) { return a <= 0 ? -((-a) / b) : (a + b - 1) / b; };
    const int64_t lo = std::clamp<int64_t>(ceil_div(-offset, p->sw), 0, p->ow);
    const int64_t hi = std::clamp<int64_t>(ceil_div(p->w - offset, p->sw), lo, p->ow);
    p->ow_lo.push_back(lo);
    p->ow_hi.push_back(hi);
  }
  SetOutput(ctx, std::move(p));
  return absl::OkStatus();
}

// max that lets NaN through, as PyTorch's max pooling does.
inline float MaxNan(float acc, float v) { return (v > acc || v != v) ? v : acc; }

void MaxPoolPlane(const PoolPlan& p, const float* in, float* out) {
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  for (int64_t y = 0; y < p.oh; ++y) {
    float* dst = out + y * p.ow;
    std::fill(dst, dst + p.ow, kLowest);
    for (int64_t i = 0; i < p.kh; ++i) {
      const int64_t iy = y * p.sh - p.ph + i * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      const float* row = in + iy * p.w;
      for (int64_t j = 0; j < p.kw; ++j) {
        const int64_t lo = p.ow_lo[j], hi = p.ow_hi[j];
        if (hi == lo) continue;
        const float* src = row + lo * p.sw + j * p.dw - p.pw;
        float* d = dst + lo;
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

absl::Status EvalMaxPool(EvalContext& ctx) {
  const PoolPlan& p = StateAs<PoolPlan>(ctx);
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t in_plane = p.h * p.w, out_plane = p.oh * p.ow;
  ParallelFor(p.planes, ctx.num_threads, p.planes * out_plane * p.kh * p.kw,
              [&](int64_t begin, int64_t end) {
                for (int64_t q = begin; q < end; ++q) {
                  MaxPoolPlane(p, x + q * in_plane, y + q * out_plane);
                }
              });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- AvgPool

absl::Status PrepareAvgPool(PrepareContext& ctx) {
  auto p = std::make_shared<PoolPlan>();
  RETURN_IF_ERROR(PrepareInput(ctx, p.get()));
  RETURN_IF_ERROR(PrepareWindow(ctx, p.get(), /*with_dilation=*/false));
  p->count_include_pad = ctx.node.attrs.GetBool("count_include_pad", true);
  p->divisor_override = ctx.node.attrs.GetInt("divisor_override", 0);
  if (p->divisor_override < 0) {
    return InvalidArg(ctx.node, "divisor_override must be positive (0 = none), got ",
                      p->divisor_override);
  }
  SetOutput(ctx, std::move(p));
  return absl::OkStatus();
}

void AvgPoolPlane(const PoolPlan& p, const float* in, float* out) {
  for (int64_t y = 0; y < p.oh; ++y) {
    int64_t y0 = y * p.sh - p.ph;
    int64_t y1 = std::min(y0 + p.kh, p.h + p.ph);
    const int64_t pool_h = y1 - y0;
    y0 = std::max<int64_t>(y0, 0);
    y1 = std::min(y1, p.h);
    for (int64_t x = 0; x < p.ow; ++x) {
      int64_t x0 = x * p.sw - p.pw;
      int64_t x1 = std::min(x0 + p.kw, p.w + p.pw);
      const int64_t pool_size = pool_h * (x1 - x0);
      x0 = std::max<int64_t>(x0, 0);
      x1 = std::min(x1, p.w);
      if (y0 >= y1 || x0 >= x1) {
        out[y * p.ow + x] = 0.0f;  // the window lies entirely in the padding
        continue;
      }
      float sum = 0.0f;
      for (int64_t iy = y0; iy < y1; ++iy) {
        const float* row = in + iy * p.w;
        for (int64_t ix = x0; ix < x1; ++ix) sum += row[ix];
      }
      const int64_t divisor = p.divisor_override != 0 ? p.divisor_override
                              : p.count_include_pad   ? pool_size
                                                      : (y1 - y0) * (x1 - x0);
      out[y * p.ow + x] = sum / static_cast<float>(divisor);
    }
  }
}

absl::Status EvalAvgPool(EvalContext& ctx) {
  const PoolPlan& p = StateAs<PoolPlan>(ctx);
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t in_plane = p.h * p.w, out_plane = p.oh * p.ow;
  ParallelFor(p.planes, ctx.num_threads, p.planes * out_plane * p.kh * p.kw,
              [&](int64_t begin, int64_t end) {
                for (int64_t q = begin; q < end; ++q) {
                  AvgPoolPlane(p, x + q * in_plane, y + q * out_plane);
                }
              });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- AdaptiveAvgPool

absl::Status PrepareAdaptiveAvgPool(PrepareContext& ctx) {
  auto p = std::make_shared<PoolPlan>();
  RETURN_IF_ERROR(PrepareInput(ctx, p.get()));
  std::vector<int64_t> size = ctx.node.attrs.GetInts("output_size");
  if (size.size() == 1) size.assign(2, size[0]);
  if (size.size() != 2) {
    return Unimplemented(ctx.node, "only 2-D adaptive pooling is implemented, output_size has ",
                         size.size(), " values");
  }
  // -1 stands for PyTorch's None: keep the input size.
  if (size[0] == -1) size[0] = p->h;
  if (size[1] == -1) size[1] = p->w;
  if (size[0] < 1 || size[1] < 1) {
    return InvalidArg(ctx.node, "output_size must be positive, got [", size[0], ", ", size[1], "]");
  }
  if (p->h < 1 || p->w < 1) {
    return InvalidArg(ctx.node, "expected non-empty spatial dims, got ",
                      DimsToString(ctx.inputs[0].dims));
  }
  p->oh = size[0];
  p->ow = size[1];
  for (int64_t i = 0; i < p->oh; ++i) {
    p->h_start.push_back(i * p->h / p->oh);
    p->h_end.push_back(((i + 1) * p->h + p->oh - 1) / p->oh);
  }
  for (int64_t j = 0; j < p->ow; ++j) {
    p->w_start.push_back(j * p->w / p->ow);
    p->w_end.push_back(((j + 1) * p->w + p->ow - 1) / p->ow);
  }
  SetOutput(ctx, std::move(p));
  return absl::OkStatus();
}

absl::Status EvalAdaptiveAvgPool(EvalContext& ctx) {
  const PoolPlan& p = StateAs<PoolPlan>(ctx);
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t in_plane = p.h * p.w, out_plane = p.oh * p.ow;
  if (out_plane == 1) {
    // Global average pooling (resnet, mobilenet heads): one mean per plane.
    ParallelFor(p.planes, ctx.num_threads, p.planes * in_plane, [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) {
        y[q] = static_cast<float>(AccurateSum(x + q * in_plane, in_plane) / in_plane);
      }
    });
    return absl::OkStatus();
  }
  ParallelFor(p.planes, ctx.num_threads, p.planes * in_plane, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const float* src = x + q * in_plane;
      float* dst = y + q * out_plane;
      for (int64_t i = 0; i < p.oh; ++i) {
        for (int64_t j = 0; j < p.ow; ++j) {
          float sum = 0.0f;
          for (int64_t iy = p.h_start[i]; iy < p.h_end[i]; ++iy) {
            for (int64_t ix = p.w_start[j]; ix < p.w_end[j]; ++ix) sum += src[iy * p.w + ix];
          }
          const int64_t count = (p.h_end[i] - p.h_start[i]) * (p.w_end[j] - p.w_start[j]);
          dst[i * p.ow + j] = sum / static_cast<float>(count);
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> PoolKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kMaxPool, DType::kF32, PrepareMaxPool, EvalMaxPool},
      {ir::OpKind::kAvgPool, DType::kF32, PrepareAvgPool, EvalAvgPool},
      {ir::OpKind::kAdaptiveAvgPool, DType::kF32, PrepareAdaptiveAvgPool, EvalAdaptiveAvgPool},
  };
  return kKernels;
}

}  // namespace kiln::kernels
