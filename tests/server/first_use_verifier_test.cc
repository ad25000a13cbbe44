#include "server/core/first_use_verifier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class FirstUseRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("kiln-first-use-record-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "record").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& text) {
    std::ofstream out(path_);
    out << text;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(FirstUseRecordTest, PassedAndFallenBackSignaturesRoundTrip) {
  const std::vector<RecordedSignature> signatures = {
      {"FP32[3, 8];", "verified on first use: passed on x=FP32[3, 8]: output0 max |diff| 0", {}},
      {"FP32[4, 16];",
       "fallback: Kiln diverged from libtorch; served with aten::gelu, aten::add through the "
       "libtorch fallback: passed",
       {"aten::gelu", "aten::add"}},
      {"lists=2,-;FP32[1, 2];FP32[2, 2];FP32[2];", "verified on first use: passed", {}},
  };
  Write(FormatSignatureRecord(signatures));
  EXPECT_EQ(ReadSignatureRecord(path_), signatures);
}

TEST_F(FirstUseRecordTest, TabsAndNewlinesInsideAFieldBecomeSpaces) {
  Write(FormatSignatureRecord({{"FP32[1];", "line one\nline\ttwo", {"aten::relu"}}}));
  const std::vector<RecordedSignature> read = ReadSignatureRecord(path_);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].summary, "line one line two");
  EXPECT_THAT(read[0].forced, ElementsAre("aten::relu"));
}

TEST_F(FirstUseRecordTest, AnOldRecordStillReadsAsPassed) {
  // The format kilnd wrote before it kept the signatures that fell back.
  Write(
      "kiln verified signatures 1\n"
      "FP32[3, 8];\tverified on first use: passed on x=FP32[3, 8]\n"
      "FP32[5, 8];\tverified on first use: passed on x=FP32[5, 8]\n");
  const std::vector<RecordedSignature> read = ReadSignatureRecord(path_);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].key, "FP32[3, 8];");
  EXPECT_EQ(read[0].summary, "verified on first use: passed on x=FP32[3, 8]");
  EXPECT_THAT(read[0].forced, IsEmpty());
  EXPECT_EQ(read[1].key, "FP32[5, 8];");
}

TEST_F(FirstUseRecordTest, WhatIsNotARecordLineIsIgnored) {
  Write(
      "kiln verified signatures 2\n"
      "no tab here\n"
      "\tno key\n"
      "FP32[1];\tsummary\tsomething=else\n"
      "FP32[2];\tsummary\tfallback=\n"
      "FP32[3];\tsummary\tfallback=aten::relu\n");
  const std::vector<RecordedSignature> read = ReadSignatureRecord(path_);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].key, "FP32[3];");
  Write("kiln verified signatures 3\nFP32[1];\tsummary\n");
  EXPECT_THAT(ReadSignatureRecord(path_), IsEmpty());
  EXPECT_THAT(ReadSignatureRecord((dir_ / "missing").string()), IsEmpty());
}

// forward(self, x): relu(x).
std::unique_ptr<runtime::Model> ReluModel() {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::NodeId relu = g.AddNode(ir::OpKind::kRelu, {x}, {}, "aten::relu");
  g.AddOutput(g.node(relu).outputs[0], "output0");
  auto m = runtime::Model::Create(std::move(g), {});
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

// A signature that fell back in an earlier run is served by the model rebuilt
// with the same forced ops, and libtorch is not asked again.
TEST_F(FirstUseRecordTest, ARememberedFallbackIsRebuiltWithItsOpsAndNotVerifiedAgain) {
  const std::string key = "FP32[2, 3];";
  Write(FormatSignatureRecord(
      {{key, "fallback: Kiln diverged from libtorch; served with aten::relu", {"aten::relu"}}}));
  FirstUseOptions options;
  options.label = "model 'm' version 1";
  options.record_path = path_;
  options.import.force_fallback = {"aten::conv2d"};  // the load config's own
  int references = 0;
  options.reference = [&](const std::string&, std::chrono::steady_clock::time_point) {
    ++references;
    return std::unique_ptr<verify::TorchReference>();
  };
  std::vector<std::vector<std::string>> rebuilt_with;
  options.rebuild = [&](const std::string& path, const importer::ImportOptions& import,
                        std::chrono::steady_clock::time_point)
      -> absl::StatusOr<std::unique_ptr<runtime::Model>> {
    EXPECT_EQ(path, "/models/m.pt");
    rebuilt_with.push_back(import.force_fallback);
    return ReluModel();
  };
  FirstUseVerifier verifier(std::move(options));
  verifier.set_model_path("/models/m.pt");
  std::map<std::string, std::string> props = verifier.Properties();
  EXPECT_EQ(props["verify.signatures"], "FP32[2, 3];: fallback (aten::relu)");
  EXPECT_THAT(props["verify.signature.FP32[2,3]"], HasSubstr("remembered from an earlier run"));

  std::unique_ptr<runtime::Model> served = ReluModel();
  Tensor x = Tensor::Zeros(DType::kF32, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = i - 2.5f;
  const std::vector<kernels::TensorInfo> signature = {
      kernels::TensorInfo{DType::kF32, {2, 3}, nullptr, true}};
  for (int request = 0; request < 2; ++request) {
    auto answer = verifier.Admit(*served, key, signature, {runtime::RunValue::Of(x)}, {});
    ASSERT_TRUE(answer.ok()) << answer.status();
    ASSERT_TRUE(answer->has_value());
    const Tensor& y = (**answer)[0].tensor;
    ASSERT_EQ(y.dims(), (Dims{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(y.data<float>()[i], std::max(0.0f, i - 2.5f));
  }
  // Rebuilt once, with the load's forced ops and the remembered ones.
  EXPECT_THAT(rebuilt_with, ElementsAre(ElementsAre("aten::conv2d", "aten::relu")));
  EXPECT_EQ(references, 0);
  props = verifier.Properties();
  EXPECT_EQ(props["verify.first_use.count"], "0");
  EXPECT_EQ(props["verify.signatures"], "FP32[2, 3];: fallback (aten::relu)");
}

TEST_F(FirstUseRecordTest, AnOldRecordsSignaturesAreNotVerifiedAgain) {
  Write("kiln verified signatures 1\nFP32[2, 3];\tverified on first use: passed\n");
  FirstUseOptions options;
  options.record_path = path_;
  options.reference = [](const std::string&, std::chrono::steady_clock::time_point) {
    ADD_FAILURE() << "libtorch was asked";
    return std::unique_ptr<verify::TorchReference>();
  };
  FirstUseVerifier verifier(std::move(options));
  EXPECT_EQ(verifier.Properties()["verify.signatures"], "FP32[2, 3];: passed");
  std::unique_ptr<runtime::Model> served = ReluModel();
  auto answer = verifier.Admit(*served, "FP32[2, 3];",
                               {kernels::TensorInfo{DType::kF32, {2, 3}, nullptr, true}},
                               {runtime::RunValue::Of(Tensor::Zeros(DType::kF32, {2, 3}))}, {});
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_FALSE(answer->has_value());  // runs natively
}

}  // namespace
}  // namespace kiln::server
