// Reference detection ops: Nms as the greedy loop over boxes sorted by score
// (stable, NaN first), and RoiAlign as, per output element, the mean of its
// bilinear samples, each computed from its definition in double.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/kernels/reference/ref_util.h"

namespace kiln::kernels::reference {
namespace {

using ir::OpKind;

absl::StatusOr<Outputs> Nms(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values boxes = Read(*in[0]);
  const Values scores = Read(*in[1]);
  if (boxes.dims.size() != 2 || boxes.dims[1] != 4 || scores.dims.size() != 1 ||
      scores.dims[0] != boxes.dims[0]) {
    return RefError(node, "expected boxes [N, 4] and scores [N]");
  }
  const int64_t n = boxes.dims[0];
  const double threshold = node.attrs.GetFloat("iou_threshold");
  auto box = [&](int64_t i, int k) { return boxes.v[4 * i + k]; };
  auto area = [&](int64_t i) { return (box(i, 2) - box(i, 0)) * (box(i, 3) - box(i, 1)); };
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double sa = scores.v[a], sb = scores.v[b];
    return (std::isnan(sa) && !std::isnan(sb)) || sa > sb;
  });
  std::vector<bool> suppressed(n, false);
  std::vector<double> kept;
  for (int64_t oi = 0; oi < n; ++oi) {
    const int64_t i = order[oi];
    if (suppressed[i]) continue;
    kept.push_back(static_cast<double>(i));
    for (int64_t oj = oi + 1; oj < n; ++oj) {
      const int64_t j = order[oj];
      const double w = std::max(0.0, std::min(box(i, 2), box(j, 2)) - std::max(box(i, 0), box(j, 0)));
      const double h = std::max(0.0, std::min(box(i, 3), box(j, 3)) - std::max(box(i, 1), box(j, 1)));
      const double inter = w * h;
      if (inter / (area(i) + area(j) - inter) > threshold) suppressed[j] = true;
    }
  }
  return Outputs{Write(DType::kInt64, {static_cast<int64_t>(kept.size())}, kept)};
}

// The bilinear sample of plane `v` (height h, width w) at (y, x): 0 more than
// a pixel outside; clamped to the border within that pixel.
double Bilinear(const double* v, int64_t h, int64_t w, double y, double x) {
  if (!(y >= -1.0 && y <= h && x >= -1.0 && x <= w)) return 0.0;
  y = std::min(std::max(y, 0.0), static_cast<double>(h - 1));
  x = std::min(std::max(x, 0.0), static_cast<double>(w - 1));
  const int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x);
  const int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
  const double ly = y - y0, lx = x - x0;
  return (1 - ly) * (1 - lx) * v[y0 * w + x0] + (1 - ly) * lx * v[y0 * w + x1] +
         ly * (1 - lx) * v[y1 * w + x0] + ly * lx * v[y1 * w + x1];
}

absl::StatusOr<Outputs> RoiAlign(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values x = Read(*in[0]);
  const Values rois = Read(*in[1]);
  if (x.dims.size() != 4 || rois.dims.size() != 2 || rois.dims[1] != 5) {
    return RefError(node, "expected input [N, C, H, W] and rois [K, 5]");
  }
  const int64_t c_n = x.dims[1], h = x.dims[2], w = x.dims[3], k_n = rois.dims[0];
  const int64_t ph_n = node.attrs.GetInt("pooled_height", 1);
  const int64_t pw_n = node.attrs.GetInt("pooled_width", 1);
  const int64_t ratio = node.attrs.GetInt("sampling_ratio", -1);
  const double scale = node.attrs.GetFloat("spatial_scale", 1.0);
  const bool aligned = node.attrs.GetBool("aligned", false);
  const double offset = aligned ? 0.5 : 0.0;
  std::vector<double> out;
  for (int64_t k = 0; k < k_n; ++k) {
    const double* r = &rois.v[5 * k];
    const int64_t b = static_cast<int64_t>(r[0]);
    if (b < 0 || b >= x.dims[0]) return RefError(node, "batch index out of range");
    const double x1 = r[1] * scale - offset, y1 = r[2] * scale - offset;
    double rw = r[3] * scale - offset - x1, rh = r[4] * scale - offset - y1;
    if (!aligned) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bh = rh / ph_n, bw = rw / pw_n;
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / ph_n));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / pw_n));
    for (int64_t c = 0; c < c_n; ++c) {
      const double* plane = &x.v[(b * c_n + c) * h * w];
      for (int64_t ph = 0; ph < ph_n; ++ph) {
        for (int64_t pw = 0; pw < pw_n; ++pw) {
          double sum = 0.0;
          for (int64_t iy = 0; iy < gh; ++iy) {
            for (int64_t ix = 0; ix < gw; ++ix) {
              sum += Bilinear(plane, h, w, y1 + ph * bh + (iy + 0.5) * bh / gh,
                              x1 + pw * bw + (ix + 0.5) * bw / gw);
            }
          }
          out.push_back(sum / static_cast<double>(std::max<int64_t>(gh * gw, 1)));
        }
      }
    }
  }
  return Outputs{Write(in[0]->dtype(), {k_n, c_n, ph_n, pw_n}, out)};
}

}  // namespace

MaybeOutputs VisionReference(const ir::Node& node, const std::vector<const Tensor*>& in) {
  switch (node.kind) {
    case OpKind::kNms: return Nms(node, in);
    case OpKind::kRoiAlign: return RoiAlign(node, in);
    default: return std::nullopt;
  }
}

}  // namespace kiln::kernels::reference
