#include "server/core/tensor_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using InputTensor = inference::ModelInferRequest::InferInputTensor;

InputTensor* AddInput(inference::ModelInferRequest& request, const std::string& name,
                      const std::string& datatype, std::vector<int64_t> shape) {
  InputTensor* input = request.add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  for (int64_t d : shape) input->add_shape(d);
  return input;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.num_elements());
}

template <typename T>
std::string Raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

absl::Status DecodeError(const inference::ModelInferRequest& request) {
  return DecodeInputs(request).status();
}

TEST(TensorCodecTest, DecodesEveryTypedField) {
  inference::ModelInferRequest request;
  auto* b = AddInput(request, "b", "BOOL", {3})->mutable_contents();
  for (bool v : {true, false, true}) b->add_bool_contents(v);
  auto* u8 = AddInput(request, "u8", "UINT8", {2})->mutable_contents();
  u8->add_uint_contents(0);
  u8->add_uint_contents(255);
  auto* i8 = AddInput(request, "i8", "INT8", {2})->mutable_contents();
  i8->add_int_contents(-128);
  i8->add_int_contents(127);
  auto* i16 = AddInput(request, "i16", "INT16", {2})->mutable_contents();
  i16->add_int_contents(-32768);
  i16->add_int_contents(32767);
  auto* i32 = AddInput(request, "i32", "INT32", {1, 2})->mutable_contents();
  i32->add_int_contents(-7);
  i32->add_int_contents(1 << 30);
  auto* i64 = AddInput(request, "i64", "INT64", {2})->mutable_contents();
  i64->add_int64_contents(int64_t{1} << 40);
  i64->add_int64_contents(-3);
  auto* f32 = AddInput(request, "f32", "FP32", {2, 2})->mutable_contents();
  for (float v : {1.5f, -2.0f, 0.0f, 3.25f}) f32->add_fp32_contents(v);
  auto* f64 = AddInput(request, "f64", "FP64", {})->mutable_contents();
  f64->add_fp64_contents(2.5);

  absl::StatusOr<std::vector<runtime::NamedTensor>> decoded = DecodeInputs(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 8u);
  const auto& t = *decoded;
  EXPECT_EQ(t[0].name, "b");
  EXPECT_EQ(t[0].tensor.dtype(), DType::kBool);
  EXPECT_THAT(Values<uint8_t>(t[0].tensor), ElementsAre(1, 0, 1));
  EXPECT_EQ(t[1].tensor.dtype(), DType::kUInt8);
  EXPECT_THAT(Values<uint8_t>(t[1].tensor), ElementsAre(0, 255));
  EXPECT_EQ(t[2].tensor.dtype(), DType::kInt8);
  EXPECT_THAT(Values<int8_t>(t[2].tensor), ElementsAre(-128, 127));
  EXPECT_EQ(t[3].tensor.dtype(), DType::kInt16);
  EXPECT_THAT(Values<int16_t>(t[3].tensor), ElementsAre(-32768, 32767));
  EXPECT_EQ(t[4].tensor.dtype(), DType::kInt32);
  EXPECT_EQ(t[4].tensor.dims(), (Dims{1, 2}));
  EXPECT_THAT(Values<int32_t>(t[4].tensor), ElementsAre(-7, 1 << 30));
  EXPECT_EQ(t[5].tensor.dtype(), DType::kInt64);
  EXPECT_THAT(Values<int64_t>(t[5].tensor), ElementsAre(int64_t{1} << 40, -3));
  EXPECT_EQ(t[6].tensor.dtype(), DType::kF32);
  EXPECT_THAT(Values<float>(t[6].tensor), ElementsAre(1.5f, -2.0f, 0.0f, 3.25f));
  EXPECT_EQ(t[7].tensor.dtype(), DType::kF64);
  EXPECT_EQ(t[7].tensor.rank(), 0);
  EXPECT_THAT(Values<double>(t[7].tensor), ElementsAre(2.5));
}

TEST(TensorCodecTest, DecodesRawForEveryDatatype) {
  struct Case {
    std::string datatype;
    DType dtype;
    size_t size;
  };
  const std::vector<Case> cases = {
      {"BOOL", DType::kBool, 1},   {"UINT8", DType::kUInt8, 1}, {"INT8", DType::kInt8, 1},
      {"INT16", DType::kInt16, 2}, {"INT32", DType::kInt32, 4}, {"INT64", DType::kInt64, 8},
      {"FP16", DType::kF16, 2},    {"BF16", DType::kBF16, 2},   {"FP32", DType::kF32, 4},
      {"FP64", DType::kF64, 8},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.datatype);
    inference::ModelInferRequest request;
    AddInput(request, "x", c.datatype, {2, 3});
    std::string raw(6 * c.size, '\0');
    for (size_t i = 0; i < raw.size(); ++i)
      raw[i] = static_cast<char>(c.dtype == DType::kBool ? i % 2 : i + 1);
    request.add_raw_input_contents(raw);
    auto decoded = DecodeInputs(request);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    const Tensor& t = (*decoded)[0].tensor;
    EXPECT_EQ(t.dtype(), c.dtype);
    EXPECT_EQ(t.dims(), (Dims{2, 3}));
    ASSERT_EQ(t.byte_size(), raw.size());
    EXPECT_EQ(std::memcmp(t.raw_data(), raw.data(), raw.size()), 0);
  }
}

TEST(TensorCodecTest, RawBoolsAreNormalizedToZeroOrOne) {
  inference::ModelInferRequest request;
  AddInput(request, "mask", "BOOL", {3});
  request.add_raw_input_contents(std::string("\x00\x07\x01", 3));
  auto decoded = DecodeInputs(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(Values<uint8_t>((*decoded)[0].tensor), ElementsAre(0, 1, 1));
}

TEST(TensorCodecTest, RawSizeMismatchNamesInputAndSizes) {
  inference::ModelInferRequest request;
  AddInput(request, "image", "FP32", {2, 2});
  request.add_raw_input_contents(Raw(std::vector<float>{1, 2, 3}));
  absl::Status status = DecodeError(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'image'"));
  EXPECT_THAT(status.message(), HasSubstr("12 bytes, expected 16"));
}

TEST(TensorCodecTest, TypedCountMismatchNamesInputAndCounts) {
  inference::ModelInferRequest request;
  auto* c = AddInput(request, "x", "INT64", {3})->mutable_contents();
  c->add_int64_contents(1);
  absl::Status status = DecodeError(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'x'"));
  EXPECT_THAT(status.message(), HasSubstr("needs 3 values in int64_contents, got 1"));
}

TEST(TensorCodecTest, ContentsAndRawTogetherAreRejected) {
  inference::ModelInferRequest request;
  AddInput(request, "a", "FP32", {1})->mutable_contents()->add_fp32_contents(1.0f);
  AddInput(request, "b", "FP32", {1});
  request.add_raw_input_contents(Raw(std::vector<float>{1}));
  request.add_raw_input_contents(Raw(std::vector<float>{2}));
  absl::Status status = DecodeError(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'a'"));
  EXPECT_THAT(status.message(), HasSubstr("contents must not be set"));
}

TEST(TensorCodecTest, RawCountMustMatchInputCount) {
  inference::ModelInferRequest request;
  AddInput(request, "a", "FP32", {1});
  AddInput(request, "b", "FP32", {1});
  request.add_raw_input_contents(Raw(std::vector<float>{1}));
  absl::Status status = DecodeError(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("expected 2 raw_input_contents"));
}

TEST(TensorCodecTest, DataInTheWrongFieldIsRejected) {
  inference::ModelInferRequest request;
  AddInput(request, "x", "FP32", {1})->mutable_contents()->add_int_contents(1);
  absl::Status status = DecodeError(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("FP32 expects fp32_contents, got int_contents"));
}

TEST(TensorCodecTest, HalfPrecisionNeedsRaw) {
  for (const char* datatype : {"FP16", "BF16"}) {
    inference::ModelInferRequest request;
    AddInput(request, "h", datatype, {1})->mutable_contents()->add_fp32_contents(1.0f);
    absl::Status status = DecodeError(request);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("raw_input_contents"));
  }
}

TEST(TensorCodecTest, OutOfRangeNarrowIntegersAreRejected) {
  inference::ModelInferRequest request;
  AddInput(request, "x", "INT8", {1})->mutable_contents()->add_int_contents(128);
  EXPECT_THAT(DecodeError(request).message(), HasSubstr("value 128 at index 0 is out of range"));
  inference::ModelInferRequest u8;
  AddInput(u8, "y", "UINT8", {1})->mutable_contents()->add_uint_contents(256);
  EXPECT_EQ(DecodeError(u8).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorCodecTest, BadDatatypeAndShapesAreRejected) {
  inference::ModelInferRequest unknown;
  AddInput(unknown, "s", "BYTES", {1});
  EXPECT_THAT(DecodeError(unknown).message(), HasSubstr("unsupported datatype 'BYTES'"));

  inference::ModelInferRequest negative;
  AddInput(negative, "x", "FP32", {-1, 2});
  EXPECT_THAT(DecodeError(negative).message(), HasSubstr("negative dimension"));

  inference::ModelInferRequest huge;
  AddInput(huge, "x", "FP32", {int64_t{1} << 40, int64_t{1} << 40});
  huge.add_raw_input_contents("");
  EXPECT_THAT(DecodeError(huge).message(), HasSubstr("too large"));
}

TEST(TensorCodecTest, MissingDataIsAnErrorUnlessEmpty) {
  inference::ModelInferRequest missing;
  AddInput(missing, "x", "FP32", {2});
  EXPECT_THAT(DecodeError(missing).message(), HasSubstr("needs 2 values in fp32_contents, got 0"));

  inference::ModelInferRequest empty;
  AddInput(empty, "x", "FP32", {0, 4});
  auto decoded = DecodeInputs(empty);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ((*decoded)[0].tensor.num_elements(), 0);
}

// Found by tests/fuzz/request_decoder_fuzzer.cc: a huge dim before a zero one
// made the byte count overflow before it reached the zero, and the decoder
// aborted kilnd. The tensor is empty: decoded, never an abort.
TEST(TensorCodecTest, AHugeDimBesideAZeroOneIsAnEmptyTensor) {
  for (const char* datatype : {"FP64", "INT8"}) {
    inference::ModelInferRequest raw;
    AddInput(raw, "x", datatype, {int64_t{1} << 62, 0});
    raw.add_raw_input_contents("");
    auto decoded = DecodeInputs(raw);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ((*decoded)[0].tensor.num_elements(), 0);

    inference::ModelInferRequest typed;
    AddInput(typed, "x", datatype, {int64_t{1} << 62, 0, int64_t{1} << 62});
    decoded = DecodeInputs(typed);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ((*decoded)[0].tensor.num_elements(), 0);
  }
}

TEST(TensorCodecTest, RequestedOutputsKeepOrder) {
  inference::ModelInferRequest request;
  request.add_outputs()->set_name("b");
  request.add_outputs()->set_name("a");
  EXPECT_THAT(RequestedOutputs(request), ElementsAre("b", "a"));
}

TEST(TensorCodecTest, EncodesOutputsAsRaw) {
  Tensor f = Tensor::Zeros(DType::kF32, {2});
  f.data<float>()[0] = 1.0f;
  f.data<float>()[1] = -1.0f;
  Tensor h = Tensor::Zeros(DType::kF16, {1, 3});
  inference::ModelInferResponse response;
  EncodeOutputs({{"logits", f}, {"half", h}}, &response);
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "logits");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(2));
  EXPECT_EQ(response.raw_output_contents(0), Raw(std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(response.outputs(1).datatype(), "FP16");
  EXPECT_THAT(response.outputs(1).shape(), ElementsAre(1, 3));
  EXPECT_EQ(response.raw_output_contents(1).size(), 6u);
  EXPECT_FALSE(response.outputs(0).has_contents());
}

// With RawOutputs the tensors themselves are handed over (for a front that
// sends their bytes from there), nothing copied into raw_output_contents.
TEST(TensorCodecTest, EncodesOutputsIntoRawOutputsWithoutCopying) {
  Tensor f = Tensor::Zeros(DType::kF32, {2});
  f.data<float>()[0] = 1.0f;
  Tensor empty = Tensor::Zeros(DType::kInt64, {0, 4});
  inference::ModelInferResponse response;
  RawOutputs raw;
  ASSERT_TRUE(EncodeOutputs({{"logits", f}, {"none", empty}}, inference::ModelInferRequest(),
                            nullptr, &response, &raw)
                  .ok());
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.raw_output_contents_size(), 0);
  EXPECT_EQ(response.outputs(1).datatype(), "INT64");
  EXPECT_THAT(response.outputs(1).shape(), ElementsAre(0, 4));
  ASSERT_EQ(raw.entries.size(), 2u);
  EXPECT_EQ(raw.bytes(0).data(), f.raw_data());  // the tensor's own bytes
  EXPECT_EQ(raw.bytes(0), Raw(std::vector<float>{1.0f, 0.0f}));
  EXPECT_TRUE(raw.bytes(1).empty());
}

}  // namespace
}  // namespace kiln::server
