#include "server/http/json_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "engine/common/half.h"
#include "server/http/http_status.h"
#include "server/core/tensor_codec.h"

namespace kiln::server::http {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> Values(const std::string& raw) {
  std::vector<T> out(raw.size() / sizeof(T));
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

template <typename T>
std::string Raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

absl::Status ParseError(const std::string& body) {
  inference::ModelInferRequest request;
  OutputFormat format;
  return ParseInferRequest(body, std::nullopt, &request, &format);
}

TEST(JsonCodecTest, NestedAndFlatDataBecomeRawBytesOfTheirDatatype) {
  inference::ModelInferRequest request;
  OutputFormat format;
  ASSERT_TRUE(ParseInferRequest(R"({"id": "r1", "inputs": [
      {"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [[1.5, -2], [0, 3.25]]},
      {"name": "ids", "datatype": "INT64", "shape": [3], "data": [1099511627776, -3, 0]},
      {"name": "mask", "datatype": "BOOL", "shape": [2], "data": [true, false]},
      {"name": "h", "datatype": "FP16", "shape": [2], "data": [0.5, -1]},
      {"name": "u", "datatype": "UINT8", "shape": [2], "data": [0, 255]}]})",
                                std::nullopt, &request, &format)
                  .ok());
  EXPECT_EQ(request.id(), "r1");
  ASSERT_EQ(request.raw_input_contents_size(), 5);
  EXPECT_THAT(Values<float>(request.raw_input_contents(0)), ElementsAre(1.5f, -2.f, 0.f, 3.25f));
  EXPECT_THAT(Values<int64_t>(request.raw_input_contents(1)),
              ElementsAre(int64_t{1} << 40, -3, 0));
  EXPECT_THAT(Values<uint8_t>(request.raw_input_contents(2)), ElementsAre(1, 0));
  EXPECT_THAT(Values<uint16_t>(request.raw_input_contents(3)),
              ElementsAre(FloatToHalf(0.5f), FloatToHalf(-1.f)));
  EXPECT_THAT(Values<uint8_t>(request.raw_input_contents(4)), ElementsAre(0, 255));
  // What the gRPC path decodes from the same message.
  absl::StatusOr<std::vector<runtime::NamedTensor>> tensors = DecodeInputs(request);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_EQ((*tensors)[0].tensor.dims(), (Dims{2, 2}));
  EXPECT_FALSE(format.binary_default);
}

TEST(JsonCodecTest, BytesAreLengthPrefixedAsOnTheWire) {
  inference::ModelInferRequest request;
  OutputFormat format;
  ASSERT_TRUE(ParseInferRequest(
                  R"({"inputs": [{"name": "s", "datatype": "BYTES", "shape": [2], "data": ["ab", ""]}]})",
                  std::nullopt, &request, &format)
                  .ok());
  EXPECT_EQ(request.raw_input_contents(0), std::string("\x02\0\0\0ab\0\0\0\0", 10));
}

TEST(JsonCodecTest, BinaryInputsAreCutFromTheBodyAfterTheHeader) {
  const std::string header =
      R"({"inputs": [{"name": "a", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}},
                     {"name": "b", "datatype": "INT32", "shape": [1], "data": [7]}],
          "outputs": [{"name": "y", "parameters": {"binary_data": true}}, {"name": "z"}],
          "parameters": {"binary_data_output": false}})";
  const std::string body = header + Raw<float>({1.f, 2.f});
  inference::ModelInferRequest request;
  OutputFormat format;
  ASSERT_TRUE(ParseInferRequest(body, header.size(), &request, &format).ok());
  EXPECT_THAT(Values<float>(request.raw_input_contents(0)), ElementsAre(1.f, 2.f));
  EXPECT_THAT(Values<int32_t>(request.raw_input_contents(1)), ElementsAre(7));
  EXPECT_TRUE(format.IsBinary("y"));
  EXPECT_FALSE(format.IsBinary("z"));
  ASSERT_EQ(request.outputs_size(), 2);
  // The parameters travel on: the shared checks see them as a gRPC client sends them.
  EXPECT_TRUE(request.outputs(0).parameters().at("binary_data").bool_param());
  EXPECT_EQ(request.inputs(0).parameters().at("binary_data_size").int64_param(), 8);

  // Sizes that do not add up to the body are refused.
  OutputFormat f;
  inference::ModelInferRequest r;
  EXPECT_THAT(ParseInferRequest(header + Raw<float>({1.f}), header.size(), &r, &f).message(),
              HasSubstr("goes past the end of the body"));
  inference::ModelInferRequest r2;
  EXPECT_THAT(
      ParseInferRequest(header + Raw<float>({1.f, 2.f, 3.f}), header.size(), &r2, &f).message(),
      HasSubstr("4 bytes of binary data that no input's binary_data_size claims"));
  inference::ModelInferRequest r3;
  EXPECT_THAT(ParseInferRequest(header, header.size() + 1, &r3, &f).message(),
              HasSubstr("larger than the body"));
}

TEST(JsonCodecTest, BadRequestsAreInvalidArgumentWithWhere) {
  EXPECT_THAT(ParseError("{\"inputs\": [").message(), HasSubstr("malformed JSON"));
  EXPECT_EQ(ParseError("{\"inputs\": [").code(), absl::StatusCode::kInvalidArgument);
  // A number past double's range is the parser's out_of_range, not a
  // parse_error: malformed JSON too (it was an uncaught exception, found by
  // tests/fuzz/http_codec_fuzzer.cc).
  EXPECT_THAT(ParseError(R"({"inputs": 1e999})").message(),
              HasSubstr("malformed JSON: number overflow parsing '1e999'"));
  EXPECT_EQ(ParseError(R"({"inputs": 1e999})").code(), absl::StatusCode::kInvalidArgument);
  inference::RepositoryIndexRequest index;
  EXPECT_THAT(ParseRepositoryIndexRequest(R"({"ready": -1e400})", &index).message(),
              HasSubstr("malformed JSON"));
  EXPECT_THAT(ParseError(std::string(100, '[') + std::string(100, ']')).message(),
              HasSubstr("nested deeper than 64"));
  EXPECT_THAT(ParseError("[]").message(), HasSubstr("must be a JSON object"));
  EXPECT_THAT(ParseError(R"({"inputs": [], "ouputs": []})").message(),
              HasSubstr("unknown field \"ouputs\""));
  EXPECT_THAT(
      ParseError(R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [1, 2]}]})")
          .message(),
      HasSubstr("input 'x': shape [2, 3] needs 6 values in \"data\", got 2"));
  EXPECT_THAT(
      ParseError(R"({"inputs": [{"name": "x", "datatype": "INT64", "shape": [1], "data": [1.5]}]})")
          .message(),
      HasSubstr("value 1.5 at index 0 is not an integer"));
  EXPECT_THAT(
      ParseError(R"({"inputs": [{"name": "x", "datatype": "UINT8", "shape": [1], "data": [256]}]})")
          .message(),
      HasSubstr("value 256 at index 0 is out of range"));
  EXPECT_THAT(
      ParseError(R"({"inputs": [{"name": "x", "datatype": "BOOL", "shape": [1], "data": [1]}]})")
          .message(),
      HasSubstr("is not true or false"));
  EXPECT_THAT(
      ParseError(R"({"inputs": [{"name": "x", "datatype": "FP99", "shape": [1], "data": [1]}]})")
          .message(),
      HasSubstr("input 'x': unsupported datatype 'FP99'"));
  EXPECT_THAT(ParseError(R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]})").message(),
              HasSubstr("needs \"data\" or the \"binary_data_size\" parameter"));
  EXPECT_THAT(ParseError(R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": "1", "data": [1]}]})")
                  .message(),
              HasSubstr("\"shape\" must be an array of integers"));
  EXPECT_THAT(ParseError(R"({"inputs": [], "parameters": {"p": [1]}})").message(),
              HasSubstr("parameter \"p\" must be a bool, a number or a string"));
}

TEST(JsonCodecTest, ResponsesCarryDataOrBinaryAsAsked) {
  inference::ModelInferResponse response;
  response.set_model_name("m");
  response.set_model_version("1");
  response.set_id("r1");
  auto* y = response.add_outputs();
  y->set_name("y");
  y->set_datatype("FP32");
  y->add_shape(1);
  y->add_shape(3);
  response.add_raw_output_contents(Raw<float>({0.1f, -2.f, 1e30f}));
  auto* h = response.add_outputs();
  h->set_name("h");
  h->set_datatype("FP16");
  h->add_shape(2);
  response.add_raw_output_contents(Raw<uint16_t>({FloatToHalf(0.5f), FloatToHalf(-3.f)}));
  auto* b = response.add_outputs();
  b->set_name("b");
  b->set_datatype("BOOL");
  b->add_shape(2);
  response.add_raw_output_contents(std::string("\x01\x00", 2));

  OutputFormat json_only;
  absl::StatusOr<EncodedResponse> encoded = EncodeInferResponse(response, json_only);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_FALSE(encoded->header_length.has_value());
  EXPECT_EQ(encoded->body,
            R"({"model_name":"m","model_version":"1","id":"r1","outputs":[)"
            R"({"datatype":"FP32","name":"y","shape":[1,3],"data":[0.1,-2,1e+30]},)"
            R"({"datatype":"FP16","name":"h","shape":[2],"data":[0.5,-3]},)"
            R"({"datatype":"BOOL","name":"b","shape":[2],"data":[true,false]}]})");

  OutputFormat binary;
  binary.binary_default = true;
  binary.binary["b"] = false;
  encoded = EncodeInferResponse(response, binary);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  ASSERT_TRUE(encoded->header_length.has_value());
  const std::string header = encoded->body.substr(0, *encoded->header_length);
  EXPECT_THAT(header, HasSubstr(R"("name":"y","parameters":{"binary_data_size":12})"));
  EXPECT_THAT(header, HasSubstr(R"("name":"h","parameters":{"binary_data_size":4})"));
  EXPECT_THAT(header, HasSubstr(R"("data":[true,false])"));
  EXPECT_EQ(encoded->body.size(), *encoded->header_length);  // the binary section follows it
  EXPECT_EQ(absl::StrJoin(encoded->binary, ""),
            response.raw_output_contents(0) + response.raw_output_contents(1));
}

// With the outputs in their tensors (RawOutputs, as kilnd's HTTP front asks
// for them), JSON data is written from the tensors and the binary section is
// the tensors' own bytes, not copies.
TEST(JsonCodecTest, EncodesFromRawOutputsWithoutCopying) {
  Tensor y = Tensor::Zeros(DType::kF32, {1, 3});
  y.data<float>()[0] = 0.5f;
  y.data<float>()[2] = -4.0f;
  Tensor ids = Tensor::Zeros(DType::kInt64, {2});
  ids.data<int64_t>()[1] = 7;
  inference::ModelInferResponse response;
  response.set_model_name("m");
  response.set_model_version("1");
  RawOutputs raw;
  ASSERT_TRUE(EncodeOutputs({{"y", y}, {"ids", ids}}, inference::ModelInferRequest(), nullptr,
                            &response, &raw)
                  .ok());
  ASSERT_EQ(response.raw_output_contents_size(), 0);

  OutputFormat binary_y;
  binary_y.binary["y"] = true;
  absl::StatusOr<EncodedResponse> encoded = EncodeInferResponse(response, binary_y, &raw);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  ASSERT_TRUE(encoded->header_length.has_value());
  EXPECT_EQ(encoded->body.size(), *encoded->header_length);
  EXPECT_THAT(encoded->body, HasSubstr(R"("name":"y","parameters":{"binary_data_size":12})"));
  EXPECT_THAT(encoded->body, HasSubstr(R"("name":"ids","shape":[2],"data":[0,7])"));
  ASSERT_EQ(encoded->binary.size(), 1u);
  EXPECT_EQ(encoded->binary[0].data(), y.raw_data());  // the tensor's own bytes
  EXPECT_EQ(encoded->binary[0].size(), 12u);

  // Contents that do not pair up with the outputs are an internal error.
  raw.entries.pop_back();
  EXPECT_FALSE(EncodeInferResponse(response, binary_y, &raw).ok());
}

TEST(JsonCodecTest, RepositoryParametersDecodeBase64Files) {
  google::protobuf::Map<std::string, inference::ModelRepositoryParameter> params;
  ASSERT_TRUE(ParseRepositoryParameters(
                  R"({"parameters": {"file:1/model.pt": "UEsDBA==", "config": {"strict": true}}})",
                  &params)
                  .ok());
  EXPECT_EQ(params.at("file:1/model.pt").bytes_param(), "PK\x03\x04");
  EXPECT_EQ(params.at("config").string_param(), R"({"strict":true})");
  params.clear();
  EXPECT_THAT(
      ParseRepositoryParameters(R"({"parameters": {"file:1/model.pt": "not base64!"}})", &params)
          .message(),
      HasSubstr("must be the file's content in base64"));
}

TEST(HttpStatusTest, MapsCodesAsTritonAndGoogleRpcDo) {
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 500);
  EXPECT_EQ(ErrorBody(absl::NotFoundError("model 'x' \"y\"")),
            R"({"error":"model 'x' \"y\""})");
}

}  // namespace
}  // namespace kiln::server::http
