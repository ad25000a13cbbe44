// Reference detection ops: Nms as the greedy loop over boxes sorted by score
// (stable, NaN first), and RoiAlign as, per output element, the mean of its
// bilinear samples, each computed from its definition in double. GridSample
// per output element from its taps and weights in double.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

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

// ---- GridSample, per output element. The source coordinates are part of
// the op's definition in the input's type (nearest's ties depend on their
// rounding): unnormalized and padded in float as ATen's CPU kernel does
// (x + 1) * (size / 2) - 0.5, (x + 1) * ((size - 1) / 2), reflection by
// trunc and min), for FP32 input; the sums of taps in double.

float GridSource(float coord, int64_t size, bool align_corners) {
  return align_corners ? (coord + 1) * (static_cast<float>(size - 1) / 2)
                       : (coord + 1) * (static_cast<float>(size) / 2) - 0.5f;
}

float GridClipRef(float x, int64_t size) {
  if (std::isnan(x)) return 0.0f;
  return std::min(static_cast<float>(size - 1), std::max(x, 0.0f));
}

float GridPadRef(float x, int64_t size, const std::string& pad, bool align_corners) {
  if (pad == "border") return GridClipRef(x, size);
  if (pad == "reflection") {
    // Folded into [lo, lo + span] (the corner centres, or their outer edges).
    const float twice_span = static_cast<float>(align_corners ? 2 * (size - 1) : 2 * size);
    if (twice_span == 0) return 0.0f;
    const float shift = align_corners ? 0.0f : 0.5f;
    const float in = std::fabs(x + shift);
    const float extra = in - std::trunc(in / twice_span) * twice_span;
    return GridClipRef(std::min(extra, twice_span - extra) - shift, size);
  }
  return x;
}

absl::StatusOr<Outputs> GridSample(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values x = Read(*in[0]);
  const Values grid = Read(*in[1]);
  if (x.dims.size() != 4 || grid.dims.size() != 4 || grid.dims[3] != 2 ||
      grid.dims[0] != x.dims[0]) {
    return RefError(node, "expected input [N, C, H, W] and grid [N, Ho, Wo, 2]");
  }
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3];
  const int64_t ho = grid.dims[1], wo = grid.dims[2];
  const std::string mode = node.attrs.GetString("mode", "bilinear");
  const std::string pad = node.attrs.GetString("padding_mode", "zeros");
  const bool align = node.attrs.GetBool("align_corners", false);
  // The pixel (yi, xi) of plane (b, ch), 0 outside the image.
  auto pixel = [&](int64_t b, int64_t ch, double yi, double xi) {
    if (!(yi >= 0 && yi < h && xi >= 0 && xi < w)) return 0.0;
    return x.v[((b * c + ch) * h + static_cast<int64_t>(yi)) * w + static_cast<int64_t>(xi)];
  };
  auto cubic = [](double t, int k) {
    const double a = -0.75;
    const double d = k == 0 ? t + 1 : k == 1 ? t : k == 2 ? 1 - t : 2 - t;
    return k == 1 || k == 2 ? ((a + 2) * d - (a + 3)) * d * d + 1
                            : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  };
  std::vector<double> out;
  out.reserve(n * c * ho * wo);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t r = 0; r < ho; ++r) {
        for (int64_t q = 0; q < wo; ++q) {
          const double* g = &grid.v[((b * ho + r) * wo + q) * 2];
          const double sx = GridSource(static_cast<float>(g[0]), w, align);
          const double sy = GridSource(static_cast<float>(g[1]), h, align);
          double value = 0;
          if (mode == "bicubic") {
            const double x0 = std::floor(sx), y0 = std::floor(sy);
            for (int i = 0; i < 4; ++i) {
              double row = 0;
              for (int j = 0; j < 4; ++j) {
                row += cubic(sx - x0, j) *
                       pixel(b, ch, GridPadRef(static_cast<float>(y0 - 1 + i), h, pad, align),
                             GridPadRef(static_cast<float>(x0 - 1 + j), w, pad, align));
              }
              value += cubic(sy - y0, i) * row;
            }
          } else {
            const double px = GridPadRef(static_cast<float>(sx), w, pad, align);
            const double py = GridPadRef(static_cast<float>(sy), h, pad, align);
            if (mode == "nearest") {
              value = pixel(b, ch, std::nearbyint(py), std::nearbyint(px));
            } else if (mode == "bilinear") {
              const double x0 = std::floor(px), y0 = std::floor(py);
              const double dx = px - x0, dy = py - y0;
              value = (1 - dx) * (1 - dy) * pixel(b, ch, y0, x0) +
                      dx * (1 - dy) * pixel(b, ch, y0, x0 + 1) +
                      (1 - dx) * dy * pixel(b, ch, y0 + 1, x0) + dx * dy * pixel(b, ch, y0 + 1, x0 + 1);
            } else {
              return RefError(node, "unknown mode");
            }
          }
          out.push_back(value);
        }
      }
    }
  }
  return Outputs{Write(in[0]->dtype(), {n, c, ho, wo}, out)};
}

// AffineGrid: theta[n] times (x, y[, z], 1) at every pixel centre, the
// centres evenly spaced over [-1, 1] (over [-1 + 1/size, 1 - 1/size] without
// align_corners), in double.
absl::StatusOr<Outputs> AffineGrid(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values theta = Read(*in[0]);
  std::vector<int64_t> size = node.attrs.GetInts("size");
  if (in.size() > 1 && in[1] != nullptr) {
    size.assign(in[1]->data<int64_t>(), in[1]->data<int64_t>() + in[1]->num_elements());
  }
  const int64_t k = static_cast<int64_t>(size.size()) - 2;
  if ((k != 2 && k != 3) || theta.dims != std::vector<int64_t>{size[0], k, k + 1}) {
    return RefError(node, "expected theta [N, k, k + 1] for a size of k spatial dims");
  }
  const bool align = node.attrs.GetBool("align_corners", false);
  auto centre = [&](int64_t i, int64_t steps) {
    if (steps <= 1) return 0.0;
    const double v = -1.0 + 2.0 * i / (steps - 1);
    return align ? v : v * (steps - 1) / steps;
  };
  const int64_t dn = k == 3 ? size[2] : 1, hn = size[k], wn = size[k + 1];
  std::vector<double> out;
  for (int64_t b = 0; b < size[0]; ++b) {
    for (int64_t d = 0; d < dn; ++d) {
      for (int64_t h = 0; h < hn; ++h) {
        for (int64_t w = 0; w < wn; ++w) {
          const double base[4] = {centre(w, wn), centre(h, hn), k == 3 ? centre(d, dn) : 1.0, 1.0};
          for (int64_t j = 0; j < k; ++j) {
            double sum = 0;
            for (int64_t c = 0; c <= k; ++c) sum += base[c] * theta.v[(b * k + j) * (k + 1) + c];
            out.push_back(sum);
          }
        }
      }
    }
  }
  std::vector<int64_t> dims = {size[0]};
  if (k == 3) dims.push_back(dn);
  dims.insert(dims.end(), {hn, wn, k});
  return Outputs{Write(in[0]->dtype(), dims, out)};
}

}  // namespace

MaybeOutputs VisionReference(const ir::Node& node, const std::vector<const Tensor*>& in) {
  switch (node.kind) {
    case OpKind::kNms: return Nms(node, in);
    case OpKind::kRoiAlign: return RoiAlign(node, in);
    case OpKind::kGridSample: return GridSample(node, in);
    case OpKind::kAffineGrid: return AffineGrid(node, in);
    default: return std::nullopt;
  }
}

}  // namespace kiln::kernels::reference
