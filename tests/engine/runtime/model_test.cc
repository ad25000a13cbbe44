#include "engine/runtime/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

// forward(self, x, bias): Linear(x) + bias, with a 3x4 weight.
ir::Graph TwoInputGraph() {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId bias = g.AddInput("bias", {});
  Tensor w = Tensor::Zeros(DType::kF32, {3, 4});
  for (int i = 0; i < 12; ++i) w.data<float>()[i] = 0.5f * i;
  ir::ValueId wv = g.AddConstant(w, "fc.weight");
  ir::NodeId lin = g.AddNode(ir::OpKind::kLinear, {x, wv, ir::kNoValue}, {}, "aten::linear");
  ir::NodeId add = g.AddNode(ir::OpKind::kAdd, {g.node(lin).outputs[0], bias}, {}, "aten::add");
  g.AddOutput(g.node(add).outputs[0], "output0");
  return g;
}

NamedTensor F32(std::string name, Dims dims) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = 1.0f;
  return NamedTensor{std::move(name), t};
}

std::string InferError(const Model& m, const std::vector<NamedTensor>& in,
                       const std::vector<std::string>& outs = {}) {
  auto r = m.Infer(in, outs);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(ModelTest, ContractComesFromTheGraph) {
  auto m = Model::Create(TwoInputGraph(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& in = (*m)->inputs();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].name, "x");
  EXPECT_EQ(in[0].dtype, DType::kF32);
  // Linear's weight fixes the last dim; any leading dims are taken, as in PyTorch.
  EXPECT_EQ(in[0].dims, (Dims{-1, 4}));
  EXPECT_TRUE(in[0].any_leading_dims);
  EXPECT_EQ(in[1].name, "bias");
  EXPECT_FALSE(in[1].dims.has_value());  // nothing fixes the rank of bias
}

TEST(ModelTest, OutputsProbedWhenInputRanksAreKnown) {
  ModelOptions opts;
  opts.inputs = {TensorSpec{"", DType::kUnknown, Dims{-1, 4}},
                 TensorSpec{"", DType::kF32, Dims{3}}};
  auto m = Model::Create(TwoInputGraph(), opts);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->outputs().size(), 1u);
  EXPECT_EQ((*m)->outputs()[0].dtype, DType::kF32);
  EXPECT_EQ((*m)->outputs()[0].dims, (Dims{-1, 3}));
  EXPECT_EQ((*m)->outputs()[0].path, "result[0]");
  EXPECT_EQ((*m)->inputs()[1].dtype_source, "declared");
}

TEST(ModelTest, InputWithNothingImplyingADtypeIsOpenAndCompiledPerRequest) {
  auto m = Model::Create(TwoInputGraph(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->inputs()[0].dtype, DType::kF32);  // Linear's weight
  EXPECT_EQ((*m)->inputs()[0].dtype_source, "implied");
  EXPECT_EQ((*m)->inputs()[1].dtype, DType::kUnknown);  // bias: only added
  EXPECT_EQ((*m)->inputs()[1].dtype_source, "");
  EXPECT_THAT(InferError(**m, {F32("bias", {3})}),
              HasSubstr("missing input 'x' (FP32[..., 4])"));
  EXPECT_THAT(InferError(**m, {F32("x", {1, 4})}),
              HasSubstr("missing input 'bias' (any datatype[any rank])"));
}

// forward(self, ids, mask, v): embedding(ids) rows, masked by mask, plus v.
ir::Graph EmbeddingMaskGraph() {
  ir::Graph g;
  ir::ValueId ids = g.AddInput("ids", {});
  ir::ValueId mask = g.AddInput("mask", {});
  ir::ValueId v = g.AddInput("v", {});
  ir::ValueId table = g.AddConstant(Tensor::Zeros(DType::kF32, {10, 4}), "embed.weight");
  ir::Attributes attrs;
  attrs.SetInt("axis", 0);
  ir::NodeId emb = g.AddNode(ir::OpKind::kIndexSelect, {table, ids}, attrs, "aten::embedding");
  ir::NodeId where =
      g.AddNode(ir::OpKind::kWhere, {mask, v, g.node(emb).outputs[0]}, {}, "aten::masked_fill");
  g.AddOutput(g.node(where).outputs[0], "output0");
  return g;
}

TEST(ModelTest, EmbeddingIndicesAreInt64AndWhereConditionsBool) {
  auto m = Model::Create(EmbeddingMaskGraph(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->inputs()[0].dtype, DType::kInt64);
  EXPECT_EQ((*m)->inputs()[1].dtype, DType::kBool);
  EXPECT_EQ((*m)->inputs()[2].dtype, DType::kUnknown);
  NamedTensor ids{"ids", Tensor::Zeros(DType::kF32, {2})};
  NamedTensor mask{"mask", Tensor::Zeros(DType::kBool, {2, 4})};
  EXPECT_THAT(InferError(**m, {ids, mask, F32("v", {2, 4})}),
              HasSubstr("input 'ids': expected datatype INT64 or INT32, got FP32 "
                        "(INT64 is implied"));
  // Token ids: INT32 also runs (embedding takes INT32 indices), with the same result.
  EXPECT_EQ((*m)->inputs()[0].also_accepts, std::vector<DType>{DType::kInt32});
  for (DType d : {DType::kInt64, DType::kInt32}) {
    NamedTensor typed{"ids", Tensor::Zeros(d, {2})};
    auto out = (*m)->Infer({typed, mask, F32("v", {2, 4})}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].tensor.dims(), (Dims{2, 4}));
  }
  // Declared INT64 in the config: exactly INT64.
  ModelOptions opts;
  opts.inputs = {TensorSpec{"", DType::kInt64}};
  auto declared = Model::Create(EmbeddingMaskGraph(), opts);
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_TRUE((*declared)->inputs()[0].also_accepts.empty());
  NamedTensor ids32{"ids", Tensor::Zeros(DType::kInt32, {2})};
  EXPECT_THAT(InferError(**declared, {ids32, mask, F32("v", {2, 4})}),
              HasSubstr("expected datatype INT64, got INT32 (INT64 is declared"));
}

// What an archive's sample inputs go through (import_checks.cc): Infer's own
// checks, values in graph input order, nothing compiled or run.
TEST(ModelTest, MatchInputsChecksWhatInferChecksAndRunsNothing) {
  auto m = Model::Create(EmbeddingMaskGraph(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  NamedTensor ids32{"ids", Tensor::Zeros(DType::kInt32, {2})};
  NamedTensor mask{"mask", Tensor::Zeros(DType::kBool, {2, 4})};
  auto matched = (*m)->MatchInputs({F32("v", {2, 4}), mask, ids32});
  ASSERT_TRUE(matched.ok()) << matched.status();
  ASSERT_EQ(matched->args.size(), 3u);
  EXPECT_EQ(matched->args[0].tensor.dtype(), DType::kInt32);  // also_accepts
  EXPECT_EQ(matched->args[1].tensor.dtype(), DType::kBool);
  EXPECT_EQ(matched->args[2].tensor.dims(), (Dims{2, 4}));
  ASSERT_EQ(matched->signature.size(), 3u);
  EXPECT_EQ(matched->signature[0].dtype, DType::kInt32);
  EXPECT_FALSE(matched->has_list);
  EXPECT_EQ((*m)->num_compiled(), 0u);
  NamedTensor ids_f32{"ids", Tensor::Zeros(DType::kF32, {2})};
  auto refused = (*m)->MatchInputs({ids_f32, mask, F32("v", {2, 4})});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(std::string(refused.status().message()),
            InferError(**m, {ids_f32, mask, F32("v", {2, 4})}));
  EXPECT_THAT(std::string((*m)->MatchInputs({ids32, mask}).status().message()),
              HasSubstr("missing input 'v'"));
}

TEST(ModelTest, TritonPositionalNamesAreAliases) {
  auto m = Model::Create(TwoInputGraph(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = (*m)->Infer({F32("INPUT__0", {2, 4}), F32("INPUT__1", {3})}, {"OUTPUT__0"});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "OUTPUT__0");  // the name it was requested by
  EXPECT_THAT(InferError(**m, {F32("x", {2, 4}), F32("INPUT__0", {2, 4}), F32("bias", {3})}),
              HasSubstr("input 'INPUT__0' given twice (x alias INPUT__0)"));
  EXPECT_THAT(InferError(**m, {F32("INPUT__2", {2, 4})}), HasSubstr("unknown input 'INPUT__2'"));
  EXPECT_THAT(InferError(**m, {F32("x", {2, 4}), F32("bias", {3})}, {"output0", "OUTPUT__0"}),
              HasSubstr("output 'OUTPUT__0' requested twice"));
  EXPECT_EQ(InputAlias(3), "INPUT__3");
  EXPECT_EQ(OutputAlias(0), "OUTPUT__0");
}

TEST(ModelTest, OutputPathsFollowTheImportersStructuredNames) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("pair.1", {});
  g.AddOutput(x, "output1.0");
  g.AddOutput(x, "logits");
  ModelOptions opts;
  opts.outputs = {TensorSpec{"renamed", DType::kUnknown, std::nullopt}};
  auto m = Model::Create(std::move(g), opts);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->inputs()[0].path, "pair[1]");
  EXPECT_EQ((*m)->outputs()[0].name, "renamed");
  EXPECT_EQ((*m)->outputs()[0].path, "result[1][0]");  // where it is, whatever it is called
  EXPECT_EQ((*m)->outputs()[1].path, "result['logits']");
}

TEST(ModelTest, InfersAndCachesPerSignature) {
  auto m = Model::Create(TwoInputGraph(), {});
  ASSERT_TRUE(m.ok());
  auto out = (*m)->Infer({F32("bias", {3}), F32("x", {2, 4})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "output0");
  EXPECT_EQ((*out)[0].tensor.dims(), (Dims{2, 3}));
  // row i of W sums to 0.5 * (4i + 0+1+2+3); plus bias 1.
  EXPECT_FLOAT_EQ((*out)[0].tensor.data<float>()[1], 0.5f * (16 + 6) + 1);
  ASSERT_TRUE((*m)->Infer({F32("bias", {3}), F32("x", {5, 4})}, {}).ok());
  ASSERT_TRUE((*m)->Infer({F32("bias", {3}), F32("x", {2, 4})}, {}).ok());
  EXPECT_EQ((*m)->num_compiled(), 2u);
}

// A run on fewer threads (a server's team split under load) has a plan of
// its own, compiled once, with the same answer; 0 or the model's count is
// the model's plan.
TEST(ModelTest, RunOnAnotherThreadCountCompilesItsOwnPlanOnce) {
  ModelOptions opts;
  opts.compile.num_threads = 2;
  auto m = Model::Create(TwoInputGraph(), opts);
  ASSERT_TRUE(m.ok());
  const std::vector<NamedTensor> in = {F32("bias", {3}), F32("x", {2, 4})};
  auto wide = (*m)->Infer(in, {});
  ASSERT_TRUE(wide.ok()) << wide.status();
  RunOptions same;
  same.num_threads = 2;
  ASSERT_TRUE((*m)->Infer(in, {}, same).ok());
  EXPECT_EQ((*m)->num_compiled(), 1u);
  RunOptions narrow;
  narrow.num_threads = 1;
  for (int i = 0; i < 2; ++i) {
    auto one = (*m)->Infer(in, {}, narrow);
    ASSERT_TRUE(one.ok()) << one.status();
    ASSERT_EQ((*one)[0].tensor.dims(), (*wide)[0].tensor.dims());
    for (int64_t k = 0; k < (*one)[0].tensor.num_elements(); ++k) {
      EXPECT_EQ((*one)[0].tensor.data<float>()[k], (*wide)[0].tensor.data<float>()[k]) << k;
    }
  }
  EXPECT_EQ((*m)->num_compiled(), 2u);
  // In graph input order: x, bias.
  auto exe = (*m)->GetExecutable(
      {{DType::kF32, {2, 4}, nullptr, true}, {DType::kF32, {3}, nullptr, true}}, 1);
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*m)->num_compiled(), 2u);
}

TEST(ModelTest, ValidationNamesTheInputAndSaysExpectedVersusGot) {
  auto m = Model::Create(TwoInputGraph(), {});
  ASSERT_TRUE(m.ok());
  const Model& model = **m;
  EXPECT_THAT(InferError(model, {F32("x", {1, 4}), F32("y", {3})}),
              HasSubstr("unknown input 'y'; the model's inputs are: x, bias"));
  EXPECT_THAT(InferError(model, {F32("x", {1, 4})}), HasSubstr("missing input 'bias'"));
  EXPECT_THAT(InferError(model, {F32("x", {1, 4}), F32("x", {1, 4}), F32("bias", {3})}),
              HasSubstr("input 'x' given twice"));
  // A 1-D or 3-D input is a Linear's too, as in PyTorch; the last dim is the weight's.
  EXPECT_THAT(InferError(model, {F32("x", {1, 5}), F32("bias", {3})}),
              HasSubstr("input 'x': expected shape FP32[..., 4], got [1, 5]"));
  EXPECT_THAT(InferError(model, {F32("x", {}), F32("bias", {3})}),
              HasSubstr("input 'x': expected shape FP32[..., 4], got []"));
  EXPECT_TRUE(model.Infer({F32("x", {4}), F32("bias", {3})}, {}).ok());
  EXPECT_TRUE(model.Infer({F32("x", {2, 5, 4}), F32("bias", {3})}, {}).ok());
  NamedTensor ints{"x", Tensor::Zeros(DType::kInt64, {1, 4})};
  EXPECT_THAT(InferError(model, {ints, F32("bias", {3})}),
              HasSubstr("input 'x': expected datatype FP32, got INT64 (FP32 is implied"));
  EXPECT_THAT(InferError(model, {F32("x", {1, 4}), F32("bias", {3})}, {"logits"}),
              HasSubstr("unknown output 'logits'"));
}

TEST(ModelTest, ConfigRenamesInputsAndOutputs) {
  ModelOptions opts;
  opts.inputs = {TensorSpec{"features", DType::kUnknown, std::nullopt}};
  opts.outputs = {TensorSpec{"scores", DType::kUnknown, std::nullopt}};
  auto m = Model::Create(TwoInputGraph(), opts);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->inputs()[0].name, "features");
  EXPECT_EQ((*m)->inputs()[1].name, "bias");
  auto out = (*m)->Infer({F32("features", {1, 4}), F32("bias", {3})}, {"scores"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].name, "scores");
}

TEST(ModelTest, RejectsMoreDeclaredInputsThanTheModelHas) {
  ModelOptions opts;
  opts.inputs.resize(3);
  auto m = Model::Create(TwoInputGraph(), opts);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
}

// forward(self, xs: List[Tensor], bias): cat(xs, 0) + bias.
ir::Graph ListInputGraph() {
  ir::Graph g;
  ir::ValueId xs = g.AddInput("xs", {}, ir::ValueKind::kTensorList);
  ir::ValueId bias = g.AddInput("bias", {});
  ir::Attributes axis;
  axis.SetInt("axis", 0);
  ir::NodeId cat = g.AddNode(ir::OpKind::kConcat, {xs}, axis, "aten::cat");
  ir::NodeId add = g.AddNode(ir::OpKind::kAdd, {g.node(cat).outputs[0], bias}, {}, "aten::add");
  g.AddOutput(g.node(add).outputs[0], "output0");
  return g;
}

TEST(ModelTest, ListInputIsSentAsNumberedElements) {
  auto m = Model::Create(ListInputGraph(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& in = (*m)->inputs();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].name, "xs.0");
  EXPECT_EQ(in[0].list, "xs");
  EXPECT_EQ(in[0].path, "xs[0]");
  EXPECT_TRUE(in[1].list.empty());
  for (int n : {1, 3}) {
    std::vector<NamedTensor> request;
    for (int k = n - 1; k >= 0; --k) request.push_back(F32(absl::StrCat("xs.", k), {k + 1, 2}));
    request.push_back(F32("bias", {2}));
    auto out = (*m)->Infer(request, {});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    const int64_t rows = n * (n + 1) / 2;  // 1 + 2 + ... + n
    EXPECT_EQ((*out)[0].tensor.dims(), (Dims{rows, 2}));
    for (int64_t i = 0; i < rows * 2; ++i) EXPECT_EQ((*out)[0].tensor.data<float>()[i], 2.0f);
  }
  EXPECT_EQ((*m)->num_compiled(), 2u);  // one executable per list length
  // The same length again reuses its executable.
  ASSERT_TRUE((*m)->Infer({F32("xs.0", {1, 2}), F32("bias", {2})}, {}).ok());
  EXPECT_EQ((*m)->num_compiled(), 2u);
}

// A gate that records what it is shown, and runs the request itself.
class RecordingGate : public SignatureGate {
 public:
  absl::StatusOr<std::optional<std::vector<RunValue>>> Admit(
      const Model& model, const std::string& key, const std::vector<kernels::TensorInfo>& signature,
      const std::vector<RunValue>& args, const RunOptions& run) const override {
    keys.push_back(key);
    shown.push_back(args);
    ASSIGN_OR_RETURN(std::vector<RunValue> outs, model.RunMatched(signature, args, run));
    return std::optional<std::vector<RunValue>>(std::move(outs));
  }
  std::map<std::string, std::string> Properties() const override { return {}; }

  mutable std::vector<std::string> keys;
  mutable std::vector<std::vector<RunValue>> shown;
};

TEST(ModelTest, GateSeesAListInputAsAListAndRunsIt) {
  auto gate = std::make_shared<RecordingGate>();
  ModelOptions opts;
  opts.gate = gate;
  auto m = Model::Create(ListInputGraph(), opts);
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = (*m)->Infer({F32("xs.0", {1, 2}), F32("xs.1", {2, 2}), F32("bias", {2})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor.dims(), (Dims{3, 2}));
  ASSERT_EQ(gate->keys.size(), 1u);
  // The list lengths keep two lists of other lengths but the same elements apart.
  EXPECT_EQ(gate->keys[0], "lists=2,-;FP32[1, 2];FP32[2, 2];FP32[2];");
  ASSERT_EQ(gate->shown[0].size(), 2u);  // one value per graph input
  EXPECT_EQ(gate->shown[0][0].kind, RunValue::Kind::kTensorList);
  EXPECT_EQ(gate->shown[0][0].list.size(), 2u);
  EXPECT_EQ(gate->shown[0][1].kind, RunValue::Kind::kTensor);
}

TEST(ModelTest, ListInputWithAGapOrNoElementIsRefusedNamingTheMissingOne) {
  auto m = Model::Create(ListInputGraph(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  std::string msg = InferError(**m, {F32("xs.0", {1, 2}), F32("xs.2", {1, 2}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("missing input 'xs.1'"));
  EXPECT_THAT(msg, HasSubstr("xs.0 ... xs.2"));
  // A huge index is a gap too, not an allocation.
  msg = InferError(**m, {F32("xs.0", {1, 2}), F32("xs.4000000000", {1, 2}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("missing input 'xs.1'"));
  msg = InferError(**m, {F32("xs.1", {1, 2}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("missing input 'xs.0'"));
  msg = InferError(**m, {F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("missing input 'xs.0'"));
  msg = InferError(**m, {F32("xs.0", {1, 2}), F32("xs.0", {1, 2}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("'xs.0' given twice"));
  // Not element names: a leading zero, a non-number.
  for (const char* name : {"xs.01", "xs.a", "xs."}) {
    msg = InferError(**m, {F32("xs.0", {1, 2}), F32(name, {1, 2}), F32("bias", {2})});
    EXPECT_THAT(msg, HasSubstr(absl::StrCat("unknown input '", name, "'")));
  }
}

TEST(ModelTest, ParameterWithADefaultIsOptionalAndItsDefaultRuns) {
  // forward(self, x: FP32[2, 3], scale: float = 2.5) -> x * scale
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", ir::TensorType{DType::kF32, Dims{2, 3}});
  ir::ValueId scale =
      g.AddInput("scale", ir::TensorType{DType::kF64, Dims{}}, ir::ValueKind::kFloat);
  Tensor d = Tensor::Zeros(DType::kF64, {});
  *d.data<double>() = 2.5;
  g.mutable_value(scale).default_value = d;
  g.AddOutput(g.node(g.AddNode(ir::OpKind::kMul, {x, scale})).outputs[0], "output0");
  auto m = Model::Create(std::move(g), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE((*m)->inputs()[1].optional);
  EXPECT_EQ((*m)->inputs()[1].default_text, "2.5");
  auto out = (*m)->Infer({F32("x", {2, 3})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor.data<float>()[0], 2.5f);
  Tensor given = Tensor::Zeros(DType::kF64, {});
  *given.data<double>() = -1.0;
  out = (*m)->Infer({F32("x", {2, 3}), NamedTensor{"scale", given}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor.data<float>()[0], -1.0f);
}

TEST(ModelTest, ListInputOfAKnownLengthCompilesToAStaticPlan) {
  // cat(xs) + bias with xs expanded to three elements: the passes resolve the
  // list, so the plan is static and its output shape known before any run.
  absl::StatusOr<ir::Graph> expanded = ExpandListInputs(ListInputGraph(), {size_t{3}, std::nullopt});
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  std::vector<kernels::TensorInfo> sig;
  for (int k = 0; k < 3; ++k) sig.push_back(kernels::TensorInfo{DType::kF32, {k + 1, 2}, nullptr, true});
  sig.push_back(kernels::TensorInfo{DType::kF32, {2}, nullptr, true});
  auto exe = Executable::Compile(*expanded, sig, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_TRUE((*exe)->is_static()) << (*exe)->num_dynamic_steps() << " dynamic steps";
  EXPECT_EQ((*exe)->output_infos()[0].dims, (Dims{6, 2}));
  // So metadata knows a list model's outputs: cat's rows follow the list's length.
  ModelOptions opts;
  opts.inputs = {TensorSpec{"", DType::kF32, Dims{1, 2}}, TensorSpec{"", DType::kF32, Dims{2}}};
  auto m = Model::Create(ListInputGraph(), opts);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->outputs()[0].dtype, DType::kF32);
  EXPECT_EQ((*m)->outputs()[0].dims, (Dims{-1, 2}));
  // Without the passes the list stays dynamic (what the pass changes).
  CompileOptions no_passes;
  no_passes.run_passes = false;
  auto dynamic = Executable::Compile(*expanded, sig, no_passes);
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  EXPECT_FALSE((*dynamic)->is_static());
}

TEST(ModelTest, ListInputSentWholeIsItsElementsStackedOnANewFirstDim) {
  auto m = Model::Create(ListInputGraph(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  // Three [1, 2] elements: cat gives [3, 2]; the same plan as three xs.k.
  auto out = (*m)->Infer({F32("xs", {3, 1, 2}), F32("bias", {2})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor.dims(), (Dims{3, 2}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ((*out)[0].tensor.data<float>()[i], 2.0f);
  ASSERT_TRUE(
      (*m)->Infer({F32("xs.0", {1, 2}), F32("xs.1", {1, 2}), F32("xs.2", {1, 2}), F32("bias", {2})},
                  {})
          .ok());
  EXPECT_EQ((*m)->num_compiled(), 1u);
  // Whole and as elements at once, a 0-dim whole list.
  std::string msg = InferError(**m, {F32("xs", {1, 1, 2}), F32("xs.0", {1, 2}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("given both whole ('xs') and as elements"));
  msg = InferError(**m, {F32("xs.0", {1, 2}), F32("xs", {1, 1, 2}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("given both whole ('xs') and as elements"));
  msg = InferError(**m, {F32("xs", {}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("new first dim"));
  // Empty elements cost no payload: the length is bounded, not allocated.
  msg = InferError(**m, {F32("xs", {4000000000, 0}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("a list of 4000000000 elements; at most 4096"));
  std::vector<NamedTensor> many;
  for (int k = 0; k <= 4096; ++k) many.push_back(F32(absl::StrCat("xs.", k), {0, 2}));
  many.push_back(F32("bias", {2}));
  msg = InferError(**m, many);
  EXPECT_THAT(msg, HasSubstr("list 'xs' has more than 4096 elements"));
  // The contract checks each element.
  ModelOptions opts;
  opts.inputs = {TensorSpec{"", DType::kF32, Dims{-1, 2}}};
  auto declared = Model::Create(ListInputGraph(), opts);
  ASSERT_TRUE(declared.ok()) << declared.status();
  msg = InferError(**declared, {F32("xs", {2, 1, 3}), F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("expected shape FP32[-1, 2], got [1, 3] per element ([2, 1, 3] stacked)"));
  // An empty list is [0, ...] (or [0]); the model itself decides what that means.
  msg = InferError(**m, {F32("bias", {2})});
  EXPECT_THAT(msg, HasSubstr("shape [0] for an empty list"));
}


// forward(self, x): return torch.split(x, split_size, 1) (or chunk, unbind):
// a list whose length only x's shape tells, named as a whole result.
ir::Graph SplitListGraph(const std::string& output_name, int64_t split_size, int64_t chunks) {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::Attributes attrs;
  attrs.SetInt("axis", 1);
  if (split_size > 0) attrs.SetInt("split_size", split_size);
  if (chunks > 0) attrs.SetInt("chunks", chunks);
  ir::NodeId split = g.AddNode(ir::OpKind::kSplitList, {x}, std::move(attrs), "aten::split");
  g.mutable_value(g.node(split).outputs[0]).kind = ir::ValueKind::kTensorList;
  g.AddOutput(g.node(split).outputs[0], output_name);
  return g;
}

NamedTensor Iota(std::string name, DType dtype, Dims dims) {
  Tensor t = Tensor::Zeros(dtype, std::move(dims));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kInt64) {
      t.data<int64_t>()[i] = i;
    } else {
      t.data<float>()[i] = static_cast<float>(i);
    }
  }
  return NamedTensor{std::move(name), t};
}

TEST(ModelTest, ListReturnedWholeComesBackAsTheResultsPositions) {
  ModelOptions opts;
  opts.inputs = {TensorSpec{"", DType::kInt64, Dims{2, -1}}};
  auto m = Model::Create(SplitListGraph("output", 2, 0), opts);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->outputs()[0].path, "result");
  // x = [[0 1 2 3 4], [5 6 7 8 9]] split by 2 along dim 1: 3 pieces, the last one narrower.
  auto out = (*m)->Infer({Iota("x", DType::kInt64, {2, 5})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[0].name, "output0");
  EXPECT_EQ((*out)[1].name, "output1");
  EXPECT_EQ((*out)[2].name, "output2");
  EXPECT_EQ((*out)[0].tensor.dims(), (Dims{2, 2}));
  EXPECT_EQ((*out)[2].tensor.dims(), (Dims{2, 1}));
  EXPECT_EQ((*out)[2].tensor.dtype(), DType::kInt64);
  const int64_t* p1 = (*out)[1].tensor.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(p1, p1 + 4), (std::vector<int64_t>{2, 3, 7, 8}));
  EXPECT_EQ((*out)[2].tensor.data<int64_t>()[1], 9);
  // Another width, another length.
  out = (*m)->Infer({Iota("x", DType::kInt64, {2, 8})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->size(), 4u);
}

TEST(ModelTest, NestedListOutputElementsAppendTheirIndex) {
  // chunk(x, 3, 1) of a width-4 input is 2 pieces of 2 (torch.chunk's rule).
  auto m = Model::Create(SplitListGraph("output1", 0, 3), {});
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = (*m)->Infer({Iota("x", DType::kF32, {1, 4})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].name, "output1.0");
  EXPECT_EQ((*out)[1].name, "output1.1");
  EXPECT_EQ((*out)[1].tensor.dims(), (Dims{1, 2}));
  EXPECT_EQ((*out)[1].tensor.data<float>()[0], 2.0f);
  // unbind(x, 1): each column, the axis dropped.
  m = Model::Create(SplitListGraph("output", 0, 0), {});
  ASSERT_TRUE(m.ok()) << m.status();
  out = (*m)->Infer({Iota("x", DType::kF32, {2, 3})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[2].tensor.dims(), (Dims{2}));
  EXPECT_EQ((*out)[2].tensor.data<float>()[1], 5.0f);
}

}  // namespace
}  // namespace kiln::runtime
