// Resampling: Resize, GridSample and AffineGrid (the sampling grid of an
// affine transform, F.affine_grid: theta applied to the pixel centres'
// coordinates in [-1, 1], the base grid computed as ATen's linspace does).
//
// Resize (F.interpolate / aten::upsample_*) over the 1 to 3 trailing spatial
// dims of an [N, C, spatial...] input, in the modes nearest, nearest_exact,
// linear (linear, bilinear, trilinear) and cubic (bicubic), with or without
// align_corners.
//
// Output size: attr sizes, else floor(in * scale) from attr scales. Source
// coordinates follow PyTorch's UpSample.h term by term, in float: the scale
// is in/out (or 1/scale when scales are given), align_corners maps corner to
// corner with (in-1)/(out-1), otherwise src = scale * (dst + 0.5) - 0.5
// (clamped at 0 except for cubic). Nearest takes floor(dst * scale) (with the
// out == in and out == 2 * in shortcuts PyTorch takes), nearest_exact
// floor((dst + 0.5) * scale). Cubic uses Keys' kernel with A = -0.75 and
// clamps taps at the borders.
//
// The resampling is separable: Prepare computes, per dim and output index,
// the source taps and their weights; Eval sums the tensor product of taps
// (1, 2^k or 4^k per output element), in parallel over planes.
//
// BF16 cubic has its own row, because libtorch 1.13 computes it in BFloat16
// arithmetic, and its rounding moves the result by several units in the last
// place (3e-2 relative) from the FP32 result rounded once: the scale is
// computed in BF16, the source index in float from it, the Keys coefficients
// in BF16 with every operation rounded, and the sum of the 4 x 4 taps rounds
// each product and each partial sum, width taps first, then the height taps
// over the width sums. Its other modes run the FP32 kernel widened, as every
// op without a BF16 kernel does.
// GridSample (aten::grid_sampler_2d, F.grid_sample on 4-D input): output
// [N, C, Ho, Wo] sampled from x [N, C, H, W] at grid [N, Ho, Wo, 2] (x then y
// in [-1, 1]: the outer edges of the corner pixels, or their centres with
// align_corners). Coordinates follow ATen's vectorised CPU kernel (what
// libtorch runs for float32 and float64) term by term in the input's type:
// unnormalize, then the padding (border clamps, reflection
// folds the coordinate back into the image and clamps; zeros reads 0 for a
// tap outside), applied to each of the 16 taps for bicubic. Bilinear weights
// are formed as ATen's vectorised CPU kernel forms them, nearest rounds half
// to even, bicubic uses Keys' kernel (A = -0.75), summing each row of taps
// before the rows. A NaN coordinate reads 0 (zeros) or clamps to 0. Per
// output pixel the taps and weights are computed once for every channel.
//
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {
namespace {

struct Axis {
  int64_t in = 1, out = 1;
  int taps = 1;
  std::vector<int64_t> index;  // [out * taps]
  // [out * taps]: computed in float for FP32 input and in double for FP64, as
  // PyTorch computes them in the input's type; one of the two is filled.
  std::vector<float> weight;
  std::vector<double> weight_f64;

  template <typename T>
  const std::vector<T>& Weights() const {
    if constexpr (std::is_same_v<T, float>) {
      return weight;
    } else {
      return weight_f64;
    }
  }
  template <typename T>
  std::vector<T>& Weights() {
    return const_cast<std::vector<T>&>(static_cast<const Axis*>(this)->Weights<T>());
  }
};

struct ResizePlan {
  int64_t planes = 0;
  Axis axes[3];  // depth, height, width (unit when absent)
};

// PyTorch's compute_scales_value: 1/scale when a scale was given, else in/out.
// C is the type PyTorch computes coordinates in: float for FP32 input, double
// for FP64 (and float for nearest, whose index PyTorch always takes in float).
template <typename C>
C ScaleValue(double scale, int64_t in, int64_t out) {
  return scale > 0 ? static_cast<C>(1.0 / scale) : static_cast<C>(in) / static_cast<C>(out);
}

// PyTorch's area_pixel_compute_scale.
template <typename C>
C AreaScale(int64_t in, int64_t out, bool align_corners, double scale) {
  if (align_corners) return out > 1 ? static_cast<C>(in - 1) / static_cast<C>(out - 1) : C(0);
  return ScaleValue<C>(scale, in, out);
}

// PyTorch's area_pixel_compute_source_index.
template <typename C>
C SourceIndex(C scale, int64_t dst, bool align_corners, bool cubic) {
  if (align_corners) return scale * static_cast<C>(dst);
  const C src = scale * (static_cast<C>(dst) + C(0.5)) - C(0.5);
  return (!cubic && src < C(0)) ? C(0) : src;
}

template <typename C>
C Cubic1(C x, C a) {
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
template <typename C>
C Cubic2(C x, C a) {
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

template <typename C>
void BuildAxis(Axis& ax, const std::string& mode, bool align_corners, double scale) {
  std::vector<C>& weight = ax.Weights<C>();
  const int64_t in = ax.in, out = ax.out;
  if (mode == "nearest" || mode == "nearest_exact") {
    ax.taps = 1;
    const float s = ScaleValue<float>(scale, in, out);
    for (int64_t i = 0; i < out; ++i) {
      int64_t src;
      if (mode == "nearest") {
        if (out == in) {
          src = i;
        } else if (out == 2 * in) {
          src = i >> 1;
        } else {
          src = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * s)), in - 1);
        }
      } else {
        src =
            std::min(static_cast<int64_t>(std::floor((static_cast<float>(i) + 0.5f) * s)), in - 1);
      }
      ax.index.push_back(src);
      weight.push_back(C(1));
    }
    return;
  }
  if (mode == "linear") {
    ax.taps = 2;
    const C s = AreaScale<C>(in, out, align_corners, scale);
    for (int64_t i = 0; i < out; ++i) {
      if (out == in) {
        ax.index.insert(ax.index.end(), {i, i});
        weight.insert(weight.end(), {C(1), C(0)});
        continue;
      }
      const C real = SourceIndex<C>(s, i, align_corners, /*cubic=*/false);
      const int64_t i0 = static_cast<int64_t>(real);
      const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
      const C l1 = std::min(std::max(real - static_cast<C>(i0), C(0)), C(1));
      ax.index.insert(ax.index.end(), {i0, i1});
      weight.insert(weight.end(), {C(1) - l1, l1});
    }
    return;
  }
  // cubic
  ax.taps = 4;
  const C s = AreaScale<C>(in, out, align_corners, scale);
  constexpr C kA = C(-0.75);
  for (int64_t i = 0; i < out; ++i) {
    const C real = SourceIndex<C>(s, i, align_corners, /*cubic=*/true);
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    const C t = std::min(std::max(real - static_cast<C>(i0), C(0)), C(1));
    const C w[4] = {Cubic2<C>(t + 1, kA), Cubic1<C>(t, kA), Cubic1<C>(1 - t, kA),
                    Cubic2<C>(2 - t, kA)};
    for (int k = 0; k < 4; ++k) {
      ax.index.push_back(std::clamp<int64_t>(i0 - 1 + k, 0, in - 1));
      weight.push_back(w[k]);
    }
  }
}

float RoundBF16(float v) { return BF16ToFloat(FloatToBF16(v)); }

// A cubic axis for BF16 input, as libtorch 1.13's compute_indices_weights
// computes it for BFloat16: the scale in BF16 (in / out as two BF16 values,
// (in - 1) / (out - 1) with align_corners, or 1 / scale rounded), the source
// index and its fraction in float, then the coefficients in BF16 arithmetic
// (each operation rounded) from the fraction rounded to BF16.
void BuildCubicAxisBF16(Axis& ax, bool align_corners, double scale) {
  const int64_t in = ax.in, out = ax.out;
  float s;
  if (align_corners) {
    s = out > 1 ? RoundBF16(RoundBF16(static_cast<float>(in - 1)) /
                            RoundBF16(static_cast<float>(out - 1)))
                : 0.0f;
  } else if (scale > 0) {
    s = RoundBF16(static_cast<float>(1.0 / scale));
  } else {
    s = RoundBF16(RoundBF16(static_cast<float>(in)) / RoundBF16(static_cast<float>(out)));
  }
  auto r = RoundBF16;
  constexpr float kA = -0.75f;  // kA + 2, kA + 3, 4, 5 and 8 times kA are exact in BF16
  auto cubic1 = [&](float v) { return r(r(r(r(r((kA + 2) * v) - (kA + 3)) * v) * v) + 1); };
  auto cubic2 = [&](float v) {
    return r(r(r(r(r(r(kA * v) - 5 * kA) * v) + 8 * kA) * v) - 4 * kA);
  };
  ax.taps = 4;
  for (int64_t i = 0; i < out; ++i) {
    const float real = SourceIndex<float>(s, i, align_corners, /*cubic=*/true);
    const int64_t i0 = static_cast<int64_t>(std::floor(real));
    const float t = r(real - static_cast<float>(i0));
    const float t1 = r(1 - t);
    const float w[4] = {cubic2(r(t + 1)), cubic1(t), cubic1(t1), cubic2(r(t1 + 1))};
    for (int k = 0; k < 4; ++k) {
      ax.index.push_back(std::clamp<int64_t>(i0 - 1 + k, 0, in - 1));
      ax.weight.push_back(w[k]);
    }
  }
}

absl::Status PrepareResize(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 2));
  const ir::Attributes& attrs = ctx.node.attrs;
  const std::string mode = attrs.GetString("mode", "nearest");
  if (mode != "nearest" && mode != "nearest_exact" && mode != "linear" && mode != "cubic") {
    return InvalidArg(ctx.node, "unknown mode '", mode, "'");
  }
  // FP32; FP64 and BF16 cubic have their own table rows.
  const DType t = ctx.inputs[0].dtype;
  if (t == DType::kBF16 && mode != "cubic") {
    return Unimplemented(ctx.node, "BF16 ", mode, " runs the FP32 kernel widened");
  }
  if (t != DType::kF64 && t != DType::kBF16) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  const bool f64 = t == DType::kF64;
  const Dims& x = ctx.inputs[0].dims;
  const bool align_corners = attrs.GetBool("align_corners", false);
  ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, IntsAttrOrInput(ctx, "sizes", 1));
  const std::vector<double> scales = attrs.GetFloats("scales");
  const size_t spatial = !sizes.empty() ? sizes.size() : scales.size();
  if (spatial < 1 || spatial > 3 || x.size() < spatial + 1) {
    return InvalidArg(ctx.node, "expected 1 to 3 output sizes or scales for input ",
                      DimsToString(x));
  }
  if (!scales.empty() && scales.size() != spatial) {
    return InvalidArg(ctx.node, "sizes and scales have different lengths");
  }
  if (mode == "cubic" && spatial != 2) return Unimplemented(ctx.node, "cubic mode is 2-D only");
  auto p = std::make_shared<ResizePlan>();
  p->planes = NumElements(Dims(x.begin(), x.end() - spatial));
  Dims out = x;
  for (size_t k = 0; k < spatial; ++k) {
    Axis& ax = p->axes[3 - spatial + k];
    ax.in = x[x.size() - spatial + k];
    const double scale = scales.empty() ? 0.0 : scales[k];
    ax.out = !sizes.empty() ? sizes[k]
                            : static_cast<int64_t>(std::floor(static_cast<double>(ax.in) * scale));
    if (ax.out < 1 || ax.in < 1) {
      return InvalidArg(ctx.node, "cannot resize ", DimsToString(x), " to output sizes [",
                        absl::StrJoin(sizes, ", "), "] / scales [", absl::StrJoin(scales, ", "),
                        "]");
    }
    if (f64) {
      BuildAxis<double>(ax, mode, align_corners, scale);
    } else if (t == DType::kBF16) {
      BuildCubicAxisBF16(ax, align_corners, scale);
    } else {
      BuildAxis<float>(ax, mode, align_corners, scale);
    }
    out[x.size() - spatial + k] = ax.out;
  }
  for (size_t k = 0; k < 3 - spatial; ++k) {
    p->axes[k].index = {0};
    p->axes[k].weight = {1.0f};
    p->axes[k].weight_f64 = {1.0};
  }
  ctx.outputs = {TensorInfo{t, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

template <typename T>
absl::Status EvalResize(EvalContext& ctx) {
  const ResizePlan& p = StateAs<ResizePlan>(ctx);
  const Axis& az = p.axes[0];
  const Axis& ay = p.axes[1];
  const Axis& ax = p.axes[2];
  const T* x = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  const T* wz_of = az.Weights<T>().data();
  const T* wy_of = ay.Weights<T>().data();
  const T* wx_of = ax.Weights<T>().data();
  const int64_t in_volume = az.in * ay.in * ax.in;
  const int64_t out_volume = az.out * ay.out * ax.out;
  const int64_t taps = az.taps * ay.taps * ax.taps;
  ParallelFor(p.planes, ctx.num_threads, p.planes * out_volume * taps,
              [&](int64_t begin, int64_t end) {
                for (int64_t q = begin; q < end; ++q) {
                  const T* src = x + q * in_volume;
                  T* dst = y + q * out_volume;
                  for (int64_t z = 0; z < az.out; ++z) {
                    for (int64_t r = 0; r < ay.out; ++r) {
                      for (int64_t c = 0; c < ax.out; ++c) {
                        T sum = T(0);
                        for (int a = 0; a < az.taps; ++a) {
                          const T wz = wz_of[z * az.taps + a];
                          const int64_t iz = az.index[z * az.taps + a];
                          for (int b = 0; b < ay.taps; ++b) {
                            const T wy = wz * wy_of[r * ay.taps + b];
                            const T* row = src + (iz * ay.in + ay.index[r * ay.taps + b]) * ax.in;
                            T acc = T(0);
                            for (int t = 0; t < ax.taps; ++t) {
                              acc += wx_of[c * ax.taps + t] * row[ax.index[c * ax.taps + t]];
                            }
                            sum += wy * acc;
                          }
                        }
                        dst[(z * ay.out + r) * ax.out + c] = sum;
                      }
                    }
                  }
                }
              });
  return absl::OkStatus();
}

// BF16 cubic (2-D only), rounding as libtorch does (see the top of the file).
absl::Status EvalCubicBF16(EvalContext& ctx) {
  const ResizePlan& p = StateAs<ResizePlan>(ctx);
  const Axis& ay = p.axes[1];
  const Axis& ax = p.axes[2];
  const uint16_t* x = ctx.inputs[0]->data<uint16_t>();
  uint16_t* y = ctx.outputs[0]->data<uint16_t>();
  const int64_t in_plane = ay.in * ax.in;
  const int64_t out_plane = ay.out * ax.out;
  ParallelFor(p.planes, ctx.num_threads, p.planes * out_plane * 16, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const uint16_t* src = x + q * in_plane;
      uint16_t* dst = y + q * out_plane;
      for (int64_t r = 0; r < ay.out; ++r) {
        for (int64_t c = 0; c < ax.out; ++c) {
          float sum = 0;
          for (int b = 0; b < 4; ++b) {
            const uint16_t* row = src + ay.index[r * 4 + b] * ax.in;
            float acc = 0;
            for (int k = 0; k < 4; ++k) {
              const float term =
                  RoundBF16(BF16ToFloat(row[ax.index[c * 4 + k]]) * ax.weight[c * 4 + k]);
              acc = k == 0 ? term : RoundBF16(acc + term);
            }
            const float term = RoundBF16(acc * ay.weight[r * 4 + b]);
            sum = b == 0 ? term : RoundBF16(sum + term);
          }
          dst[r * ax.out + c] = FloatToBF16(sum);
        }
      }
    }
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- GridSample

enum class GridMode { kBilinear, kNearest, kBicubic };
enum class GridPad { kZeros, kBorder, kReflection };

struct GridSamplePlan {
  GridMode mode = GridMode::kBilinear;
  GridPad pad = GridPad::kZeros;
  bool align_corners = false;
  int64_t n = 0, c = 0, h = 0, w = 0, ho = 0, wo = 0;
};

absl::Status PrepareGridSample(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  RETURN_IF_ERROR(CheckDType(ctx, 1, t));
  const Dims& x = ctx.inputs[0].dims;
  const Dims& grid = ctx.inputs[1].dims;
  if (x.size() == 5) {
    return Unimplemented(ctx.node, "volumetric (5-D) grid sampling runs on the fallback");
  }
  if (x.size() != 4 || grid.size() != 4 || grid[3] != 2 || grid[0] != x[0]) {
    return InvalidArg(ctx.node, "expected input [N, C, H, W] and grid [N, H_out, W_out, 2], got ",
                      DimsToString(x), " and ", DimsToString(grid));
  }
  if (x[2] <= 0 || x[3] <= 0) {
    return InvalidArg(ctx.node, "input ", DimsToString(x), " has an empty spatial dim");
  }
  auto p = std::make_shared<GridSamplePlan>();
  const ir::Attributes& attrs = ctx.node.attrs;
  const std::string mode = attrs.GetString("mode", "bilinear");
  const std::string pad = attrs.GetString("padding_mode", "zeros");
  if (mode == "bilinear") {
    p->mode = GridMode::kBilinear;
  } else if (mode == "nearest") {
    p->mode = GridMode::kNearest;
  } else if (mode == "bicubic") {
    p->mode = GridMode::kBicubic;
  } else {
    return InvalidArg(ctx.node, "unknown mode '", mode, "'");
  }
  if (pad == "zeros") {
    p->pad = GridPad::kZeros;
  } else if (pad == "border") {
    p->pad = GridPad::kBorder;
  } else if (pad == "reflection") {
    p->pad = GridPad::kReflection;
  } else {
    return InvalidArg(ctx.node, "unknown padding_mode '", pad, "'");
  }
  p->align_corners = attrs.GetBool("align_corners", false);
  p->n = x[0];
  p->c = x[1];
  p->h = x[2];
  p->w = x[3];
  p->ho = grid[1];
  p->wo = grid[2];
  ctx.outputs = {TensorInfo{t, {x[0], x[1], grid[1], grid[2]}}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// [-1, 1] to pixels: the corner pixels' centres with align_corners, their
// outer edges otherwise (ATen's vectorised CPU kernel's form, which libtorch
// runs for float32 and float64).
template <typename T>
T GridUnnormalize(T coord, int64_t size, bool align_corners) {
  return align_corners ? (coord + 1) * (static_cast<T>(size - 1) / 2)
                       : (coord + 1) * (static_cast<T>(size) / 2) - T(0.5);
}

// Into [0, size - 1]; NaN becomes 0 (as ATen's vectorised kernel clamps).
template <typename T>
T GridClip(T x, int64_t size) {
  return x > T(0) ? std::min(x, static_cast<T>(size - 1)) : T(0);
}

// The padding of a pixel coordinate (zeros: none; taps outside read 0).
// Reflection folds x by the image's bounds (the corner centres with
// align_corners, their outer edges otherwise), as the vectorised kernel does.
template <typename T>
T GridPadCoordinate(T x, int64_t size, GridPad pad, bool align_corners) {
  if (pad == GridPad::kBorder) return GridClip(x, size);
  if (pad == GridPad::kReflection) {
    const T twice_span = static_cast<T>(align_corners ? 2 * (size - 1) : 2 * size);
    if (twice_span == T(0)) return T(0);
    const T shift = align_corners ? T(0) : T(0.5);
    const T in = std::fabs(x + shift);
    const T extra = in - std::trunc(in / twice_span) * twice_span;
    return GridClip(std::min(extra, twice_span - extra) - shift, size);
  }
  return x;
}

// The pixel index of a whole-number coordinate, or -1 outside [0, size).
template <typename T>
int64_t GridIndex(T x, int64_t size) {
  return x >= T(0) && x < static_cast<T>(size) ? static_cast<int64_t>(x) : -1;
}

template <typename T>
absl::Status EvalGridSample(EvalContext& ctx) {
  const GridSamplePlan& p = StateAs<GridSamplePlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  const T* grid = ctx.inputs[1]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  const int64_t plane = p.h * p.w, out_plane = p.ho * p.wo;
  const int taps = p.mode == GridMode::kBicubic ? 16 : p.mode == GridMode::kBilinear ? 4 : 1;
  ParallelFor(p.n * p.ho, ctx.num_threads, p.n * out_plane * p.c * taps * 2,
              [&](int64_t begin, int64_t end) {
    int64_t index[16];
    T weight[16];
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / p.ho, r = row % p.ho;
      const T* src = x + b * p.c * plane;
      T* dst = y + b * p.c * out_plane + r * p.wo;
      for (int64_t q = 0; q < p.wo; ++q) {
        const T* g = grid + ((b * p.ho + r) * p.wo + q) * 2;
        const T ix = GridUnnormalize(g[0], p.w, p.align_corners);
        const T iy = GridUnnormalize(g[1], p.h, p.align_corners);
        int n = 0;  // taps inside the image: offsets into a plane and weights
        if (p.mode == GridMode::kBicubic) {
          // Taps at floor - 1 .. floor + 2, each coordinate padded.
          const T x0 = std::floor(ix), y0 = std::floor(iy);
          const T tx = ix - x0, ty = iy - y0;
          constexpr T kA = T(-0.75);
          const T cx[4] = {Cubic2<T>(tx + 1, kA), Cubic1<T>(tx, kA), Cubic1<T>(1 - tx, kA),
                           Cubic2<T>(2 - tx, kA)};
          const T cy[4] = {Cubic2<T>(ty + 1, kA), Cubic1<T>(ty, kA), Cubic1<T>(1 - ty, kA),
                           Cubic2<T>(2 - ty, kA)};
          for (int i = 0; i < 4; ++i) {
            const int64_t yi = GridIndex(
                GridPadCoordinate(y0 - 1 + i, p.h, p.pad, p.align_corners), p.h);
            for (int j = 0; j < 4; ++j) {
              const int64_t xj = GridIndex(
                  GridPadCoordinate(x0 - 1 + j, p.w, p.pad, p.align_corners), p.w);
              index[i * 4 + j] = yi < 0 || xj < 0 ? -1 : yi * p.w + xj;
              weight[i * 4 + j] = cx[j];
            }
          }
          // Per row of taps: the x-weighted sum, then the rows weighted by cy.
          for (int64_t ch = 0; ch < p.c; ++ch) {
            const T* s = src + ch * plane;
            T sum = 0;
            for (int i = 0; i < 4; ++i) {
              T rsum = 0;
              for (int j = 0; j < 4; ++j) {
                const int64_t k = index[i * 4 + j];
                rsum += (k < 0 ? T(0) : s[k]) * weight[i * 4 + j];
              }
              sum += rsum * cy[i];
            }
            dst[ch * out_plane + q] = sum;
          }
          continue;
        }
        const T px = GridPadCoordinate(ix, p.w, p.pad, p.align_corners);
        const T py = GridPadCoordinate(iy, p.h, p.pad, p.align_corners);
        if (p.mode == GridMode::kNearest) {
          const int64_t xi = GridIndex(std::nearbyint(px), p.w);
          const int64_t yi = GridIndex(std::nearbyint(py), p.h);
          if (xi >= 0 && yi >= 0) {
            index[0] = yi * p.w + xi;
            weight[0] = 1;
            n = 1;
          }
        } else {
          // Bilinear: the four neighbours, weighted as ATen's vectorised
          // kernel weights them (nw = (1 - dy)(1 - dx), ne, sw, se).
          const T x0 = std::floor(px), y0 = std::floor(py);
          const T dx = px - x0, dy = py - y0;
          const T e = 1 - dx, s = 1 - dy;
          const int64_t xw = GridIndex(x0, p.w), xe = GridIndex(x0 + 1, p.w);
          const int64_t yn = GridIndex(y0, p.h), ys = GridIndex(y0 + 1, p.h);
          const int64_t idx[4] = {yn < 0 || xw < 0 ? -1 : yn * p.w + xw,
                                  yn < 0 || xe < 0 ? -1 : yn * p.w + xe,
                                  ys < 0 || xw < 0 ? -1 : ys * p.w + xw,
                                  ys < 0 || xe < 0 ? -1 : ys * p.w + xe};
          const T wt[4] = {s * e, s * dx, dy * e, dy * dx};
          for (int k = 0; k < 4; ++k) {
            // Every tap is summed, outside ones as 0, so the sum's order is ATen's.
            index[k] = idx[k];
            weight[k] = wt[k];
          }
          n = 4;
        }
        for (int64_t ch = 0; ch < p.c; ++ch) {
          const T* sp = src + ch * plane;
          T sum = 0;
          for (int k = 0; k < n; ++k) sum += (index[k] < 0 ? T(0) : sp[index[k]]) * weight[k];
          dst[ch * out_plane + q] = sum;
        }
      }
    }
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- AffineGrid

struct AffineGridPlan {
  int64_t n = 0, spatial = 0;  // spatial: 2 or 3
  int64_t dims[3] = {1, 1, 1};  // D, H, W (D = 1 in 2-D)
  bool align_corners = false;
};

absl::Status PrepareAffineGrid(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 2));
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  ASSIGN_OR_RETURN(const std::vector<int64_t> size, IntsAttrOrInput(ctx, "size", 1));
  const Dims& theta = ctx.inputs[0].dims;
  auto p = std::make_shared<AffineGridPlan>();
  p->spatial = static_cast<int64_t>(size.size()) - 2;
  if (p->spatial != 2 && p->spatial != 3) {
    return InvalidArg(ctx.node, "size must be [N, C, H, W] or [N, C, D, H, W], got ",
                      DimsToString(size));
  }
  for (int64_t d : size) {
    if (d < 0) return InvalidArg(ctx.node, "negative size ", DimsToString(size));
  }
  const int64_t rows = p->spatial, cols = p->spatial + 1;
  if (theta.size() != 3 || theta[0] != size[0] || theta[1] != rows || theta[2] != cols) {
    return InvalidArg(ctx.node, "expected theta [", size[0], ", ", rows, ", ", cols,
                      "] for size ", DimsToString(size), ", got ", DimsToString(theta));
  }
  p->n = size[0];
  if (p->spatial == 3) p->dims[0] = size[2];
  p->dims[1] = size[size.size() - 2];
  p->dims[2] = size[size.size() - 1];
  p->align_corners = ctx.node.attrs.GetBool("align_corners", false);
  Dims out = {p->n};
  if (p->spatial == 3) out.push_back(p->dims[0]);
  out.insert(out.end(), {p->dims[1], p->dims[2], p->spatial});
  ctx.outputs = {TensorInfo{t, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// linspace(-1, 1, steps) as ATen computes it (from both ends towards the
// middle), scaled by (steps - 1) / steps without align_corners; 0 for one step.
template <typename T>
std::vector<T> AffineBase(int64_t steps, bool align_corners) {
  std::vector<T> v(static_cast<size_t>(std::max<int64_t>(steps, 0)), T(0));
  if (steps <= 1) return v;
  const T step = T(2) / static_cast<T>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i) {
    v[i] = i < halfway ? T(-1) + step * static_cast<T>(i)
                       : T(1) - step * static_cast<T>(steps - i - 1);
    if (!align_corners) v[i] = v[i] * static_cast<T>(steps - 1) / static_cast<T>(steps);
  }
  return v;
}

// grid[n, d, h, w, :] = theta[n] @ (x_w, y_h[, z_d], 1), the base grid's
// coordinates in ATen's order (x along W first).
template <typename T>
absl::Status EvalAffineGrid(EvalContext& ctx) {
  const AffineGridPlan& p = StateAs<AffineGridPlan>(ctx);
  const T* theta = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  const std::vector<T> bz = AffineBase<T>(p.dims[0], p.align_corners);
  const std::vector<T> by = AffineBase<T>(p.dims[1], p.align_corners);
  const std::vector<T> bx = AffineBase<T>(p.dims[2], p.align_corners);
  const int64_t k = p.spatial, cols = k + 1;
  for (int64_t b = 0; b < p.n; ++b) {
    const T* th = theta + b * k * cols;
    for (int64_t d = 0; d < p.dims[0]; ++d) {
      for (int64_t h = 0; h < p.dims[1]; ++h) {
        for (int64_t w = 0; w < p.dims[2]; ++w) {
          const T base[4] = {bx[w], by[h], k == 3 ? bz[d] : T(1), T(1)};
          for (int64_t j = 0; j < k; ++j) {
            T sum = 0;
            for (int64_t c = 0; c < cols; ++c) sum += base[c] * th[j * cols + c];
            *y++ = sum;
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> ResizeKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kResize, DType::kF32, PrepareResize, EvalResize<float>},
      {ir::OpKind::kResize, DType::kF64, PrepareResize, EvalResize<double>},
      {ir::OpKind::kResize, DType::kBF16, PrepareResize, EvalCubicBF16},
      {ir::OpKind::kGridSample, DType::kF32, PrepareGridSample, EvalGridSample<float>},
      {ir::OpKind::kGridSample, DType::kF64, PrepareGridSample, EvalGridSample<double>},
      {ir::OpKind::kAffineGrid, DType::kF32, PrepareAffineGrid, EvalAffineGrid<float>},
      {ir::OpKind::kAffineGrid, DType::kF64, PrepareAffineGrid, EvalAffineGrid<double>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
