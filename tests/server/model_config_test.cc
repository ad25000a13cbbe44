#include "server/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kiln::server
