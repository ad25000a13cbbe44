#include "server/core/infer_request_reader.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "server/core/tensor_codec.h"

namespace kiln::server {
namespace {

// Two inputs inline (1000 floats, then 3 int64s), one in shared memory, an
// empty one, parameters, outputs and an id: every kind of field the message has.
inference::ModelInferRequest Sample() {
  inference::ModelInferRequest r;
  r.set_model_name("m");
  r.set_model_version("2");
  r.set_id("request-7");
  (*r.mutable_parameters())["timeout"].set_int64_param(-5);
  (*r.mutable_parameters())["profile"].set_bool_param(true);
  auto add = [&](const std::string& name, const std::string& type, std::vector<int64_t> shape) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype(type);
    for (int64_t d : shape) in->add_shape(d);
    return in;
  };
  add("x", "FP32", {10, 100});
  auto* shm = add("s", "FP32", {2});
  (*shm->mutable_parameters())["shared_memory_region"].set_string_param("region");
  add("ids", "INT64", {3});
  add("none", "FP32", {0, 4});
  r.add_outputs()->set_name("y");
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * static_cast<float>(i) - 7;
  r.add_raw_input_contents()->assign(reinterpret_cast<const char*>(x.data()), x.size() * 4);
  const int64_t ids[3] = {1, -2, int64_t{1} << 40};
  r.add_raw_input_contents()->assign(reinterpret_cast<const char*>(ids), sizeof(ids));
  r.add_raw_input_contents();  // the empty input's
  return r;
}

// `bytes` cut into pieces of `size` bytes (the last shorter), with an empty
// piece between each two.
std::vector<absl::string_view> Cut(const std::string& bytes, size_t size) {
  std::vector<absl::string_view> pieces;
  for (size_t at = 0; at < bytes.size(); at += size) {
    pieces.push_back(absl::string_view(bytes).substr(at, size));
    pieces.push_back(absl::string_view());
  }
  return pieces;
}

std::string Joined(const std::vector<absl::string_view>& pieces) {
  std::string s;
  for (absl::string_view p : pieces) s.append(p.data(), p.size());
  return s;
}

// Equal field by field (a map's order on the wire is unspecified).
bool Same(const inference::ModelInferRequest& a, const inference::ModelInferRequest& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

// What protobuf alone makes of the bytes, raw entries included.
void ExpectSameAsProtobuf(const std::vector<absl::string_view>& pieces, const std::string& what) {
  inference::ModelInferRequest want;
  const bool want_ok = want.ParseFromString(Joined(pieces));
  inference::ModelInferRequest got;
  RawInputs raw;
  ASSERT_EQ(ReadInferRequest(pieces, &got, &raw), want_ok) << what;
  if (!want_ok) return;
  for (const auto& entry : raw.entries) got.add_raw_input_contents(Joined(entry));
  EXPECT_TRUE(Same(got, want)) << what;
}

TEST(InferRequestReaderTest, LeavesRawEntriesInPlaceAndParsesTheRestLikeProtobuf) {
  const inference::ModelInferRequest sample = Sample();
  const std::string bytes = sample.SerializeAsString();
  for (size_t size : {bytes.size(), size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{4096}}) {
    const std::vector<absl::string_view> pieces = Cut(bytes, size);
    inference::ModelInferRequest got;
    RawInputs raw;
    ASSERT_TRUE(ReadInferRequest(pieces, &got, &raw)) << size;
    EXPECT_EQ(got.raw_input_contents_size(), 0);
    ASSERT_EQ(raw.entries.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(Joined(raw.entries[i]), sample.raw_input_contents(i)) << size << " entry " << i;
      for (absl::string_view v : raw.entries[i]) {  // views into the pieces, not copies
        EXPECT_GE(v.data(), bytes.data());
        EXPECT_LE(v.data() + v.size(), bytes.data() + bytes.size());
      }
    }
    ExpectSameAsProtobuf(pieces, "cut " + std::to_string(size));

    // Decoded, the inputs are the ones the whole message gives.
    auto want = DecodeInputs(sample, nullptr);
    auto decoded = DecodeInputs(got, nullptr, &raw);
    // The shared-memory input needs a registry: both fail alike without one.
    EXPECT_EQ(decoded.status(), want.status());
    inference::ModelInferRequest plain = got, plain_sample = sample;
    plain.mutable_inputs()->DeleteSubrange(1, 1);
    plain_sample.mutable_inputs()->DeleteSubrange(1, 1);
    auto want_plain = DecodeInputs(plain_sample, nullptr);
    auto got_plain = DecodeInputs(plain, nullptr, &raw);
    ASSERT_TRUE(want_plain.ok()) << want_plain.status();
    ASSERT_TRUE(got_plain.ok()) << got_plain.status();
    ASSERT_EQ(got_plain->size(), want_plain->size());
    for (size_t i = 0; i < want_plain->size(); ++i) {
      const Tensor& a = (*got_plain)[i].tensor;
      const Tensor& b = (*want_plain)[i].tensor;
      EXPECT_EQ((*got_plain)[i].name, (*want_plain)[i].name);
      EXPECT_EQ(a.dims(), b.dims());
      ASSERT_EQ(a.byte_size(), b.byte_size());
      if (a.byte_size() > 0) EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()), 0);
    }
  }
}

TEST(InferRequestReaderTest, RawEntriesMayComeAnywhereInTheMessage) {
  inference::ModelInferRequest sample = Sample();
  inference::ModelInferRequest head = sample;
  head.clear_raw_input_contents();
  inference::ModelInferRequest raw_only;
  *raw_only.mutable_raw_input_contents() = sample.raw_input_contents();
  // The raw entries first, then the rest: the same message to protobuf.
  const std::string bytes = raw_only.SerializeAsString() + head.SerializeAsString();
  inference::ModelInferRequest got;
  RawInputs raw;
  ASSERT_TRUE(ReadInferRequest({absl::string_view(bytes)}, &got, &raw));
  EXPECT_TRUE(Same(got, head));
  ASSERT_EQ(raw.entries.size(), 3u);
  EXPECT_EQ(Joined(raw.entries[1]), sample.raw_input_contents(1));
}

TEST(InferRequestReaderTest, TruncatedOrDamagedBytesAreJudgedAsProtobufJudgesThem) {
  const std::string bytes = Sample().SerializeAsString();
  for (size_t end = 0; end < bytes.size(); end += (end < 200 ? 1 : 97)) {
    ExpectSameAsProtobuf(Cut(bytes.substr(0, end), 5), "truncated at " + std::to_string(end));
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string damaged = bytes.substr(0, 200 + rng() % 64);
    damaged[rng() % damaged.size()] = static_cast<char>(rng());
    damaged[rng() % damaged.size()] = static_cast<char>(rng());
    ExpectSameAsProtobuf(Cut(damaged, 1 + rng() % 9), "damaged, trial " + std::to_string(trial));
  }
  // Field number 0, an end-group with no start, a length past the end, a tag
  // in 6 bytes (found by the fuzzer: protobuf reads tags of 5 at most), field
  // 7 tagged in 2 bytes, a raw entry's length in 2.
  for (const std::string& odd :
       {std::string("\x00\x01", 2), std::string("\x0c", 1), std::string("\x3a\x7f\x01", 3),
        std::string("\xdd\xf7\xf7\x92\x83\x00\xff\xff\xc4\xff", 10),
        std::string("\xba\x00\x01x", 4), std::string("\x3a\x81\x00x", 4)}) {
    ExpectSameAsProtobuf({absl::string_view(odd)}, "odd bytes");
  }
}

TEST(InferRequestReaderTest, AGroupGoesToProtobufWithTheRawEntries) {
  inference::ModelInferRequest sample = Sample();
  // An unknown field 99 sent as a group (wire types 3 and 4): protobuf keeps
  // it as an unknown field; the reader hands the whole message over.
  const std::string group = std::string("\x9b\x06\x08\x01\x9c\x06", 6);
  const std::string bytes = sample.SerializeAsString() + group;
  inference::ModelInferRequest got;
  RawInputs raw;
  ASSERT_TRUE(ReadInferRequest({absl::string_view(bytes)}, &got, &raw));
  EXPECT_TRUE(raw.entries.empty());
  EXPECT_EQ(got.raw_input_contents_size(), 3);
  ExpectSameAsProtobuf({absl::string_view(bytes)}, "group");
  auto decoded = DecodeInputs(got, nullptr, &raw);  // entries from the message
  EXPECT_EQ(decoded.status(), DecodeInputs(sample, nullptr).status());
}

TEST(InferRequestReaderTest, RawEntriesInBothPlacesAreRefused) {
  inference::ModelInferRequest sample = Sample();
  sample.mutable_inputs()->DeleteSubrange(1, 1);
  RawInputs raw;
  for (const std::string& entry : sample.raw_input_contents()) {
    raw.entries.push_back({absl::string_view(entry)});
  }
  auto decoded = DecodeInputs(sample, nullptr, &raw);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::server
