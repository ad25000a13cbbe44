// Softmax's `safe` attribute and the fuse_safe_softmax pass: the masking that
// core ATen's decomposition of _safe_softmax writes after a softmax
// (where(not(any(not(x == -inf), axis, keepdim)), 0, softmax(x))) becomes
// one Softmax that zeroes the slices whose every element is -inf. Checked
// against the unfused ops (the pipeline off) on slices fully masked, partly
// masked, holding a NaN, and plain, along the last axis and an inner one, in
// float32 and float64, with Kiln's kernels and oneDNN's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "engine/common/half.h"
#include "engine/runtime/executable.h"
#include "tests/engine/runtime/graph_test_util.h"

namespace kiln::runtime {
namespace {

using ir::OpKind;
using ir::ValueId;
using testing::Count;
using testing::Out;

constexpr double kInf = std::numeric_limits<double>::infinity();

ValueId Number(ir::Graph& g, double v) {
  Tensor t = Tensor::Zeros(DType::kF64, {});
  t.data<double>()[0] = v;
  return g.AddConstant(std::move(t), "", ir::ValueKind::kFloat);
}

struct Options {
  int64_t axis = -1;
  bool fill_zeros = true;     // Fill(like softmax, 0); else a number 0
  bool expose_softmax = false;  // the softmax is also a graph output
};

// The decomposed pattern on input x.
ir::Graph Decomposed(DType dtype, const Dims& dims, const Options& o) {
  ir::Graph g;
  const ValueId x = g.AddInput("x", ir::TensorType{dtype, dims});
  ir::Attributes sa;
  sa.SetInt("axis", o.axis);
  const ValueId s = Out(g, g.AddNode(OpKind::kSoftmax, {x}, sa, "aten::_softmax"));
  const ValueId eq = Out(g, g.AddNode(OpKind::kEqual, {x, Number(g, -kInf)}, {}, "aten::eq"));
  const ValueId keep = Out(g, g.AddNode(OpKind::kLogicalNot, {eq}, {}, "aten::logical_not"));
  ir::Attributes any;
  any.SetInts("axes", {o.axis});
  any.SetBool("keepdim", true);
  const ValueId some = Out(g, g.AddNode(OpKind::kReduceAny, {keep}, any, "aten::any"));
  const ValueId masked = Out(g, g.AddNode(OpKind::kLogicalNot, {some}, {}, "aten::logical_not"));
  ValueId zeros;
  if (o.fill_zeros) {
    ir::Attributes fill;
    fill.SetFloat("value", 0.0);
    zeros = Out(g, g.AddNode(OpKind::kFill, {s}, fill, "aten::full_like"));
  } else {
    zeros = Number(g, 0.0);
  }
  g.AddOutput(Out(g, g.AddNode(OpKind::kWhere, {masked, zeros, s}, {}, "aten::where")), "y");
  if (o.expose_softmax) g.AddOutput(s, "softmax");
  return g;
}

// Values in [-3, 3), with slices along `axis` of every kind.
Tensor Input(DType dtype, const Dims& dims, int64_t axis) {
  Tensor t = Tensor::Zeros(dtype, dims);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-3, 3);
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += rank;
  int64_t outer = 1, len = dims[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= dims[d];
  auto set = [&](int64_t o, int64_t a, int64_t i, double v) {
    const int64_t e = (o * len + a) * inner + i;
    if (dtype == DType::kF32) t.data<float>()[e] = static_cast<float>(v);
    else t.data<double>()[e] = v;
  };
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t kind = (o * inner + i) % 5;  // 0 plain, 1 all -inf, 2 some -inf, 3 NaN, 4 -inf but first
      for (int64_t a = 0; a < len; ++a) {
        double v = u(rng);
        if (kind == 1) v = -kInf;
        if (kind == 2 && a % 2 == 0) v = -kInf;
        if (kind == 3) v = a == len - 1 ? std::nan("") : -kInf;
        if (kind == 4 && a > 0) v = -kInf;
        set(o, a, i, v);
      }
    }
  }
  return t;
}

double At(const Tensor& t, int64_t e) {
  return t.dtype() == DType::kF32 ? t.data<float>()[e] : t.data<double>()[e];
}

void ExpectSame(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  for (int64_t e = 0; e < want.num_elements(); ++e) {
    const double a = At(got, e), b = At(want, e);
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a)) << what << " element " << e << " is " << a;
    } else if (std::isinf(b)) {
      EXPECT_EQ(a, b) << what << " element " << e;
    } else {
      EXPECT_NEAR(a, b, tol) << what << " element " << e;
    }
  }
}

void Check(DType dtype, const Dims& dims, const Options& o) {
  SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << DimsToString(dims) << " axis "
                                    << o.axis << (o.fill_zeros ? " fill" : " number"));
  const ir::Graph g = Decomposed(dtype, dims, o);
  const std::vector<kernels::TensorInfo> infos = {{dtype, dims}};
  absl::StatusOr<testing::ThreeWays> w = testing::CompileThreeWays(g, infos);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const Executable* exe : {w->onednn.get(), w->native.get()}) {
    const ir::Graph compiled = exe->graph().Compacted();
    EXPECT_EQ(Count(compiled, OpKind::kWhere), 0) << ir::PrintGraph(compiled);
    EXPECT_EQ(Count(compiled, OpKind::kReduceAny), 0) << ir::PrintGraph(compiled);
    ASSERT_EQ(Count(compiled, OpKind::kSoftmax), 1) << ir::PrintGraph(compiled);
    for (const ir::Node& n : compiled.nodes()) {
      if (n.kind == OpKind::kSoftmax) EXPECT_TRUE(n.attrs.GetBool("safe"));
    }
  }
  const Tensor x = Input(dtype, dims, o.axis);
  auto ra = w->onednn->Run({x});
  auto rb = w->native->Run({x});
  auto rc = w->reference->Run({x});
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_TRUE(rc.ok()) << rc.status();
  const Tensor& want = (*rc)[0];
  // Kiln's own softmax kernel: the same bytes as the unfused ops.
  ExpectSame((*rb)[0], want, 0.0, "native");
  ExpectSame((*ra)[0], want, dtype == DType::kF32 ? 1e-6 : 1e-12, "with oneDNN");
  // The fully masked slices are zeros, not NaN (the unfused ops say so too).
  bool some_zeroed = false;
  for (int64_t e = 0; e < want.num_elements(); ++e) {
    some_zeroed |= At(x, e) == -kInf && At(want, e) == 0.0;
  }
  EXPECT_TRUE(some_zeroed);
}

TEST(SafeSoftmaxTest, DecomposedMaskingIsOneSafeSoftmax) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    Check(dtype, {2, 3, 5, 7}, Options{-1, true});
    Check(dtype, {2, 3, 5, 7}, Options{-1, false});
    Check(dtype, {4, 6, 3}, Options{1, true});  // inner slices (strided)
  }
}

// Without `safe`: a slice holding a NaN or +inf, or all -inf, is NaN
// everywhere, as PyTorch gives; oneDNN's softmax (which skips NaN in its max)
// is corrected to the same answer as Kiln's own kernel, for softmax and
// log-softmax, along the last axis and an inner one.
TEST(SafeSoftmaxTest, NonFiniteSlicesGivePyTorchsNaNs) {
  for (OpKind kind : {OpKind::kSoftmax, OpKind::kLogSoftmax}) {
    for (int64_t axis : {int64_t{-1}, int64_t{1}}) {
      SCOPED_TRACE(::testing::Message() << ir::OpName(kind) << " axis " << axis);
      const Dims dims = {3, 10, 6};
      ir::Graph g;
      const ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, dims});
      ir::Attributes a;
      a.SetInt("axis", axis);
      g.AddOutput(Out(g, g.AddNode(kind, {x}, a)), "y");
      CompileOptions onednn, native;
      native.use_providers = false;
      auto p = Executable::Compile(g, {{DType::kF32, dims}}, onednn);
      auto q = Executable::Compile(g, {{DType::kF32, dims}}, native);
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_TRUE(q.ok()) << q.status();
      Tensor in = Input(DType::kF32, dims, axis);
      in.data<float>()[1] = std::numeric_limits<float>::infinity();  // a slice with +inf
      auto rp = (*p)->Run({in});
      auto rq = (*q)->Run({in});
      ASSERT_TRUE(rp.ok()) << rp.status();
      ASSERT_TRUE(rq.ok()) << rq.status();
      ExpectSame((*rp)[0], (*rq)[0], 1e-5, "oneDNN against Kiln's kernel");
      int nans = 0;
      for (int64_t e = 0; e < (*rq)[0].num_elements(); ++e) nans += std::isnan(At((*rq)[0], e));
      EXPECT_GT(nans, 0);
    }
  }
}

// ScaledDotProductAttention with `safe` (aten::scaled_dot_product_attention's,
// as torch >= 2.5 computes it): a query whose every key is masked out gets
// zeros, with Kiln's kernel and oneDNN's; without it (attention written out
// as ops) such a row stays NaN, as softmax gives.
TEST(SafeSoftmaxTest, AttentionOfAFullyMaskedQueryIsZeroWhenSafe) {
  for (bool safe : {true, false}) {
    SCOPED_TRACE(safe ? "safe" : "not safe");
    ir::Graph g;
    const Dims qd = {2, 2, 3, 4}, kd = {2, 2, 5, 4}, md = {2, 1, 1, 5};
    const ValueId q = g.AddInput("q", ir::TensorType{DType::kF32, qd});
    const ValueId k = g.AddInput("k", ir::TensorType{DType::kF32, kd});
    const ValueId v = g.AddInput("v", ir::TensorType{DType::kF32, kd});
    const ValueId m = g.AddInput("keep", ir::TensorType{DType::kBool, md});
    ir::Attributes a;
    a.SetString("bool_mask", "keep");
    if (safe) a.SetBool("safe", true);
    g.AddOutput(Out(g, g.AddNode(OpKind::kScaledDotProductAttention, {q, k, v, m}, a)), "y");
    const std::vector<kernels::TensorInfo> infos = {
        {DType::kF32, qd}, {DType::kF32, kd}, {DType::kF32, kd}, {DType::kBool, md}};
    absl::StatusOr<testing::ThreeWays> w = testing::CompileThreeWays(g, infos);
    ASSERT_TRUE(w.ok()) << w.status();
    std::mt19937 rng(7);
    Tensor keep = Tensor::Zeros(DType::kBool, md);
    for (int64_t j = 0; j < 5; ++j) keep.data<bool>()[5 + j] = j % 2 == 0;  // batch 0: none
    const std::vector<Tensor> in = {testing::Random(qd, rng, -1, 1), testing::Random(kd, rng, -1, 1),
                                    testing::Random(kd, rng, -1, 1), keep};
    for (const auto* exe : {&w->onednn, &w->native}) {
      auto r = (*exe)->Run(in);
      ASSERT_TRUE(r.ok()) << r.status();
      const float* y = (*r)[0].data<float>();
      for (int64_t e = 0; e < 2 * 3 * 4; ++e) {  // batch 0: fully masked
        if (safe) {
          EXPECT_EQ(y[e], 0.0f) << e;
        } else {
          EXPECT_TRUE(std::isnan(y[e])) << e;
        }
      }
      for (int64_t e = 2 * 3 * 4; e < 2 * 2 * 3 * 4; ++e) EXPECT_TRUE(std::isfinite(y[e])) << e;
    }
  }
}

// A softmax that is read elsewhere too stays as it is (fusing would compute it twice).
TEST(SafeSoftmaxTest, SoftmaxReadElsewhereIsNotFused) {
  const Dims dims = {2, 5, 6};
  const ir::Graph g = Decomposed(DType::kF32, dims, Options{-1, true, true});
  auto exe = Executable::Compile(g, {{DType::kF32, dims}}, CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  const ir::Graph compiled = (*exe)->graph().Compacted();
  EXPECT_EQ(Count(compiled, OpKind::kWhere), 1);
  auto r = (*exe)->Run({Input(DType::kF32, dims, -1)});
  ASSERT_TRUE(r.ok()) << r.status();
}

// The mask over another axis than the softmax's is another computation: not fused.
TEST(SafeSoftmaxTest, MaskOverAnotherAxisIsNotFused) {
  ir::Graph g = Decomposed(DType::kF32, {2, 5, 6}, Options{-1, true});
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    if (g.node(n).kind == OpKind::kReduceAny) g.mutable_node(n).attrs.SetInts("axes", {1});
  }
  auto exe = Executable::Compile(g, {{DType::kF32, Dims{2, 5, 6}}}, CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(Count((*exe)->graph().Compacted(), OpKind::kWhere), 1);
}

// Softmax{safe} in float16: widened through the float32 kernel, which zeroes
// the same slices.
TEST(SafeSoftmaxTest, Float16WidenedKeepsTheMask) {
  ir::Graph g;
  const Dims dims = {3, 4};
  const ValueId x = g.AddInput("x", ir::TensorType{DType::kF16, dims});
  ir::Attributes sa;
  sa.SetInt("axis", -1);
  sa.SetBool("safe", true);
  g.AddOutput(Out(g, g.AddNode(OpKind::kSoftmax, {x}, sa)), "y");
  auto exe = Executable::Compile(g, {{DType::kF16, dims}}, CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  const Tensor x32 = Input(DType::kF32, dims, -1);
  Tensor x16 = Tensor::Zeros(DType::kF16, dims);
  for (int64_t e = 0; e < x32.num_elements(); ++e) {
    x16.data<uint16_t>()[e] = FloatToHalf(x32.data<float>()[e]);
  }
  auto r = (*exe)->Run({x16});
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t row = 0; row < 3; ++row) {
    const uint16_t* y = (*r)[0].data<uint16_t>() + row * 4;
    const float* in = x32.data<float>() + row * 4;
    const bool all_masked = in[0] == -kInf && in[1] == -kInf && in[2] == -kInf && in[3] == -kInf;
    float sum = 0;
    for (int i = 0; i < 4; ++i) sum += HalfToFloat(y[i]);
    if (all_masked) {
      EXPECT_EQ(sum, 0.0f) << "row " << row;
    } else {
      EXPECT_NEAR(sum, 1.0f, 2e-3) << "row " << row;
    }
  }
}

}  // namespace
}  // namespace kiln::runtime
