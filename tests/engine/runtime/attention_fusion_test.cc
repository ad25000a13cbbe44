// The fuse_attention pass: attention written out as ops (BERT's
// heads-transposed MatMul / scale / mask / Softmax / MatMul, and torch 1.13's
// multi_head_attention_forward with the query scaled first and sequence-first
// heads) becomes one ScaledDotProductAttention node whose transpositions are
// attributes. The fused graph gives the unfused graph's numbers: exactly with
// Kiln's own kernel (which runs the ops one by one), within float rounding
// with the oneDNN kernel (other GEMM blocking), on one and two threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/ir/graph.h"
#include "engine/runtime/executable.h"
#include "tests/engine/runtime/graph_test_util.h"
#include "engine/runtime/profiler.h"

namespace kiln::runtime {
namespace {

using ir::OpKind;
using ir::ValueId;
using testing::Count;
using testing::Random;
using testing::Out;

ValueId Transpose(ir::Graph& g, ValueId x, int64_t a, int64_t b) {
  ir::Attributes attrs;
  attrs.SetInt("dim0", a);
  attrs.SetInt("dim1", b);
  return Out(g, g.AddNode(OpKind::kPermute, {x}, attrs, "aten::transpose"));
}

ValueId Number(ir::Graph& g, double v) {
  Tensor t = Tensor::Zeros(DType::kF64, {});
  t.data<double>()[0] = v;
  return g.AddConstant(t, "", ir::ValueKind::kFloat);
}

ValueId Softmax(ir::Graph& g, ValueId x) {
  ir::Attributes a;
  a.SetInt("axis", -1);
  return Out(g, g.AddNode(OpKind::kSoftmax, {x}, a, "aten::softmax"));
}

ValueId Op(ir::Graph& g, OpKind kind, ValueId a, ValueId b) {
  return Out(g, g.AddNode(kind, {a, b}));
}

struct Case {
  ir::Graph graph;
  std::vector<Tensor> inputs;
  int fused = 0;  // ScaledDotProductAttention nodes expected
};

// BERT: q, k, v [B, L, H, D] -> transpose(1, 2); (q k^T) / sqrt(D) + mask;
// softmax; x v; transpose(1, 2) back.
Case Bert(bool with_mask, int64_t b, int64_t l, int64_t h, int64_t d) {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(3);
  std::vector<ValueId> qkv;
  for (const char* name : {"q", "k", "v"}) {
    qkv.push_back(g.AddInput(name, ir::TensorType{DType::kF32, Dims{b, l, h, d}}));
    c.inputs.push_back(Random({b, l, h, d}, rng, -2, 2));
  }
  ValueId q = Transpose(g, qkv[0], 1, 2), k = Transpose(g, qkv[1], 1, 2),
          v = Transpose(g, qkv[2], 1, 2);
  ValueId s = Op(g, OpKind::kMatMul, q, Transpose(g, k, -1, -2));
  s = Op(g, OpKind::kDiv, s, Number(g, std::sqrt(static_cast<double>(d))));
  if (with_mask) {
    ValueId mask = g.AddInput("mask", ir::TensorType{DType::kF32, Dims{b, 1, 1, l}});
    Tensor m = Random({b, 1, 1, l}, rng, 0, 1);
    for (int64_t i = 0; i < m.num_elements(); ++i) {
      m.data<float>()[i] = m.data<float>()[i] < 0.3f ? -10000.0f : 0.0f;
    }
    c.inputs.push_back(m);
    s = Op(g, OpKind::kAdd, mask, s);  // the mask first: either order fuses
  }
  ValueId y = Op(g, OpKind::kMatMul, Softmax(g, s), v);
  g.AddOutput(Transpose(g, y, 1, 2), "y");
  c.fused = 1;
  return c;
}

// torch 1.13's multi_head_attention_forward: q, k, v [L, B*H, D] ->
// transpose(0, 1); (q / sqrt(D)) k^T; softmax; x v; transpose(0, 1).
Case SequenceFirst(int64_t l, int64_t bh, int64_t d) {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(4);
  std::vector<ValueId> qkv;
  for (const char* name : {"q", "k", "v"}) {
    qkv.push_back(g.AddInput(name, ir::TensorType{DType::kF32, Dims{l, bh, d}}));
    c.inputs.push_back(Random({l, bh, d}, rng, -2, 2));
  }
  ValueId q = Transpose(g, qkv[0], 0, 1), k = Transpose(g, qkv[1], 0, 1),
          v = Transpose(g, qkv[2], 0, 1);
  q = Op(g, OpKind::kDiv, q, Number(g, std::sqrt(static_cast<double>(d))));
  ValueId s = Op(g, OpKind::kMatMul, q, Transpose(g, k, -2, -1));
  ValueId y = Op(g, OpKind::kMatMul, Softmax(g, s), v);
  g.AddOutput(Transpose(g, y, 0, 1), "y");
  c.fused = 1;
  return c;
}

// No scale, no transpositions; and the same again with the probabilities also
// a graph output, which keeps that one unfused.
Case Plain(bool expose_probabilities) {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(5);
  const Dims qd{2, 7, 5}, kd{2, 9, 5}, vd{9, 3};  // v's batch broadcasts
  ValueId q = g.AddInput("q", ir::TensorType{DType::kF32, qd});
  ValueId k = g.AddInput("k", ir::TensorType{DType::kF32, kd});
  ValueId v = g.AddInput("v", ir::TensorType{DType::kF32, vd});
  c.inputs = {Random(qd, rng, -2, 2), Random(kd, rng, -2, 2), Random(vd, rng, -2, 2)};
  ValueId p = Softmax(g, Op(g, OpKind::kMatMul, q, Transpose(g, k, -2, -1)));
  g.AddOutput(Op(g, OpKind::kMatMul, p, v), "y");
  if (expose_probabilities) g.AddOutput(p, "p");
  c.fused = expose_probabilities ? 0 : 1;
  return c;
}

// aten::scaled_dot_product_attention as the importer makes it: one node on
// transposed operands, a BOOL key padding mask (true takes part), its result
// transposed back.
Case Imported() {
  Case c;
  ir::Graph& g = c.graph;
  std::mt19937 rng(6);
  const int64_t b = 2, l = 11, h = 3, d = 8;
  std::vector<ValueId> qkv;
  for (const char* name : {"q", "k", "v"}) {
    qkv.push_back(Transpose(g, g.AddInput(name, ir::TensorType{DType::kF32, Dims{b, l, h, d}}), 1, 2));
    c.inputs.push_back(Random({b, l, h, d}, rng, -2, 2));
  }
  ValueId keep = g.AddInput("keep", ir::TensorType{DType::kBool, Dims{b, 1, 1, l}});
  Tensor k = Tensor::Zeros(DType::kBool, {b, 1, 1, l});
  for (int64_t i = 0; i < k.num_elements(); ++i) k.data<bool>()[i] = i % l == 0 || (i * 7) % 3 != 0;
  c.inputs.push_back(k);
  ir::Attributes attrs;
  attrs.SetString("bool_mask", "keep");
  ValueId y = Out(g, g.AddNode(OpKind::kScaledDotProductAttention, {qkv[0], qkv[1], qkv[2], keep},
                               attrs, "aten::scaled_dot_product_attention"));
  g.AddOutput(Transpose(g, y, 1, 2), "y");
  c.fused = 1;
  return c;
}

void Check(const Case& c, const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<kernels::TensorInfo> infos;
  for (const Tensor& t : c.inputs) infos.push_back({t.dtype(), t.dims()});
  for (int threads : {1, 2}) {
    CompileOptions onednn, native, reference;
    onednn.num_threads = native.num_threads = reference.num_threads = threads;
    native.use_providers = reference.use_providers = false;
    reference.run_passes = false;
    auto a = Executable::Compile(c.graph, infos, onednn);
    auto b = Executable::Compile(c.graph, infos, native);
    auto r = Executable::Compile(c.graph, infos, reference);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE(r.ok()) << r.status();
    for (const Executable* exe : {a->get(), b->get()}) {
      const ir::Graph compiled = exe->graph().Compacted();
      EXPECT_EQ(Count(compiled, OpKind::kScaledDotProductAttention), c.fused)
          << ir::PrintGraph(compiled);
      if (c.fused > 0) {
        EXPECT_EQ(Count(compiled, OpKind::kSoftmax), 0) << ir::PrintGraph(compiled);
        EXPECT_EQ(Count(compiled, OpKind::kPermute), 0) << ir::PrintGraph(compiled);
      }
    }
    auto ra = (*a)->Run(c.inputs);
    auto rb = (*b)->Run(c.inputs);
    auto rr = (*r)->Run(c.inputs);
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    ASSERT_TRUE(rr.ok()) << rr.status();
    for (size_t i = 0; i < rr->size(); ++i) {
      const Tensor& want = (*rr)[i];
      ASSERT_EQ((*ra)[i].dims(), want.dims());
      ASSERT_EQ((*rb)[i].dims(), want.dims());
      // Kiln's own kernel runs the very ops: the same bytes.
      EXPECT_EQ(std::memcmp((*rb)[i].raw_data(), want.raw_data(), want.byte_size()), 0)
          << "output " << i << " threads " << threads;
      double diff = 0;
      for (int64_t e = 0; e < want.num_elements(); ++e) {
        diff = std::max(diff, std::fabs(double((*ra)[i].data<float>()[e]) - want.data<float>()[e]));
      }
      EXPECT_LE(diff, 2e-5) << "output " << i << " threads " << threads;
    }
  }
}

TEST(AttentionFusionTest, BertHeadsTransposedWithScaleAndMask) {
  Check(Bert(/*with_mask=*/true, 2, 33, 3, 16), "bert, mask");
  Check(Bert(/*with_mask=*/false, 1, 128, 4, 64), "bert, no mask");
}

TEST(AttentionFusionTest, SequenceFirstWithTheQueryScaled) {
  Check(SequenceFirst(50, 6, 32), "sequence first");
}

TEST(AttentionFusionTest, ImportedAttentionReadsItsTranspositionsInPlace) {
  Check(Imported(), "imported");
}

TEST(AttentionFusionTest, UnscaledAndBroadcastAndSharedProbabilities) {
  Check(Plain(false), "plain");
  Check(Plain(true), "probabilities exposed");
}

// Random uses of the node itself: batch dims broadcast between q, k, v and
// the mask, transposed operands and results, float and BOOL masks broadcast
// over rows or keys, every scale form. The oneDNN kernel (where its shape
// rules hold) against Kiln's own, which runs the unfused ops.
TEST(AttentionFusionTest, FusedKernelMatchesTheOpsOnRandomUses) {
  std::mt19937 rng(11);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int fast = 0;
  for (int i = 0; i < 60; ++i) {
    const int64_t l = uniform(1, 40), s = uniform(1, 40), d = uniform(1, 24), dv = uniform(1, 9);
    Dims batch;
    for (int64_t n = uniform(0, 2); n > 0; --n) batch.push_back(uniform(1, 3));
    auto operand = [&](int64_t rows, int64_t cols) {
      Dims dims(batch.begin() + uniform(0, static_cast<int64_t>(batch.size())), batch.end());
      for (int64_t& x : dims) {
        if (uniform(0, 9) < 3) x = 1;
      }
      dims.push_back(rows);
      dims.push_back(cols);
      return dims;
    };
    ir::Graph g;
    ir::Attributes attrs;
    std::vector<Tensor> inputs;
    std::vector<ValueId> values;
    auto add = [&](Tensor t, const char* perm) {
      if (perm != nullptr && uniform(0, 9) < 4) {
        const int64_t rank = t.rank(), a = uniform(0, rank - 1), b = uniform(0, rank - 1);
        attrs.SetInts(perm, {a, b - rank});
        Dims swapped = t.dims();
        std::swap(swapped[a], swapped[b]);
        t = Random(swapped, rng, -2, 2);
      }
      values.push_back(g.AddInput("in" + std::to_string(values.size()),
                                  ir::TensorType{t.dtype(), t.dims()}));
      inputs.push_back(std::move(t));
    };
    add(Random(operand(l, d), rng, -2, 2), "q_perm");
    add(Random(operand(s, d), rng, -2, 2), "k_perm");
    add(Random(operand(s, dv), rng, -2, 2), "v_perm");
    if (uniform(0, 2) > 0) {
      Dims m = operand(uniform(0, 2) == 0 ? 1 : l, uniform(0, 4) == 0 ? 1 : s);
      if (uniform(0, 1) == 0) {
        Tensor keep = Tensor::Zeros(DType::kBool, m);
        for (int64_t e = 0; e < keep.num_elements(); ++e) keep.data<bool>()[e] = uniform(0, 9) < 8;
        attrs.SetString("bool_mask", "keep");
        add(std::move(keep), nullptr);
      } else {
        add(Random(m, rng, -3, 3), nullptr);
      }
    }
    if (uniform(0, 1) == 0) attrs.SetFloat("scale", 0.25 * uniform(1, 8));
    if (uniform(0, 2) == 0) attrs.SetString("scale_on", "query");
    if (uniform(0, 2) == 0) {
      const int64_t rank = static_cast<int64_t>(batch.size()) + 2;
      attrs.SetInts("out_perm", {uniform(0, rank - 1), uniform(0, rank - 1)});
    }
    g.AddOutput(Out(g, g.AddNode(OpKind::kScaledDotProductAttention, values, attrs)), "y");
    std::vector<kernels::TensorInfo> infos;
    for (const Tensor& t : inputs) infos.push_back({t.dtype(), t.dims()});
    CompileOptions onednn, native;
    onednn.num_threads = native.num_threads = 2;
    native.use_providers = false;
    auto a = Executable::Compile(g, infos, onednn);
    auto b = Executable::Compile(g, infos, native);
    SCOPED_TRACE(ir::PrintGraph(g));
    ASSERT_EQ(a.ok(), b.ok()) << a.status() << " / " << b.status();
    if (!a.ok()) continue;  // operands the ops refuse (a transposition that breaks the shapes)
    Profiler profiler;
    RunOptions run;
    run.observer = &profiler;
    std::vector<RunValue> rv;
    for (const Tensor& t : inputs) rv.push_back(RunValue::Of(t));
    auto ra = (*a)->RunValues(rv, run);
    auto rb = (*b)->Run(inputs);
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    for (const ProfileNode& n : profiler.Finish().nodes) fast += n.kernel == "onednn.sdpa";
    const Tensor& got = (*ra)[0].tensor;
    const Tensor& want = (*rb)[0];
    ASSERT_EQ(got.dims(), want.dims());
    for (int64_t e = 0; e < want.num_elements(); ++e) {
      const double x = got.data<float>()[e], y = want.data<float>()[e];
      if (std::isnan(x) && std::isnan(y)) continue;
      ASSERT_LE(std::fabs(x - y), 2e-5 * std::max(1.0, std::fabs(y))) << "case " << i << " element " << e;
    }
  }
  EXPECT_GT(fast, 20);  // the fused kernel took most of them
}

// The kernel the compiler picks for the fused node is the oneDNN one where it
// applies; the profile names it.
TEST(AttentionFusionTest, TheFusedKernelRunsInThePlan) {
  for (const Case& c : {Bert(true, 1, 16, 2, 8), Imported()}) {
    std::vector<kernels::TensorInfo> infos;
    for (const Tensor& t : c.inputs) infos.push_back({t.dtype(), t.dims()});
    auto exe = Executable::Compile(c.graph, infos, CompileOptions{});
    ASSERT_TRUE(exe.ok()) << exe.status();
    Profiler profiler;
    RunOptions run;
    run.observer = &profiler;
    std::vector<RunValue> values;
    for (const Tensor& t : c.inputs) values.push_back(RunValue::Of(t));
    ASSERT_TRUE((*exe)->RunValues(values, run).ok());
    const Profile p = profiler.Finish();
    bool found = false;
    for (const ProfileNode& n : p.nodes) found = found || n.kernel == "onednn.sdpa";
    EXPECT_TRUE(found) << p.FormatTable();
  }
}

}  // namespace
}  // namespace kiln::runtime
