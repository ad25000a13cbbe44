// The oneDNN provider's Softmax, LogSoftmax, LayerNorm and batched MatMul
// give Kiln's own kernels' numbers (within float rounding), on every axis,
// affine form and batch broadcast.
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
double ProviderDiff(const ir::Graph& g, const Tensor& x, const Tensor* y = nullptr) {
  CompileOptions fast, native;
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
