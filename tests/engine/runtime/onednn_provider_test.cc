// The oneDNN provider's Softmax, LogSoftmax, LayerNorm and batched MatMul
// give Kiln's own kernels' numbers (within float rounding), on every axis,
// affine form and batch broadcast; at Precision::kBf16 its convolutions and
// linear layers stay within bfloat16's rounding of them. A PrimitiveCall
// reads the bytes each call gives it, also from concurrent callers.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "engine/kernels/bf16_rate.h"
#include "engine/kernels/onednn/onednn.h"
#include "engine/runtime/executable.h"
#include "tests/engine/runtime/graph_test_util.h"

namespace kiln::runtime {
namespace {

using ir::OpKind;
using ir::ValueId;
using testing::Random;

// Runs `g` on `x` with and without the providers (at `fast`'s options);
// returns max |a - b|.
double ProviderDiff(const ir::Graph& g, const Tensor& x, const Tensor* y = nullptr,
                    CompileOptions fast = {}) {
  CompileOptions native;
  native.use_providers = false;
  std::vector<kernels::TensorInfo> infos = {{DType::kF32, x.dims()}};
  std::vector<Tensor> inputs = {x};
  if (y != nullptr) {
    infos.push_back({DType::kF32, y->dims()});
    inputs.push_back(*y);
  }
  auto a = Executable::Compile(g, infos, fast);
  auto b = Executable::Compile(g, infos, native);
  EXPECT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(b.ok()) << b.status();
  if (!a.ok() || !b.ok()) return 1e30;
  auto ra = (*a)->Run(inputs);
  auto rb = (*b)->Run(inputs);
  EXPECT_TRUE(ra.ok() && rb.ok());
  if (!ra.ok() || !rb.ok()) return 1e30;
  EXPECT_EQ((*ra)[0].dims(), (*rb)[0].dims());
  double d = 0;
  for (int64_t i = 0; i < (*rb)[0].num_elements(); ++i) {
    d = std::max(d, std::fabs(double((*ra)[0].data<float>()[i]) - (*rb)[0].data<float>()[i]));
  }
  return d;
}

TEST(OneDnnProviderTest, SoftmaxAndLogSoftmaxOnEveryAxis) {
  std::mt19937 rng(2);
  const Tensor x = Random({2, 3, 5, 7}, rng, -6, 6);
  for (OpKind kind : {OpKind::kSoftmax, OpKind::kLogSoftmax}) {
    for (int64_t axis : {-1, 0, 1, 2}) {
      ir::Graph g;
      ValueId in = g.AddInput("x", ir::TensorType{DType::kF32, x.dims()});
      ir::Attributes a;
      a.SetInt("axis", axis);
      g.AddOutput(g.node(g.AddNode(kind, {in}, a)).outputs[0], "y");
      // Log-softmax values reach -12 here: 1e-5 is a few ulp of them.
      EXPECT_LE(ProviderDiff(g, x), 1e-5) << ir::OpName(kind) << " axis " << axis;
    }
  }
}

TEST(OneDnnProviderTest, LayerNormWithAndWithoutAffine) {
  std::mt19937 rng(4);
  const Tensor x = Random({3, 4, 16}, rng, -3, 5);
  for (int affine = 0; affine < 4; ++affine) {
    ir::Graph g;
    ValueId in = g.AddInput("x", ir::TensorType{DType::kF32, x.dims()});
    ValueId w = (affine & 1) ? g.AddConstant(Random({16}, rng, 0.5, 2)) : ir::kNoValue;
    ValueId b = (affine & 2) ? g.AddConstant(Random({16}, rng, -1, 1)) : ir::kNoValue;
    ir::Attributes a;
    a.SetInts("normalized_shape", {16});
    a.SetFloat("eps", 1e-5);
    g.AddOutput(g.node(g.AddNode(OpKind::kLayerNorm, {in, w, b}, a)).outputs[0], "y");
    EXPECT_LE(ProviderDiff(g, x), 1e-5) << "affine " << affine;
  }
}

TEST(OneDnnProviderTest, BatchedMatMulWithBroadcastBatchDims) {
  std::mt19937 rng(6);
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{12, 16, 8}, {12, 8, 16}},          // attention scores, rank 3
      {{2, 4, 16, 8}, {2, 4, 8, 5}},       // rank 4
      {{2, 4, 16, 8}, {1, 4, 8, 5}},       // a batch dim broadcast
      {{3, 1, 6, 7}, {1, 5, 7, 4}}};       // both broadcast
  for (const auto& [da, db] : cases) {
    const Tensor a = Random(da, rng, -1, 1), b = Random(db, rng, -1, 1);
    ir::Graph g;
    ValueId x = g.AddInput("a", ir::TensorType{DType::kF32, da});
    ValueId y = g.AddInput("b", ir::TensorType{DType::kF32, db});
    g.AddOutput(g.node(g.AddNode(OpKind::kMatMul, {x, y})).outputs[0], "c");
    EXPECT_LE(ProviderDiff(g, a, &b), 1e-5) << DimsToString(da) << " x " << DimsToString(db);
  }
}

}  // namespace
}  // namespace kiln::runtime

namespace kiln::runtime {
namespace {

double MaxAbs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) m = std::max(m, double(std::fabs(t.data<float>()[i])));
  return m;
}

// A convolution (NCHW input, then NHWC), a second one with a fused residual
// add, a flatten and a linear layer with bias: at Precision::kBf16 the plan
// differs from the float32 one by bfloat16's rounding (so bfloat16 did run)
// and by no more than it.
TEST(OneDnnProviderTest, Bf16PrecisionStaysWithinBfloat16Rounding) {
  std::mt19937 rng(8);
  const Tensor x = Random({2, 8, 12, 12}, rng, -1, 1);
  ir::Graph g;
  ValueId in = g.AddInput("x", ir::TensorType{DType::kF32, x.dims()});
  auto conv = [&](ValueId v, int64_t c, int64_t o) {
    ir::Attributes a;
    a.SetInts("stride", {1, 1});
    a.SetInts("padding", {1, 1});
    a.SetInts("dilation", {1, 1});
    a.SetInt("groups", 1);
    ValueId w = g.AddConstant(Random({o, c, 3, 3}, rng, -0.3, 0.3));
    ValueId b = g.AddConstant(Random({o}, rng, -0.5, 0.5));
    return g.node(g.AddNode(OpKind::kConv, {v, w, b}, a, "aten::_convolution")).outputs[0];
  };
  ValueId y = conv(in, 8, 16);
  ValueId z = conv(y, 16, 16);
  z = g.node(g.AddNode(OpKind::kAdd, {z, y}, {}, "aten::add")).outputs[0];
  ir::Attributes flat;
  flat.SetInt("start_dim", 1);
  flat.SetInt("end_dim", -1);
  z = g.node(g.AddNode(OpKind::kFlatten, {z}, flat, "aten::flatten")).outputs[0];
  ValueId w = g.AddConstant(Random({10, 16 * 12 * 12}, rng, -0.05, 0.05));
  ValueId b = g.AddConstant(Random({10}, rng, -0.5, 0.5));
  g.AddOutput(g.node(g.AddNode(OpKind::kLinear, {z, w, b}, {}, "aten::linear")).outputs[0], "y");

  CompileOptions native;
  native.use_providers = false;
  auto plain = Executable::Compile(g, {{DType::kF32, x.dims()}}, native);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto ref = (*plain)->Run({x});
  ASSERT_TRUE(ref.ok()) << ref.status();
  const double scale = MaxAbs((*ref)[0]);
  ASSERT_GT(scale, 0.1);

  CompileOptions fp32, bf16;
  bf16.precision = Precision::kBf16;
  EXPECT_LE(ProviderDiff(g, x, nullptr, fp32), 1e-5 * scale);
  const double d = ProviderDiff(g, x, nullptr, bf16);
  EXPECT_GT(d, 1e-5 * scale) << "no bfloat16 rounding: the float32 kernels ran";
  EXPECT_LE(d, 2e-2 * scale);
}

// Plans of one model for other batch sizes reorder a Linear's weights once:
// the same constant into the same format is one copy while a plan holds it;
// another format is another copy; the values are the reordered weights.
TEST(OneDnnProviderTest, PrepackedWeightsAreSharedBetweenPlans) {
  using dnnl::memory;
  const int64_t n = 64, k = 32;
  std::vector<float> w(n * k);  // PyTorch's [N, K]
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  const memory::desc given({k, n}, memory::data_type::f32, memory::format_tag::ba);
  const memory::desc ab({k, n}, memory::data_type::f32, memory::format_tag::ab);
  auto a = kernels::onednn::PrepackedWeights(w.data(), given, ab);
  auto b = kernels::onednn::PrepackedWeights(w.data(), given, ab);
  auto c = kernels::onednn::PrepackedWeights(w.data(), given, given);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  const float* packed = static_cast<const float*>(a->get_data_handle());
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t nn = 0; nn < n; ++nn) ASSERT_EQ(packed[kk * n + nn], w[nn * k + kk]);
  }
  std::vector<float> other(w);  // other bytes: a copy of their own
  EXPECT_NE(kernels::onednn::PrepackedWeights(other.data(), given, ab).get(), a.get());
}

// A call's memory objects outlive it: each call must read and write the
// bytes it is given (not the previous call's), a fixed argument stays set,
// concurrent callers each get memory objects of their own, and a call with
// the wrong number of arguments is an error, not a read of a stale handle.
TEST(OneDnnProviderTest, PrimitiveCallReadsTheBytesOfEachCallAlsoConcurrently) {
  using dnnl::memory;
  using kernels::onednn::PrimitiveCall;
  const int64_t m = 3, k = 4, n = 5;
  const memory::desc a_desc({m, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc b_desc({k, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc c_desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
  std::vector<float> b(k * n);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) - 3.0f;
  // As every kernel of the provider: the scratchpad is the caller's (oneDNN's
  // own is not safe to share between concurrent calls of one primitive).
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc), attr,
                                        kernels::onednn::Engine());
  const PrimitiveCall matmul(dnnl::matmul(pd), {{DNNL_ARG_SRC, a_desc},
                                                {DNNL_ARG_DST, c_desc},
                                                {DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc()},
                                                {DNNL_ARG_WEIGHTS, b_desc, b.data()}});
  // a = seed + i; c = a b, checked against a plain loop.
  auto check = [&](float seed) {
    std::vector<float> a(m * k), c(m * n, -1.0f);
    std::vector<char> scratch(pd.scratchpad_desc().get_size() + 1);
    for (size_t i = 0; i < a.size(); ++i) a[i] = seed + static_cast<float>(i);
    matmul.Execute(kernels::onednn::Stream(), {a.data(), c.data(), scratch.data()});
    kernels::onednn::Stream().wait();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float want = 0;
        for (int64_t p = 0; p < k; ++p) want += a[i * k + p] * b[p * n + j];
        if (c[i * n + j] != want) return false;
      }
    }
    return true;
  };
  EXPECT_TRUE(check(0.0f));
  EXPECT_TRUE(check(100.0f));  // other buffers, other numbers
  int seq_wrong = 0;
  for (int i = 0; i < 200; ++i) seq_wrong += !check(static_cast<float>(i));
  EXPECT_EQ(seq_wrong, 0);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) wrong += !check(static_cast<float>(t * 1000 + i));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  std::vector<float> a(m * k), c(m * n);
  EXPECT_THROW(matmul.Execute(kernels::onednn::Stream(), {a.data(), c.data()}), dnnl::error);
  EXPECT_THROW(
      matmul.Execute(kernels::onednn::Stream(), {a.data(), c.data(), c.data(), c.data()}),
      dnnl::error);
  EXPECT_THROW(PrimitiveCall().Execute(kernels::onednn::Stream(), {}), dnnl::error);
}

// The bfloat16 GEMM rate that decides a "bf16" model's precision (the
// registry): measured once per process, both rates or the reason there are none.
TEST(OneDnnProviderTest, Bf16RateIsMeasuredOnceAgainstFloat32) {
  const kernels::Bf16Rate& rate = kernels::MeasuredBf16Rate(2);
  if (rate.error.empty()) {
    EXPECT_GT(rate.f32_gflops, 1.0);
    EXPECT_GT(rate.bf16_gflops, 1.0);
    EXPECT_DOUBLE_EQ(rate.speedup(), rate.bf16_gflops / rate.f32_gflops);
  } else {
    EXPECT_EQ(rate.speedup(), 0.0);  // never "faster" when not measured
  }
  EXPECT_EQ(&kernels::MeasuredBf16Rate(1), &rate);  // not measured again
}

}  // namespace
}  // namespace kiln::runtime
