// The per-signature fallback (issue 17): a node whose kernel refuses a
// signature at compile time runs as its libtorch twin (ir/fallback_twin.h).
// libtorch stays out of this test: the Fallback kernel installed here stands
// in for engine/fallback's, computing the one op it is given (aten::linear
// with a 1-D weight, a dot product per row) so the numbers can be checked.
// Its own binary: the installed kernel is process-wide.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/ir/fallback_twin.h"
#include "engine/kernels/kernel.h"
#include "engine/runtime/executable.h"
#include "engine/runtime/model.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

absl::Status PrepareDot(kernels::PrepareContext& ctx) {
  if (ctx.node.attrs.GetString("op") != "aten::linear" || ctx.inputs.size() != 2) {
    return absl::UnimplementedError("the test's fallback only runs aten::linear(x, w)");
  }
  Dims out = ctx.inputs[0].dims;
  out.pop_back();
  ctx.outputs = {kernels::TensorInfo{DType::kF32, out}};
  return absl::OkStatus();
}

absl::Status EvalDot(kernels::EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& w = *ctx.inputs[1];
  const int64_t k = w.dim(0);
  for (int64_t r = 0; r < ctx.outputs[0]->num_elements(); ++r) {
    float acc = 0;
    for (int64_t i = 0; i < k; ++i) acc += x.data<float>()[r * k + i] * w.data<float>()[i];
    ctx.outputs[0]->data<float>()[r] = acc;
  }
  return absl::OkStatus();
}

// forward(x): F.linear(x, w) with w = [1, 2, 3, 4], as the TorchScript
// importer leaves it: a Linear node with its libtorch twin.
ir::Graph LinearGraph(Dims weight_dims) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  Tensor w = Tensor::Zeros(DType::kF32, weight_dims);
  for (int64_t i = 0; i < w.num_elements(); ++i) w.data<float>()[i] = static_cast<float>(i + 1);
  ir::ValueId wv = g.AddConstant(w, "w");
  ir::NodeId lin = g.AddNode(ir::OpKind::kLinear, {x, wv, ir::kNoValue}, {}, "aten::linear");
  ir::Attributes twin;
  twin.SetString("op", "aten::linear");
  twin.SetString("overload", "");
  twin.SetString("args", "in;in;none");
  ir::AddFallbackTwin(g.mutable_node(lin), twin, {0, 1});
  g.AddOutput(g.node(lin).outputs[0], "output0");
  return g;
}

Tensor Ones(Dims dims) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = 1.0f;
  return t;
}

class FallbackTwinTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kernels::InstallKernel(
        kernels::KernelDef{ir::OpKind::kFallback, DType::kUnknown, PrepareDot, EvalDot});
  }
};

TEST_F(FallbackTwinTest, TwinIsHiddenFromListingsAndSwappedOnlyOnTheNodeAsImported) {
  ir::Graph g = LinearGraph({4});
  EXPECT_THAT(ir::PrintGraph(g), ::testing::Not(HasSubstr("fallback.")));
  ir::Node node = g.node(g.value(g.outputs()[0]).producer);
  ir::Node fused = node;
  fused.attrs.SetString("activation", "relu");  // a pass fused an epilogue into it
  EXPECT_FALSE(ir::SwapInFallbackTwin(fused));
  ir::Node more = node;
  more.inputs[2] = more.inputs[0];  // a pass gave it a bias
  more.inputs.push_back(more.inputs[0]);
  EXPECT_FALSE(ir::SwapInFallbackTwin(more));
  ASSERT_TRUE(ir::SwapInFallbackTwin(node));
  EXPECT_EQ(node.kind, ir::OpKind::kFallback);
  EXPECT_EQ(node.attrs.GetString("op"), "aten::linear");
  EXPECT_EQ(node.attrs.GetString("args"), "in;in;none");
  EXPECT_FALSE(node.attrs.Has("fallback.inputs"));
  EXPECT_EQ(node.inputs, (std::vector<ir::ValueId>{g.node(g.value(g.outputs()[0]).producer)
                                                        .inputs[0],
                                                    g.node(g.value(g.outputs()[0]).producer)
                                                        .inputs[1]}));
}

TEST_F(FallbackTwinTest, RefusedSignatureRunsThroughTheFallback) {
  // Linear's kernel wants a 2-D weight: this signature goes to the twin.
  auto exe = Executable::Compile(LinearGraph({4}), {kernels::TensorInfo{DType::kF32, {3, 4}}}, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  ASSERT_EQ((*exe)->libtorch_fallbacks().size(), 1u);
  EXPECT_THAT((*exe)->libtorch_fallbacks()[0], HasSubstr("aten::linear ("));
  EXPECT_THAT((*exe)->libtorch_fallbacks()[0], HasSubstr("2-D weight"));
  auto out = (*exe)->Run({Ones({3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dims(), (Dims{3}));
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[2], 10.0f);  // 1 + 2 + 3 + 4
}

TEST_F(FallbackTwinTest, AcceptedSignatureStaysNative) {
  auto exe =
      Executable::Compile(LinearGraph({2, 4}), {kernels::TensorInfo{DType::kF32, {3, 4}}}, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_TRUE((*exe)->libtorch_fallbacks().empty());
  EXPECT_TRUE((*exe)->is_static());
}

TEST_F(FallbackTwinTest, ModelCountsSignaturesThatFellBack) {
  auto m = Model::Create(LinearGraph({4}), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->Infer({{"x", Ones({3, 4})}}, {}).ok());
  ASSERT_TRUE((*m)->Infer({{"x", Ones({2, 5, 4})}}, {}).ok());
  ASSERT_TRUE((*m)->Infer({{"x", Ones({3, 4})}}, {}).ok());  // compiled already
  EXPECT_EQ((*m)->signature_fallbacks(), (std::map<std::string, int>{{"aten::linear", 2}}));
}

}  // namespace
}  // namespace kiln::runtime
