#include "client/npy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

namespace kiln::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A header exactly as numpy 1.24's np.save writes it (padded to 128 bytes).
std::string NumpyHeader(const std::string& dict) {
  std::string header = dict;
  header.append(128 - 10 - dict.size() - 1, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header;
}

Tensor Pattern(DType dtype, Dims dims) {
  Tensor t = Tensor::Zeros(dtype, std::move(dims));
  auto* p = static_cast<unsigned char*>(t.raw_data());
  for (size_t i = 0; i < t.byte_size(); ++i) {
    p[i] = dtype == DType::kBool ? i % 2 : static_cast<unsigned char>(i * 7 + 3);
  }
  return t;
}

TEST(NpyTest, RoundTripsEveryNumpyDtype) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kInt64, DType::kInt32,
                      DType::kInt16, DType::kInt8, DType::kUInt8, DType::kBool}) {
    for (const Dims& dims : {Dims{2, 3, 4}, Dims{5}, Dims{}, Dims{2, 0}}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + DimsToString(dims));
      const Tensor original = Pattern(dtype, dims);
      absl::StatusOr<std::string> bytes = SerializeNpy(original);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      // Data starts 64-byte aligned, as numpy requires of writers.
      EXPECT_EQ((bytes->size() - original.byte_size()) % 64, 0u);
      absl::StatusOr<Tensor> parsed = ParseNpy(*bytes);
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_EQ(parsed->dtype(), dtype);
      EXPECT_EQ(parsed->dims(), dims);
      ASSERT_EQ(parsed->byte_size(), original.byte_size());
      EXPECT_EQ(std::memcmp(parsed->raw_data(), original.raw_data(), original.byte_size()), 0);
    }
  }
}

TEST(NpyTest, WritesNumpyHeaderSyntax) {
  auto bytes = SerializeNpy(Pattern(DType::kF32, {2, 3}));
  ASSERT_TRUE(bytes.ok());
  EXPECT_THAT(*bytes, HasSubstr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  auto one_d = SerializeNpy(Pattern(DType::kInt8, {5}));
  ASSERT_TRUE(one_d.ok());
  EXPECT_THAT(*one_d, HasSubstr("'descr': '|i1'"));
  EXPECT_THAT(*one_d, HasSubstr("'shape': (5,)"));
  auto scalar = SerializeNpy(Pattern(DType::kBool, {}));
  ASSERT_TRUE(scalar.ok());
  EXPECT_THAT(*scalar, HasSubstr("'descr': '|b1'"));
  EXPECT_THAT(*scalar, HasSubstr("'shape': ()"));
}

TEST(NpyTest, ReadsWhatNumpyWrites) {
  std::string bytes = NumpyHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  const float values[] = {0, 1, 2, 3, 4, 5};
  bytes.append(reinterpret_cast<const char*>(values), sizeof(values));
  auto t = ParseNpy(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dims(), (Dims{2, 3}));
  EXPECT_THAT(std::vector<float>(t->data<float>(), t->data<float>() + 6),
              ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(NpyTest, ReadsVersion2AndAlternateSpellings) {
  std::string dict = "{\"descr\": \"=i4\", \"fortran_order\": False, \"shape\": (2L,)}\n";
  std::string bytes("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((dict.size() >> (8 * i)) & 0xff));
  bytes += dict;
  const int32_t values[] = {-1, 7};
  bytes.append(reinterpret_cast<const char*>(values), sizeof(values));
  auto t = ParseNpy(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kInt32);
  EXPECT_THAT(std::vector<int32_t>(t->data<int32_t>(), t->data<int32_t>() + 2), ElementsAre(-1, 7));
}

TEST(NpyTest, RejectsWhatKilnCannotRepresent) {
  struct Case {
    std::string dict;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "big-endian"},
           {"{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "Fortran-ordered"},
           {"{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }", "unsupported dtype '<u2'"},
           {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "unsupported dtype"},
           {"{'fortran_order': False, 'shape': (1,), }", "no string 'descr'"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,, }", "malformed header"},
       }) {
    std::string bytes = NumpyHeader(c.dict) + std::string(4, '\0');
    auto t = ParseNpy(bytes);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.dict;
    EXPECT_THAT(t.status().message(), HasSubstr(c.message)) << c.dict;
  }
}

TEST(NpyTest, RejectsBadMagicAndWrongDataSize) {
  EXPECT_THAT(ParseNpy("PK\x03\x04 not numpy").status().message(), HasSubstr("bad magic"));
  std::string truncated =
      NumpyHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") +
      std::string(20, '\0');
  EXPECT_THAT(ParseNpy(truncated).status().message(), HasSubstr("data holds 20 bytes"));
}

TEST(NpyTest, Bf16IsWrittenAsExactlyWidenedFloat32) {
  // NumPy has no bfloat16: 1.5, -2.0 and 0.15625 as bfloat16 bit patterns.
  Tensor bf16 = Tensor::Zeros(DType::kBF16, {3});
  auto* bits = static_cast<uint16_t*>(bf16.raw_data());
  bits[0] = 0x3FC0;
  bits[1] = 0xC000;
  bits[2] = 0x3E20;
  auto bytes = SerializeNpy(bf16);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = ParseNpy(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype(), DType::kF32);
  EXPECT_THAT(std::vector<float>(back->data<float>(), back->data<float>() + 3),
              ElementsAre(1.5f, -2.0f, 0.15625f));
}

TEST(NpyTest, FileRoundTrip) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kiln-npy-" + std::to_string(::getpid()) + ".npy"))
          .string();
  const Tensor original = Pattern(DType::kF32, {3, 2});
  ASSERT_TRUE(WriteNpy(path, original).ok());
  auto read = ReadNpy(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(std::memcmp(read->raw_data(), original.raw_data(), original.byte_size()), 0);
  EXPECT_EQ(ReadNpy("/nonexistent/x.npy").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::client
