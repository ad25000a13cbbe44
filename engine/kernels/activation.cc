// Unary activations: Relu, Clip, Sigmoid, Tanh, Gelu (erf and tanh forms),
// Silu, HardSigmoid, HardSwish, LeakyRelu, Elu (also selu and celu), Mish,
// Softplus, LogSigmoid, HardShrink, SoftShrink, Threshold, and PRelu (with a
// per-channel weight). One shared Prepare (same dims out as in), one Eval
// template over a per-op functor; the formulas follow PyTorch's CPU kernels
// term by term so float32 results agree to rounding. The activations models
// use also run on FP64 (double functors) and on FP16/BF16 (widened to FP32,
// widen.cc). Relu, Clip (with integer bounds) and Threshold also keep integer
// tensors integer, their numbers converted as libtorch's integer kernels
// convert a Scalar (truncated, then wrapped into the type); Clip of a BOOL
// tensor with integer bounds is INT64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <string>

#include "engine/common/status_macros.h"
#include "engine/kernels/activation.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/vector_math.h"

namespace kiln::kernels {
namespace {

// Per-node constants read once in Prepare.
struct UnaryParams {
  float lo = -std::numeric_limits<float>::infinity();  // Clip
  float hi = std::numeric_limits<float>::infinity();   // Clip
  bool gelu_tanh = false;                              // Gelu approximate="tanh"
  // LeakyRelu (a = slope), Elu (a = alpha * scale, b = scale, c = input_scale),
  // Softplus (a = beta, b = threshold), shrinks (a = lambda), Threshold (a, b).
  float a = 0.0f, b = 0.0f, c = 0.0f;
  // The same parameters unrounded, for FP64 input.
  double lo_d = -std::numeric_limits<double>::infinity();
  double hi_d = std::numeric_limits<double>::infinity();
  double a_d = 0.0, b_d = 0.0, c_d = 0.0;
  // Clip of an integer tensor: the bounds truncated to int64 (absent: no bound);
  // Threshold of one: threshold and value the same way.
  bool has_lo = false, has_hi = false;
  int64_t lo_i = 0, hi_i = 0;
  int64_t a_i = 0, b_i = 0;

  // a, b, c in the element type T (float or double).
  template <typename T>
  T A() const { return std::is_same_v<T, double> ? a_d : a; }
  template <typename T>
  T B() const { return std::is_same_v<T, double> ? b_d : b; }
  template <typename T>
  T C() const { return std::is_same_v<T, double> ? c_d : c; }
};

absl::Status PrepareUnary(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  // FP32, or FP64 for the ops registered with it (the table's FP64 rows).
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  ctx.outputs = {TensorInfo{t, ctx.inputs[0].dims}};
  ctx.state = std::make_shared<UnaryParams>();
  return absl::OkStatus();
}

// Relu of an integer tensor (not BOOL: PyTorch refuses it).
absl::Status PrepareIntegerUnary(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const DType t = ctx.inputs[0].dtype;
  if (!IsIntegral(t)) {
    return Unimplemented(ctx.node, "expected an integer input, got ", DTypeName(t));
  }
  ctx.outputs = {TensorInfo{t, ctx.inputs[0].dims}};
  ctx.state = std::make_shared<UnaryParams>();
  return absl::OkStatus();
}

absl::Status PrepareClipParams(PrepareContext& ctx);

// A Scalar argument as libtorch converts it for an integer kernel: truncated
// toward zero (then wrapped into the element type by the functor).
int64_t TruncToInt64(double v) {
  constexpr double kLimit = 9.2e18;
  return static_cast<int64_t>(std::max(-kLimit, std::min(kLimit, v)));
}

absl::Status PrepareClip(PrepareContext& ctx) {
  RETURN_IF_ERROR(PrepareUnary(ctx));
  return PrepareClipParams(ctx);
}

// clamp of an integer tensor keeps it integer only with integer bounds; with a
// float bound PyTorch computes in float (the FP32 kernel, through widen.cc).
absl::Status PrepareIntegerClip(PrepareContext& ctx) {
  RETURN_IF_ERROR(PrepareIntegerUnary(ctx));
  if (!ctx.node.attrs.GetBool("integer_bounds")) {
    return Unimplemented(ctx.node, "float bounds on an integer tensor compute in float");
  }
  return PrepareClipParams(ctx);
}

// clamp of a bool tensor with integer bounds is INT64 (bool and a Python int
// promote to int64); with a float bound FP32 (through widen.cc).
absl::Status PrepareBoolClip(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kBool));
  if (!ctx.node.attrs.GetBool("integer_bounds")) {
    return Unimplemented(ctx.node, "float bounds on a bool tensor compute in float");
  }
  RETURN_IF_ERROR(PrepareClipParams(ctx));
  ctx.outputs = {TensorInfo{DType::kInt64, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

absl::Status PrepareClipParams(PrepareContext& ctx) {
  auto params = std::make_shared<UnaryParams>();
  // An absent bound is PyTorch's clamp(min=None) / clamp(max=None).
  const ir::Attributes& attrs = ctx.node.attrs;
  if (attrs.Has("min")) params->lo = static_cast<float>(params->lo_d = attrs.GetFloat("min"));
  if (attrs.Has("max")) params->hi = static_cast<float>(params->hi_d = attrs.GetFloat("max"));
  if (std::isnan(params->lo) || std::isnan(params->hi)) {
    return InvalidArg(ctx.node, "clip bounds must not be NaN");
  }
  // Integer bounds as libtorch converts a Scalar for an integer kernel:
  // truncated toward zero (hardtanh's -1.5 is -1), then to the element type
  // with wrapping (-1 is 255 for UINT8).
  params->has_lo = attrs.Has("min");
  params->has_hi = attrs.Has("max");
  params->lo_i = TruncToInt64(params->lo_d);
  params->hi_i = TruncToInt64(params->hi_d);
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

// Reads the attributes of the parameterised activations.
absl::Status ReadParams(PrepareContext& ctx) {
  auto params = std::make_shared<UnaryParams>();
  const ir::Attributes& attrs = ctx.node.attrs;
  switch (ctx.node.kind) {
    case ir::OpKind::kLeakyRelu:
      params->a = static_cast<float>(params->a_d = attrs.GetFloat("negative_slope", 0.01));
      break;
    case ir::OpKind::kElu: {
      const double alpha = attrs.GetFloat("alpha", 1.0);
      const double scale = attrs.GetFloat("scale", 1.0);
      params->a_d = alpha * scale;
      params->b_d = scale;
      params->c_d = attrs.GetFloat("input_scale", 1.0);
      break;
    }
    case ir::OpKind::kSoftplus:
      params->a_d = attrs.GetFloat("beta", 1.0);
      params->b_d = attrs.GetFloat("threshold", 20.0);
      break;
    case ir::OpKind::kHardShrink:
    case ir::OpKind::kSoftShrink:
      params->a_d = attrs.GetFloat("lambd", 0.5);
      break;
    case ir::OpKind::kThreshold:
      params->a_d = attrs.GetFloat("threshold", 0.0);
      params->b_d = attrs.GetFloat("value", 0.0);
      break;
    default:
      break;
  }
  if (ctx.node.kind != ir::OpKind::kLeakyRelu) {
    params->a = static_cast<float>(params->a_d);
    params->b = static_cast<float>(params->b_d);
    params->c = static_cast<float>(params->c_d);
  }
  params->a_i = TruncToInt64(params->a_d);
  params->b_i = TruncToInt64(params->b_d);
  ctx.state = std::move(params);
  return absl::OkStatus();
}

absl::Status PrepareParams(PrepareContext& ctx) {
  RETURN_IF_ERROR(PrepareUnary(ctx));
  return ReadParams(ctx);
}

// Threshold of an integer tensor (its dtype kept, as in libtorch).
absl::Status PrepareIntegerParams(PrepareContext& ctx) {
  RETURN_IF_ERROR(PrepareIntegerUnary(ctx));
  return ReadParams(ctx);
}

// Each functor: Apply(x, params) and a rough cost per element (in simple float
// operations) used for the parallel threshold.
struct ReluOp {
  static constexpr int kCost = 1;
  // std::max(x, 0) returns x for NaN, as PyTorch's relu (clamp_min) does.
  static float Apply(float x, const UnaryParams&) { return std::max(x, 0.0f); }
  static double Apply(double x, const UnaryParams&) { return std::max(x, 0.0); }
  // Integer tensors stay integers (PyTorch's relu is clamp_min, defined on them).
  template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  static T Apply(T x, const UnaryParams&) {
    return x < T(0) ? T(0) : x;
  }
};
struct ClipOp {
  static constexpr int kCost = 1;
  // min(max(x, lo), hi): PyTorch's clamp, NaN propagating, hi wins if lo > hi.
  static float Apply(float x, const UnaryParams& p) { return std::min(std::max(x, p.lo), p.hi); }
  static double Apply(double x, const UnaryParams& p) {
    return std::min(std::max(x, p.lo_d), p.hi_d);
  }
  // Integer tensors with integer bounds (clamp(ids, 0, n - 1)): the bounds in
  // T as libtorch's integer kernel sees them, wrapped (clamp(uint8, -1, 2) has
  // a lower bound of 255, so every element becomes 2).
  template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  static T Apply(T x, const UnaryParams& p) {
    T y = x;
    if (p.has_lo) y = std::max(y, static_cast<T>(p.lo_i));
    if (p.has_hi) y = std::min(y, static_cast<T>(p.hi_i));
    return y;
  }
};
struct SigmoidOp {
  static constexpr int kCost = 20;
  // float32 over a contiguous array, where HasVectorMath() (vector_math.h).
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams&) {
    VectorSigmoid(x, y, n);
  }
  static float Apply(float x, const UnaryParams&) { return 1.0f / (1.0f + std::exp(-x)); }
  static double Apply(double x, const UnaryParams&) { return 1.0 / (1.0 + std::exp(-x)); }
};
struct TanhOp {
  static constexpr int kCost = 20;
  // float32 over a contiguous array, where HasVectorMath() (vector_math.h).
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams&) {
    VectorTanh(x, y, n);
  }
  static float Apply(float x, const UnaryParams&) { return std::tanh(x); }
  static double Apply(double x, const UnaryParams&) { return std::tanh(x); }
};
struct GeluErfOp {
  static constexpr int kCost = 20;
  // float32 over a contiguous array, where HasVectorMath() (vector_math.h).
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams&) {
    VectorGeluErf(x, y, n);
  }
  static float Apply(float x, const UnaryParams&) {
    constexpr float kAlpha = static_cast<float>(M_SQRT1_2);
    return x * 0.5f * (1.0f + std::erf(x * kAlpha));
  }
  static double Apply(double x, const UnaryParams&) { return x * 0.5 * (1.0 + std::erf(x * M_SQRT1_2)); }
};
struct GeluTanhOp {
  static constexpr int kCost = 20;
  // float32 over a contiguous array, where HasVectorMath() (vector_math.h).
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams&) {
    VectorGeluTanh(x, y, n);
  }
  static float Apply(float x, const UnaryParams&) {
    constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2/pi)
    constexpr float kKappa = 0.044715f;
    const float inner = kBeta * (x + kKappa * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(inner));
  }
  static double Apply(double x, const UnaryParams&) {
    const double inner = M_SQRT2 * M_2_SQRTPI * 0.5 * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + std::tanh(inner));
  }
};
struct SiluOp {
  static constexpr int kCost = 20;
  // float32 over a contiguous array, where HasVectorMath() (vector_math.h).
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams&) {
    VectorSilu(x, y, n);
  }
  static float Apply(float x, const UnaryParams&) { return x / (1.0f + std::exp(-x)); }
  static double Apply(double x, const UnaryParams&) { return x / (1.0 + std::exp(-x)); }
};
struct HardSigmoidOp {
  static constexpr int kCost = 2;
  template <typename T>
  static T Apply(T x, const UnaryParams&) {
    return std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
  }
};
struct HardSwishOp {
  static constexpr int kCost = 3;
  template <typename T>
  static T Apply(T x, const UnaryParams&) {
    return x * std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
  }
};

struct LeakyReluOp {
  static constexpr int kCost = 1;
  static float Apply(float x, const UnaryParams& p) { return x > 0.0f ? x : x * p.a; }
  static double Apply(double x, const UnaryParams& p) { return x > 0.0 ? x : x * p.a_d; }
};
struct EluOp {
  static constexpr int kCost = 20;
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams& p) {
    VectorElu(x, y, n, p.a, p.b, p.c);
  }
  template <typename T>
  static T Apply(T x, const UnaryParams& p) {
    return x <= T(0) ? std::expm1(x * p.C<T>()) * p.A<T>() : x * p.B<T>();
  }
};
struct MishOp {
  static constexpr int kCost = 40;
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams&) { VectorMish(x, y, n); }
  template <typename T>
  static T Apply(T x, const UnaryParams&) { return x * std::tanh(std::log1p(std::exp(x))); }
};
struct SoftplusOp {
  static constexpr int kCost = 40;
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams& p) {
    VectorSoftplus(x, y, n, p.a, p.b);
  }
  template <typename T>
  static T Apply(T x, const UnaryParams& p) {
    return x * p.A<T>() > p.B<T>() ? x : std::log1p(std::exp(x * p.A<T>())) / p.A<T>();
  }
};
struct LogSigmoidOp {
  static constexpr int kCost = 40;
  static void Vector(const float* x, float* y, int64_t n, const UnaryParams&) { VectorLogSigmoid(x, y, n); }
  // min(x, 0) - log1p(exp(-|x|)): no overflow for large |x|.
  template <typename T>
  static T Apply(T x, const UnaryParams&) {
    return std::min(x, T(0)) - std::log1p(std::exp(-std::abs(x)));
  }
};
struct HardShrinkOp {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T x, const UnaryParams& p) {
    return (x >= -p.A<T>() && x <= p.A<T>()) ? T(0) : x;
  }
};
struct SoftShrinkOp {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T x, const UnaryParams& p) {
    return x > p.A<T>() ? x - p.A<T>() : (x < -p.A<T>() ? x + p.A<T>() : T(0));
  }
};
struct ThresholdOp {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T x, const UnaryParams& p) {
    if constexpr (std::is_integral_v<T>) {
      // libtorch's integer threshold: both numbers truncated, then in T.
      return x <= static_cast<T>(p.a_i) ? static_cast<T>(p.b_i) : x;
    } else {
      return x <= p.A<T>() ? p.B<T>() : x;
    }
  }
};

// Whether Op has a float32 vector form (Op::Vector).
template <typename Op, typename = void>
struct HasVector : std::false_type {};
template <typename Op>
struct HasVector<Op, std::void_t<decltype(&Op::Vector)>> : std::true_type {};

template <typename Op, typename T = float>
absl::Status EvalUnary(EvalContext& ctx) {
  const UnaryParams& params = StateAs<UnaryParams>(ctx);
  const T* in = ctx.inputs[0]->data<T>();
  T* out = ctx.outputs[0]->data<T>();
  const int64_t n = ctx.outputs[0]->num_elements();
  if constexpr (std::is_same_v<T, float> && HasVector<Op>::value) {
    if (HasVectorMath()) {
      ParallelFor(n, ctx.num_threads, n * Op::kCost, [&](int64_t begin, int64_t end) {
        Op::Vector(in + begin, out + begin, end - begin, params);
      });
      return absl::OkStatus();
    }
  }
  ParallelFor(n, ctx.num_threads, n * Op::kCost, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = Op::Apply(in[i], params);
  });
  return absl::OkStatus();
}

// Clip of a bool tensor with integer bounds: 0/1 clamped in INT64.
absl::Status EvalBoolClip(EvalContext& ctx) {
  const UnaryParams& params = StateAs<UnaryParams>(ctx);
  const bool* in = ctx.inputs[0]->data<bool>();
  int64_t* out = ctx.outputs[0]->data<int64_t>();
  const int64_t n = ctx.outputs[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = ClipOp::Apply<int64_t>(in[i] ? 1 : 0, params);
  return absl::OkStatus();
}

template <typename T = float>
absl::Status EvalGelu(EvalContext& ctx) {
  return StateAs<UnaryParams>(ctx).gelu_tanh ? EvalUnary<GeluTanhOp, T>(ctx)
                                             : EvalUnary<GeluErfOp, T>(ctx);
}

// ---------------------------------------------------------------- PRelu

// x > 0 ? x : w * x with w one value, or one per channel (dim 1; dim 0 of a 1-D input).
struct PReluPlan {
  int64_t outer = 1, channels = 1, inner = 1;
};

absl::Status PreparePRelu(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  const DType t = ctx.inputs[0].dtype;  // FP32, or FP64 (its own table row)
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  RETURN_IF_ERROR(CheckDType(ctx, 1, t));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t w = NumElements(ctx.inputs[1].dims);
  auto plan = std::make_shared<PReluPlan>();
  plan->inner = NumElements(x);
  if (w != 1) {
    const size_t cdim = x.size() >= 2 ? 1 : 0;
    if (x.empty() || x[cdim] != w) {
      return InvalidArg(ctx.node, "weight has ", w, " values, expected 1 or the ",
                        x.empty() ? 0 : x[cdim], " channels of input ", DimsToString(x));
    }
    plan->outer = NumElements(Dims(x.begin(), x.begin() + cdim));
    plan->channels = w;
    plan->inner = NumElements(Dims(x.begin() + cdim + 1, x.end()));
  }
  ctx.outputs = {TensorInfo{t, x}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

template <typename T>
absl::Status EvalPRelu(EvalContext& ctx) {
  const PReluPlan& p = StateAs<PReluPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  const T* w = ctx.inputs[1]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  const int64_t planes = p.outer * p.channels;
  ParallelFor(planes, ctx.num_threads, planes * p.inner, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const T a = w[q % p.channels];
      const T* src = x + q * p.inner;
      T* dst = y + q * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) dst[i] = src[i] > T(0) ? src[i] : a * src[i];
    }
  });
  return absl::OkStatus();
}

}  // namespace

std::string_view ActivationAttrFor(const ir::Node& node) {
  switch (node.kind) {
    case ir::OpKind::kGelu:
      return node.attrs.GetString("approximate", "none") == "tanh" ? "gelu_tanh" : "gelu";
    case ir::OpKind::kSilu: return "silu";
    case ir::OpKind::kSigmoid: return "sigmoid";
    case ir::OpKind::kTanh: return "tanh";
    case ir::OpKind::kHardSwish: return "hardswish";
    default: return {};
  }
}

absl::StatusOr<Activation> ActivationFromAttrs(const ir::Node& node) {
  if (!node.attrs.Has("post_act")) return Activation::kNone;
  const std::string name = node.attrs.GetString("post_act");
  if (name == "gelu") return Activation::kGeluErf;
  if (name == "gelu_tanh") return Activation::kGeluTanh;
  if (name == "silu") return Activation::kSilu;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "tanh") return Activation::kTanh;
  if (name == "hardswish") return Activation::kHardSwish;
  return InvalidArg(node, "unknown post_act '", name, "'");
}

namespace {
template <typename Op, typename T>
void ApplyOp(T* y, int64_t n) {
  const UnaryParams params;
  if constexpr (std::is_same_v<T, float> && HasVector<Op>::value) {
    if (HasVectorMath()) return Op::Vector(y, y, n, params);
  }
  for (int64_t i = 0; i < n; ++i) y[i] = Op::Apply(y[i], params);
}
}  // namespace

template <typename T>
void ApplyActivation(Activation act, T* y, int64_t n) {
  switch (act) {
    case Activation::kNone: return;
    case Activation::kGeluErf: return ApplyOp<GeluErfOp>(y, n);
    case Activation::kGeluTanh: return ApplyOp<GeluTanhOp>(y, n);
    case Activation::kSilu: return ApplyOp<SiluOp>(y, n);
    case Activation::kSigmoid: return ApplyOp<SigmoidOp>(y, n);
    case Activation::kTanh: return ApplyOp<TanhOp>(y, n);
    case Activation::kHardSwish: return ApplyOp<HardSwishOp>(y, n);
  }
}
template void ApplyActivation<float>(Activation, float*, int64_t);
template void ApplyActivation<double>(Activation, double*, int64_t);

absl::Span<const KernelDef> ActivationKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kRelu, DType::kF32, PrepareUnary, EvalUnary<ReluOp>},
      {ir::OpKind::kRelu, DType::kInt64, PrepareIntegerUnary, EvalUnary<ReluOp, int64_t>},
      {ir::OpKind::kRelu, DType::kInt32, PrepareIntegerUnary, EvalUnary<ReluOp, int32_t>},
      {ir::OpKind::kRelu, DType::kInt16, PrepareIntegerUnary, EvalUnary<ReluOp, int16_t>},
      {ir::OpKind::kRelu, DType::kInt8, PrepareIntegerUnary, EvalUnary<ReluOp, int8_t>},
      {ir::OpKind::kRelu, DType::kUInt8, PrepareIntegerUnary, EvalUnary<ReluOp, uint8_t>},
      {ir::OpKind::kClip, DType::kF32, PrepareClip, EvalUnary<ClipOp>},
      {ir::OpKind::kClip, DType::kInt64, PrepareIntegerClip, EvalUnary<ClipOp, int64_t>},
      {ir::OpKind::kClip, DType::kInt32, PrepareIntegerClip, EvalUnary<ClipOp, int32_t>},
      {ir::OpKind::kClip, DType::kInt16, PrepareIntegerClip, EvalUnary<ClipOp, int16_t>},
      {ir::OpKind::kClip, DType::kInt8, PrepareIntegerClip, EvalUnary<ClipOp, int8_t>},
      {ir::OpKind::kClip, DType::kUInt8, PrepareIntegerClip, EvalUnary<ClipOp, uint8_t>},
      {ir::OpKind::kClip, DType::kBool, PrepareBoolClip, EvalBoolClip},
      {ir::OpKind::kThreshold, DType::kInt64, PrepareIntegerParams, EvalUnary<ThresholdOp, int64_t>},
      {ir::OpKind::kThreshold, DType::kInt32, PrepareIntegerParams, EvalUnary<ThresholdOp, int32_t>},
      {ir::OpKind::kThreshold, DType::kInt16, PrepareIntegerParams, EvalUnary<ThresholdOp, int16_t>},
      {ir::OpKind::kThreshold, DType::kInt8, PrepareIntegerParams, EvalUnary<ThresholdOp, int8_t>},
      {ir::OpKind::kThreshold, DType::kUInt8, PrepareIntegerParams, EvalUnary<ThresholdOp, uint8_t>},
      {ir::OpKind::kSigmoid, DType::kF32, PrepareUnary, EvalUnary<SigmoidOp>},
      {ir::OpKind::kTanh, DType::kF32, PrepareUnary, EvalUnary<TanhOp>},
      {ir::OpKind::kGelu, DType::kF32, PrepareGelu, EvalGelu<>},
      {ir::OpKind::kSilu, DType::kF32, PrepareUnary, EvalUnary<SiluOp>},
      {ir::OpKind::kHardSigmoid, DType::kF32, PrepareUnary, EvalUnary<HardSigmoidOp>},
      {ir::OpKind::kHardSwish, DType::kF32, PrepareUnary, EvalUnary<HardSwishOp>},
      {ir::OpKind::kLeakyRelu, DType::kF32, PrepareParams, EvalUnary<LeakyReluOp>},
      {ir::OpKind::kElu, DType::kF32, PrepareParams, EvalUnary<EluOp>},
      {ir::OpKind::kMish, DType::kF32, PrepareUnary, EvalUnary<MishOp>},
      {ir::OpKind::kSoftplus, DType::kF32, PrepareParams, EvalUnary<SoftplusOp>},
      {ir::OpKind::kLogSigmoid, DType::kF32, PrepareUnary, EvalUnary<LogSigmoidOp>},
      {ir::OpKind::kHardShrink, DType::kF32, PrepareParams, EvalUnary<HardShrinkOp>},
      {ir::OpKind::kSoftShrink, DType::kF32, PrepareParams, EvalUnary<SoftShrinkOp>},
      {ir::OpKind::kThreshold, DType::kF32, PrepareParams, EvalUnary<ThresholdOp>},
      {ir::OpKind::kPRelu, DType::kF32, PreparePRelu, EvalPRelu<float>},
      // FP64: every activation, computed in double like PyTorch.
      {ir::OpKind::kRelu, DType::kF64, PrepareUnary, EvalUnary<ReluOp, double>},
      {ir::OpKind::kClip, DType::kF64, PrepareClip, EvalUnary<ClipOp, double>},
      {ir::OpKind::kSigmoid, DType::kF64, PrepareUnary, EvalUnary<SigmoidOp, double>},
      {ir::OpKind::kTanh, DType::kF64, PrepareUnary, EvalUnary<TanhOp, double>},
      {ir::OpKind::kGelu, DType::kF64, PrepareGelu, EvalGelu<double>},
      {ir::OpKind::kSilu, DType::kF64, PrepareUnary, EvalUnary<SiluOp, double>},
      {ir::OpKind::kLeakyRelu, DType::kF64, PrepareParams, EvalUnary<LeakyReluOp, double>},
      {ir::OpKind::kHardSigmoid, DType::kF64, PrepareUnary, EvalUnary<HardSigmoidOp, double>},
      {ir::OpKind::kHardSwish, DType::kF64, PrepareUnary, EvalUnary<HardSwishOp, double>},
      {ir::OpKind::kElu, DType::kF64, PrepareParams, EvalUnary<EluOp, double>},
      {ir::OpKind::kMish, DType::kF64, PrepareUnary, EvalUnary<MishOp, double>},
      {ir::OpKind::kSoftplus, DType::kF64, PrepareParams, EvalUnary<SoftplusOp, double>},
      {ir::OpKind::kLogSigmoid, DType::kF64, PrepareUnary, EvalUnary<LogSigmoidOp, double>},
      {ir::OpKind::kHardShrink, DType::kF64, PrepareParams, EvalUnary<HardShrinkOp, double>},
      {ir::OpKind::kSoftShrink, DType::kF64, PrepareParams, EvalUnary<SoftShrinkOp, double>},
      {ir::OpKind::kThreshold, DType::kF64, PrepareParams, EvalUnary<ThresholdOp, double>},
      {ir::OpKind::kPRelu, DType::kF64, PreparePRelu, EvalPRelu<double>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
