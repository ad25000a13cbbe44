// Numeric parity of the promotion sample: each traced module that
// gen_promotion_table.py saved (one op on operands of two dtypes and kinds, or
// one of its small models: float64 MLP, float64 CNN (conv, batch norm, pools,
// depthwise conv, linear), float64 decoder head (conv transpose, bilinear
// and bicubic resize, var/std/logsumexp/norm/cumsum, einsum, multi-head
// attention, LSTM, GRU), int64/int32 embedding ids, bool masks,
// uint8 images, integer arithmetic) is imported, compiled natively (no libtorch
// fallback is installed) for libtorch's input dtypes and run; the output
// must have libtorch's dtype and dims, and its values must be bit-identical
// for integer, bool and float32 outputs, within 1e-6 relative for float64,
// and within one rounding of the storage type for float16/bfloat16 (computed
// in float32, as PyTorch does on CPU).
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/runtime/executable.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// "DTYPE:[d0,d1]:hexbytes" -> a tensor; undefined on a parse error.
Tensor ParseTensor(const std::string& s) {
  const size_t c1 = s.find(':');
  const size_t c2 = s.find(':', c1 + 1);
  std::optional<DType> dtype = DTypeFromName(s.substr(0, c1));
  if (!dtype || c2 == std::string::npos) return {};
  const std::string dims_text = s.substr(c1 + 2, c2 - c1 - 3);
  Dims dims;
  std::stringstream ds(dims_text);
  for (std::string tok; std::getline(ds, tok, ',');) dims.push_back(std::stoll(tok));
  Tensor t = Tensor::Zeros(*dtype, dims);
  const std::string hex = s.substr(c2 + 1);
  if (hex == "-") return t.byte_size() == 0 ? t : Tensor();
  if (hex.size() != 2 * t.byte_size()) return {};
  auto* bytes = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.byte_size(); ++i) {
    bytes[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return t;
}

float HalfToFloat(uint16_t h, bool bf16) {
  if (bf16) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v = exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                     : exp == 31 ? (man ? NAN : INFINITY)
                                 : std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  return sign ? -v : v;
}

// Empty when `got` matches `want` under the rule in the file comment.
std::string Compare(const Tensor& want, const Tensor& got) {
  if (got.dtype() != want.dtype()) {
    return absl::StrCat("dtype ", DTypeName(got.dtype()), ", libtorch ", DTypeName(want.dtype()));
  }
  if (got.dims() != want.dims()) return "dims differ";
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    double w, g, tol = 0;
    switch (want.dtype()) {
      case DType::kF64:
        w = want.data<double>()[i];
        g = got.data<double>()[i];
        tol = 1e-6 * std::fabs(w);
        break;
      case DType::kF16:
      case DType::kBF16: {
        const bool bf = want.dtype() == DType::kBF16;
        w = HalfToFloat(static_cast<const uint16_t*>(want.raw_data())[i], bf);
        g = HalfToFloat(static_cast<const uint16_t*>(got.raw_data())[i], bf);
        tol = (bf ? 1.0 / 128 : 1.0 / 1024) * std::fabs(w);
        break;
      }
      default: {
        const size_t n = DTypeSize(want.dtype());
        if (std::memcmp(static_cast<const char*>(want.raw_data()) + i * n,
                        static_cast<const char*>(got.raw_data()) + i * n, n) != 0) {
          return absl::StrCat("element ", i, " differs (bit-exact comparison)");
        }
        continue;
      }
    }
    if (std::isnan(w) && std::isnan(g)) continue;
    if (!(std::fabs(w - g) <= tol)) return absl::StrCat("element ", i, ": ", g, " vs ", w);
  }
  return "";
}

TEST(PromotionNumericsTest, SampledRowsMatchLibtorch) {
  const std::string dir = KILN_PROMOTION_DIR;
  std::ifstream file(dir + "/promotion_cases.tsv");
  ASSERT_TRUE(file.good()) << "run the promotion_table target first";
  int cases = 0, failures = 0;
  bool saw_f64_cnn = false, saw_f64_decoder = false, saw_int_trunc_div = false;
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, '\t');) f.push_back(cell);
    ASSERT_EQ(f.size(), 8u) << line;
    const std::string what =
        absl::StrCat(f[0], " ", f[1], "(", f[2], " ", f[3], ", ", f[4], " ", f[5], "): ");
    ++cases;
    saw_f64_cnn |= f[0] == "f64_cnn";
    saw_f64_decoder |= f[0] == "f64_decoder_head";
    saw_int_trunc_div |= f[0] == "int_trunc_div";
    std::vector<Tensor> inputs;
    std::stringstream is(f[6]);
    for (std::string tok; std::getline(is, tok, ' ');) inputs.push_back(ParseTensor(tok));
    const Tensor want = ParseTensor(f[7]);
    ASSERT_NE(want.dtype(), DType::kUnknown) << what << "bad output field";

    auto fail = [&](const std::string& why) {
      ++failures;
      ADD_FAILURE() << what << why;
    };
    absl::StatusOr<ir::Graph> graph =
        importer::ImportTorchScriptFile(dir + "/promotion_cases/" + f[0] + ".pt");
    if (!graph.ok()) {
      fail(absl::StrCat("import: ", graph.status().ToString()));
      continue;
    }
    std::vector<kernels::TensorInfo> infos;
    for (const Tensor& t : inputs) infos.push_back(kernels::TensorInfo{t.dtype(), t.dims()});
    auto exe = runtime::Executable::Compile(*graph, infos, {});
    if (!exe.ok()) {
      fail(absl::StrCat("compile: ", exe.status().ToString()));
      continue;
    }
    absl::StatusOr<std::vector<Tensor>> out = (*exe)->Run(inputs);
    if (!out.ok() || out->size() != 1) {
      fail(absl::StrCat("run: ", out.status().ToString()));
      continue;
    }
    const std::string diff = Compare(want, (*out)[0]);
    if (!diff.empty()) fail(diff + "\n" + ir::PrintGraph(*graph));
  }
  EXPECT_GT(cases, 300);
  EXPECT_TRUE(saw_f64_cnn) << "the float64 CNN model is missing from the sample";
  EXPECT_TRUE(saw_f64_decoder) << "the float64 decoder-head model is missing from the sample";
  EXPECT_TRUE(saw_int_trunc_div) << "the int64 trunc-division model is missing from the sample";
  EXPECT_EQ(failures, 0) << failures << " of " << cases << " cases differ from libtorch";
}

}  // namespace
}  // namespace kiln
