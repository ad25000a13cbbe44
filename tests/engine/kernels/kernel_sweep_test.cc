// Sweep: every float32 kernel in AllKernels() (and the dtype-agnostic shape
// kernels, fed float32) against kernels/reference/ on random shapes and
// attributes, on 1 and 2 threads (in the spirit of ggml's test-backend-ops).
// Each op kind has a small case generator below; a kernel with no generator
// fails the sweep, so a new op cannot slip in untested.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/kernels/kernel.h"
#include "tests/engine/kernels/single_op_graph.h"
#include "tests/engine/kernels/sweep_case.h"

namespace kiln::kernels {
namespace {

using testing::Absent;
using testing::RandomF32;
using testing::SingleOpGraph;

constexpr int kCasesPerKernel = 48;
constexpr double kRelTol = 1e-4;

using Case = testing::SweepCase;

using Rng = std::mt19937;

int64_t Uniform(Rng& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool Coin(Rng& rng, double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

Dims RandomDims(Rng& rng, int64_t min_rank, int64_t max_rank, int64_t max_dim) {
  Dims d(Uniform(rng, min_rank, max_rank));
  for (int64_t& x : d) x = Uniform(rng, 1, max_dim);
  return d;
}

// Every 6th case is "big": enough work to take the kernels' parallel paths.
bool Big(int i) { return i % 6 == 5; }

// ---------------------------------------------------------------- generators

Case Binary(ir::OpKind op, Rng& rng, int i) {
  Dims out = Big(i) ? Dims{2, Uniform(rng, 8, 24), Uniform(rng, 20, 40), Uniform(rng, 20, 40)}
                    : RandomDims(rng, 0, 5, 5);
  auto operand = [&] {
    // Drop some leading dims and set some dims to 1, so it broadcasts.
    Dims d(out.begin() + Uniform(rng, 0, static_cast<int64_t>(out.size())), out.end());
    for (int64_t& x : d) {
      if (Coin(rng, 0.3)) x = 1;
    }
    return d;
  };
  Dims a = operand(), b = operand();
  if (Coin(rng)) a = out;  // at least one full-size operand, usually
  Tensor tb = op == ir::OpKind::kDiv ? RandomF32(b, rng, 0.5f, 2.0f) : RandomF32(b, rng);
  if (op == ir::OpKind::kDiv) {
    for (int64_t k = 0; k < tb.num_elements(); ++k) {
      if (Coin(rng)) tb.data<float>()[k] = -tb.data<float>()[k];  // keep |b| >= 0.5
    }
  }
  return {{RandomF32(a, rng), tb}, {}, {}};
}

Case Unary(ir::OpKind op, Rng& rng, int i) {
  Dims d = Big(i) ? Dims{Uniform(rng, 30000, 70000)} : RandomDims(rng, 0, 4, 7);
  ir::Attributes attrs;
  if (op == ir::OpKind::kClip) {
    const double lo = std::uniform_real_distribution<double>(-3, 1)(rng);
    if (Coin(rng, 0.8)) attrs.SetFloat("min", lo);
    if (Coin(rng, 0.8))
      attrs.SetFloat("max", lo + std::uniform_real_distribution<double>(0, 4)(rng));
  }
  if (op == ir::OpKind::kGelu && Coin(rng))
    attrs.SetString("approximate", Coin(rng) ? "tanh" : "none");
  return {{RandomF32(d, rng, -6, 6)}, attrs, {}};
}

Case MatMul(Rng& rng, int i) {
  const int64_t big = Big(i) ? 70 : 7;
  const int64_t m = Uniform(rng, 1, big), n = Uniform(rng, 1, big), k = Uniform(rng, 1, big);
  const int64_t ra = Uniform(rng, 1, 4), rb = Uniform(rng, 1, 4);
  Dims batch = RandomDims(rng, 2, 2, 3);
  auto make = [&](int64_t rank, Dims matrix) {
    if (rank == 1) return Dims{matrix[0] == 1 ? matrix[1] : matrix[0]};
    Dims d(batch.end() - (rank - 2), batch.end());
    for (int64_t& x : d) {
      if (Coin(rng, 0.3)) x = 1;
    }
    d.insert(d.end(), matrix.begin(), matrix.end());
    return d;
  };
  Dims a = ra == 1 ? Dims{k} : make(ra, {m, k});
  Dims b = rb == 1 ? Dims{k} : make(rb, {k, n});
  return {{RandomF32(a, rng), RandomF32(b, rng)}, {}, {1}};
}

Case Linear(Rng& rng, int i) {
  const int64_t big = Big(i) ? 80 : 9;
  const int64_t k = Uniform(rng, 1, big), n = Uniform(rng, 1, big);
  Dims x = RandomDims(rng, 0, 2, 4);
  x.push_back(k);
  Tensor bias = Coin(rng) ? RandomF32({n}, rng) : Absent();
  return {{RandomF32(x, rng), RandomF32({n, k}, rng), bias}, {}, {1, 2}};
}

Case Conv(Rng& rng, int i) {
  // 0 im2col, 1 pointwise, 2 depthwise (any window), 3 grouped, 4 depthwise 3x3
  // with equal strides 1 or 2 and no dilation (the specialised mobilenet path).
  const int algo = i % 5;
  const bool depthwise = algo == 2 || algo == 4;
  const int64_t groups = algo == 3 ? Uniform(rng, 2, 3) : 1;
  int64_t c = depthwise ? Uniform(rng, 1, 8) : groups * Uniform(rng, 1, 4);
  int64_t o = depthwise ? c : groups * Uniform(rng, 1, 4);
  int64_t kh = Uniform(rng, 1, 4), kw = Uniform(rng, 1, 4);
  int64_t sh = Uniform(rng, 1, 3), sw = Uniform(rng, 1, 3);
  int64_t ph = Uniform(rng, 0, 2), pw = Uniform(rng, 0, 2);
  int64_t dh = Uniform(rng, 1, 2), dw = Uniform(rng, 1, 2);
  if (algo == 1 || (algo == 3 && Coin(rng, 0.3))) {  // pointwise, also grouped
    kh = kw = sh = sw = 1;
    ph = pw = 0;
  } else if (algo == 4) {
    kh = kw = 3;
    dh = dw = 1;
    sh = sw = Uniform(rng, 1, 2);
  }
  const int64_t span_h = dh * (kh - 1) + 1, span_w = dw * (kw - 1) + 1;
  const int64_t extra = Big(i) ? 24 : 8;
  const int64_t h = std::max<int64_t>(span_h - 2 * ph, 1) + Uniform(rng, 0, extra);
  const int64_t w = std::max<int64_t>(span_w - 2 * pw, 1) + Uniform(rng, 0, extra);
  const int64_t n = Uniform(rng, 1, 2);
  const int64_t g = depthwise ? c : groups;
  Dims x = Coin(rng, 0.2) ? Dims{c, h, w} : Dims{n, c, h, w};
  ir::Attributes attrs;
  attrs.SetInts("stride", {sh, sw});
  attrs.SetInts("padding", {ph, pw});
  attrs.SetInts("dilation", {dh, dw});
  attrs.SetInt("groups", g);
  Tensor bias = Coin(rng, 0.7) ? RandomF32({o}, rng) : Absent();
  return {{RandomF32(x, rng), RandomF32({o, c / g, kh, kw}, rng), bias}, attrs, {1, 2}};
}

Case Pool(ir::OpKind op, Rng& rng, int i) {
  const bool max = op == ir::OpKind::kMaxPool;
  const int64_t kh = Uniform(rng, 1, 4), kw = Uniform(rng, 1, 4);
  const int64_t sh = Uniform(rng, 1, 3), sw = Uniform(rng, 1, 3);
  const int64_t ph = Uniform(rng, 0, kh / 2), pw = Uniform(rng, 0, kw / 2);
  const int64_t dh = max ? Uniform(rng, 1, 2) : 1, dw = max ? Uniform(rng, 1, 2) : 1;
  const int64_t extra = Big(i) ? 40 : 8;
  const int64_t h = dh * (kh - 1) + 1 + Uniform(rng, 0, extra);
  const int64_t w = dw * (kw - 1) + 1 + Uniform(rng, 0, extra);
  Dims x = Coin(rng, 0.2) ? Dims{Uniform(rng, 1, 4), h, w}
                          : Dims{Uniform(rng, 1, 2), Uniform(rng, 1, Big(i) ? 16 : 3), h, w};
  ir::Attributes attrs;
  attrs.SetInts("kernel", {kh, kw});
  if (Coin(rng, 0.8)) attrs.SetInts("stride", {sh, sw});
  attrs.SetInts("padding", {ph, pw});
  attrs.SetBool("ceil_mode", Coin(rng));
  if (max) {
    attrs.SetInts("dilation", {dh, dw});
  } else {
    attrs.SetBool("count_include_pad", Coin(rng));
    if (Coin(rng, 0.2)) attrs.SetInt("divisor_override", Uniform(rng, 1, 5));
  }
  return {{RandomF32(x, rng)}, attrs, {}};
}

Case AdaptivePool(Rng& rng, int i) {
  const int64_t h = Uniform(rng, 1, Big(i) ? 60 : 10), w = Uniform(rng, 1, Big(i) ? 60 : 10);
  ir::Attributes attrs;
  if (i % 3 == 0) {
    attrs.SetInts("output_size", {1, 1});
  } else {
    attrs.SetInts("output_size", {Uniform(rng, 1, 8), Uniform(rng, 1, 8)});
  }
  Dims x = Coin(rng, 0.2) ? Dims{Uniform(rng, 1, 4), h, w}
                          : Dims{Uniform(rng, 1, 2), Uniform(rng, 1, Big(i) ? 32 : 3), h, w};
  return {{RandomF32(x, rng)}, attrs, {}};
}

Case BatchNorm(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{2, 16, 40, 40} : RandomDims(rng, 2, 4, 6);
  const int64_t c = x[1];
  ir::Attributes attrs;
  attrs.SetFloat("eps", Coin(rng) ? 1e-5 : 1e-3);
  return {{RandomF32(x, rng), RandomF32({c}, rng), RandomF32({c}, rng), RandomF32({c}, rng),
           RandomF32({c}, rng, 0.1f, 2.0f)},
          attrs,
          {1, 2, 3, 4}};
}

Case LayerNorm(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{64, 768} : RandomDims(rng, 1, 4, 6);
  const int64_t k = Uniform(rng, 1, static_cast<int64_t>(x.size()));
  std::vector<int64_t> shape(x.end() - k, x.end());
  ir::Attributes attrs;
  attrs.SetInts("normalized_shape", shape);
  attrs.SetFloat("eps", 1e-5);
  Tensor weight = Coin(rng, 0.7) ? RandomF32(shape, rng) : Absent();
  Tensor bias = Coin(rng, 0.7) ? RandomF32(shape, rng) : Absent();
  return {{RandomF32(x, rng, -3, 3), weight, bias}, attrs, {1, 2}};
}

Case Softmax(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{8, Uniform(rng, 2, 30), 600} : RandomDims(rng, 1, 4, 7);
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = Uniform(rng, 0, rank - 1);
  if (Coin(rng)) axis -= rank;
  ir::Attributes attrs;
  attrs.SetInt("axis", axis);
  return {{RandomF32(x, rng, -10, 10)}, attrs, {}};
}

Case Mean(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{4, 64, 15, 15} : RandomDims(rng, 0, 4, 6);
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < rank; ++a) {
    if (Coin(rng)) axes.push_back(Coin(rng) ? a : a - rank);
  }
  std::shuffle(axes.begin(), axes.end(), rng);
  ir::Attributes attrs;
  attrs.SetInts("axes", axes);
  attrs.SetBool("keepdim", Coin(rng));
  return {{RandomF32(x, rng)}, attrs, {}};
}

Case View(ir::OpKind op, Rng& rng, int) {
  Dims x = RandomDims(rng, 0, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  ir::Attributes attrs;
  if (op == ir::OpKind::kReshape) {
    // Shuffle the dims, merge a random pair, and maybe hide one as -1.
    Dims shape = x;
    std::shuffle(shape.begin(), shape.end(), rng);
    if (shape.size() >= 2 && Coin(rng)) {
      shape[0] *= shape.back();
      shape.pop_back();
    }
    if (!shape.empty() && Coin(rng)) shape[Uniform(rng, 0, shape.size() - 1)] = -1;
    attrs.SetInts("shape", shape);
  } else if (op == ir::OpKind::kFlatten && rank > 0) {
    const int64_t start = Uniform(rng, 0, rank - 1), end = Uniform(rng, start, rank - 1);
    attrs.SetInt("start_dim", Coin(rng) ? start : start - rank);
    attrs.SetInt("end_dim", Coin(rng) ? end : end - rank);
  }
  return {{RandomF32(x, rng)}, attrs, {}};
}

Case Concat(Rng& rng, int) {
  Dims base = RandomDims(rng, 1, 4, 4);
  const int64_t rank = static_cast<int64_t>(base.size());
  const int64_t axis = Uniform(rng, 0, rank - 1);
  std::vector<Tensor> inputs;
  for (int64_t k = Uniform(rng, 1, 4); k > 0; --k) {
    Dims d = base;
    d[axis] = Uniform(rng, 0, 4);
    inputs.push_back(RandomF32(d, rng));
  }
  ir::Attributes attrs;
  attrs.SetInt("axis", Coin(rng) ? axis : axis - rank);
  return {inputs, attrs, {}};
}

using Generator = std::function<Case(Rng&, int)>;

const std::map<ir::OpKind, Generator>& Generators() {
  using K = ir::OpKind;
  static const auto* gens = [] {
    auto* m = new std::map<ir::OpKind, Generator>();
    for (K op : {K::kAdd, K::kSub, K::kMul, K::kDiv}) {
      (*m)[op] = [op](Rng& r, int i) { return Binary(op, r, i); };
    }
    for (K op : {K::kRelu, K::kClip, K::kSigmoid, K::kTanh, K::kGelu, K::kSilu, K::kHardSigmoid,
                 K::kHardSwish}) {
      (*m)[op] = [op](Rng& r, int i) { return Unary(op, r, i); };
    }
    for (K op : {K::kMaxPool, K::kAvgPool}) {
      (*m)[op] = [op](Rng& r, int i) { return Pool(op, r, i); };
    }
    // Reorder outside a compiled plan sees plain tensors only: a copy (layout_test.cc covers NHWC).
    for (K op : {K::kIdentity, K::kReshape, K::kFlatten, K::kReorder}) {
      (*m)[op] = [op](Rng& r, int i) { return View(op, r, i); };
    }
    (*m)[K::kMatMul] = MatMul;
    (*m)[K::kLinear] = Linear;
    (*m)[K::kConv] = Conv;
    (*m)[K::kAdaptiveAvgPool] = AdaptivePool;
    (*m)[K::kBatchNorm] = BatchNorm;
    (*m)[K::kLayerNorm] = LayerNorm;
    (*m)[K::kSoftmax] = Softmax;
    (*m)[K::kLogSoftmax] = Softmax;
    (*m)[K::kMean] = Mean;
    (*m)[K::kConcat] = Concat;
    testing::AddCoverageSweepCases(*m);
    testing::AddVisionSweepCases(*m);
    return m;
  }();
  return *gens;
}

std::string Describe(const SingleOpGraph& g) {
  std::string s = absl::StrCat(ir::OpName(g.node().kind), "(");
  for (const Tensor& t : g.inputs()) {
    absl::StrAppend(&s, t.defined() ? DimsToString(t.dims()) : "None", " ");
  }
  return absl::StrCat(s, ") ", ir::PrintGraph(g.graph()));
}

// Compares two tensors elementwise: floats within |got - want| <= kRelTol *
// max(|want|, 1) (NaN matches NaN), every other dtype exactly.
::testing::AssertionResult Close(const Tensor& got, const Tensor& want) {
  if (got.dims() != want.dims()) {
    return ::testing::AssertionFailure()
           << "dims " << DimsToString(got.dims()) << " vs reference " << DimsToString(want.dims());
  }
  if (got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "dtype " << DTypeName(got.dtype()) << " vs reference " << DTypeName(want.dtype());
  }
  if (got.dtype() != DType::kF32) {
    if (got.byte_size() > 0 && std::memcmp(got.raw_data(), want.raw_data(), got.byte_size()) != 0) {
      return ::testing::AssertionFailure() << DTypeName(got.dtype()) << " values differ";
    }
    return ::testing::AssertionSuccess();
  }
  for (int64_t k = 0; k < got.num_elements(); ++k) {
    const double a = got.data<float>()[k], b = want.data<float>()[k];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (!(std::abs(a - b) <= kRelTol * std::max(std::abs(b), 1.0))) {
      return ::testing::AssertionFailure()
             << "element " << k << ": kernel " << a << " vs reference " << b;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(KernelSweepTest, EveryFloatKernelMatchesReference) {
  int kernels = 0;
  for (const KernelDef& kernel : AllKernels()) {
    if (kernel.dtype != DType::kF32 && kernel.dtype != DType::kUnknown) continue;
    if (IsNonTensorOp(kernel.op)) continue;  // scalar_ops_test.cc covers those
    ++kernels;
    auto gen = Generators().find(kernel.op);
    ASSERT_NE(gen, Generators().end()) << "no sweep case generator for " << ir::OpName(kernel.op);
    Rng rng(testing::SweepSeed(kernel.op) * 7919 + 1);
    for (int i = 0; i < kCasesPerKernel; ++i) {
      Case c = gen->second(rng, i);
      SingleOpGraph g(kernel.op, c.inputs, c.attrs, c.constant_inputs);
      SCOPED_TRACE(absl::StrCat("case ", i, ": ", Describe(g)));
      auto want = g.RunReference();
      ASSERT_TRUE(want.ok()) << want.status();
      for (int threads : {1, 2}) {
        auto got = g.Run(threads);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(got->size(), want->size());
        for (size_t o = 0; o < got->size(); ++o) {
          EXPECT_TRUE(Close((*got)[o], (*want)[o])) << "threads=" << threads;
        }
      }
    }
  }
  int tensor_ops = 0;
  for (ir::OpKind op : ir::AllOpKinds()) tensor_ops += IsNonTensorOp(op) ? 0 : 1;
  EXPECT_GE(kernels, tensor_ops - 1);  // all but Constant
}

}  // namespace

const std::map<ir::OpKind, testing::SweepGenerator>& testing::SweepGenerators() {
  return Generators();
}

}  // namespace kiln::kernels
