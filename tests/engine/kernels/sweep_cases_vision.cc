// Sweep case generators for the detection kernels (vision.cc): random boxes
// (some overlapping, some degenerate, some off the map) and scores with ties
// for Nms; maps, regions and every RoiAlign option for RoiAlign.
#include <algorithm>
#include <cmath>

#include "tests/engine/kernels/single_op_graph.h"
#include "tests/engine/kernels/sweep_case.h"

namespace kiln::kernels::testing {
namespace {

using K = ir::OpKind;
using Rng = SweepRng;
using Case = SweepCase;

int64_t Uniform(Rng& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
float Real(Rng& rng, double lo, double hi) {
  return static_cast<float>(std::uniform_real_distribution<double>(lo, hi)(rng));
}
bool Coin(Rng& rng, double p = 0.5) { return std::bernoulli_distribution(p)(rng); }
bool Big(int i) { return i % 6 == 5; }

// Boxes (x1, y1, x2, y2) clustered in a small area, so many overlap.
Tensor Boxes(Rng& rng, int64_t n, float extent) {
  Tensor t = Tensor::Zeros(DType::kF32, {n, 4});
  float* b = t.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float x = Real(rng, -1, extent), y = Real(rng, -1, extent);
    // A few degenerate boxes (zero or negative size), as detectors emit.
    const float w = Coin(rng, 0.05) ? Real(rng, -1, 0) : Real(rng, 0.5, extent / 2);
    const float h = Coin(rng, 0.05) ? 0.0f : Real(rng, 0.5, extent / 2);
    b[4 * i + 0] = x;
    b[4 * i + 1] = y;
    b[4 * i + 2] = x + w;
    b[4 * i + 3] = y + h;
  }
  return t;
}

Case NmsCase(Rng& rng, int i) {
  const int64_t n = Big(i) ? Uniform(rng, 200, 600) : Uniform(rng, 0, 24);
  Tensor scores = RandomF32({n}, rng, 0, 1);
  if (Coin(rng, 0.3)) {
    // Scores in tenths: ties, which must not change which box wins.
    float* s = scores.data<float>();
    for (int64_t k = 0; k < n; ++k) s[k] = std::round(s[k] * 10) / 10;
  }
  ir::Attributes attrs;
  attrs.SetFloat("iou_threshold", Real(rng, 0.1, 0.9));
  return {{Boxes(rng, n, Big(i) ? 40.0f : 8.0f), scores}, attrs, {}};
}

Case RoiAlignCase(Rng& rng, int i) {
  const int64_t n = Uniform(rng, 1, 2), c = Big(i) ? 16 : Uniform(rng, 1, 3);
  const int64_t h = Uniform(rng, 1, Big(i) ? 32 : 9), w = Uniform(rng, 1, Big(i) ? 32 : 9);
  const int64_t k = Big(i) ? 24 : Uniform(rng, 0, 4);
  const double scale = Coin(rng) ? 1.0 : Coin(rng) ? 0.5 : 0.25;
  Tensor rois = Tensor::Zeros(DType::kF32, {k, 5});
  float* r = rois.data<float>();
  for (int64_t j = 0; j < k; ++j) {
    // In image coordinates (before spatial_scale), partly off the map.
    const float ext_w = static_cast<float>(w / scale), ext_h = static_cast<float>(h / scale);
    const float x1 = Real(rng, -2, ext_w), y1 = Real(rng, -2, ext_h);
    r[5 * j + 0] = static_cast<float>(Uniform(rng, 0, n - 1));
    r[5 * j + 1] = x1;
    r[5 * j + 2] = y1;
    r[5 * j + 3] = x1 + Real(rng, Coin(rng, 0.1) ? -1 : 0, ext_w / 2 + 1);
    r[5 * j + 4] = y1 + Real(rng, 0, ext_h / 2 + 1);
  }
  ir::Attributes attrs;
  attrs.SetFloat("spatial_scale", scale);
  attrs.SetInt("pooled_height", Uniform(rng, 1, 4));
  attrs.SetInt("pooled_width", Uniform(rng, 1, 4));
  attrs.SetInt("sampling_ratio", Uniform(rng, -1, 3));
  attrs.SetBool("aligned", Coin(rng));
  return {{RandomF32({n, c, h, w}, rng), rois}, attrs, {}};
}

}  // namespace

void AddVisionSweepCases(std::map<ir::OpKind, SweepGenerator>& m) {
  m[K::kNms] = NmsCase;
  m[K::kRoiAlign] = RoiAlignCase;
}

}  // namespace kiln::kernels::testing
