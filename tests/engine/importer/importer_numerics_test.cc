// End-to-end numerics of imported fixtures: each archive from make_models.py is
// imported, run through the runtime on its sample inputs, and compared with the
// outputs libtorch computed for the same file. A wrong attribute convention in
// the importer (padding, axis, alpha, ...) shows up here as a large error.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/importer/torchscript_importer.h"
#include "engine/runtime/model.h"
#include "gtest/gtest.h"

namespace kiln::importer {
namespace {

std::string Fixture(const std::string& name) {
  const char* dir = std::getenv("KILN_FIXTURES");
  return absl::StrCat(dir ? dir : "fixtures", "/", name);
}

// Reads a C-ordered little-endian float32 .npy (version 1.0), as make_models.py
// writes them. Returns an undefined tensor (dtype kUnknown) on any mismatch.
Tensor ReadF32Npy(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0 || bytes[6] != 1) return {};
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
  const std::string header = bytes.substr(10, header_len);
  if (header.find("'<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos) {
    return {};
  }
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

class ImportedModelNumericsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ImportedModelNumericsTest, MatchesLibtorchOutput) {
  const std::string name = GetParam();
  absl::StatusOr<ir::Graph> graph = ImportTorchScriptFile(Fixture(name + ".pt"));
  ASSERT_TRUE(graph.ok()) << graph.status();

  std::vector<runtime::NamedTensor> inputs;
  for (ir::ValueId v : graph->inputs()) {
    const std::string& input = graph->value(v).name;
    Tensor t = ReadF32Npy(Fixture(absl::StrCat(name, ".input.", input, ".npy")));
    ASSERT_EQ(t.dtype(), DType::kF32) << "cannot read the sample for input " << input;
    inputs.push_back({input, std::move(t)});
  }
  absl::StatusOr<std::unique_ptr<runtime::Model>> model =
      runtime::Model::Create(*std::move(graph), {});
  ASSERT_TRUE(model.ok()) << model.status();
  auto outputs = (*model)->Infer(inputs, {});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);

  const Tensor want = ReadF32Npy(Fixture(name + ".output0.npy"));
  const Tensor& got = (*outputs)[0].tensor;
  ASSERT_EQ(want.dtype(), DType::kF32);
  ASSERT_EQ(got.dtype(), DType::kF32);
  ASSERT_EQ(got.dims(), want.dims());
  double max_ref = 0, max_err = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double{want.data<float>()[i]}));
    max_err = std::max(max_err,
                       std::fabs(double{got.data<float>()[i]} - double{want.data<float>()[i]}));
  }
  // Float32 with different summation orders: ~1e-6 of the output scale in
  // practice; 1e-4 leaves room for other kernels while any semantic slip
  // (a wrong padding, axis or scalar) is orders of magnitude larger.
  EXPECT_LE(max_err, 1e-4 * max_ref + 1e-6) << name << ": max |ref| " << max_ref;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ImportedModelNumericsTest,
                         ::testing::Values("mlp", "mlp_scripted", "two_input", "resnet18",
                                           "mobilenet_v2"));

}  // namespace
}  // namespace kiln::importer
