#include "server/core/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ModelConfigTest, ParsesNamesDatatypesAndDims) {
  auto config = ParseModelConfig(R"({
      "inputs": [{"name": "image", "datatype": "FP32", "dims": [-1, 3, 224, 224]},
                 {"name": "scale"}],
      "outputs": [{"name": "logits"}]})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->import.input_names, ElementsAre("image", "scale"));
  EXPECT_THAT(config->import.output_names, ElementsAre("logits"));
  ASSERT_EQ(config->model.inputs.size(), 2u);
  EXPECT_EQ(config->model.inputs[0].dtype, DType::kF32);
  ASSERT_TRUE(config->model.inputs[0].dims.has_value());
  EXPECT_THAT(*config->model.inputs[0].dims, ElementsAre(-1, 3, 224, 224));
  EXPECT_EQ(config->model.inputs[1].dtype, DType::kUnknown);
  EXPECT_FALSE(config->model.inputs[1].dims.has_value());
  EXPECT_EQ(config->model.outputs[0].name, "logits");
}

TEST(ModelConfigTest, DryRunFlag) {
  auto config = ParseModelConfig(R"({"dry_run": true, "inputs": [{"datatype": "INT64"}]})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->dry_run);
  EXPECT_FALSE(ParseModelConfig("{}")->dry_run);
  auto bad = ParseModelConfig(R"({"dry_run": "yes"})");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("dry_run"));
}

TEST(ModelConfigTest, EmptyObjectIsValid) {
  auto config = ParseModelConfig("{}");
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->model.inputs.empty());
}

TEST(ModelConfigTest, RejectsBadConfigsWithWhere) {
  struct Case {
    const char* json;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"{", "not valid JSON"},
           {"[]", "expected a JSON object"},
           {R"({"input": []})", "unknown key 'input'"},
           {R"({"inputs": {}})", "inputs: expected an array"},
           {R"({"inputs": [{"name": 3}]})", "inputs[0]: 'name' must be a string"},
           {R"({"inputs": [{"datatype": "FLOAT"}]})", "unknown datatype 'FLOAT'"},
           {R"({"inputs": [{"dims": [1, -2]}]})", "integers >= -1"},
           {R"({"outputs": [{"name": "y", "shape": [1]}]})", "outputs[0]: unknown key 'shape'"},
       }) {
    auto config = ParseModelConfig(c.json);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(config.status().message(), HasSubstr(c.message)) << c.json;
  }
}

TEST(ModelConfigTest, VersionPolicyDefaultsToLatestOne) {
  auto config = ParseModelConfig("{}");
  ASSERT_TRUE(config.ok());
  EXPECT_THAT(config->version_policy.Select({1, 2, 5}), ElementsAre(5));
  EXPECT_THAT(config->version_policy.Select({}), ::testing::IsEmpty());
}

TEST(ModelConfigTest, ParsesTritonVersionPolicies) {
  auto latest = ParseModelConfig(R"({"version_policy": {"latest": {"num_versions": 2}}})");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_THAT(latest->version_policy.Select({3, 1, 2}), ElementsAre(2, 3));
  EXPECT_EQ(latest->version_policy.ToString(), "latest 2");
  auto all = ParseModelConfig(R"({"version_policy": {"all": {}}})");
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(all->version_policy.Select({2, 1}), ElementsAre(1, 2));
  auto specific = ParseModelConfig(R"({"version_policy": {"specific": {"versions": [1, 4]}}})");
  ASSERT_TRUE(specific.ok());
  EXPECT_THAT(specific->version_policy.Select({1, 2, 3}), ElementsAre(1));
}

TEST(ModelConfigTest, RejectsBadVersionPolicies) {
  for (const char* json : {
           R"({"version_policy": "latest"})",
           R"({"version_policy": {"latest": {"num_versions": 0}}})",
           R"({"version_policy": {"latest": {"count": 2}}})",
           R"({"version_policy": {"all": {"x": 1}}})",
           R"({"version_policy": {"specific": {"versions": []}}})",
           R"({"version_policy": {"specific": {"versions": [0]}}})",
           R"({"version_policy": {"all": {}, "latest": {}}})",
       }) {
    auto config = ParseModelConfig(json);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(config.status().message(), HasSubstr("version_policy")) << json;
  }
}

TEST(ModelConfigTest, StrictAndVerify) {
  auto defaults = ParseModelConfig("{}");
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->strict);
  EXPECT_TRUE(defaults->verify.enabled);
  EXPECT_EQ(defaults->verify.tolerance, 1e-4);
  EXPECT_FALSE(defaults->verify.fallback_on_mismatch);
  EXPECT_TRUE(defaults->verify.on_first_use);
  auto first_use_off = ParseModelConfig(R"({"verify": {"on_first_use": false}})");
  ASSERT_TRUE(first_use_off.ok()) << first_use_off.status();
  EXPECT_FALSE(first_use_off->verify.on_first_use);
  EXPECT_TRUE(first_use_off->verify.enabled);

  auto config = ParseModelConfig(R"({"strict": true, "verify": {"tolerance": 0.001,
      "on_mismatch": "fallback", "inputs": [{"name": "x", "dims": [1, 3, 64, 64]}]}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->strict);
  EXPECT_EQ(config->verify.tolerance, 0.001);
  EXPECT_TRUE(config->verify.fallback_on_mismatch);
  ASSERT_EQ(config->verify.inputs.size(), 1u);
  EXPECT_THAT(*config->verify.inputs[0].dims, ElementsAre(1, 3, 64, 64));
  auto wide = ParseModelConfig(R"({"accumulation": "float64"})");
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_TRUE(wide->accumulate_float64);
  EXPECT_FALSE(config->accumulate_float64);
  EXPECT_EQ(config->precision, Precision::kFp32);
  auto bf16 = ParseModelConfig(R"({"precision": "bf16"})");
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->precision, Precision::kBf16);
  EXPECT_FALSE(bf16->precision_forced);  // a request for speed: the registry may run float32
  auto always = ParseModelConfig(R"({"precision": "bf16_always"})");
  ASSERT_TRUE(always.ok()) << always.status();
  EXPECT_EQ(always->precision, Precision::kBf16);
  EXPECT_TRUE(always->precision_forced);
  EXPECT_EQ(ParseModelConfig(R"({"precision": "fp32"})")->precision, Precision::kFp32);
  auto off = ParseModelConfig(R"({"verify": false})");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->verify.enabled);

  for (const char* json : {R"({"strict": 1})", R"({"verify": 3})",
                           R"({"verify": {"on_mismatch": "ignore"}})",
                           R"({"verify": {"on_first_use": "yes"}})",
                           R"({"verify": {"tolerance": -1}})", R"({"verify": {"sample": []}})",
                           R"({"verify": {"inputs": [{"dims": [1]}]}})",
                           R"({"accumulation": "double"})", R"({"accumulation": 64})",
                           R"({"precision": "fp16"})", R"({"precision": 16})",
                           R"({"precision": "BF16_ALWAYS"})"}) {
    auto bad = ParseModelConfig(json);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << json;
  }
}

TEST(ModelConfigTest, GraphSettingsNameWhatDecidesTheServedGraph) {
  auto settings = [](const char* json) {
    absl::StatusOr<ModelConfig> config = ParseModelConfig(json);
    EXPECT_TRUE(config.ok()) << json;
    return config.ok() ? GraphSettings(*config) : std::string("(bad)");
  };
  // Unverified: the graph is the file's import, whatever else the config says.
  EXPECT_EQ(settings(R"({"verify": false})"), "");
  EXPECT_EQ(settings(R"({"verify": false, "strict": true})"), "");
  // Verified: every setting that can change its outcome, canonically.
  const std::string plain = settings("{}");
  EXPECT_THAT(plain, HasSubstr("verify="));
  EXPECT_EQ(settings(R"({"verify": {"tolerance": 1e-4, "on_mismatch": "fail"}})"), plain);
  for (const char* json :
       {R"({"verify": {"tolerance": 1e-3}})", R"({"verify": {"on_mismatch": "fallback"}})",
        R"({"verify": {"inputs": [{"name": "x", "dims": [1, 3, 64, 64]}]}})",
        R"({"inputs": [{"name": "image", "datatype": "FP32"}]})",
        R"({"outputs": [{"name": "logits"}]})"}) {
    EXPECT_NE(settings(json), plain) << json;
  }
  // The accumulation changes the graph (its convolutions' attribute), verified or not.
  EXPECT_EQ(settings(R"({"verify": false, "accumulation": "float64"})"), "accumulation=float64");
  EXPECT_NE(settings(R"({"accumulation": "float64"})"), plain);
  EXPECT_EQ(settings(R"({"accumulation": "float32"})"), plain);
  // The precision changes what the verified import accepts, not the import.
  EXPECT_NE(settings(R"({"precision": "bf16"})"), plain);
  EXPECT_EQ(settings(R"({"precision": "fp32"})"), plain);
  EXPECT_EQ(settings(R"({"verify": false, "precision": "bf16"})"), "");
  EXPECT_EQ(settings(R"({"verify": {"on_mismatch": "fallback", "tolerance": 0.01}})"),
            settings(R"({"verify": {"tolerance": 0.01, "on_mismatch": "fallback"}})"));
}

TEST(ModelConfigTest, DynamicBatchingInTritonsShape) {
  auto config = ParseModelConfig(R"({
      "max_batch_size": 16,
      "dynamic_batching": {
        "preferred_batch_size": [4, 8],
        "max_queue_delay_microseconds": 100,
        "preserve_ordering": true,
        "default_queue_policy": {"max_queue_size": 32, "default_timeout_microseconds": "5000",
                                 "timeout_action": "DELAY"}}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_batch_size, 16);
  ASSERT_TRUE(config->dynamic_batching.has_value());
  const DynamicBatching& b = *config->dynamic_batching;
  EXPECT_THAT(b.preferred_batch_size, ElementsAre(4, 8));
  EXPECT_EQ(b.max_queue_delay_us, 100u);
  EXPECT_TRUE(b.preserve_ordering);
  EXPECT_EQ(b.default_queue_policy.max_queue_size, 32u);
  EXPECT_EQ(b.default_queue_policy.default_timeout_us, 5000u);  // protobuf JSON's string form
  EXPECT_EQ(b.default_queue_policy.timeout_action, QueuePolicy::TimeoutAction::kDelay);

  auto plain = ParseModelConfig(R"({"max_batch_size": 4})");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->dynamic_batching.has_value());
  auto defaults = ParseModelConfig(R"({"max_batch_size": 4, "dynamic_batching": {}})");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->dynamic_batching->default_queue_policy.timeout_action,
            QueuePolicy::TimeoutAction::kReject);
  EXPECT_EQ(defaults->dynamic_batching->max_queue_delay_us, 0u);
}

TEST(ModelConfigTest, ParsesAllowedBatchSizes) {
  auto absent = ParseModelConfig(R"({"max_batch_size": 8, "dynamic_batching": {}})");
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->dynamic_batching->allowed_batch_sizes.has_value());
  auto listed = ParseModelConfig(
      R"({"max_batch_size": 8, "dynamic_batching": {"allowed_batch_sizes": [2, 8]}})");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed->dynamic_batching->allowed_batch_sizes, (std::vector<int64_t>{2, 8}));
  auto off = ParseModelConfig(
      R"({"max_batch_size": 8, "dynamic_batching": {"allowed_batch_sizes": []}})");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_TRUE(off->dynamic_batching->allowed_batch_sizes->empty());
  auto error = [](const char* json) { return std::string(ParseModelConfig(json).status().message()); };
  EXPECT_THAT(error(R"({"max_batch_size": 4, "dynamic_batching": {"allowed_batch_sizes": [8]}})"),
              HasSubstr("dynamic_batching.allowed_batch_sizes"));
  EXPECT_THAT(error(R"({"max_batch_size": 4, "dynamic_batching": {"allowed_batch_sizes": [0]}})"),
              HasSubstr("integers >= 1"));
  EXPECT_THAT(error(R"({"max_batch_size": 4, "dynamic_batching": {"allowed_batch_sizes": 4}})"),
              HasSubstr("expected an array"));
}

TEST(ModelConfigTest, RejectsBadBatchingWithWhere) {
  auto error = [](const char* json) { return std::string(ParseModelConfig(json).status().message()); };
  EXPECT_THAT(error(R"({"dynamic_batching": {}})"), HasSubstr("needs \"max_batch_size\" >= 1"));
  EXPECT_THAT(error(R"({"max_batch_size": -1})"), HasSubstr("max_batch_size"));
  EXPECT_THAT(error(R"({"max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [8]}})"),
              HasSubstr("size 8 exceeds max_batch_size 4"));
  EXPECT_THAT(error(R"({"max_batch_size": 4, "dynamic_batching": {"max_queue_delay": 1}})"),
              HasSubstr("unknown key 'max_queue_delay'"));
  EXPECT_THAT(
      error(R"({"max_batch_size": 4,
                "dynamic_batching": {"default_queue_policy": {"timeout_action": "DROP"}}})"),
      HasSubstr("timeout_action"));
  EXPECT_THAT(error(R"({"max_batch_size": 4,
                        "dynamic_batching": {"max_queue_delay_microseconds": -5}})"),
              HasSubstr("expected an integer >= 0"));
}

TEST(ModelConfigTest, ParsesTritonModelWarmup) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(R"({
    "max_batch_size": 8,
    "model_warmup": [
      {"name": "zeros", "batch_size": 4, "count": 3,
       "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [3, 2], "zero_data": true}}},
      {"name": "mixed",
       "inputs": {"ids": {"data_type": "INT64", "dims": [5], "random_data": true},
                  "img": {"data_type": "TYPE_FP16", "dims": [2], "input_data_file": "sub/img.raw"}}}]})");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->warmup.size(), 2u);
  const WarmupSample& zeros = config->warmup[0];
  EXPECT_EQ(zeros.name, "zeros");
  EXPECT_EQ(zeros.batch_size, 4);
  EXPECT_EQ(zeros.count, 3u);
  ASSERT_EQ(zeros.inputs.size(), 1u);
  EXPECT_EQ(zeros.inputs[0].name, "x");
  EXPECT_EQ(zeros.inputs[0].dtype, DType::kF32);
  EXPECT_EQ(zeros.inputs[0].dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(zeros.inputs[0].source, WarmupInput::Source::kZero);
  const WarmupSample& mixed = config->warmup[1];
  EXPECT_EQ(mixed.batch_size, 1);
  EXPECT_EQ(mixed.count, 1u);
  ASSERT_EQ(mixed.inputs.size(), 2u);
  EXPECT_EQ(mixed.inputs[0].source, WarmupInput::Source::kRandom);
  EXPECT_EQ(mixed.inputs[0].dtype, DType::kInt64);
  EXPECT_EQ(mixed.inputs[1].source, WarmupInput::Source::kFile);
  EXPECT_EQ(mixed.inputs[1].file, "sub/img.raw");
  EXPECT_EQ(mixed.inputs[1].dtype, DType::kF16);
}

TEST(ModelConfigTest, RejectsBadWarmupWithWhere) {
  auto error = [](const std::string& warmup, const char* extra = "") {
    return std::string(
        ParseModelConfig(absl::StrCat("{", extra, "\"model_warmup\": ", warmup, "}")).status().message());
  };
  auto sample = [](const std::string& input) {
    return absl::StrCat(R"([{"name": "s", "inputs": {"x": )", input, "}}]");
  };
  EXPECT_THAT(error(sample(R"({"data_type": "TYPE_FP32", "dims": [1], "input_data_file": "/etc/passwd"})")),
              HasSubstr("not absolute"));
  EXPECT_THAT(error(sample(R"({"data_type": "TYPE_FP32", "dims": [1], "input_data_file": "a/../../x"})")),
              HasSubstr("'..' is not allowed"));
  EXPECT_THAT(error(sample(R"({"data_type": "TYPE_FP32", "dims": [1]})")),
              HasSubstr("exactly one of"));
  EXPECT_THAT(error(sample(R"({"data_type": "TYPE_FP32", "dims": [1], "zero_data": true,
                               "random_data": true})")),
              HasSubstr("exactly one of"));
  EXPECT_THAT(error(sample(R"({"data_type": "TYPE_STRING", "dims": [1], "zero_data": true})")),
              HasSubstr("unsupported data_type 'TYPE_STRING'"));
  EXPECT_THAT(error(sample(R"({"data_type": "TYPE_FP32", "dims": [-1], "zero_data": true})")),
              HasSubstr("model_warmup[0].inputs.x: 'dims' entries must be integers >= 0"));
  EXPECT_THAT(error(R"([{"inputs": {}}])"), HasSubstr("'name'"));
  EXPECT_THAT(error(R"([{"name": "s", "inputs": {"x": {"data_type": "FP32", "dims": [1],
                        "zero_data": true}}, "batch_size": 2}])"),
              HasSubstr("must be 1 for a model without max_batch_size"));
  EXPECT_THAT(error(R"([{"name": "s", "inputs": {"x": {"data_type": "FP32", "dims": [1],
                        "zero_data": true}}, "batch_size": 9}])", R"("max_batch_size": 8, )"),
              HasSubstr("9 exceeds max_batch_size 8"));
  EXPECT_THAT(error(R"([{"name": "s", "input": {}}])"), HasSubstr("unknown key 'input'"));
}

}  // namespace
}  // namespace kiln::server
