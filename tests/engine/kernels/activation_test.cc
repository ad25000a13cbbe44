// Activations: values from PyTorch 1.13 (torch.sigmoid, F.gelu, ...) on the
// same inputs, printed with 7 significant digits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using testing::Attrs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::F32;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::IsNan;
using ::testing::Pointwise;
using testing::SingleOpGraph;
using testing::Values;

const std::vector<float> kInput = {-3, -1, -0.5f, 0, 0.5f, 1, 2, 7};

// Runs `op` on kInput and returns the kernel's values, checking that the
// reference gives the same within 1e-6.
std::vector<float> Activate(ir::OpKind op, ir::Attributes attrs = {}) {
  SingleOpGraph g(op, {F32({8}, kInput)}, std::move(attrs));
  auto out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto ref = g.RunReference();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) {
    EXPECT_THAT(Values((*out)[0]), Pointwise(FloatNear(1e-6), Values((*ref)[0])));
  }
  return Values((*out)[0]);
}

auto Near(std::vector<float> expected) { return Pointwise(FloatNear(2e-6), std::move(expected)); }

TEST(ActivationKernelTest, ReluZeroesNegatives) {
  EXPECT_THAT(Activate(ir::OpKind::kRelu), ElementsAre(0, 0, 0, 0, 0.5f, 1, 2, 7));
}

TEST(ActivationKernelTest, ReluPropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SingleOpGraph g(ir::OpKind::kRelu, {F32({2}, {nan, -1})});
  auto out = g.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(Values((*out)[0]), ElementsAre(IsNan(), 0));
}

TEST(ActivationKernelTest, ClipIsRelu6) {
  EXPECT_THAT(Activate(ir::OpKind::kClip, Attrs().Float("min", 0).Float("max", 6)),
              ElementsAre(0, 0, 0, 0, 0.5f, 1, 2, 6));
}

TEST(ActivationKernelTest, ClipWithOnlyMinIsUnboundedAbove) {
  EXPECT_THAT(Activate(ir::OpKind::kClip, Attrs().Float("min", -0.75)),
              ElementsAre(-0.75f, -0.75f, -0.5f, 0, 0.5f, 1, 2, 7));
}

// Integer tensors keep their dtype with the bounds as libtorch's integer
// kernels see them: truncated (hardtanh(int64, -1.5, 1.7) clamps to [-1, 1])
// and wrapped (a uint8 clip's -1 is 255, so torch.clip(uint8, -1, 2) is all 2).
TEST(ActivationKernelTest, IntegerClipTruncatesAndWrapsItsBounds) {
  Tensor x = Tensor::Zeros(DType::kInt64, {4});
  const int64_t xs[] = {-3, 0, 1, 7};
  std::copy(xs, xs + 4, x.data<int64_t>());
  auto out = SingleOpGraph(ir::OpKind::kClip, {x},
                           Attrs().Float("min", -1.5).Float("max", 1.7).Bool("integer_bounds", true))
                 .Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_THAT(std::vector<int64_t>((*out)[0].data<int64_t>(), (*out)[0].data<int64_t>() + 4),
              ElementsAre(-1, 0, 1, 1));
  Tensor u = Tensor::Zeros(DType::kUInt8, {3});
  const uint8_t us[] = {0, 3, 200};
  std::copy(us, us + 3, u.data<uint8_t>());
  auto wrapped = SingleOpGraph(ir::OpKind::kClip, {u},
                               Attrs().Float("min", -1).Float("max", 2).Bool("integer_bounds", true))
                     .Run();
  ASSERT_TRUE(wrapped.ok()) << wrapped.status();
  const uint8_t* w = (*wrapped)[0].data<uint8_t>();
  EXPECT_THAT(std::vector<int>(w, w + 3), ElementsAre(2, 2, 2));
}

// clamp(bool, 0, 1) is INT64 in libtorch (bool and a Python int promote to int64).
TEST(ActivationKernelTest, BoolClipWithIntegerBoundsIsInt64) {
  Tensor b = Tensor::Zeros(DType::kBool, {2});
  b.data<bool>()[0] = true;
  auto out = SingleOpGraph(ir::OpKind::kClip, {b},
                           Attrs().Float("max", 0).Bool("integer_bounds", true))
                 .Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_THAT(std::vector<int64_t>((*out)[0].data<int64_t>(), (*out)[0].data<int64_t>() + 2),
              ElementsAre(0, 0));
}

// F.threshold(int64 [-2, 0, 1, 3], -0.5, 7) == [7, 7, 1, 3]: both numbers truncated.
TEST(ActivationKernelTest, IntegerThresholdTruncatesItsNumbers) {
  Tensor x = Tensor::Zeros(DType::kInt64, {4});
  const int64_t xs[] = {-2, 0, 1, 3};
  std::copy(xs, xs + 4, x.data<int64_t>());
  auto out = SingleOpGraph(ir::OpKind::kThreshold, {x},
                           Attrs().Float("threshold", -0.5).Float("value", 7))
                 .Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_THAT(std::vector<int64_t>((*out)[0].data<int64_t>(), (*out)[0].data<int64_t>() + 4),
              ElementsAre(7, 7, 1, 3));
}

TEST(ActivationKernelTest, SigmoidMatchesPyTorch) {
  EXPECT_THAT(Activate(ir::OpKind::kSigmoid), Near({0.04742587f, 0.2689414f, 0.3775407f, 0.5f,
                                                    0.6224594f, 0.7310586f, 0.880797f, 0.999089f}));
}

TEST(ActivationKernelTest, TanhMatchesPyTorch) {
  EXPECT_THAT(Activate(ir::OpKind::kTanh), Near({-0.9950548f, -0.7615942f, -0.4621172f, 0.0f,
                                                 0.4621172f, 0.7615942f, 0.9640276f, 0.9999983f}));
}

TEST(ActivationKernelTest, GeluErfMatchesPyTorch) {
  EXPECT_THAT(
      Activate(ir::OpKind::kGelu, Attrs().Str("approximate", "none")),
      Near({-0.004049867f, -0.1586553f, -0.1542688f, 0.0f, 0.3457312f, 0.8413447f, 1.9545f, 7.0f}));
}

TEST(ActivationKernelTest, GeluDefaultsToErf) {
  EXPECT_THAT(Activate(ir::OpKind::kGelu), Near({-0.004049867f, -0.1586553f, -0.1542688f, 0.0f,
                                                 0.3457312f, 0.8413447f, 1.9545f, 7.0f}));
}

TEST(ActivationKernelTest, GeluTanhMatchesPyTorch) {
  EXPECT_THAT(
      Activate(ir::OpKind::kGelu, Attrs().Str("approximate", "tanh")),
      Near({-0.003637433f, -0.158808f, -0.154286f, 0.0f, 0.345714f, 0.841192f, 1.954598f, 7.0f}));
}

TEST(ActivationKernelTest, SiluMatchesPyTorch) {
  EXPECT_THAT(Activate(ir::OpKind::kSilu), Near({-0.1422776f, -0.2689414f, -0.1887703f, 0.0f,
                                                 0.3112297f, 0.7310586f, 1.761594f, 6.993623f}));
}

TEST(ActivationKernelTest, HardSigmoidMatchesPyTorch) {
  EXPECT_THAT(Activate(ir::OpKind::kHardSigmoid),
              Near({0.0f, 0.3333333f, 0.4166667f, 0.5f, 0.5833333f, 0.6666667f, 0.8333333f, 1.0f}));
}

TEST(ActivationKernelTest, HardSwishMatchesPyTorch) {
  EXPECT_THAT(Activate(ir::OpKind::kHardSwish), Near({0.0f, -0.3333333f, -0.2083333f, 0.0f,
                                                      0.2916667f, 0.6666667f, 1.666667f, 7.0f}));
}

TEST(ActivationKernelTest, GeluRejectsUnknownApproximation) {
  SingleOpGraph g(ir::OpKind::kGelu, {F32({1}, {0})}, Attrs().Str("approximate", "fast"));
  absl::Status s = g.Prepare();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("approximate must be \"none\" or \"tanh\""));
}

TEST(ActivationKernelTest, KeepsShapeAndRunsInParallel) {
  std::mt19937 rng(3);
  Tensor x = testing::RandomF32({4, 64, 33, 17}, rng, -5, 5);
  SingleOpGraph g(ir::OpKind::kSilu, {x});
  auto one = g.Run(1);
  auto two = g.Run(2);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ((*two)[0].dims(), x.dims());
  EXPECT_THAT(Values((*two)[0]), ElementsAreArray(Values((*one)[0])));
}

// The float32 vector path (AVX-512 CPUs) against the double formula: wide
// ranges, denormals, +-inf and NaN, on a length that is not a multiple of 16,
// at 1 and 2 threads. Tolerance: 8 float ulps of the result; for Gelu, whose
// 1 + erf (1 + tanh) cancels for negative x in float32 as in PyTorch, also
// 4 ulps of 1 times |x|; results below 3e-37 may be 0 (past x = -88.7,
// exp(-x) overflows float32 and Silu's x / inf is 0, in the scalar formula too).
TEST(ActivationKernelTest, TranscendentalsMatchDoubleAcrossRanges) {
  std::vector<float> x;
  for (int i = 0; i < 20011; ++i) x.push_back(-100.0f + 200.0f * static_cast<float>(i) / 20011.0f);
  for (int i = 0; i < 4001; ++i) x.push_back(-8.0f + 16.0f * static_cast<float>(i) / 4001.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, -1e-38f, 1e-20f, 88.7f, 89.0f, -87.0f, -104.0f,
                  1e30f, -1e30f, inf, -inf, std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  ASSERT_NE(n % 16, 0);
  struct Case { ir::OpKind op; const char* approximate; double (*f)(double); bool cancels = false; };
  const Case cases[] = {
      {ir::OpKind::kSigmoid, nullptr, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {ir::OpKind::kSilu, nullptr, [](double v) { return v / (1.0 + std::exp(-v)); }},
      {ir::OpKind::kTanh, nullptr, [](double v) { return std::tanh(v); }},
      {ir::OpKind::kGelu, "none", [](double v) { return v * 0.5 * (1.0 + std::erf(v * M_SQRT1_2)); }, true},
      {ir::OpKind::kGelu, "tanh",
       [](double v) { return 0.5 * v * (1.0 + std::tanh(M_SQRT2 * M_2_SQRTPI * 0.5 * (v + 0.044715 * v * v * v))); }, true},
      {ir::OpKind::kMish, nullptr, [](double v) { return v * std::tanh(std::log1p(std::exp(v))); }},
      {ir::OpKind::kLogSigmoid, nullptr,
       [](double v) { return std::min(v, 0.0) - std::log1p(std::exp(-std::abs(v))); }},
      {ir::OpKind::kSoftplus, nullptr,
       [](double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }},
      {ir::OpKind::kElu, nullptr, [](double v) { return v <= 0.0 ? std::expm1(v) : v; }},
      // unary.cc's transcendentals, through the same vector math.
      {ir::OpKind::kExp, nullptr, [](double v) { return std::exp(v); }},
      {ir::OpKind::kExpm1, nullptr, [](double v) { return std::expm1(v); }},
      {ir::OpKind::kLog, nullptr, [](double v) { return std::log(v); }},
      {ir::OpKind::kLog1p, nullptr, [](double v) { return std::log1p(v); }},
      {ir::OpKind::kErf, nullptr, [](double v) { return std::erf(v); }},
  };
  for (const Case& c : cases) {
    ir::Attributes attrs;
    if (c.approximate) attrs.SetString("approximate", c.approximate);
    SingleOpGraph g(c.op, {F32({n}, x)}, attrs);
    for (int threads : {1, 2}) {
      auto out = g.Run(threads);
      ASSERT_TRUE(out.ok()) << out.status();
      const std::vector<float> y = Values((*out)[0]);
      for (int64_t i = 0; i < n; ++i) {
        const double want = c.f(static_cast<double>(x[i]));
        SCOPED_TRACE(::testing::Message() << ir::OpName(c.op) << " x=" << x[i] << " threads=" << threads);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(y[i])) << y[i];
        } else if (std::isinf(want) || std::isinf(static_cast<float>(want))) {
          EXPECT_EQ(y[i], static_cast<float>(want));
        } else {
          const double tol = std::max(8 * std::abs(want) * 0x1p-24,
                                      c.cancels ? 4 * std::abs(static_cast<double>(x[i])) * 0x1p-24 : 0.0);
          ASSERT_NEAR(y[i], want, std::max(tol, 3e-37)) << "i=" << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::kernels
