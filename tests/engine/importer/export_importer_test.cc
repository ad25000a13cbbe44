// The torch.export front on archives built here (a small stored zip writer and
// hand-written ExportedProgram JSON in the layout torch 2.14 writes), so these
// tests need neither libtorch nor Python: a valid program imported and run (its
// dynamic dim's range enforced), torch.cond and while_loop imported as If and
// Loop and run, every hostile archive refused with InvalidArgument, plus
// mutation fuzz tests of the archive and of the control flow.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/importer/export/exported_program_importer.h"
#include "engine/common/mapped_file.h"
#include "engine/importer/export/pt2_archive.h"
#include "engine/importer/export/torch_save.h"
#include "engine/passes/pass.h"
#include "engine/runtime/model.h"
#include "tests/engine/importer/zip_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::importer {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// ------------------------------------------------------------ building archives

json Meta(std::vector<json> sizes, int dtype = 7) {
  json m = {{"dtype", dtype}, {"requires_grad", false}, {"layout", 7},
            {"device", {{"type", "cpu"}, {"index", nullptr}}},
            {"storage_offset", {{"as_int", 0}}}};
  m["sizes"] = json::array();
  m["strides"] = json::array();
  for (const json& s : sizes) m["sizes"].push_back(s.is_number() ? json{{"as_int", s}} : s);
  int64_t stride = 1;
  std::vector<json> strides(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = {{"as_int", stride}};
    stride *= sizes[i].is_number() ? sizes[i].get<int64_t>() : 1;
  }
  for (const json& s : strides) m["strides"].push_back(s);
  return m;
}

json Sym(const std::string& name) {
  return {{"as_expr", {{"expr_str", absl::StrCat("Symbol('", name, "', positive=True, integer=True)")},
                       {"hint", {{"as_int", 2}}}}}};
}

json Arg(const std::string& name, json arg) { return {{"name", name}, {"arg", arg}, {"kind", 1}}; }
json T(const std::string& name) { return {{"as_tensor", {{"name", name}}}}; }

json Node(const std::string& target, std::vector<json> inputs, const std::string& out) {
  return {{"target", target}, {"inputs", inputs}, {"outputs", json::array({T(out)})},
          {"metadata", json::object()}, {"name", out}};
}

// features[batch, 4] -> y = relu_(linear(features)) * scale, returned as {"y": ...}; "linear"
// is read after relu_ mutated it, and the reshape goes through sym_size (a dynamic batch).
struct Program {
  json ep;
  std::map<std::string, std::string> weights;  // path_name -> bytes
  json weights_config;

  Program() {
    json tv;
    tv["x"] = Meta({Sym("s0"), 4});
    tv["p_w"] = Meta({3, 4});
    tv["p_b"] = Meta({3});
    tv["b_scale"] = Meta({3});
    tv["linear"] = Meta({Sym("s0"), 3});
    tv["relu_"] = Meta({Sym("s0"), 3});
    tv["mul"] = Meta({Sym("s0"), 3});
    tv["view"] = Meta({Sym("s0"), 3});
    json nodes = json::array();
    nodes.push_back(Node("torch.ops.aten.linear.default",
                         {Arg("input", T("x")), Arg("weight", T("p_w")), Arg("bias", T("p_b"))},
                         "linear"));
    nodes.push_back(Node("torch.ops.aten.relu_.default", {Arg("self", T("linear"))}, "relu_"));
    nodes.push_back(
        Node("torch.ops.aten.mul.Tensor", {Arg("self", T("linear")), Arg("other", T("b_scale"))},
             "mul"));
    json sym = {{"target", "torch.ops.aten.sym_size.int"},
                {"inputs", {Arg("self", T("mul")), Arg("dim", {{"as_int", 0}})}},
                {"outputs", json::array({{{"as_sym_int", {{"as_name", "sym_size_int"}}}}})},
                {"name", "sym_size_int"}};
    nodes.push_back(sym);
    nodes.push_back(Node(
        "torch.ops.aten.view.default",
        {Arg("self", T("mul")),
         Arg("size", {{"as_sym_ints", {{{"as_name", "sym_size_int"}}, {{"as_int", 3}}}}})},
        "view"));
    json graph = {{"inputs", json::array()}, {"outputs", json::array({T("view")})},
                  {"nodes", nodes}, {"tensor_values", tv},
                  {"sym_int_values", json::object()}, {"is_single_tensor_return", false}};
    json signature = {
        {"input_specs",
         {{{"parameter", {{"arg", {{"name", "p_w"}}}, {"parameter_name", "lin.weight"}}}},
          {{"parameter", {{"arg", {{"name", "p_b"}}}, {"parameter_name", "lin.bias"}}}},
          {{"buffer",
            {{"arg", {{"name", "b_scale"}}}, {"buffer_name", "scale"}, {"persistent", true}}}},
          {{"user_input", {{"arg", T("x")}}}}}},
        {"output_specs", {{{"user_output", {{"arg", T("view")}}}}}}};
    const std::string out_spec =
        R"([1, {"type": "builtins.dict", "context": "[\"y\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}])";
    json mcg = json::array(
        {{{"fqn", ""},
          {"signature",
           {{"inputs", json::array()}, {"outputs", json::array()}, {"in_spec", ""},
            {"out_spec", out_spec}, {"forward_arg_names", {"features"}}}}}});
    ep = {{"graph_module",
           {{"graph", graph}, {"signature", signature}, {"module_call_graph", mcg},
            {"metadata", json::object()}}},
          {"opset_version", {{"aten", 10}}},
          {"range_constraints", {{"s0", {{"min_val", 1}, {"max_val", 64}}}}},
          {"schema_version", {{"major", 8}, {"minor", 20}}},
          {"verifiers", {"TRAINING"}},
          {"torch_version", "2.14.1"}};
    AddWeight("lin.weight", "weight_0", {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, {3, 4});
    AddWeight("lin.bias", "weight_1", {0.5f, -10.0f, 0.0f}, {3});
    AddWeight("scale", "weight_2", {2.0f, 3.0f, 4.0f}, {3});
  }

  void AddWeight(const std::string& fqn, const std::string& path, std::vector<float> values,
                 std::vector<int64_t> dims) {
    std::vector<json> sizes(dims.begin(), dims.end());
    weights_config[fqn] = {{"path_name", path}, {"is_param", true}, {"use_pickle", false},
                           {"tensor_meta", Meta(sizes)}};
    weights[path] = std::string(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(float));
  }

  std::vector<Entry> Entries(const std::string& model_json) const {
    std::vector<Entry> e;
    for (const auto& [path, bytes] : weights) e.push_back({"m/data/weights/" + path, bytes});
    e.push_back({"m/data/weights/model_weights_config.json",
                 json{{"config", weights_config}}.dump()});
    e.push_back({"m/data/constants/model_constants_config.json", R"({"config": {}})"});
    e.push_back({"m/models/model.json", model_json});
    e.push_back({"m/archive_format", "pt2"});
    e.push_back({"m/.data/version", "6\n"});
    return e;
  }
  std::string Archive() const { return Zip(Entries(ep.dump())); }
};

Tensor Floats(Dims dims, std::vector<float> v) {
  Tensor t = Tensor::Zeros(DType::kF32, dims);
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
  return t;
}

absl::Status ImportStatus(const std::string& bytes) {
  return ImportExportedProgram(bytes).status();
}

void ExpectInvalid(const std::string& bytes, const std::string& says) {
  absl::Status s = ImportStatus(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(says));
}

void SetGraph(Program& p, std::vector<std::pair<std::string, json>> inputs, json nodes,
              const std::string& output, json tv);

// ------------------------------------------------------------ weights viewed in place

// `bytes` copied `misalign` bytes past a 64-byte aligned start of a buffer a
// shared_ptr owns, as a mapping of the file would hold them.
struct OwnedBytes {
  std::shared_ptr<char> buffer;
  std::string_view bytes;
};
OwnedBytes OwnedCopy(const std::string& bytes, size_t misalign = 0) {
  const size_t size = (bytes.size() + misalign + 63) / 64 * 64;
  std::shared_ptr<char> buffer(static_cast<char*>(std::aligned_alloc(64, size)), std::free);
  std::memcpy(buffer.get() + misalign, bytes.data(), bytes.size());
  return {buffer, std::string_view(buffer.get() + misalign, bytes.size())};
}

bool Inside(const void* p, std::string_view bytes) {
  const auto* c = static_cast<const char*>(p);
  return c >= bytes.data() && c < bytes.data() + bytes.size();
}

// The tensor of the constant named `name`, or nullptr.
const Tensor* ConstantNamed(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes()) {
    if (n.kind == ir::OpKind::kConstant && !n.outputs.empty() &&
        g.value(n.outputs[0]).name == name) {
      return n.attrs.GetTensor("value");
    }
  }
  return nullptr;
}

// Raw deflate (as zip stores it) of `data`.
std::string Deflate(const std::string& data) {
  z_stream z;
  std::memset(&z, 0, sizeof(z));
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The Program's archive with every weight entry 64-byte aligned, as torch
// writes it; `deflated` names weight files stored deflated instead.
std::string AlignedArchive(const std::vector<Entry>& entries,
                           const std::set<std::string>& deflated = {}) {
  std::vector<Entry> out = entries;
  for (Entry& e : out) {
    if (e.name.find("/data/weights/weight_") == std::string::npos) continue;
    e.align = 64;
    const std::string file = e.name.substr(e.name.rfind('/') + 1);
    if (deflated.count(file) > 0) {
      e.declared_size = e.data.size();
      e.data = Deflate(e.data);
      e.method = 8;
    }
  }
  return Zip(out);
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

TEST(ExportImporterViewTest, AlignedStoredWeightsViewTheArchive) {
  const Program p;
  const OwnedBytes owned = OwnedCopy(AlignedArchive(p.Entries(p.ep.dump())));
  const long before = owned.buffer.use_count();
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(owned.bytes, owned.buffer);
  ASSERT_TRUE(g.ok()) << g.status();
  for (const char* name : {"lin.weight", "lin.bias", "scale"}) {
    const Tensor* t = ConstantNamed(*g, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_TRUE(Inside(t->raw_data(), owned.bytes)) << name << " was copied";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % kConstantViewAlign, 0u) << name;
  }
  EXPECT_EQ(Values(*ConstantNamed(*g, "scale")), (std::vector<float>{2, 3, 4}));
  // The graph's constants hold the bytes alive.
  EXPECT_GT(owned.buffer.use_count(), before);

  // Without an owner the same archive is copied.
  absl::StatusOr<ir::Graph> copied = ImportExportedProgram(owned.bytes);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_FALSE(Inside(ConstantNamed(*copied, "lin.weight")->raw_data(), owned.bytes));
  EXPECT_EQ(Values(*ConstantNamed(*copied, "scale")), (std::vector<float>{2, 3, 4}));
}

TEST(ExportImporterViewTest, MisalignedAndDeflatedWeightsAreCopied) {
  const Program p;
  // The whole archive 4 bytes past an aligned start: every tensor misaligned.
  const OwnedBytes shifted = OwnedCopy(AlignedArchive(p.Entries(p.ep.dump())), 4);
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(shifted.bytes, shifted.buffer);
  ASSERT_TRUE(g.ok()) << g.status();
  for (const char* name : {"lin.weight", "lin.bias", "scale"}) {
    const Tensor* t = ConstantNamed(*g, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_FALSE(Inside(t->raw_data(), shifted.bytes)) << name << " was viewed misaligned";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % 64, 0u) << name;
  }
  EXPECT_EQ(Values(*ConstantNamed(*g, "lin.bias")), (std::vector<float>{0.5f, -10, 0}));

  // weight_2 (scale) deflated: it is inflated and copied; the others are viewed.
  const OwnedBytes mixed = OwnedCopy(AlignedArchive(p.Entries(p.ep.dump()), {"weight_2"}));
  g = ImportExportedProgram(mixed.bytes, mixed.buffer);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(Inside(ConstantNamed(*g, "scale")->raw_data(), mixed.bytes));
  EXPECT_EQ(Values(*ConstantNamed(*g, "scale")), (std::vector<float>{2, 3, 4}));
  EXPECT_TRUE(Inside(ConstantNamed(*g, "lin.weight")->raw_data(), mixed.bytes));
}

TEST(ExportImporterViewTest, ViewedWeightsOutOfTheirStorageAreStillRefused) {
  Program p;
  p.weights_config["lin.weight"]["tensor_meta"]["storage_offset"] = {{"as_int", 1}};
  const OwnedBytes owned = OwnedCopy(AlignedArchive(p.Entries(p.ep.dump())));
  absl::Status s = ImportExportedProgram(owned.bytes, owned.buffer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("weight_0 has 48"));
}

// Tied weights: two of the program's state tensors name one file, so both
// constants view the same bytes. Compiling and running the model must leave
// those bytes (and so the other constant) as they were.
TEST(ExportImporterViewTest, TiedWeightsShareBytesThatRunningLeavesUnchanged) {
  Program p;
  p.weights_config["scale"]["path_name"] = "weight_1";  // scale is lin.bias
  const std::string archive = AlignedArchive(p.Entries(p.ep.dump()));
  const OwnedBytes owned = OwnedCopy(archive);
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(owned.bytes, owned.buffer);
  ASSERT_TRUE(g.ok()) << g.status();
  const Tensor* bias = ConstantNamed(*g, "lin.bias");
  const Tensor* scale = ConstantNamed(*g, "scale");
  ASSERT_NE(bias, nullptr);
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(bias->raw_data(), scale->raw_data());
  EXPECT_TRUE(Inside(bias->raw_data(), owned.bytes));

  absl::StatusOr<std::unique_ptr<runtime::Model>> model =
      runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<float> x = {1, 2, 3, 4, -5, 6, 7, 8};
  absl::StatusOr<std::vector<runtime::NamedTensor>> out =
      (*model)->Infer({{"features", Floats({2, 4}, x)}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const float bias_v[3] = {0.5f, -10, 0};
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_FLOAT_EQ((*out)[0].tensor.data<float>()[r * 3 + c],
                      std::max(0.0f, x[r * 4 + c] + bias_v[c]) * bias_v[c]);
    }
  }
  EXPECT_EQ(owned.bytes, archive) << "compiling or running wrote into the archive's bytes";
}

// ------------------------------------------------------------ a real model

// The .pt2 fixtures torch writes (tests/pt2/make_pt2_fixtures.py), where the
// build has them.
std::string FixturesDir() {
  if (const char* dir = std::getenv("KILN_PT2_FIXTURES")) return dir;
#ifdef KILN_PT2_FIXTURES_DIR
  return KILN_PT2_FIXTURES_DIR;
#else
  return "";
#endif
}

// A float32 .npy file (numpy's format 1.0-3.0, little-endian, C order).
absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    return absl::NotFoundError(absl::StrCat("no .npy at ", path));
  }
  const bool v1 = bytes[6] == 1;
  const size_t len = v1 ? static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8)
                        : static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8) |
                              (static_cast<uint8_t>(bytes[10]) << 16);
  const size_t start = (v1 ? 10 : 12) + len;
  const std::string header = bytes.substr(v1 ? 10 : 12, len);
  if (header.find("'<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not little-endian float32: ", header));
  }
  Dims dims;
  const size_t open = header.find('(', header.find("'shape'"));
  const size_t close = header.find(')', open);
  for (absl::string_view d :
       absl::StrSplit(header.substr(open + 1, close - open - 1), ',', absl::SkipWhitespace())) {
    dims.push_back(std::stoll(std::string(d)));
  }
  Tensor t = Tensor::Zeros(DType::kF32, dims);
  if (bytes.size() - start != t.byte_size()) return absl::InvalidArgumentError("short .npy");
  std::memcpy(t.raw_data(), bytes.data() + start, t.byte_size());
  return t;
}

// resnet18 as torch.export.save wrote it: its weights (conv weights folded
// with batch norms, prepacked by oneDNN) view the archive, the model still
// computes what torch computed, and compiling and running it leaves the
// archive's bytes as they were.
TEST(ExportImporterViewTest, RealArchiveIsViewedAndStillMatchesTorch) {
  const std::string dir = FixturesDir();
  const std::string path = dir + "/resnet18.pt2";
  if (dir.empty() || !std::ifstream(path).good()) {
    GTEST_SKIP() << "no .pt2 fixtures (" << path << "); the pt2.fixtures test makes them";
  }
  absl::StatusOr<Tensor> x = ReadNpy(dir + "/resnet18/case0/in.x.npy");
  absl::StatusOr<Tensor> want = ReadNpy(dir + "/resnet18/case0/out.output0.npy");
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(want.ok()) << want.status();

  // Mapped read-only, as kilnd's import child and kiln inspect map it: a
  // write into a viewed constant would fault here.
  absl::StatusOr<std::shared_ptr<const MappedFile>> mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  const std::string_view file((*mapped)->data(), (*mapped)->size());
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(file, *mapped);
  ASSERT_TRUE(g.ok()) << g.status();
  // fc.weight is [1000, 512]: 2 MB, viewed where it lies in the file.
  const Tensor* fc = ConstantNamed(*g, "fc.weight");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->byte_size(), 1000u * 512 * 4);
  EXPECT_TRUE(Inside(fc->raw_data(), file)) << "fc.weight was copied";
  size_t viewed = 0, total = 0;
  for (const ir::Node& n : g->nodes()) {
    if (n.kind != ir::OpKind::kConstant) continue;
    const Tensor* t = n.attrs.GetTensor("value");
    if (t->byte_size() < 1024) continue;  // the converters' scalars and shape lists
    total += t->byte_size();
    if (Inside(t->raw_data(), file)) viewed += t->byte_size();
  }
  EXPECT_GT(total, 40u << 20);
  EXPECT_EQ(viewed, total) << "torch aligns every weight; none should be copied";

  // The same archive in writable memory, compiled and run: it matches torch,
  // and the archive's bytes (which the constants view) are unchanged.
  const std::string original(file);
  const OwnedBytes owned = OwnedCopy(original);
  absl::StatusOr<ir::Graph> writable = ImportExportedProgram(owned.bytes, owned.buffer);
  ASSERT_TRUE(writable.ok()) << writable.status();
  EXPECT_TRUE(Inside(ConstantNamed(*writable, "fc.weight")->raw_data(), owned.bytes));
  for (ir::Graph* graph : {&*g, &*writable}) {
    absl::StatusOr<std::unique_ptr<runtime::Model>> model =
        runtime::Model::Create(std::move(*graph), {});
    ASSERT_TRUE(model.ok()) << model.status();
    for (int run = 0; run < 2; ++run) {
      absl::StatusOr<std::vector<runtime::NamedTensor>> out = (*model)->Infer({{"x", *x}}, {});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), 1u);
      const Tensor& y = (*out)[0].tensor;
      ASSERT_EQ(y.dims(), want->dims());
      float worst = 0;
      for (int64_t i = 0; i < y.num_elements(); ++i) {
        worst = std::max(worst, std::abs(y.data<float>()[i] - want->data<float>()[i]));
      }
      EXPECT_LT(worst, 1e-3f) << "run " << run;  // the fixture's tolerance
    }
  }
  EXPECT_TRUE(owned.bytes == original) << "compiling or running wrote into the archive's bytes";
}

// ------------------------------------------------------------ a valid program

TEST(ExportImporterTest, ImportsAndRunsAProgram) {
  ExportedProgramInfo info;
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(Program().Archive(), {}, &info);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->value(g->inputs()[0]).name, "features");  // forward()'s argument
  EXPECT_EQ(g->value(g->inputs()[0]).type.ToString(), "FP32[-1, 4]");
  ASSERT_EQ(g->output_names().size(), 1u);
  EXPECT_EQ(g->output_names()[0], "y");  // the dict's key
  ASSERT_EQ(info.dynamic_dims.size(), 1u);
  EXPECT_EQ(info.dynamic_dims[0].input, "features");
  EXPECT_EQ(info.dynamic_dims[0].symbol, "s0");
  EXPECT_EQ(info.dynamic_dims[0].min, 1);
  EXPECT_EQ(info.dynamic_dims[0].max, 64);
  EXPECT_EQ(info.schema_major, 8);

  absl::StatusOr<std::unique_ptr<runtime::Model>> model =
      runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  for (int64_t batch : {1, 3}) {
    std::vector<float> x;
    for (int64_t i = 0; i < batch * 4; ++i) x.push_back(static_cast<float>(i) - 2.0f);
    absl::StatusOr<std::vector<runtime::NamedTensor>> out =
        (*model)->Infer({{"features", Floats({batch, 4}, x)}}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    const Tensor& y = (*out)[0].tensor;
    ASSERT_EQ(y.dims(), (Dims{batch, 3}));
    const float scale[3] = {2, 3, 4}, bias[3] = {0.5f, -10, 0};
    for (int64_t r = 0; r < batch; ++r) {
      for (int c = 0; c < 3; ++c) {
        const float v = std::max(0.0f, x[r * 4 + c] + bias[c]) * scale[c];
        EXPECT_FLOAT_EQ(y.data<float>()[r * 3 + c], v) << "row " << r << " col " << c;
      }
    }
  }
}

TEST(ExportImporterTest, CoreAtenAddmmOfATransposedWeightIsALinear) {
  // run_decompositions() writes linear as addmm(b, x, permute(W, [1, 0])): a
  // Linear of W as stored, with no transpose of the weight left to run.
  Program p;
  json& graph = p.ep["graph_module"]["graph"];
  json nodes = json::array(
      {Node("torch.ops.aten.permute.default",
            {Arg("self", T("p_w")), Arg("dims", {{"as_ints", {1, 0}}})}, "permute"),
       Node("torch.ops.aten.addmm.default",
            {Arg("self", T("p_b")), Arg("mat1", T("x")), Arg("mat2", T("permute"))}, "linear")});
  for (size_t i = 1; i < graph["nodes"].size(); ++i) nodes.push_back(graph["nodes"][i]);
  graph["nodes"] = nodes;
  graph["tensor_values"]["permute"] = Meta({4, 3});
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(p.Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  ir::Graph compiled = *g;
  ASSERT_TRUE(passes::RunPipeline(compiled).ok());
  auto count = [&](ir::OpKind kind) {
    return std::count_if(compiled.nodes().begin(), compiled.nodes().end(),
                         [&](const ir::Node& n) { return n.kind == kind; });
  };
  EXPECT_EQ(count(ir::OpKind::kLinear), 1);
  EXPECT_EQ(count(ir::OpKind::kPermute), 0);
  EXPECT_EQ(count(ir::OpKind::kMatMul), 0);
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<float> x = {-2, -1, 0, 1, 2, 3, 4, 5};
  absl::StatusOr<std::vector<runtime::NamedTensor>> out =
      (*model)->Infer({{"features", Floats({2, 4}, x)}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor;
  const float scale[3] = {2, 3, 4}, bias[3] = {0.5f, -10, 0};
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_FLOAT_EQ(y.data<float>()[r * 3 + c], std::max(0.0f, x[r * 4 + c] + bias[c]) * scale[c]);
    }
  }
}

TEST(ExportImporterTest, TheTraceNamesEachNodesOutputsAndTheirValues) {
  // What the verified import compares node by node: every top-level node with
  // a tensor output, by the program's name for it, bound to a tensor of the
  // graph that import returns (after its renumbering).
  ExportTrace trace;
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(Program().Archive(), nullptr, {}, nullptr, &trace);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_FALSE(trace.nodes.empty());
  int last_index = -1;
  for (const ExportTrace::Entry& entry : trace.nodes) {
    EXPECT_GT(entry.index, last_index) << "in program order";
    last_index = entry.index;
    EXPECT_EQ(entry.op.rfind("aten::", 0), 0u) << entry.op;
    ASSERT_FALSE(entry.outputs.empty());
    for (const auto& [name, id] : entry.outputs) {
      EXPECT_FALSE(name.empty());
      ASSERT_LT(id, g->values().size()) << name;
      EXPECT_EQ(g->value(id).kind, ir::ValueKind::kTensor) << name;
    }
  }
  // The same graph as without a trace.
  absl::StatusOr<ir::Graph> plain = ImportExportedProgram(Program().Archive());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(ir::PrintGraph(*plain), ir::PrintGraph(*g));
}

TEST(ExportImporterTest, OrderedDictResultsAreNamedByTheirKeys) {
  // torchvision's segmentation models return an OrderedDict: its keys name the outputs too.
  Program p;
  p.ep["graph_module"]["module_call_graph"][0]["signature"]["out_spec"] =
      R"([1, {"type": "collections.OrderedDict", "context": "[\"out\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}])";
  ExportedProgramInfo info;
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(p.Archive(), {}, &info);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->output_names().size(), 1u);
  EXPECT_EQ(g->output_names()[0], "out");
}

TEST(ExportImporterTest, DynamicDimRangesTravelWithTheInputAndBoundRequests) {
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(Program().Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::Value& input = g->value(g->inputs()[0]);
  ASSERT_EQ(input.dim_ranges.size(), 1u);
  EXPECT_EQ(input.dim_ranges[0], (ir::DimRange{0, 1, 64, "s0"}));
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->inputs()[0].dim_ranges.size(), 1u);
  for (int64_t batch : {1, 64}) {
    absl::StatusOr<std::vector<runtime::NamedTensor>> out = (*model)->Infer(
        {{"features", Floats({batch, 4}, std::vector<float>(batch * 4, 1.0f))}}, {});
    EXPECT_TRUE(out.ok()) << "batch " << batch << ": " << out.status();
  }
  for (int64_t batch : {0, 65}) {
    absl::StatusOr<std::vector<runtime::NamedTensor>> out = (*model)->Infer(
        {{"features", Floats({batch, 4}, std::vector<float>(batch * 4, 1.0f))}}, {});
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(),
                HasSubstr(absl::StrCat("input 'features': dim 0 is ", batch,
                                       ", outside the range [1, 64]")));
  }
}

TEST(ExportImporterTest, DimsSharingASymbolMustBeEqual) {
  // add(x, y) with x and y both [s0, 4]: torch.export declared their batches equal.
  Program p;
  SetGraph(p, {{"x", Meta({Sym("s0"), 4})}, {"y", Meta({Sym("s0"), 4})}},
           json::array({Node("torch.ops.aten.add.Tensor", {Arg("self", T("x")), Arg("other", T("y"))},
                             "add")}),
           "add", {{"add", Meta({Sym("s0"), 4})}});
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(p.Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::vector<runtime::NamedTensor>> out = (*model)->Infer(
      {{"x", Floats({2, 4}, std::vector<float>(8, 1.0f))},
       {"y", Floats({3, 4}, std::vector<float>(12, 1.0f))}}, {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("the model declares them equal (s0)"));
}

TEST(ExportImporterTest, AnArchiveWithoutSampleInputsSaysSo) {
  absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> samples =
      ExportedProgramSampleInputs(Program().Archive());
  EXPECT_TRUE(absl::IsNotFound(samples.status())) << samples.status();
  EXPECT_TRUE(absl::IsInvalidArgument(ExportedProgramSampleInputs("not a zip").status()));
}

TEST(ExportImporterTest, ListsEveryUnsupportedOpAtOnce) {
  Program p;
  auto& nodes = p.ep["graph_module"]["graph"]["nodes"];
  nodes.push_back(Node("torch.ops.aten.frobnicate.default", {Arg("self", T("x"))}, "f1"));
  nodes.push_back(Node("torch.ops.aten.zorble.Tensor", {Arg("self", T("x"))}, "f2"));
  ImportOptions strict;
  strict.strict = true;
  absl::Status s = ImportExportedProgram(p.Archive(), strict).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("aten::frobnicate, aten::zorble"));
}

TEST(ExportImporterTest, UntranslatedOpsBecomeFallbackNodesWithNamedArguments) {
  // Not strict: an op without a row runs through libtorch. Its arguments are named (the
  // program leaves out those at their defaults, which libtorch's schema supplies).
  Program p;
  auto& nodes = p.ep["graph_module"]["graph"]["nodes"];
  nodes.push_back(Node("torch.ops.aten.logcumsumexp.default",
                       {Arg("self", T("view")), Arg("dim", {{"as_int", 1}})}, "lcse"));
  nodes.push_back(Node("torch.ops.aten.zorble.Tensor",
                       {Arg("self", T("x")), Arg("alpha", {{"as_float", 0.5}}),
                        Arg("dtype", {{"as_scalar_type", 7}}), Arg("none", {{"as_none", nullptr}})},
                       "f2"));
  p.ep["graph_module"]["graph"]["outputs"] = json::array({T("lcse")});
  p.ep["graph_module"]["signature"]["output_specs"][0]["user_output"]["arg"] = T("lcse");
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(p.Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  int fallbacks = 0;
  for (const ir::Node& n : g->nodes()) {
    if (n.kind != ir::OpKind::kFallback) continue;
    ++fallbacks;
    EXPECT_EQ(n.source_op, "aten::logcumsumexp");  // zorble's result is unused: dropped
    EXPECT_EQ(n.attrs.GetString("op"), "aten::logcumsumexp");
    EXPECT_EQ(n.attrs.GetString("overload"), "");
    EXPECT_EQ(n.attrs.GetString("args"), "in;const");
    EXPECT_EQ(n.attrs.GetString("arg_names"), "self;dim");
    EXPECT_EQ(n.attrs.GetInt("arg1"), 1);
    EXPECT_EQ(n.inputs.size(), 1u);
  }
  EXPECT_EQ(fallbacks, 1);
  // The dtype enum becomes c10's number (FLOAT 7 -> Float 6), before compaction drops it.
  p.ep["graph_module"]["graph"]["outputs"] = json::array({T("f2")});
  p.ep["graph_module"]["signature"]["output_specs"][0]["user_output"]["arg"] = T("f2");
  g = ImportExportedProgram(p.Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  bool seen = false;
  for (const ir::Node& n : g->nodes()) {
    if (n.kind != ir::OpKind::kFallback) continue;
    seen = true;
    EXPECT_EQ(n.attrs.GetString("overload"), "Tensor");
    EXPECT_EQ(n.attrs.GetString("args"), "in;const;const;none");
    EXPECT_EQ(n.attrs.GetString("arg_names"), "self;alpha;dtype;none");
    EXPECT_EQ(n.attrs.GetInt("arg2"), 6);
  }
  EXPECT_TRUE(seen);
}

// ------------------------------------------------------------ control flow

json Positional(json arg) { return {{"name", ""}, {"arg", arg}, {"kind", 1}}; }
json Tensors(std::vector<std::string> names) {
  json list = json::array();
  for (const std::string& n : names) list.push_back({{"name", n}});
  return {{"as_tensors", list}};
}
// {"as_graph"}: a subgraph with its own names and tensor_values.
json Subgraph(const std::string& name, std::vector<std::string> inputs, json nodes,
              std::vector<std::string> outputs, json tensor_values) {
  json g = {{"inputs", json::array()}, {"outputs", json::array()}, {"nodes", nodes},
            {"tensor_values", tensor_values}, {"sym_int_values", json::object()},
            {"is_single_tensor_return", outputs.size() == 1}};
  for (const std::string& in : inputs) g["inputs"].push_back(T(in));
  for (const std::string& out : outputs) g["outputs"].push_back(T(out));
  return {{"as_graph", {{"name", name}, {"graph", g}}}};
}

// The program's graph replaced by `nodes`, returning `output`; user inputs
// `inputs` (name -> meta), forward()'s arguments named after them.
void SetGraph(Program& p, std::vector<std::pair<std::string, json>> inputs, json nodes,
              const std::string& output, json tv) {
  json& gm = p.ep["graph_module"];
  json specs = json::array();
  json arg_names = json::array();
  for (const auto& [name, meta] : inputs) {
    tv[name] = meta;
    specs.push_back({{"user_input", {{"arg", T(name)}}}});
    arg_names.push_back(name);
  }
  gm["graph"]["nodes"] = nodes;
  gm["graph"]["outputs"] = json::array({T(output)});
  gm["graph"]["tensor_values"] = tv;
  gm["signature"]["input_specs"] = specs;
  gm["signature"]["output_specs"] = json::array({{{"user_output", {{"arg", T(output)}}}}});
  gm["module_call_graph"][0]["signature"]["forward_arg_names"] = arg_names;
}

// forward(x): torch.cond(x.sum() > 0, lambda x: relu(x) * 2, lambda x: x - 1, (x,)). The
// branches name their input "x" and a value "sum_1" as the caller does: names are per graph.
Program CondProgram() {
  Program p;
  json then_nodes = json::array(
      {Node("torch.ops.aten.relu.default", {Arg("self", T("x"))}, "sum_1"),
       Node("torch.ops.aten.mul.Tensor", {Arg("self", T("sum_1")), Arg("other", {{"as_float", 2.0}})},
            "mul")});
  json else_nodes = json::array({Node("torch.ops.aten.sub.Tensor",
                                      {Arg("self", T("x")), Arg("other", {{"as_float", 1.0}})},
                                      "sub")});
  json branch_tv = {{"x", Meta({Sym("s0"), 4})}, {"sum_1", Meta({Sym("s0"), 4})},
                    {"mul", Meta({Sym("s0"), 4})}, {"sub", Meta({Sym("s0"), 4})}};
  json cond = {{"target", "torch.ops.higher_order.cond"},
               {"inputs", {Positional(T("gt")),
                           Positional(Subgraph("true_graph_0", {"x"}, then_nodes, {"mul"}, branch_tv)),
                           Positional(Subgraph("false_graph_0", {"x"}, else_nodes, {"sub"}, branch_tv)),
                           Positional(Tensors({"x"}))}},
               {"outputs", json::array({T("getitem")})},
               {"name", "cond"}};
  json nodes = json::array(
      {Node("torch.ops.aten.sum.default", {Arg("self", T("x"))}, "sum_1"),
       Node("torch.ops.aten.gt.Scalar", {Arg("self", T("sum_1")), Arg("other", {{"as_int", 0}})},
            "gt"),
       cond});
  SetGraph(p, {{"x", Meta({Sym("s0"), 4})}}, nodes, "getitem",
           {{"sum_1", Meta({})}, {"gt", Meta({}, 12)}, {"getitem", Meta({Sym("s0"), 4})}});
  return p;
}

// forward(x, n): i, y = while_loop(lambda i, y, n: i < n, lambda i, y, n: (i + 1, y * 2),
// (zeros_like(n), x), (n,)); returns y = x * 2^n.
Program WhileProgram() {
  Program p;
  json tv = {{"arg0_1", Meta({}, 5)}, {"arg1_1", Meta({Sym("s0"), 4})}, {"arg2_1", Meta({}, 5)},
             {"lt", Meta({}, 12)}, {"add", Meta({}, 5)}, {"mul", Meta({Sym("s0"), 4})}};
  json cond_nodes = json::array({Node("torch.ops.aten.lt.Tensor",
                                      {Arg("self", T("arg0_1")), Arg("other", T("arg2_1"))}, "lt")});
  json body_nodes = json::array(
      {Node("torch.ops.aten.add.Tensor", {Arg("self", T("arg0_1")), Arg("other", {{"as_int", 1}})},
            "add"),
       Node("torch.ops.aten.mul.Tensor", {Arg("self", T("arg1_1")), Arg("other", {{"as_float", 2.0}})},
            "mul")});
  json loop = {
      {"target", "torch.ops.higher_order.while_loop"},
      {"inputs",
       {Positional(Subgraph("while_loop_cond_graph_0", {"arg0_1", "arg1_1", "arg2_1"}, cond_nodes,
                            {"lt"}, tv)),
        Positional(Subgraph("while_loop_body_graph_0", {"arg0_1", "arg1_1", "arg2_1"}, body_nodes,
                            {"add", "mul"}, tv)),
        Positional(Tensors({"zeros", "x"})), Positional(Tensors({"n"}))}},
      {"outputs", json::array({T("getitem"), T("getitem_1")})},
      {"name", "while_loop"}};
  json nodes = json::array({Node("torch.ops.aten.zeros_like.default", {Arg("self", T("n"))}, "zeros"),
                            loop});
  SetGraph(p, {{"x", Meta({Sym("s0"), 4})}, {"n", Meta({}, 5)}}, nodes, "getitem_1",
           {{"zeros", Meta({}, 5)}, {"getitem", Meta({}, 5)}, {"getitem_1", Meta({Sym("s0"), 4})}});
  return p;
}

Tensor Int64(int64_t v) {
  Tensor t = Tensor::Zeros(DType::kInt64, {});
  *t.data<int64_t>() = v;
  return t;
}

// forward(x, i): x[:, i] (index.Tensor with a None entry), through the op
// table both fronts share; with a BOOL i, a mask (a data-dependent shape).
Program IndexProgram(bool mask) {
  Program p;
  json indices = {{"as_optional_tensors", json::array({{{"as_none", nullptr}},
                                                       {{"as_tensor", {{"name", "i"}}}}})}};
  json nodes = json::array(
      {Node("torch.ops.aten.index.Tensor", {Arg("self", T("x")), Arg("indices", indices)}, "index")});
  SetGraph(p, {{"x", Meta({3, 4})}, {"i", mask ? Meta({4}, 12) : Meta({2}, 5)}}, nodes, "index",
           {{"index", Meta({3, 2})}});
  return p;
}

TEST(ExportImporterTest, IndexWithTensorIndicesAndMasksIsNative) {
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(IndexProgram(false).Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<float> x;
  for (int k = 0; k < 12; ++k) x.push_back(static_cast<float>(k));
  Tensor i = Tensor::Zeros(DType::kInt64, {2});
  i.data<int64_t>()[0] = 3;
  i.data<int64_t>()[1] = 1;
  absl::StatusOr<std::vector<runtime::NamedTensor>> out =
      (*model)->Infer({{"x", Floats({3, 4}, x)}, {"i", std::move(i)}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.dims(), (Dims{3, 2}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(y.data<float>()[r * 2], x[r * 4 + 3]);
    EXPECT_EQ(y.data<float>()[r * 2 + 1], x[r * 4 + 1]);
  }
  // x[:, mask]: an IndexMask, whose width only the mask decides.
  absl::StatusOr<ir::Graph> mg = ImportExportedProgram(IndexProgram(true).Archive());
  ASSERT_TRUE(mg.ok()) << mg.status();
  absl::StatusOr<std::unique_ptr<runtime::Model>> masked = runtime::Model::Create(*std::move(mg), {});
  ASSERT_TRUE(masked.ok()) << masked.status();
  Tensor m = Tensor::Zeros(DType::kBool, {4});
  m.data<bool>()[0] = m.data<bool>()[2] = m.data<bool>()[3] = true;
  out = (*masked)->Infer({{"x", Floats({3, 4}, x)}, {"i", m}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& z = (*out)[0].tensor;
  ASSERT_EQ(z.dims(), (Dims{3, 3}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(z.data<float>()[r * 3], x[r * 4]);
    EXPECT_EQ(z.data<float>()[r * 3 + 1], x[r * 4 + 2]);
    EXPECT_EQ(z.data<float>()[r * 3 + 2], x[r * 4 + 3]);
  }
}

// native_layer_norm (the core ATen form run_decompositions() writes) returns
// (y, mean, rstd). The statistics are computed when the program reads them,
// and dropped by the compiler when it does not.
Program NativeLayerNormProgram(bool read_stats) {
  Program p;
  json ln = Node("torch.ops.aten.native_layer_norm.default",
                 {Arg("input", T("x")), Arg("normalized_shape", {{"as_ints", {4}}}),
                  Arg("weight", {{"as_none", true}}), Arg("bias", {{"as_none", true}}),
                  Arg("eps", {{"as_float", 1e-5}})},
                 "ln");
  ln["outputs"] = json::array({T("y"), T("mean"), T("rstd")});
  json nodes = json::array({ln});
  json tv = {{"y", Meta({Sym("s0"), 4})}, {"mean", Meta({Sym("s0"), 1})}, {"rstd", Meta({Sym("s0"), 1})}};
  std::string out = "y";
  if (read_stats) {  // y * rstd + mean
    nodes.push_back(Node("torch.ops.aten.mul.Tensor", {Arg("self", T("y")), Arg("other", T("rstd"))}, "m"));
    nodes.push_back(Node("torch.ops.aten.add.Tensor", {Arg("self", T("m")), Arg("other", T("mean"))}, "out"));
    tv["m"] = Meta({Sym("s0"), 4});
    tv["out"] = Meta({Sym("s0"), 4});
    out = "out";
  }
  SetGraph(p, {{"x", Meta({Sym("s0"), 4})}}, nodes, out, tv);
  return p;
}

TEST(ExportImporterTest, NativeLayerNormStatisticsRunOnlyWhenRead) {
  const std::vector<float> x = {1, 2, 3, 6, -1, 0, 1, 4};
  for (bool read_stats : {false, true}) {
    SCOPED_TRACE(read_stats ? "statistics read" : "statistics unused");
    absl::StatusOr<ir::Graph> g = ImportExportedProgram(NativeLayerNormProgram(read_stats).Archive());
    ASSERT_TRUE(g.ok()) << g.status();
    ir::Graph compiled = *g;
    ASSERT_TRUE(passes::RunPipeline(compiled).ok());
    const auto vars = std::count_if(compiled.nodes().begin(), compiled.nodes().end(),
                                    [](const ir::Node& n) { return n.kind == ir::OpKind::kVar; });
    EXPECT_EQ(vars, read_stats ? 1 : 0);
    absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<std::vector<runtime::NamedTensor>> out =
        (*model)->Infer({{"x", Floats({2, 4}, x)}}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    const Tensor& y = (*out)[0].tensor;
    ASSERT_EQ(y.dims(), (Dims{2, 4}));
    for (int r = 0; r < 2; ++r) {
      double mean = 0, var = 0;
      for (int c = 0; c < 4; ++c) mean += x[r * 4 + c] / 4.0;
      for (int c = 0; c < 4; ++c) var += (x[r * 4 + c] - mean) * (x[r * 4 + c] - mean) / 4.0;
      const double rstd = 1.0 / std::sqrt(var + 1e-5);
      for (int c = 0; c < 4; ++c) {
        const double norm = (x[r * 4 + c] - mean) * rstd;
        const double want = read_stats ? norm * rstd + mean : norm;
        EXPECT_NEAR(y.data<float>()[r * 4 + c], want, 1e-5) << r << "," << c;
      }
    }
  }
}

// max_pool2d_with_indices, as core ATen writes every max pool: the values
// from a MaxPool; the MaxPoolWithIndices that gives the indices is dropped
// when they are not read.
TEST(ExportImporterTest, MaxPoolWithIndicesRunsTheIndicesOnlyWhenRead) {
  for (bool read_indices : {false, true}) {
    SCOPED_TRACE(read_indices ? "indices read" : "indices unused");
    Program p;
    json pool = Node("torch.ops.aten.max_pool2d_with_indices.default",
                     {Arg("self", T("x")), Arg("kernel_size", {{"as_ints", {2, 2}}}),
                      Arg("stride", {{"as_ints", {2, 2}}})},
                     "mp");
    pool["outputs"] = json::array({T("mp"), T("idx")});
    json tv = {{"mp", Meta({Sym("s0"), 1, 2, 2})}, {"idx", Meta({Sym("s0"), 1, 2, 2}, 5)}};
    SetGraph(p, {{"x", Meta({Sym("s0"), 1, 4, 4})}}, json::array({pool}), read_indices ? "idx" : "mp", tv);
    absl::StatusOr<ir::Graph> g = ImportExportedProgram(p.Archive());
    ASSERT_TRUE(g.ok()) << g.status();
    ir::Graph compiled = *g;
    ASSERT_TRUE(passes::RunPipeline(compiled).ok());
    const auto with_indices =
        std::count_if(compiled.nodes().begin(), compiled.nodes().end(),
                      [](const ir::Node& n) { return n.kind == ir::OpKind::kMaxPoolWithIndices; });
    EXPECT_EQ(with_indices, read_indices ? 1 : 0);
    absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
    ASSERT_TRUE(model.ok()) << model.status();
    std::vector<float> x;
    for (int k = 0; k < 16; ++k) x.push_back(static_cast<float>(k));
    absl::StatusOr<std::vector<runtime::NamedTensor>> out =
        (*model)->Infer({{"x", Floats({1, 1, 4, 4}, x)}}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    const Tensor& y = (*out)[0].tensor;
    ASSERT_EQ(y.num_elements(), 4);
    const int64_t want[4] = {5, 7, 13, 15};  // the maxima, and their places in the plane
    for (int k = 0; k < 4; ++k) {
      if (read_indices) {
        ASSERT_EQ(y.dtype(), DType::kInt64);
        EXPECT_EQ(y.data<int64_t>()[k], want[k]);
      } else {
        EXPECT_EQ(y.data<float>()[k], static_cast<float>(want[k]));
      }
    }
  }
}

TEST(ExportImporterTest, CondBecomesAnIfWithBothBranches) {
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(CondProgram().Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  int ifs = 0;
  for (const ir::Node& n : g->nodes()) ifs += n.kind == ir::OpKind::kIf;
  EXPECT_EQ(ifs, 1);
  EXPECT_EQ(g->blocks().size(), 3u);  // main, then, else
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  // A positive sum takes the true branch, a negative one the false branch.
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> x = {sign * 1.0f, sign * 2.0f, -0.5f, 0.25f, sign * 3.0f, 0.0f, 1.0f, -1.0f};
    absl::StatusOr<std::vector<runtime::NamedTensor>> out =
        (*model)->Infer({{"x", Floats({2, 4}, x)}}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    const Tensor& y = (*out)[0].tensor;
    ASSERT_EQ(y.dims(), (Dims{2, 4}));
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = sign > 0 ? std::max(0.0f, x[i]) * 2.0f : x[i] - 1.0f;
      EXPECT_FLOAT_EQ(y.data<float>()[i], want) << "sign " << sign << " element " << i;
    }
  }
}

TEST(ExportImporterTest, WhileLoopBecomesALoop) {
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(WhileProgram().Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  int loops = 0;
  for (const ir::Node& n : g->nodes()) loops += n.kind == ir::OpKind::kLoop;
  EXPECT_EQ(loops, 1);
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<float> x = {1, -2, 3, 0.5f};
  for (int64_t n : {0, 1, 5}) {  // 0: the loop is never entered
    absl::StatusOr<std::vector<runtime::NamedTensor>> out =
        (*model)->Infer({{"x", Floats({1, 4}, x)}, {"n", Int64(n)}}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    const Tensor& y = (*out)[0].tensor;
    ASSERT_EQ(y.dims(), (Dims{1, 4}));
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_FLOAT_EQ(y.data<float>()[i], x[i] * static_cast<float>(1 << n)) << "n " << n;
    }
  }
}

// A node whose output is {"as_tensors": [...]}: each listed name is bound to its piece. x is
// [batch, 6]; chunk into 3, split by 4 (a shorter last piece), unbind a unflattened [2, 3].
TEST(ExportImporterTest, ListResultsBindEachPiece) {
  Program p;
  auto list_node = [](const std::string& target, std::vector<json> inputs,
                      std::vector<std::string> outs) {
    json n = Node(target, std::move(inputs), outs[0]);
    n["outputs"] = json::array({Tensors(outs)});
    n["name"] = outs[0] + "_list";
    return n;
  };
  json nodes = json::array(
      {list_node("torch.ops.aten.chunk.default",
                 {Arg("self", T("x")), Arg("chunks", {{"as_int", 3}}),
                  Arg("dim", {{"as_int", -1}})},
                 {"c0", "c1", "c2"}),
       list_node("torch.ops.aten.split.Tensor",
                 {Arg("self", T("x")), Arg("split_size", {{"as_int", 4}}),
                  Arg("dim", {{"as_int", 1}})},
                 {"s0", "s1"}),
       Node("torch.ops.aten.unflatten.int",
            {Arg("self", T("s0")), Arg("dim", {{"as_int", 1}}),
             Arg("sizes", {{"as_ints", {2, -1}}})},
            "u"),
       list_node("torch.ops.aten.unbind.int", {Arg("self", T("u")), Arg("dim", {{"as_int", 1}})},
                 {"r0", "r1"}),
       // c2 * s1 + r1[:, 0:2] - c0  (all [batch, 2])
       Node("torch.ops.aten.mul.Tensor", {Arg("self", T("c2")), Arg("other", T("s1"))}, "m"),
       Node("torch.ops.aten.slice.Tensor",
            {Arg("self", T("r1")), Arg("dim", {{"as_int", 1}}), Arg("start", {{"as_int", 0}}),
             Arg("end", {{"as_int", 2}})},
            "r1s"),
       Node("torch.ops.aten.add.Tensor", {Arg("self", T("m")), Arg("other", T("r1s"))}, "a"),
       Node("torch.ops.aten.sub.Tensor", {Arg("self", T("a")), Arg("other", T("c0"))}, "out")});
  json tv;
  for (const char* name : {"c0", "c1", "c2", "s1", "m", "r1s", "a", "out"}) {
    tv[name] = Meta({Sym("s0"), 2});
  }
  tv["s0"] = Meta({Sym("s0"), 4});
  tv["u"] = Meta({Sym("s0"), 2, 2});
  tv["r0"] = Meta({Sym("s0"), 2});
  tv["r1"] = Meta({Sym("s0"), 2});
  SetGraph(p, {{"x", Meta({Sym("s0"), 6})}}, nodes, "out", tv);
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(p.Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<float> x;
  for (int i = 0; i < 12; ++i) x.push_back(static_cast<float>(i * i % 7) - 3.0f);
  absl::StatusOr<std::vector<runtime::NamedTensor>> out =
      (*model)->Infer({{"x", Floats({2, 6}, x)}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.dims(), (Dims{2, 2}));
  for (int r = 0; r < 2; ++r) {
    const float* row = &x[r * 6];
    for (int c = 0; c < 2; ++c) {
      // c2 = row[4:6], s1 = row[4:6], r1 = s0 viewed [2, 2] row 1 = row[2:4], c0 = row[0:2].
      const float want = row[4 + c] * row[4 + c] + row[2 + c] - row[c];
      EXPECT_FLOAT_EQ(y.data<float>()[r * 2 + c], want) << "row " << r << " col " << c;
    }
  }
}

TEST(ExportImporterTest, UnsupportedOpsInsideSubgraphsAreListed) {
  Program p = CondProgram();
  json& branch = p.ep["graph_module"]["graph"]["nodes"][2]["inputs"][2]["arg"]["as_graph"]["graph"];
  branch["nodes"].push_back(Node("torch.ops.aten.frobnicate.default", {Arg("self", T("x"))}, "f"));
  ImportOptions strict;
  strict.strict = true;
  absl::Status s = ImportExportedProgram(p.Archive(), strict).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("aten::frobnicate"));
}

TEST(ExportImporterHostileTest, MalformedControlFlowIsRefused) {
  {  // a branch taking more inputs than the operands give
    Program p = CondProgram();
    json& g = p.ep["graph_module"]["graph"]["nodes"][2]["inputs"][1]["arg"]["as_graph"]["graph"];
    g["inputs"].push_back(T("y"));
    ExpectInvalid(p.Archive(), "takes 2 inputs, the op passes it 1");
  }
  {  // a branch returning a value it does not compute
    Program p = CondProgram();
    json& g = p.ep["graph_module"]["graph"]["nodes"][2]["inputs"][2]["arg"]["as_graph"]["graph"];
    g["outputs"] = json::array({T("nowhere")});
    ExpectInvalid(p.Archive(), "returns %nowhere");
  }
  {  // a branch reading the caller's names: subgraphs see only their inputs
    Program p = CondProgram();
    json& g = p.ep["graph_module"]["graph"]["nodes"][2]["inputs"][2]["arg"]["as_graph"]["graph"];
    g["nodes"][0]["inputs"][0] = Arg("self", T("gt"));
    ExpectInvalid(p.Archive(), "reads %gt");
  }
  {  // subgraphs nested without end
    Program p = CondProgram();
    json cond = p.ep["graph_module"]["graph"]["nodes"][2];
    json nested = cond;
    for (int depth = 0; depth < 40; ++depth) {
      json outer = cond;
      outer["inputs"][1]["arg"]["as_graph"]["graph"]["nodes"] = json::array({nested});
      nested = outer;
    }
    p.ep["graph_module"]["graph"]["nodes"][2] = nested;
    ExpectInvalid(p.Archive(), "nest more than");
  }
}

TEST(ExportImporterFuzzTest, MutatedControlFlowNeverCrashes) {
  std::mt19937 rng(99);
  const json replacements[] = {json(), json(-1), json("x"), json::array(), json::object(),
                               json(true), json::array({json::object()})};
  int failures = 0;
  for (int round = 0; round < 300; ++round) {
    Program p = round % 2 ? CondProgram() : WhileProgram();
    std::vector<json*> slots;
    std::function<void(json&)> collect = [&](json& j) {
      slots.push_back(&j);
      if (j.is_structured()) {
        for (auto& child : j) collect(child);
      }
    };
    collect(p.ep["graph_module"]["graph"]["nodes"]);
    *slots[rng() % slots.size()] = replacements[rng() % std::size(replacements)];
    absl::StatusOr<ir::Graph> g = ImportExportedProgram(p.Archive());
    failures += !g.ok();
    if (g.ok()) EXPECT_TRUE(ir::VerifyGraph(*g).ok());
  }
  EXPECT_GT(failures, 0);
}

// ------------------------------------------------------------ hostile archives

TEST(ExportImporterTest, AWriteThroughASliceReachesTheTensorAndItsOtherViews) {
  // before = linear[:, 1:2] (taken first); relu_(linear[:, 1:3]); y = linear * scale: the
  // write shows in linear (so in y) and in before, which is also an output.
  Program p;
  json& nodes = p.ep["graph_module"]["graph"]["nodes"];
  auto slice = [](const std::string& out, int start, int end) {
    return Node("torch.ops.aten.slice.Tensor",
                {Arg("self", T("linear")), Arg("dim", {{"as_int", 1}}),
                 Arg("start", {{"as_int", start}}), Arg("end", {{"as_int", end}})},
                out);
  };
  nodes[1] = Node("torch.ops.aten.relu_.default", {Arg("self", T("part"))}, "relu_");
  nodes.insert(nodes.begin() + 1, slice("part", 1, 3));
  nodes.insert(nodes.begin() + 1, slice("before", 1, 2));
  json& tv = p.ep["graph_module"]["graph"]["tensor_values"];
  tv["part"] = Meta({Sym("s0"), 2});
  tv["before"] = Meta({Sym("s0"), 1});
  p.ep["graph_module"]["graph"]["outputs"].push_back(T("before"));
  p.ep["graph_module"]["signature"]["output_specs"].push_back({{"user_output", {{"arg", T("before")}}}});
  p.ep["graph_module"]["module_call_graph"][0]["signature"]["out_spec"] =
      R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}])";
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(p.Archive());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  // linear(x) = x[:, :3] + bias = {-1.5, -11, -2}: relu_ zeroes columns 1 and 2 only.
  absl::StatusOr<std::vector<runtime::NamedTensor>> out =
      (*model)->Infer({{"features", Floats({1, 4}, {-2, -1, -2, 7})}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(Values((*out)[0].tensor), (std::vector<float>{-3.0f, 0.0f, 0.0f}));  // * {2, 3, 4}
  EXPECT_EQ(Values((*out)[1].tensor), (std::vector<float>{0.0f}));  // was -11 before the write
}

// q, k = x.chunk(2); q.mul_(s): the pieces of split, chunk and unbind are views
// of what they split, and a write into one reaches it.
Program ChunkThenWrite(int64_t dim) {
  Program p;
  json& nodes = p.ep["graph_module"]["graph"]["nodes"];
  json chunk = Node("torch.ops.aten.chunk.default",
                    {Arg("self", T("linear")), Arg("chunks", {{"as_int", 3}}),
                     Arg("dim", {{"as_int", dim}})},
                    "unused");
  chunk["outputs"] = json::array(
      {{{"as_tensors", json::array({{{"name", "p0"}}, {{"name", "p1"}}, {{"name", "p2"}}})}}});
  nodes[1] = Node("torch.ops.aten.relu_.default", {Arg("self", T("p1"))}, "relu_");
  nodes.insert(nodes.begin() + 1, chunk);
  json& tv = p.ep["graph_module"]["graph"]["tensor_values"];
  for (const char* piece : {"p0", "p1", "p2"}) {
    tv[piece] = dim == 1 ? Meta({Sym("s0"), 1}) : Meta({Sym("s1"), 3});
  }
  return p;
}

TEST(ExportImporterTest, AWriteIntoAChunkReachesTheTensorItWasSplitFrom) {
  // Along the columns (a static dim), and along the batch (a dim known only at
  // run time: the pieces are joined again, no offsets needed).
  for (int64_t dim : {1, 0}) {
    absl::StatusOr<ir::Graph> g = ImportExportedProgram(ChunkThenWrite(dim).Archive());
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<std::unique_ptr<runtime::Model>> model =
        runtime::Model::Create(*std::move(g), {});
    ASSERT_TRUE(model.ok()) << model.status();
    // linear(x) = x[:, :3] + {0.5, -10, 0}; relu_ on the middle chunk, then * {2, 3, 4}.
    absl::StatusOr<std::vector<runtime::NamedTensor>> out = (*model)->Infer(
        {{"features", Floats({3, 4}, {-2, -1, -2, 7, -2, 20, -2, 7, 1, -1, 3, 7})}}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> want =
        dim == 1 ? std::vector<float>{-3, 0, -8, -3, 30, -8, 3, 0, 12}      // column 1 relu'd
                 : std::vector<float>{-3, -33, -8, 0, 30, 0, 3, -33, 12};  // row 1 relu'd
    EXPECT_EQ(Values((*out)[0].tensor), want) << "chunks along dim " << dim;
  }
}

TEST(ExportImporterHostileTest, WritesThroughViewsKilnCannotFollowAreRefused) {
  // A view whose result has its input's name: views in a cycle.
  Program cycle;
  json& nodes = cycle.ep["graph_module"]["graph"]["nodes"];
  nodes.insert(nodes.begin() + 1,
               Node("torch.ops.aten.alias.default", {Arg("self", T("linear"))}, "linear"));
  ExpectInvalid(cycle.Archive(), "cycle");
  // A write through expand, which has no inverse: refused, never silently dropped.
  Program expand;
  json& n = expand.ep["graph_module"]["graph"]["nodes"];
  n[1] = Node("torch.ops.aten.relu_.default", {Arg("self", T("wide"))}, "relu_");
  n.insert(n.begin() + 1, Node("torch.ops.aten.expand.default",
                               {Arg("self", T("linear")), Arg("size", {{"as_ints", {2, -1, 3}}})},
                               "wide"));
  absl::Status s = ImportStatus(expand.Archive());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("aten::expand"));
  EXPECT_THAT(s.message(), HasSubstr("written through"));
}

TEST(ExportImporterHostileTest, UnknownSchemaMajorVersion) {
  Program p;
  p.ep["schema_version"]["major"] = 9;
  ExpectInvalid(p.Archive(), "schema major version 9");
}

TEST(ExportImporterHostileTest, AotInductorPackageWithoutProgram) {
  ExpectInvalid(Zip({{"pkg/archive_format", "pt2"},
                     {"pkg/data/aotinductor/model/model.so", std::string(64, 'x')}}),
                "AOTInductor");
}

TEST(ExportImporterHostileTest, JsonThatIsNotAnExportedProgram) {
  Program p;
  ExpectInvalid(Zip(p.Entries(R"({"hello": [1, 2, 3]})")), "not a serialized ExportedProgram");
  ExpectInvalid(Zip(p.Entries("{not json")), "not JSON");
  ExpectInvalid(Zip(p.Entries("[1, 2]")), "not a serialized ExportedProgram");
}

TEST(ExportImporterHostileTest, SizesStridesAndOffsetsOutsideTheStorage) {
  {
    Program p;
    p.weights_config["lin.weight"]["tensor_meta"]["sizes"][1]["as_int"] = 4000;
    ExpectInvalid(p.Archive(), "reach byte");
  }
  {
    Program p;
    p.weights_config["lin.weight"]["tensor_meta"]["strides"][0]["as_int"] = int64_t{1} << 39;
    ExpectInvalid(p.Archive(), "reach byte");
  }
  {
    Program p;
    p.weights_config["lin.weight"]["tensor_meta"]["storage_offset"]["as_int"] = 100;
    ExpectInvalid(p.Archive(), "reach byte");
  }
  {
    Program p;
    p.weights_config["lin.weight"]["tensor_meta"]["sizes"][0]["as_int"] = -3;
    ExpectInvalid(p.Archive(), "out of range");
  }
  {
    Program p;  // stride 0: a huge tensor from a tiny file
    p.weights_config["lin.weight"]["tensor_meta"]["sizes"][0]["as_int"] = int64_t{1} << 36;
    p.weights_config["lin.weight"]["tensor_meta"]["strides"][0]["as_int"] = 0;
    ExpectInvalid(p.Archive(), "elements from a file");
  }
}

TEST(ExportImporterHostileTest, WeightFileShorterThanItsConfig) {
  Program p;
  p.weights["weight_0"] = p.weights["weight_0"].substr(0, 10);
  ExpectInvalid(p.Archive(), "weight_0 has 10");
}

TEST(ExportImporterHostileTest, AbsoluteAndDotDotPaths) {
  Program p;
  std::vector<Entry> e = p.Entries(p.ep.dump());
  e.push_back({"m/../../etc/evil", "x"});
  ExpectInvalid(Zip(e), "absolute or '..' path");
  e.back().name = "/etc/evil";
  ExpectInvalid(Zip(e), "absolute or '..' path");
}

TEST(ExportImporterHostileTest, ZipBomb) {
  Program p;
  std::vector<Entry> e = p.Entries(p.ep.dump());
  e.push_back({"m/data/weights/bomb", std::string(100, 'x'), /*method=*/8,
               /*declared_size=*/uint64_t{1} << 31});
  ExpectInvalid(Zip(e), "zip bomb");
}

TEST(ExportImporterHostileTest, MutatedBufferIsRefused) {
  Program p;
  p.ep["graph_module"]["signature"]["output_specs"].push_back(
      {{"buffer_mutation", {{"arg", T("mul")}, {"buffer_name", "scale"}}}});
  ExpectInvalid(p.Archive(), "mutates buffer 'scale'");
}

TEST(ExportImporterHostileTest, InPlaceMutationOfStateIsRefused) {
  // The training IR keeps `self.scale.add_(1)` in the graph, with no buffer_mutation output.
  Program p;
  auto& nodes = p.ep["graph_module"]["graph"]["nodes"];
  nodes.insert(nodes.begin(), Node("torch.ops.aten.add_.Tensor",
                                   {Arg("self", T("b_scale")), Arg("other", {{"as_float", 1.0}})},
                                   "add_"));
  ExpectInvalid(p.Archive(), "mutates buffer 'scale' in place");
  // Also through a view of it.
  Program q;
  auto& qnodes = q.ep["graph_module"]["graph"]["nodes"];
  qnodes.insert(qnodes.begin(),
                {Node("torch.ops.aten.unsqueeze.default",
                      {Arg("self", T("p_w")), Arg("dim", {{"as_int", 0}})}, "unsq"),
                 Node("torch.ops.aten.mul_.Tensor",
                      {Arg("self", T("unsq")), Arg("other", {{"as_float", 2.0}})}, "mul_")});
  ExpectInvalid(q.Archive(), "mutates parameter 'lin.weight' in place");
}

TEST(ExportImporterHostileTest, NotAZipAndTruncatedZip) {
  ExpectInvalid("hello world", "not a zip");
  const std::string good = Program().Archive();
  ExpectInvalid(good.substr(0, good.size() / 2), "zip");
}

// Mutations of a valid archive's bytes and of its JSON: every outcome is a
// status (OK or an error), never a crash, a hang or an exception.
TEST(ExportImporterFuzzTest, MutatedArchivesAndJsonNeverCrash) {
  Program base;
  const std::string archive = base.Archive();
  std::mt19937 rng(1234);
  int failures = 0;
  for (int round = 0; round < 400; ++round) {
    std::string bytes = archive;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xFF);
    }
    failures += !ImportStatus(bytes).ok();
  }
  // JSON mutations: a random value anywhere replaced with a value of another kind.
  const json replacements[] = {json(), json(-1), json(int64_t{1} << 62), json("s0"),
                               json::array(), json::object(), json(3.5), json(true)};
  std::vector<json*> slots;
  for (int round = 0; round < 400; ++round) {
    Program p;
    slots.clear();
    std::function<void(json&)> collect = [&](json& j) {
      slots.push_back(&j);
      if (j.is_structured()) {
        for (auto& child : j) collect(child);
      }
    };
    collect(p.ep);
    collect(p.weights_config);
    *slots[rng() % slots.size()] = replacements[rng() % std::size(replacements)];
    failures += !ImportStatus(p.Archive()).ok();
  }
  EXPECT_GT(failures, 0);
}

TEST(Pt2ArchiveTest, DetectsFormatByContent) {
  EXPECT_EQ(DetectFormat(Program().Archive()), ModelFormat::kExportedProgram);
  EXPECT_EQ(DetectFormat(Zip({{"archive/data.pkl", "x"}, {"archive/version", "3"}})),
            ModelFormat::kTorchScript);
  EXPECT_EQ(DetectFormat(Zip({{"m/serialized_exported_program.json", "{}"}})),
            ModelFormat::kLegacyExportedProgram);
  EXPECT_EQ(DetectFormat("not a zip"), ModelFormat::kUnknown);
}

}  // namespace
}  // namespace kiln::importer
