// Unary activations: Relu, Clip, Sigmoid, Tanh, Gelu (erf and tanh forms),
// Silu, HardSigmoid, HardSwish. One shared Prepare (same dims out as in), one
// Eval template over a per-op functor; the formulas follow PyTorch's CPU
// kernels term by term so float32 results agree to rounding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

// Per-node constants read once in Prepare.
struct UnaryParams {
  float lo = -std::numeric_limits<float>::infinity();  // Clip
  float hi = std::numeric_limits<float>::infinity();   // Clip
  bool gelu_tanh = false;                              // Gelu approximate="tanh"
};

absl::Status PrepareUnary(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  ctx.outputs = {TensorInfo{DType::kF32, ctx.inputs[0].dims}};
  ctx.state = std::make_shared<UnaryParams>();
  return absl::OkStatus();
}

absl::Status PrepareClip(PrepareContext& ctx) {
  RETURN_IF_ERROR(PrepareUnary(ctx));
  auto params = std::make_shared<UnaryParams>();
  // An absent bound is PyTorch's clamp(min=None) / clamp(max=None).
  const ir::Attributes& attrs = ctx.node.attrs;
  if (attrs.Has("min")) params->lo = static_cast<float>(attrs.GetFloat("min"));
  if (attrs.Has("max")) params->hi = static_cast<float>(attrs.GetFloat("max"));
  if (std::isnan(params->lo) || std::isnan(params->hi)) {
    return InvalidArg(ctx.node, "clip bounds must not be NaN");
  }
  ctx.state = std::move(params);
  return absl::OkStatus();
}

absl::Status PrepareGelu(PrepareContext& ctx) {
  RETURN_IF_ERROR(PrepareUnary(ctx));
  auto params = std::make_shared<UnaryParams>();
  const std::string approximate = ctx.node.attrs.GetString("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    return InvalidArg(ctx.node, "approximate must be \"none\" or \"tanh\", got \"", approximate,
                      "\"");
  }
  params->gelu_tanh = approximate == "tanh";
  ctx.state = std::move(params);
  return absl::OkStatus();
}

// Each functor: Apply(x, params) and a rough cost per element (in simple float
// operations) used for the parallel threshold.
struct ReluOp {
  static constexpr int kCost = 1;
  // std::max(x, 0) returns x for NaN, as PyTorch's relu (clamp_min) does.
  static float Apply(float x, const UnaryParams&) { return std::max(x, 0.0f); }
};
struct ClipOp {
  static constexpr int kCost = 1;
  // min(max(x, lo), hi): PyTorch's clamp, NaN propagating, hi wins if lo > hi.
  static float Apply(float x, const UnaryParams& p) { return std::min(std::max(x, p.lo), p.hi); }
};
struct SigmoidOp {
  static constexpr int kCost = 20;
  static float Apply(float x, const UnaryParams&) { return 1.0f / (1.0f + std::exp(-x)); }
};
struct TanhOp {
  static constexpr int kCost = 20;
  static float Apply(float x, const UnaryParams&) { return std::tanh(x); }
};
struct GeluErfOp {
  static constexpr int kCost = 20;
  static float Apply(float x, const UnaryParams&) {
    constexpr float kAlpha = static_cast<float>(M_SQRT1_2);
    return x * 0.5f * (1.0f + std::erf(x * kAlpha));
  }
};
struct GeluTanhOp {
  static constexpr int kCost = 20;
  static float Apply(float x, const UnaryParams&) {
    constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2/pi)
    constexpr float kKappa = 0.044715f;
    const float inner = kBeta * (x + kKappa * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(inner));
  }
};
struct SiluOp {
  static constexpr int kCost = 20;
  static float Apply(float x, const UnaryParams&) { return x / (1.0f + std::exp(-x)); }
};
struct HardSigmoidOp {
  static constexpr int kCost = 2;
  static float Apply(float x, const UnaryParams&) {
    return std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
  }
};
struct HardSwishOp {
  static constexpr int kCost = 3;
  static float Apply(float x, const UnaryParams&) {
    return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
  }
};

template <typename Op>
absl::Status EvalUnary(EvalContext& ctx) {
  const UnaryParams& params = StateAs<UnaryParams>(ctx);
  const float* in = ctx.inputs[0]->data<float>();
  float* out = ctx.outputs[0]->data<float>();
  const int64_t n = ctx.outputs[0]->num_elements();
  ParallelFor(n, ctx.num_threads, n * Op::kCost, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = Op::Apply(in[i], params);
  });
  return absl::OkStatus();
}

absl::Status EvalGelu(EvalContext& ctx) {
  return StateAs<UnaryParams>(ctx).gelu_tanh ? EvalUnary<GeluTanhOp>(ctx)
                                             : EvalUnary<GeluErfOp>(ctx);
}

}  // namespace

absl::Span<const KernelDef> ActivationKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kRelu, DType::kF32, PrepareUnary, EvalUnary<ReluOp>},
      {ir::OpKind::kClip, DType::kF32, PrepareClip, EvalUnary<ClipOp>},
      {ir::OpKind::kSigmoid, DType::kF32, PrepareUnary, EvalUnary<SigmoidOp>},
      {ir::OpKind::kTanh, DType::kF32, PrepareUnary, EvalUnary<TanhOp>},
      {ir::OpKind::kGelu, DType::kF32, PrepareGelu, EvalGelu},
      {ir::OpKind::kSilu, DType::kF32, PrepareUnary, EvalUnary<SiluOp>},
      {ir::OpKind::kHardSigmoid, DType::kF32, PrepareUnary, EvalUnary<HardSigmoidOp>},
      {ir::OpKind::kHardSwish, DType::kF32, PrepareUnary, EvalUnary<HardSwishOp>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
