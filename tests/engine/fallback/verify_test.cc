// Verified import (engine/verify, with libtorch's half run in process by
// LocalTorchReference), and fixtures that need the fallback or run-time shapes
// (shufflenet_v2, the deliberately unsupported model) end to end against the
// outputs libtorch wrote for the same files.
#include "engine/verify/verify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <torch/csrc/jit/api/module.h>

#include "absl/strings/str_cat.h"
#include "engine/fallback/fallback.h"
#include "engine/fallback/torch_reference.h"
#include "engine/importer/torchscript/torchscript_importer.h"

namespace kiln::fallback {
namespace {

using verify::OutputCheck;
using verify::VerifyOptions;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Fixture(const std::string& name) {
  const char* dir = std::getenv("KILN_FIXTURES");
  return absl::StrCat(dir ? dir : KILN_FIXTURES_DIR, "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Reads a little-endian float32 .npy as make_models.py writes them.
Tensor ReadF32Npy(const std::string& path) {
  const std::string bytes = ReadFile(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return {};
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
  const std::string header = bytes.substr(10, header_len);
  if (header.find("'<f4'") == std::string::npos) return {};
  const size_t open = header.find("'shape': (") + 10;
  std::stringstream shape(header.substr(open, header.find(')', open) - open));
  Dims dims;
  for (std::string tok; std::getline(shape, tok, ',');) {
    if (tok.find_first_not_of(' ') != std::string::npos) dims.push_back(std::stoll(tok));
  }
  Tensor t = Tensor::Zeros(DType::kF32, dims);
  if (bytes.size() != 10 + header_len + t.byte_size()) return {};
  std::memcpy(t.raw_data(), bytes.data() + 10 + header_len, t.byte_size());
  return t;
}

// The verified import with libtorch's half in this process.
absl::StatusOr<verify::VerifyReport> VerifyOnce(const std::string& bytes,
                                                const importer::ImportOptions& import,
                                                const runtime::Model& model,
                                                const VerifyOptions& options) {
  LocalTorchReference reference(bytes);
  return verify::VerifyOnce(reference, import, model, options);
}

// The same with the fallback retries; a rebuilt model is the file imported
// again with the forced ops.
absl::StatusOr<verify::VerifiedModel> VerifyModel(const std::string& bytes,
                                                  std::unique_ptr<runtime::Model> model,
                                                  const VerifyOptions& options) {
  LocalTorchReference reference(bytes);
  return verify::VerifyModel(
      reference, {}, std::move(model),
      [&](const importer::ImportOptions& forced) -> absl::StatusOr<std::unique_ptr<runtime::Model>> {
        absl::StatusOr<ir::Graph> graph = importer::ImportTorchScript(bytes, forced);
        if (!graph.ok()) return graph.status();
        return runtime::Model::Create(*std::move(graph), {});
      },
      options);
}

class VerifyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { InstallFallbackKernel(); }
};

std::unique_ptr<runtime::Model> Build(ir::Graph graph) {
  auto model = runtime::Model::Create(std::move(graph), {});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// A scripted module defined from `source`: its saved archive, and the model
// Kiln imports from it (null when the import fails, with a test failure).
struct Scripted {
  std::string bytes;
  std::unique_ptr<runtime::Model> model;
};

Scripted ScriptedModel(const std::string& source) {
  torch::jit::Module module("M");
  module.define(source);
  std::ostringstream s;
  module.save(s);
  Scripted out{s.str(), nullptr};
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScript(out.bytes);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (graph.ok()) out.model = Build(*std::move(graph));
  return out;
}

// ---------------------------------------------------------------- fixtures

class FixtureNumericsTest : public VerifyTest, public ::testing::WithParamInterface<const char*> {};

// Kiln's output for the fixture's sample input against libtorch's.
TEST_P(FixtureNumericsTest, MatchesLibtorch) {
  const std::string name = GetParam();
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScriptFile(Fixture(name + ".pt"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::cout << name << ": fallback ops [";
  for (const std::string& op : importer::FallbackOps(*graph)) std::cout << " " << op;
  std::cout << " ]\n";
  std::unique_ptr<runtime::Model> model = Build(*std::move(graph));
  ASSERT_NE(model, nullptr);
  Tensor x = ReadF32Npy(Fixture(name + ".input.x.npy"));
  ASSERT_EQ(x.dtype(), DType::kF32);
  std::vector<runtime::NamedTensor> inputs = {{model->inputs()[0].name, x}};
  auto out = model->Infer(inputs, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor want = ReadF32Npy(Fixture(name + ".output0.npy"));
  const Tensor& got = (*out)[0].tensor;
  ASSERT_EQ(got.dims(), want.dims());
  double max_ref = 0, max_err = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double{want.data<float>()[i]}));
    max_err = std::max(max_err,
                       std::fabs(double{got.data<float>()[i]} - double{want.data<float>()[i]}));
  }
  EXPECT_LE(max_err, 1e-4 * max_ref + 1e-6) << name << ": max |ref| " << max_ref;
  // Timing, for the report: the median of a few runs after a warm-up.
  std::vector<double> ms;
  for (int i = 0; i < 6; ++i) {
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(model->Infer(inputs, {}).ok());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin() + 1, ms.end());
  auto exe = model->GetExecutable({{DType::kF32, x.dims(), nullptr, true}});
  ASSERT_TRUE(exe.ok());
  std::cout << name << ": max |diff| " << max_err << " (max |ref| " << max_ref << "), "
            << ((*exe)->is_static() ? "static plan" : "dynamic steps ")
            << ((*exe)->is_static() ? "" : absl::StrCat((*exe)->num_dynamic_steps())) << ", "
            << (*exe)->num_folded() << " values folded, median " << ms[3] << " ms\n";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureNumericsTest,
                         ::testing::Values("shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
                                           "unsupported", "control_flow"));

TEST_F(VerifyTest, ShuffleNetShapeArithmeticFoldsIntoAStaticPlan) {
  absl::StatusOr<ir::Graph> graph =
      importer::ImportTorchScriptFile(Fixture("shufflenet_v2_x0_5.pt"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  if (!importer::FallbackOps(*graph).empty()) GTEST_SKIP() << "transpose/chunk not native yet";
  auto exe = runtime::Executable::Compile(*graph, {{DType::kF32, {1, 3, 224, 224}, nullptr, true}},
                                          {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_TRUE((*exe)->is_static());
  EXPECT_GE((*exe)->num_folded(), 16 * 6);
}

// ---------------------------------------------------------------- verify

TEST_F(VerifyTest, PassesAndPublishesTheDifferencePerOutput) {
  const std::string bytes = ReadFile(Fixture("mlp.pt"));
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScript(bytes);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::unique_ptr<runtime::Model> model = Build(*std::move(graph));
  auto report = VerifyOnce(bytes, {}, *model, {});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->passed) << report->Summary();
  EXPECT_FALSE(report->skipped);
  ASSERT_EQ(report->outputs.size(), 1u);
  EXPECT_EQ(report->outputs[0].name, "output0");
  EXPECT_LT(report->outputs[0].max_abs_diff, 1e-6);
  EXPECT_GT(report->outputs[0].max_abs_ref, 0.0);
  EXPECT_EQ(report->samples, "x=FP32[1, 16]");  // the contract's batch dim made 1
  EXPECT_THAT(report->Summary(), HasSubstr("passed on x=FP32[1, 16]: output0 max |diff|"));
}

// Past the tolerance, float outputs are judged against libtorch's float64
// result: float32 rounding passes (here resnet18 at a tolerance of 0, where
// any difference at all fails the first comparison), a conversion bug does not
// (DivergenceNamesTheFirstDivergingNode... below).
TEST_F(VerifyTest, Float32RoundingPastTheToleranceIsJudgedAgainstFloat64) {
  const std::string bytes = ReadFile(Fixture("resnet18.pt"));
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScript(bytes);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::unique_ptr<runtime::Model> model = Build(*std::move(graph));
  VerifyOptions exact;
  exact.tolerance = 0;
  auto report = VerifyOnce(bytes, {}, *model, exact);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->outputs.size(), 1u);
  const OutputCheck& out = report->outputs[0];
  ASSERT_GT(out.max_abs_diff, 1e-6);  // past a tolerance of 0
  ASSERT_TRUE(out.kiln_vs_float64.has_value()) << report->Summary();
  ASSERT_TRUE(out.libtorch_vs_float64.has_value());
  EXPECT_GT(*out.libtorch_vs_float64, 0.0);  // libtorch's float32 result rounds too
  EXPECT_LT(*out.kiln_vs_float64, 1e-5);
  EXPECT_LE(*out.kiln_vs_float64, VerifyOptions::kFloat64Margin * *out.libtorch_vs_float64);
  EXPECT_TRUE(report->passed) << report->Summary();
  EXPECT_THAT(report->Summary(), HasSubstr("(float32 rounding: Kiln "));
  EXPECT_TRUE(report->divergence.empty()) << report->divergence;
}

TEST_F(VerifyTest, ControlFlowAndFallbackModelsPass) {
  Scripted m = ScriptedModel(R"PY(
def forward(self, x):
    acc = x
    for i in range(3):
        if bool(acc.sum() > 0):
            acc = torch.logcumsumexp(acc, 0)
        else:
            acc = acc * -1.0
    return acc
)PY");
  ASSERT_NE(m.model, nullptr);
  VerifyOptions options;
  options.samples = {{"x", DType::kF32, Dims{5}}};  // a scripted model's input has no known shape
  auto report = VerifyOnce(m.bytes, {}, *m.model, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->passed) << report->Summary();
  // Without a shape the verification is skipped, not failed.
  auto skipped = VerifyOnce(m.bytes, {}, *m.model, {});
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_TRUE(skipped->skipped);
  EXPECT_THAT(skipped->skip_reason, HasSubstr("input 'x' has no known shape"));
}

TEST_F(VerifyTest, ListOfTensorsArgumentIsSampledAsATwoElementList) {
  Scripted m = ScriptedModel(R"PY(
def forward(self, xs: List[Tensor], extra: Optional[List[Tensor]]):
    y = torch.cat(xs, 0)
    if extra is not None:
        for e in extra:
            y = y * e.sum()
    return y, len(xs)
)PY");
  ASSERT_NE(m.model, nullptr);
  VerifyOptions options;
  options.samples = {{"xs.0", DType::kF32, Dims{2}}, {"extra.0", DType::kF32, Dims{3}}};
  auto report = VerifyOnce(m.bytes, {}, *m.model, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->skipped) << report->skip_reason;
  EXPECT_TRUE(report->passed) << report->Summary();
  EXPECT_EQ(report->samples, "xs=[2 x FP32[2]], extra=[2 x FP32[3]]");
  ASSERT_EQ(report->outputs.size(), 2u);
  EXPECT_GT(report->outputs[0].max_abs_ref, 0.0);
  EXPECT_EQ(report->outputs[1].max_abs_ref, 2.0);  // len(xs)

  // A conversion bug behind the list is found and named: cat on the wrong axis.
  absl::StatusOr<ir::Graph> tampered = importer::ImportTorchScript(m.bytes);
  ASSERT_TRUE(tampered.ok());
  bool found = false;
  for (size_t n = 0; n < tampered->nodes().size(); ++n) {
    ir::Node& node = tampered->mutable_node(static_cast<ir::NodeId>(n));
    if (node.kind == ir::OpKind::kConcat) {
      node.attrs.SetInt("stack", 1);  // stack instead of cat: [2, 2] not [4]
      found = true;
    }
  }
  ASSERT_TRUE(found);
  std::unique_ptr<runtime::Model> wrong = Build(*std::move(tampered));
  auto failed = VerifyOnce(m.bytes, {}, *wrong, options);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_FALSE(failed->passed);
  EXPECT_EQ(failed->divergent_op, "aten::cat");
}

// A model whose imported graph is wrong (the Softmax axis changed) diverges at
// that node; asking for the fallback serves it through libtorch instead.
TEST_F(VerifyTest, DivergenceNamesTheFirstDivergingNodeAndFallbackRepairsIt) {
  const std::string bytes = ReadFile(Fixture("mlp.pt"));
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScript(bytes);
  ASSERT_TRUE(graph.ok()) << graph.status();
  bool tampered = false;
  for (size_t n = 0; n < graph->nodes().size(); ++n) {
    ir::Node& node = graph->mutable_node(static_cast<ir::NodeId>(n));
    if (node.kind == ir::OpKind::kSoftmax) {
      node.attrs.SetInt("axis", 0);
      tampered = true;
    }
  }
  ASSERT_TRUE(tampered);
  std::unique_ptr<runtime::Model> model = Build(*graph);
  auto report = VerifyOnce(bytes, {}, *model, {});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->passed);
  EXPECT_EQ(report->divergent_op, "aten::softmax");
  EXPECT_THAT(report->divergence, HasSubstr("(aten::softmax) output %"));
  // The float64 reference does not excuse it: libtorch's float32 result is
  // close to the float64 one, Kiln's is not.
  ASSERT_TRUE(report->outputs[0].kiln_vs_float64.has_value());
  EXPECT_GT(*report->outputs[0].kiln_vs_float64, 1e-2);
  EXPECT_LT(*report->outputs[0].libtorch_vs_float64, 1e-5);
  EXPECT_THAT(report->Summary(), HasSubstr("(vs float64: Kiln "));

  auto failed = VerifyModel(bytes, Build(*graph), {});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("aten::softmax"));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("on_mismatch"));

  VerifyOptions repair;
  repair.fallback_on_mismatch = 2;
  auto repaired = VerifyModel(bytes, Build(*graph), repair);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_TRUE(repaired->report.passed);
  EXPECT_THAT(repaired->report.forced_fallback, ElementsAre("aten::softmax"));
  EXPECT_THAT(importer::FallbackOps(repaired->model->graph()), ElementsAre("aten::softmax"));
}

// Verification on first use runs a request's own values (VerifyOptions::values)
// instead of samples drawn from the contract, even where the contract knows
// no shape; the report carries libtorch's results for them and the signature.
TEST_F(VerifyTest, RequestValuesRunInsteadOfSamples) {
  Scripted m = ScriptedModel(R"PY(
def forward(self, x, scale: float):
    return torch.softmax(x * scale, dim=-1), x.sum()
)PY");
  ASSERT_NE(m.model, nullptr);
  // No shape for x: the load's samples cannot be made.
  auto skipped = VerifyOnce(m.bytes, {}, *m.model, {});
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_TRUE(skipped->skipped);

  Tensor x = Tensor::Zeros(DType::kF32, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i) - 2.5f;
  Tensor scale = Tensor::Zeros(DType::kF64, {});
  *scale.data<double>() = 2.0;
  VerifyOptions options;
  options.values = std::vector<runtime::RunValue>{runtime::RunValue::Of(x),
                                                  runtime::RunValue::Of(scale)};
  auto report = VerifyOnce(m.bytes, {}, *m.model, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->skipped) << report->skip_reason;
  EXPECT_TRUE(report->passed) << report->Summary();
  EXPECT_EQ(report->samples, "x=FP32[2, 3], scale=FP64");
  EXPECT_EQ(runtime::SignatureKey(report->signature), "FP32[2, 3];FP64[];");
  ASSERT_EQ(report->reference_outputs.size(), 2u);
  ASSERT_EQ(report->reference_outputs[1].size(), 1u);
  EXPECT_FLOAT_EQ(report->reference_outputs[1][0].data<float>()[0], 0.0f);  // sum of -2.5 .. 2.5
  ASSERT_EQ(report->reference_outputs[0].size(), 1u);
  EXPECT_EQ(report->reference_outputs[0][0].dims(), (Dims{2, 3}));
}

}  // namespace
}  // namespace kiln::fallback
