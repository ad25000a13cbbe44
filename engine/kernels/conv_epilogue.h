// What a convolution does to its output block right after the GEMM (private
// to engine/kernels/): the per-channel affine of a fused inference BatchNorm
// (y = y * scale + shift), a fused residual Add (y = y + r, the Conv's input
// 3, same dims as the output), the clamp of a fused Relu / Clip and a fused
// activation (activation.h: Gelu, Silu, Sigmoid, Tanh, HardSwish), in that
// order. The pass
// engine/passes/fuse_conv_epilogue.cc writes the Conv node's attributes
// post_scale, post_shift, post_min, post_max and post_act; the arithmetic is the
// unfused kernels' (BatchNorm's multiply then add, no FMA contraction;
// Clip's min(max(y, lo), hi)), so fusing never changes a result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/status/statusor.h"
#include "engine/common/status_macros.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"
#include "engine/kernels/activation.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {

struct ConvEpilogue {
  const Tensor* scale = nullptr;  // [out channels] in the conv's dtype, with shift
  const Tensor* shift = nullptr;
  bool residual = false;  // input 3 is present
  bool clamp = false;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  Activation act = Activation::kNone;

  bool empty() const {
    return scale == nullptr && !residual && !clamp && act == Activation::kNone;
  }
};

// Reads the node's post_* attributes; the tensors stay owned by the node, which
// outlives the plan.
inline absl::StatusOr<ConvEpilogue> ConvEpilogueFromAttrs(const ir::Node& node, DType dtype,
                                                          int64_t out_channels) {
  ConvEpilogue e;
  e.scale = node.attrs.GetTensor("post_scale");
  e.shift = node.attrs.GetTensor("post_shift");
  if ((e.scale == nullptr) != (e.shift == nullptr)) {
    return InvalidArg(node, "post_scale and post_shift come together");
  }
  for (const Tensor* t : {e.scale, e.shift}) {
    if (t != nullptr && (t->dtype() != dtype || t->num_elements() != out_channels)) {
      return InvalidArg(node, "expected post_scale/post_shift ", DTypeName(dtype), " [",
                        out_channels, "], got ", DTypeName(t->dtype()), " ",
                        DimsToString(t->dims()));
    }
  }
  e.residual = node.inputs.size() > 3 && node.inputs[3] != ir::kNoValue;
  if (node.attrs.Has("post_min") || node.attrs.Has("post_max")) {
    e.clamp = true;
    e.lo = node.attrs.GetFloat("post_min", e.lo);
    e.hi = node.attrs.GetFloat("post_max", e.hi);
  }
  ASSIGN_OR_RETURN(e.act, ActivationFromAttrs(node));
  return e;
}

// Applies the epilogue to `channels` output planes of `plane` elements, the
// first of which is output channel `first_channel`, in parallel over channels
// (num_threads 1 inside a ParallelFor). `r` is the residual at the same
// offset as `y` (nullptr without one).
template <typename T>
void ApplyConvEpilogue(const ConvEpilogue& e, int64_t first_channel, int64_t channels,
                       int64_t plane, T* y, const T* r, int num_threads = 1) {
  if (e.empty()) return;
  const T lo = static_cast<T>(e.lo), hi = static_cast<T>(e.hi);
  ParallelFor(channels, num_threads, channels * plane, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      T* dst = y + c * plane;
      if (e.scale != nullptr) {
        const T a = e.scale->data<T>()[first_channel + c];
        const T b = e.shift->data<T>()[first_channel + c];
        for (int64_t i = 0; i < plane; ++i) dst[i] = dst[i] * a + b;
      }
      if (r != nullptr) {
        const T* add = r + c * plane;
        for (int64_t i = 0; i < plane; ++i) dst[i] = dst[i] + add[i];
      }
      if (e.clamp) {
        for (int64_t i = 0; i < plane; ++i) dst[i] = std::min(std::max(dst[i], lo), hi);
      }
      ApplyActivation(e.act, dst, plane);
    }
  });
}

}  // namespace kiln::kernels
