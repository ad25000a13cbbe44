// Detection operators from torchvision (torchvision::nms, torchvision::roi_align),
// in float32 and float64, computed the way torchvision's CPU kernels compute
// them so that results agree bit for bit, ties and all.
//
// Nms: the boxes are ordered by descending score, then visited greedily: a box
// not yet suppressed is kept and suppresses every later box whose IoU with it
// is above the threshold. The order is a stable sort by descending score with
// NaN first, as torchvision 0.14 sorts (scores.sort(stable=True, dim=0,
// descending=True)): equal scores keep their index order, which decides which
// of two overlapping boxes of the same score survives. The number of kept
// boxes depends on the data, so the output is allocated by Eval
// (PrepareContext::dynamic_outputs).
//
// RoiAlign: for each region (batch index, x1, y1, x2, y2, scaled by
// spatial_scale, shifted by half a pixel when aligned) and each output bin,
// an average of bilinear samples on a grid of sampling_ratio^2 points per bin
// (adaptive, ceil(roi size / bins), when sampling_ratio <= 0). The weights of
// a sample are shared by every channel, so the loops run region, bin, sample,
// then channel innermost, each output element accumulating its samples in
// torchvision's order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

// ---------------------------------------------------------------- nms

absl::Status PrepareNms(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF32 && t != DType::kF64) {
    return Unimplemented(ctx.node, "boxes of dtype ", DTypeName(t), " are not supported");
  }
  if (ctx.inputs[1].dtype != t) {
    return InvalidArg(ctx.node, "boxes (", DTypeName(t), ") and scores (",
                      DTypeName(ctx.inputs[1].dtype), ") must have the same dtype");
  }
  const Dims& boxes = ctx.inputs[0].dims;
  const Dims& scores = ctx.inputs[1].dims;
  if (boxes.size() != 2 || boxes[1] != 4) {
    return InvalidArg(ctx.node, "expected boxes [N, 4], got ", DimsToString(boxes));
  }
  if (scores.size() != 1 || scores[0] != boxes[0]) {
    return InvalidArg(ctx.node, "expected scores [", boxes[0], "], got ", DimsToString(scores));
  }
  const int64_t n = boxes[0];
  const size_t elem = DTypeSize(t);
  // Per box: a (score, index) pair, a kept index, an area and a suppressed flag.
  ctx.workspace_bytes = n * (sizeof(std::pair<double, int64_t>) + sizeof(int64_t) + elem + 1);
  // Only Eval knows how many boxes survive.
  ctx.dynamic_outputs = true;
  ctx.outputs[0] = TensorInfo{DType::kInt64, {}};
  return absl::OkStatus();
}

template <typename T>
absl::Status EvalNms(EvalContext& ctx) {
  const Tensor& boxes_t = *ctx.inputs[0];
  const T* boxes = boxes_t.data<T>();
  const T* scores = ctx.inputs[1]->data<T>();
  const int64_t n = boxes_t.dims()[0];
  const double threshold = ctx.node.attrs.GetFloat("iou_threshold");

  // Workspace: pairs first (8-byte aligned), then kept, areas, flags.
  auto* order = static_cast<std::pair<T, int64_t>*>(ctx.workspace);
  auto* keep = reinterpret_cast<int64_t*>(order + n);
  T* areas = reinterpret_cast<T*>(keep + n);
  auto* suppressed = reinterpret_cast<uint8_t*>(areas + n);

  for (int64_t i = 0; i < n; ++i) {
    order[i] = {scores[i], i};
    const T* b = boxes + 4 * i;
    areas[i] = (b[2] - b[0]) * (b[3] - b[1]);
    suppressed[i] = 0;
  }
  std::stable_sort(order, order + n,
                   [](const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) {
                     return (std::isnan(a.first) && !std::isnan(b.first)) || a.first > b.first;
                   });

  int64_t kept = 0;
  for (int64_t oi = 0; oi < n; ++oi) {
    const int64_t i = order[oi].second;
    if (suppressed[i]) continue;
    keep[kept++] = i;
    const T* bi = boxes + 4 * i;
    for (int64_t oj = oi + 1; oj < n; ++oj) {
      const int64_t j = order[oj].second;
      if (suppressed[j]) continue;
      const T* bj = boxes + 4 * j;
      const T xx1 = std::max(bi[0], bj[0]);
      const T yy1 = std::max(bi[1], bj[1]);
      const T xx2 = std::min(bi[2], bj[2]);
      const T yy2 = std::min(bi[3], bj[3]);
      const T w = std::max(static_cast<T>(0), xx2 - xx1);
      const T h = std::max(static_cast<T>(0), yy2 - yy1);
      const T inter = w * h;
      const T iou = inter / (areas[i] + areas[j] - inter);
      if (iou > threshold) suppressed[j] = 1;
    }
  }
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DType::kInt64, {kept}, "nms indices"));
  std::copy(keep, keep + kept, out.data<int64_t>());
  *ctx.outputs[0] = std::move(out);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- roi_align

struct RoiAlignPlan {
  int64_t channels = 0, height = 0, width = 0, batch = 0, rois = 0;
  int64_t pooled_h = 1, pooled_w = 1, sampling_ratio = 0;
  double spatial_scale = 1.0;
  bool aligned = false;
};

absl::Status PrepareRoiAlign(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF32 && t != DType::kF64) {
    return Unimplemented(ctx.node, "input of dtype ", DTypeName(t), " is not supported");
  }
  if (ctx.inputs[1].dtype != t) {
    return InvalidArg(ctx.node, "input (", DTypeName(t), ") and rois (",
                      DTypeName(ctx.inputs[1].dtype), ") must have the same dtype");
  }
  const Dims& x = ctx.inputs[0].dims;
  const Dims& rois = ctx.inputs[1].dims;
  if (x.size() != 4) return InvalidArg(ctx.node, "expected input [N, C, H, W], got ", DimsToString(x));
  if (rois.size() != 2 || rois[1] != 5) {
    return InvalidArg(ctx.node, "expected rois [K, 5], got ", DimsToString(rois));
  }
  auto p = std::make_shared<RoiAlignPlan>();
  const ir::Attributes& a = ctx.node.attrs;
  p->batch = x[0];
  p->channels = x[1];
  p->height = x[2];
  p->width = x[3];
  p->rois = rois[0];
  p->pooled_h = a.GetInt("pooled_height", 1);
  p->pooled_w = a.GetInt("pooled_width", 1);
  p->sampling_ratio = a.GetInt("sampling_ratio", -1);
  p->spatial_scale = a.GetFloat("spatial_scale", 1.0);
  p->aligned = a.GetBool("aligned", false);
  if (p->pooled_h < 0 || p->pooled_w < 0) {
    return InvalidArg(ctx.node, "output size ", p->pooled_h, "x", p->pooled_w, " is negative");
  }
  if (p->height * p->width == 0 && p->rois * p->channels * p->pooled_h * p->pooled_w > 0) {
    return InvalidArg(ctx.node, "cannot sample regions of an empty map ", DimsToString(x));
  }
  ctx.outputs[0] = TensorInfo{t, {p->rois, p->channels, p->pooled_h, p->pooled_w}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// One region: every channel's bins.
template <typename T>
void RoiAlignRegion(const RoiAlignPlan& p, const T* input, const T* roi, T* out) {
  const int64_t bins = p.pooled_h * p.pooled_w;
  const int64_t plane = p.height * p.width;
  const int64_t batch_index = static_cast<int64_t>(roi[0]);
  const T* in = input + batch_index * p.channels * plane;
  const T scale = static_cast<T>(p.spatial_scale);

  // "Do not use rounding": torchvision's comment, and the offsets stay in T.
  const T offset = p.aligned ? static_cast<T>(0.5) : static_cast<T>(0.0);
  const T start_w = roi[1] * scale - offset;
  const T start_h = roi[2] * scale - offset;
  const T end_w = roi[3] * scale - offset;
  const T end_h = roi[4] * scale - offset;
  T roi_w = end_w - start_w;
  T roi_h = end_h - start_h;
  if (!p.aligned) {  // malformed regions count as 1x1
    roi_w = std::max(roi_w, static_cast<T>(1.));
    roi_h = std::max(roi_h, static_cast<T>(1.));
  }
  const T bin_h = static_cast<T>(roi_h) / static_cast<T>(p.pooled_h);
  const T bin_w = static_cast<T>(roi_w) / static_cast<T>(p.pooled_w);
  const int grid_h = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio)
                                          : static_cast<int>(std::ceil(roi_h / p.pooled_h));
  const int grid_w = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio)
                                          : static_cast<int>(std::ceil(roi_w / p.pooled_w));
  const T count = static_cast<T>(std::max(grid_h * grid_w, 1));  // an empty grid gives zeros
  const int height = static_cast<int>(p.height);
  const int width = static_cast<int>(p.width);

  for (int64_t c = 0; c < p.channels; ++c) std::fill(out + c * bins, out + (c + 1) * bins, T(0));
  for (int64_t ph = 0; ph < p.pooled_h; ++ph) {
    for (int64_t pw = 0; pw < p.pooled_w; ++pw) {
      T* bin_out = out + ph * p.pooled_w + pw;
      for (int iy = 0; iy < grid_h; ++iy) {
        const T yy = start_h + ph * bin_h +
                     static_cast<T>(iy + .5f) * bin_h / static_cast<T>(grid_h);
        for (int ix = 0; ix < grid_w; ++ix) {
          const T xx = start_w + pw * bin_w +
                       static_cast<T>(ix + .5f) * bin_w / static_cast<T>(grid_w);
          T y = yy;
          T x = xx;
          if (!(y >= -1.0 && y <= height && x >= -1.0 && x <= width)) {
            // Outside the map by more than a pixel (or NaN): zero weights on
            // the first pixel, as torchvision adds them (a NaN there spreads).
            for (int64_t c = 0; c < p.channels; ++c) {
              const T v0 = in[c * plane];
              bin_out[c * bins] += T(0) * v0 + T(0) * v0 + T(0) * v0 + T(0) * v0;
            }
            continue;
          }
          if (y <= 0) y = 0;
          if (x <= 0) x = 0;
          int y_low = static_cast<int>(y);
          int x_low = static_cast<int>(x);
          int y_high, x_high;
          if (y_low >= height - 1) {
            y_high = y_low = height - 1;
            y = static_cast<T>(y_low);
          } else {
            y_high = y_low + 1;
          }
          if (x_low >= width - 1) {
            x_high = x_low = width - 1;
            x = static_cast<T>(x_low);
          } else {
            x_high = x_low + 1;
          }
          const T ly = y - y_low;
          const T lx = x - x_low;
          const T hy = 1. - ly, hx = 1. - lx;
          const T w1 = hy * hx, w2 = hy * lx, w3 = ly * hx, w4 = ly * lx;
          const int64_t p1 = int64_t{y_low} * width + x_low;
          const int64_t p2 = int64_t{y_low} * width + x_high;
          const int64_t p3 = int64_t{y_high} * width + x_low;
          const int64_t p4 = int64_t{y_high} * width + x_high;
          for (int64_t c = 0; c < p.channels; ++c) {
            const T* v = in + c * plane;
            bin_out[c * bins] += w1 * v[p1] + w2 * v[p2] + w3 * v[p3] + w4 * v[p4];
          }
        }
      }
      for (int64_t c = 0; c < p.channels; ++c) bin_out[c * bins] /= count;
    }
  }
}

template <typename T>
absl::Status EvalRoiAlign(EvalContext& ctx) {
  const auto& p = *static_cast<const RoiAlignPlan*>(ctx.state);
  const T* input = ctx.inputs[0]->data<T>();
  const T* rois = ctx.inputs[1]->data<T>();
  T* out = ctx.outputs[0]->data<T>();
  const int64_t per_roi = p.channels * p.pooled_h * p.pooled_w;
  if (per_roi == 0) return absl::OkStatus();
  for (int64_t k = 0; k < p.rois; ++k) {
    // torchvision reads out of bounds here; Kiln refuses.
    const T b = rois[5 * k];  // truncated, as torchvision converts it
    if (!(b > -1 && b < static_cast<T>(p.batch))) {
      return InvalidArg(ctx.node, "region ", k, " has batch index ", static_cast<double>(b),
                        ", the input has ", p.batch);
    }
  }
  // Rough work per region: a bin's samples (about 4 when sampling_ratio is
  // adaptive) times the channels, 4 loads each.
  const int64_t samples = p.sampling_ratio > 0 ? p.sampling_ratio * p.sampling_ratio : 4;
  ParallelFor(p.rois, ctx.num_threads, p.rois * per_roi * samples * 8,
              [&](int64_t begin, int64_t end) {
                for (int64_t k = begin; k < end; ++k) {
                  RoiAlignRegion<T>(p, input, rois + 5 * k, out + k * per_roi);
                }
              });
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> VisionKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kNms, DType::kF32, PrepareNms, EvalNms<float>},
      {ir::OpKind::kNms, DType::kF64, PrepareNms, EvalNms<double>},
      {ir::OpKind::kRoiAlign, DType::kF32, PrepareRoiAlign, EvalRoiAlign<float>},
      {ir::OpKind::kRoiAlign, DType::kF64, PrepareRoiAlign, EvalRoiAlign<double>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
