// The oneDNN provider's Softmax, LogSoftmax and LayerNorm give Kiln's own
// kernels' numbers (within float rounding), on every axis and affine form.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/runtime/executable.h"

namespace kiln::runtime {
namespace {

using ir::OpKind;
using ir::ValueId;

Tensor Random(Dims dims, std::mt19937& rng, double lo, double hi) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(u(rng));
  return t;
}

// Runs `g` on `x` with and without the providers; returns max |a - b| and
// checks that the provider's kernel was the one compiled.
double ProviderDiff(const ir::Graph& g, const Tensor& x) {
  CompileOptions fast, native;
  native.use_providers = false;
  kernels::TensorInfo info{DType::kF32, x.dims()};
  auto a = Executable::Compile(g, {info}, fast);
  auto b = Executable::Compile(g, {info}, native);
  EXPECT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(b.ok()) << b.status();
  if (!a.ok() || !b.ok()) return 1e30;
  auto ra = (*a)->Run({x});
  auto rb = (*b)->Run({x});
  EXPECT_TRUE(ra.ok() && rb.ok());
  if (!ra.ok() || !rb.ok()) return 1e30;
  double d = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    d = std::max(d, std::fabs(double((*ra)[0].data<float>()[i]) - (*rb)[0].data<float>()[i]));
  }
  return d;
}

TEST(OneDnnNormTest, SoftmaxAndLogSoftmaxOnEveryAxis) {
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

TEST(OneDnnNormTest, LayerNormWithAndWithoutAffine) {
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

}  // namespace
}  // namespace kiln::runtime
