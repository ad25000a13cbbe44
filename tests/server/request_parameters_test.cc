#include "server/core/request_parameters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

inference::ModelInferRequest RequestWithOneInputAndOutput() {
  inference::ModelInferRequest request;
  request.set_model_name("m");
  request.add_inputs()->set_name("x");
  request.add_outputs()->set_name("y");
  return request;
}

TEST(RequestParametersTest, AStockRequestHasNone) {
  absl::StatusOr<InferParameters> p = ParseInferParameters(RequestWithOneInputAndOutput());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->profile);
  EXPECT_FALSE(p->timeout.has_value());
}

TEST(RequestParametersTest, KnownParametersAreReadOrAccepted) {
  inference::ModelInferRequest request = RequestWithOneInputAndOutput();
  (*request.mutable_parameters())["profile"].set_bool_param(true);
  (*request.mutable_parameters())["timeout"].set_int64_param(1500);
  (*request.mutable_parameters())["priority"].set_uint64_param(3);
  (*request.mutable_parameters())["binary_data_output"].set_bool_param(true);
  (*request.mutable_inputs(0)->mutable_parameters())["binary_data_size"].set_int64_param(12);
  (*request.mutable_outputs(0)->mutable_parameters())["binary_data"].set_bool_param(true);
  absl::StatusOr<InferParameters> p = ParseInferParameters(request);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->profile);
  ASSERT_TRUE(p->timeout.has_value());
  EXPECT_EQ(p->timeout->count(), 1500);
}

TEST(RequestParametersTest, ATimeoutOfZeroMeansNone) {
  inference::ModelInferRequest request = RequestWithOneInputAndOutput();
  (*request.mutable_parameters())["timeout"].set_uint64_param(0);
  absl::StatusOr<InferParameters> p = ParseInferParameters(request);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->timeout.has_value());
}

TEST(RequestParametersTest, UnknownNamesAreInvalidArgumentAllNamedWithTheirPlace) {
  inference::ModelInferRequest request = RequestWithOneInputAndOutput();
  (*request.mutable_parameters())["temperature"].set_double_param(0.5);
  (*request.mutable_inputs(0)->mutable_parameters())["layout\n"].set_string_param("NHWC");
  (*request.mutable_outputs(0)->mutable_parameters())["classification"].set_int64_param(2);
  absl::StatusOr<InferParameters> p = ParseInferParameters(request);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              HasSubstr("unknown parameters 'temperature' (request), 'layout\\n' (input 'x')"));
  EXPECT_THAT(p.status().message(), HasSubstr("on the request: profile, timeout, priority"));
}

// The shared-memory parameters are typed here; tensor_codec checks their regions.
TEST(RequestParametersTest, SharedMemoryParametersAreAcceptedWithTheirTypes) {
  inference::ModelInferRequest request = RequestWithOneInputAndOutput();
  auto& input = *request.mutable_inputs(0)->mutable_parameters();
  input["shared_memory_region"].set_string_param("region0");
  input["shared_memory_byte_size"].set_int64_param(12);
  input["shared_memory_offset"].set_uint64_param(64);
  auto& output = *request.mutable_outputs(0)->mutable_parameters();
  output["shared_memory_region"].set_string_param("region0");
  output["shared_memory_byte_size"].set_int64_param(12);
  EXPECT_TRUE(ParseInferParameters(request).ok());
  input["shared_memory_region"].set_int64_param(3);
  EXPECT_THAT(ParseInferParameters(request).status().message(),
              HasSubstr("'shared_memory_region' of the input 'x' must be a string_param"));
  input["shared_memory_region"].set_string_param("region0");
  output["shared_memory_offset"].set_int64_param(-1);
  EXPECT_EQ(ParseInferParameters(request).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestParametersTest, ClassificationAndSequencesAreUnimplemented) {
  inference::ModelInferRequest request = RequestWithOneInputAndOutput();
  (*request.mutable_outputs(0)->mutable_parameters())["classification"].set_int64_param(3);
  EXPECT_EQ(ParseInferParameters(request).status().code(), absl::StatusCode::kUnimplemented);
  request = RequestWithOneInputAndOutput();
  (*request.mutable_parameters())["sequence_id"].set_int64_param(7);
  EXPECT_THAT(ParseInferParameters(request).status().message(),
              HasSubstr("'sequence_id' (request; the sequences extension)"));
}

TEST(RequestParametersTest, KnownNamesOfTheWrongTypeAreInvalidArgument) {
  inference::ModelInferRequest request = RequestWithOneInputAndOutput();
  (*request.mutable_parameters())["profile"].set_string_param("yes");
  EXPECT_THAT(ParseInferParameters(request).status().message(),
              HasSubstr("parameter 'profile' of the request must be a bool_param"));
  request = RequestWithOneInputAndOutput();
  (*request.mutable_parameters())["timeout"].set_int64_param(-5);
  absl::Status s = ParseInferParameters(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("non-negative int64_param or a uint64_param"));
}

}  // namespace
}  // namespace kiln::server
