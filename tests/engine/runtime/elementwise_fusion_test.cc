// The compile phase's fuse_elementwise (engine/runtime/compile/fuse_elementwise.cc):
// runs of elementwise ops become one ElementwiseChain node, and the fused plan
// gives the bytes of the plan compiled with the fusion off, on one and two
// threads, with and without the oneDNN provider: tile by tile (float32, one
// shape), over whole tensors (a broadcast operand), after a convolution's
// NHWC output, on random chains; and a plan read back as the cache reads it
// (its compiled graph, without the passes) runs no step twice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/ir/graph.h"
#include "engine/runtime/executable.h"
#include "tests/engine/runtime/graph_test_util.h"

namespace kiln::runtime {
namespace {

using ir::OpKind;
using ir::ValueId;
using testing::Random;
using testing::Out;

ValueId Op(ir::Graph& g, OpKind kind, std::vector<ValueId> in, ir::Attributes attrs = {}) {
  return Out(g, g.AddNode(kind, std::move(in), std::move(attrs)));
}
ValueId Number(ir::Graph& g, double v) {
  Tensor t = Tensor::Zeros(DType::kF64, {});
  t.data<double>()[0] = v;
  return g.AddConstant(t, "", ir::ValueKind::kFloat);
}

// Nodes of `kind` the compiled graph still runs (its blocks' nodes).
int Count(const Executable& exe, OpKind kind) {
  return testing::Count(exe.graph().Compacted(), kind);
}

struct Case {
  ir::Graph graph;
  std::vector<Tensor> inputs;
  int chains = 0;    // ElementwiseChain nodes expected (-1: at least one)
  int left = 0;      // elementwise nodes expected outside chains (of `left_kind`)
  OpKind left_kind = OpKind::kSigmoid;
};

std::vector<kernels::TensorInfo> Infos(const Case& c) {
  std::vector<kernels::TensorInfo> infos;
  for (const Tensor& t : c.inputs) infos.push_back({t.dtype(), t.dims()});
  return infos;
}

void ExpectSameBytes(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].dims(), want[i].dims()) << what;
    ASSERT_EQ(got[i].dtype(), want[i].dtype()) << what;
    EXPECT_EQ(std::memcmp(got[i].raw_data(), want[i].raw_data(), want[i].byte_size()), 0)
        << what << ": output " << i;
  }
}

void Check(const Case& c) {
  for (bool providers : {true, false}) {
    for (int threads : {1, 2}) {
      const std::string what = absl::StrCat("providers ", providers, " threads ", threads);
      CompileOptions fused, plain;
      fused.num_threads = plain.num_threads = threads;
      fused.use_providers = plain.use_providers = providers;
      plain.disabled_passes = {"fuse_elementwise"};
      auto a = Executable::Compile(c.graph, Infos(c), fused);
      auto b = Executable::Compile(c.graph, Infos(c), plain);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      const int chains = Count(**a, OpKind::kElementwiseChain);
      if (c.chains >= 0) {
        EXPECT_EQ(chains, c.chains) << what << "\n" << ir::PrintGraph((*a)->graph().Compacted());
        EXPECT_EQ(Count(**a, c.left_kind), c.left) << what;
      } else {
        EXPECT_GE(chains, 1) << what;
      }
      EXPECT_EQ(Count(**b, OpKind::kElementwiseChain), 0) << what;
      auto ra = (*a)->Run(c.inputs);
      auto rb = (*b)->Run(c.inputs);
      ASSERT_TRUE(ra.ok()) << ra.status();
      ASSERT_TRUE(rb.ok()) << rb.status();
      ExpectSameBytes(*ra, *rb, what);

      // As the compiled-graph cache reads a plan back: its graph, no passes.
      CompileOptions again = fused;
      again.run_passes = false;
      auto r = Executable::Compile((*a)->graph(), Infos(c), again);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(Count(**r, OpKind::kElementwiseChain), chains) << what;
      auto rr = (*r)->Run(c.inputs);
      ASSERT_TRUE(rr.ok()) << rr.status();
      ExpectSameBytes(*rr, *rb, what + " (read back)");
    }
  }
}

// x * sigmoid(x) + 0.5, tanh: one chain of four steps over [3, 5000].
TEST(ElementwiseFusionTest, SwishThenAffineThenTanhIsOneChain) {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(1);
  const ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{3, 5000}});
  c.inputs.push_back(Random({3, 5000}, rng, -4, 4));
  ValueId y = Op(g, OpKind::kMul, {x, Op(g, OpKind::kSigmoid, {x})});
  y = Op(g, OpKind::kTanh, {Op(g, OpKind::kAdd, {y, Number(g, 0.5)})});
  g.AddOutput(y, "y");
  c.chains = 1;
  Check(c);
}

// GELU written out (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
TEST(ElementwiseFusionTest, HandWrittenGeluIsOneChain) {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(2);
  const ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{2, 128, 96}});
  c.inputs.push_back(Random({2, 128, 96}, rng, -5, 5));
  ValueId cube = Op(g, OpKind::kPow, {x, Number(g, 3.0)});
  ValueId inner = Op(g, OpKind::kAdd, {x, Op(g, OpKind::kMul, {cube, Number(g, 0.044715)})});
  ValueId t = Op(g, OpKind::kTanh, {Op(g, OpKind::kMul, {inner, Number(g, std::sqrt(2 / M_PI))})});
  ValueId y = Op(g, OpKind::kMul, {Op(g, OpKind::kMul, {x, Number(g, 0.5)}),
                                   Op(g, OpKind::kAdd, {t, Number(g, 1.0)})});
  g.AddOutput(y, "y");
  // Steps join the step just before them: Pow ... Tanh is one chain; x * 0.5
  // comes next and reads neither, so it stays alone, and the last Add and Mul
  // make a second chain.
  c.chains = 2;
  c.left_kind = OpKind::kMul;
  c.left = 1;
  Check(c);
}

// A bias of one row broadcast over the rows: the chain runs over whole
// tensors (not tile by tile) and gives the same bytes.
TEST(ElementwiseFusionTest, BroadcastOperandRunsOverWholeTensors) {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(3);
  const ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{4, 1000}});
  const ValueId b = g.AddInput("b", ir::TensorType{DType::kF32, Dims{1000}});
  c.inputs.push_back(Random({4, 1000}, rng, -2, 2));
  c.inputs.push_back(Random({1000}, rng, -2, 2));
  ValueId y = Op(g, OpKind::kSilu, {Op(g, OpKind::kAdd, {x, b})});
  y = Op(g, OpKind::kMaximum, {y, Op(g, OpKind::kNeg, {x})});
  g.AddOutput(y, "y");
  // Neg comes between Silu and Maximum in the node order: Add-Silu and
  // Neg-Maximum.
  c.chains = 2;
  c.left_kind = OpKind::kSilu;
  Check(c);
}

// After a convolution whose output (NHWC under the provider) is read twice:
// sigmoid(y) * y, + 1, on the channels-last bytes; the convolution keeps its
// own fusions.
TEST(ElementwiseFusionTest, AfterAConvolutionInItsLayout) {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(4);
  const ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{2, 8, 20, 20}});
  c.inputs.push_back(Random({2, 8, 20, 20}, rng, -1, 1));
  const ValueId w = g.AddConstant(Random({16, 8, 3, 3}, rng, -0.3, 0.3), "w");
  ir::Attributes conv;
  conv.SetInts("padding", {1, 1});
  const ValueId y = Op(g, OpKind::kConv, {x, w}, conv);
  ValueId z = Op(g, OpKind::kMul, {Op(g, OpKind::kSigmoid, {y}), y});
  z = Op(g, OpKind::kAdd, {z, Number(g, 1.0)});
  g.AddOutput(z, "z");
  c.chains = 1;
  Check(c);
}

// Nothing fuses across a value with a second use or a graph output: the
// Sigmoid (read twice) and the Tanh (an output) stay, and only Relu and the
// Add that reads it make a chain.
TEST(ElementwiseFusionTest, SharedValuesAndOutputsEndAChain) {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(5);
  const ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{6, 700}});
  c.inputs.push_back(Random({6, 700}, rng, -2, 2));
  const ValueId s = Op(g, OpKind::kSigmoid, {x});  // read twice: a chain ends here
  const ValueId a = Op(g, OpKind::kTanh, {s});
  const ValueId b = Op(g, OpKind::kRelu, {s});
  g.AddOutput(a, "a");
  g.AddOutput(Op(g, OpKind::kAdd, {a, b}), "sum");  // `a` is an output: not fused into
  c.chains = 1;
  c.left = 1;
  Check(c);
}

// Random chains of 2 to 7 steps over one to three inputs (the output's
// shape, a broadcast row, a single element), big enough for the tiles now
// and then.
TEST(ElementwiseFusionTest, RandomChainsGiveTheUnfusedBytes) {
  const OpKind unary[] = {OpKind::kRelu, OpKind::kSigmoid, OpKind::kTanh, OpKind::kGelu,
                          OpKind::kSilu, OpKind::kNeg, OpKind::kAbs, OpKind::kErf,
                          OpKind::kHardSwish, OpKind::kSqrt};
  const OpKind binary[] = {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv,
                           OpKind::kMaximum, OpKind::kMinimum};
  std::mt19937 rng(6);
  auto pick = [&](int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  for (int i = 0; i < 30; ++i) {
    Case c;
    ir::Graph& g = c.graph;
    const Dims dims = i % 3 == 0 ? Dims{2, 3, 3000} : Dims{pick(4) + 1, pick(40) + 1};
    std::vector<ValueId> values;
    const int inputs = pick(3) + 1;
    for (int k = 0; k < inputs; ++k) {
      Dims d = dims;
      if (k > 0 && pick(3) == 0) d = {dims.back()};
      if (k > 0 && pick(4) == 0) d = {1};
      values.push_back(g.AddInput(absl::StrCat("x", k), ir::TensorType{DType::kF32, d}));
      c.inputs.push_back(Random(d, rng, -2, 2));
    }
    ValueId v = values[0];
    const int steps = pick(6) + 2;
    for (int s = 0; s < steps; ++s) {
      if (pick(2) == 0) {
        OpKind k = unary[pick(10)];
        if (k == OpKind::kSqrt) v = Op(g, OpKind::kAbs, {v});
        v = Op(g, k, {v});
      } else {
        ValueId other = values[pick(static_cast<int>(values.size()))];
        v = pick(2) == 0 ? Op(g, binary[pick(6)], {v, other}) : Op(g, binary[pick(6)], {other, v});
      }
    }
    g.AddOutput(v, "y");
    SCOPED_TRACE(absl::StrCat("chain ", i, "\n", ir::PrintGraph(g)));
    c.chains = -1;  // not counted: a chain may start after the first op
    Check(c);
  }
}

}  // namespace
}  // namespace kiln::runtime
