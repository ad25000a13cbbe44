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
#include <type_traits>
#include <vector>

#include <ATen/Functions.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>

#include "absl/strings/str_cat.h"
#include "engine/importer/torchscript/import_context.h"
#include "engine/importer/torchscript/torchscript_importer.h"
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
                                           "mobilenet_v2", "self_attention"));

// torch.div(a, b, rounding_mode=...) on run-time Python numbers seen as 0-dim
// tensors (traced shape arithmetic such as sequence-first MultiheadAttention's
// head_dim): imported natively, run, and compared with what at::div computes
// for the same operands, signs and dtypes.
template <typename T>
Tensor ScalarOf(T v) {
  Tensor t = Tensor::Zeros(std::is_integral_v<T> ? DType::kInt64 : DType::kF64, {});
  *t.data<T>() = v;
  return t;
}

template <typename T>
void ExpectDivMatchesLibtorch(const std::string& mode, T a, T b) {
  constexpr bool kInt = std::is_integral_v<T>;
  const std::string type = kInt ? "int" : "float";
  const std::string ir_text = absl::StrCat(R"IR(
graph(%a : )IR", type, ", %b : ", type, R"IR():
  %mode : str = prim::Constant[value=")IR", mode, R"IR("]()
  %ta : Tensor = prim::NumToTensor(%a)
  %tb : Tensor = prim::NumToTensor(%b)
  %q : Tensor = aten::div(%ta, %tb, %mode)
  %r : )IR", type, " = aten::", kInt ? "Int" : "Float", R"IR((%q)
  return (%r))IR");
  torch::jit::Graph torch_graph;
  torch::jit::parseIR(ir_text, &torch_graph);
  ImportOptions options;
  options.strict = true;  // a fallback would hide a missing translation
  absl::StatusOr<ir::Graph> graph = ImportTorchGraph(torch_graph, options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::unique_ptr<runtime::Model>> model =
      runtime::Model::Create(*std::move(graph), {});
  ASSERT_TRUE(model.ok()) << model.status();
  auto outputs = (*model)->Infer({{"a", ScalarOf(a)}, {"b", ScalarOf(b)}}, {});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  const Tensor& got = (*outputs)[0].tensor;

  const at::ScalarType st = kInt ? at::kLong : at::kDouble;
  const at::Tensor want =
      at::div(at::scalar_tensor(a, st), at::scalar_tensor(b, st), mode);
  ASSERT_EQ(want.scalar_type(), st);
  const std::string what = absl::StrCat("div(", a, ", ", b, ", rounding_mode=", mode, ")");
  ASSERT_EQ(got.num_elements(), 1) << what;
  if constexpr (kInt) {
    ASSERT_EQ(got.dtype(), DType::kInt64) << what;
    EXPECT_EQ(*got.data<int64_t>(), want.item<int64_t>()) << what;
  } else {
    ASSERT_EQ(got.dtype(), DType::kF64) << what;
    EXPECT_EQ(*got.data<double>(), want.item<double>()) << what;
  }
}

TEST(ImporterScalarDivTest, TruncAndFloorMatchLibtorchOnSignedIntsAndFloats) {
  for (const char* mode : {"trunc", "floor"}) {
    for (int64_t a : {-7, 7, -6, 16, 0}) {
      for (int64_t b : {2, -2, 3, 4}) ExpectDivMatchesLibtorch<int64_t>(mode, a, b);
    }
    for (double a : {-7.5, 7.5, -0.25, 6.0}) {
      for (double b : {2.0, -2.0, 0.5}) ExpectDivMatchesLibtorch<double>(mode, a, b);
    }
  }
}

// The ops that moved from the TorchScript front's own table to the table both
// fronts share, in the TorchScript forms only a scripted graph has (list
// overloads, lists built at run time, scale lists, factory
// ops with dtype=x.dtype): each scripted forward() is imported strictly (no
// fallback may hide a missing translation), run by Kiln, and compared with
// what libtorch's own run of the same module answers.
struct ScriptCase {
  const char* name;
  const char* source;  // the body of forward(self, x: Tensor)
};

void ExpectScriptMatchesLibtorch(const ScriptCase& c) {
  torch::jit::Module module("TestModule");
  module.define(absl::StrCat("def forward(self, x):\n", c.source));
  std::ostringstream bytes;
  module.save(bytes);
  ImportOptions options;
  options.strict = true;
  absl::StatusOr<ir::Graph> graph = ImportTorchScript(bytes.str(), options);
  ASSERT_TRUE(graph.ok()) << c.name << ": " << graph.status();
  absl::StatusOr<std::unique_ptr<runtime::Model>> model =
      runtime::Model::Create(*std::move(graph), {});
  ASSERT_TRUE(model.ok()) << c.name << ": " << model.status();

  at::manual_seed(0);
  const at::Tensor x = at::rand({2, 3, 5, 6});
  Tensor input = Tensor::Zeros(DType::kF32, {2, 3, 5, 6});
  std::memcpy(input.raw_data(), x.data_ptr<float>(), input.byte_size());
  auto outputs = (*model)->Infer({{"x", std::move(input)}}, {});
  ASSERT_TRUE(outputs.ok()) << c.name << ": " << outputs.status();
  ASSERT_EQ(outputs->size(), 1u) << c.name;
  const Tensor& got = (*outputs)[0].tensor;

  const at::Tensor want = module.forward({x}).toTensor().contiguous();
  ASSERT_EQ(got.dims(), Dims(want.sizes().begin(), want.sizes().end())) << c.name;
  if (want.scalar_type() == at::kFloat) {
    ASSERT_EQ(got.dtype(), DType::kF32) << c.name;
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_NEAR(got.data<float>()[i], want.data_ptr<float>()[i], 1e-5) << c.name << " at " << i;
    }
  } else {
    ASSERT_EQ(want.scalar_type(), at::kLong) << c.name;
    ASSERT_EQ(got.dtype(), DType::kInt64) << c.name;
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_EQ(got.data<int64_t>()[i], want.data_ptr<int64_t>()[i]) << c.name << " at " << i;
    }
  }
}

TEST(ImporterSharedOpsTest, TorchScriptFormsMatchLibtorch) {
  const ScriptCase kCases[] = {
      {"add.t and slice.t", R"PY(
    s = x.size()[2:] + x.size()[:1]
    return x.reshape(s[0], s[1], s[2], -1)
)PY"},
      {"cat of a list built in a loop", R"PY(
    parts = []
    for i in range(3):
        parts.append(x * float(i))
    return torch.cat(parts, 1)
)PY"},
      {"slice with run-time bounds", R"PY(
    return x[:, 1:x.size(1), : x.size(3) - 2]
)PY"},
      {"adaptive pools", R"PY(
    a = torch.adaptive_avg_pool2d(x, [2, 4])
    b, i = torch.adaptive_max_pool1d(x.flatten(2), [5])
    return a.sum() + b.sum() + a * 0 + i.sum()
)PY"},
      // F.interpolate's scripted source builds its scale list in a loop,
      // which stays a fallback; the aten forms it calls, directly:
      {"upsample_nearest2d.vec by scale", R"PY(
    return torch.upsample_nearest2d(x, None, [2.0, 3.0])
)PY"},
      {"upsample_bilinear2d.vec to a size", R"PY(
    return torch.upsample_bilinear2d(x, [7, 9], False, None)
)PY"},
      {"upsample_bicubic2d with scales, corners aligned", R"PY(
    return torch.upsample_bicubic2d(x, [8, 12], True, 1.6, 2.0)
)PY"},
      {"upsample_nearest2d to a run-time size", R"PY(
    return torch.upsample_nearest2d(x, [x.size(2) * 2, x.size(3) + 1])
)PY"},
      {"zeros, ones, full, empty", R"PY(
    z = torch.zeros([2, 3, 1, 1]) + torch.ones(2, 3, 5, 6) * 2.0
    f = torch.full([1, 3, 1, 6], 0.25) + torch.empty([1]).fill_(1.0)
    return x * z + f
)PY"},
      {"factory ops of a run-time size and dtype", R"PY(
    return x + torch.ones(x.size(), dtype=x.dtype) + torch.zeros([x.shape[2], x.shape[3]])
)PY"},
      {"full of an int", R"PY(
    return torch.full([2, 3], 7) + x.size(0)
)PY"},
      {"linspace and eye", R"PY(
    return x + torch.linspace(-1.0, 2.5, 6) + torch.eye(5, 6) + torch.eye(x.size(2), 6)
)PY"},
      {"stack of a list built in a loop and of a literal one", R"PY(
    parts = []
    for i in range(2):
        parts.append(x[i])
    return torch.stack(parts, 1) + torch.stack([x[1], x[0]], 1)
)PY"},
      {"t and floor_divide", R"PY(
    y = x[0, 0].t() * 10.0
    return torch.floor_divide(y, 3.0) + torch.floor_divide(y, y.t().t() + 1.0)
)PY"},
      {"int linspace", R"PY(
    return torch.linspace(0, 10, 7, dtype=4)  # 4: torch.int64
)PY"},
  };
  for (const ScriptCase& c : kCases) ExpectScriptMatchesLibtorch(c);
}

}  // namespace
}  // namespace kiln::importer
