// The torch.save pickle reader (engine/importer/export/torch_save.h) and the
// torch 2.1-2.7 layout of torch.export archives, on pickles and archives built
// here opcode by opcode in the form torch.save writes them (protocol 2, the
// tensors _rebuild_tensor_v2 calls over persistent ids): a good state dict read
// (a transposed view materialized), every truncation, random bit flips and
// hostile opcodes (GLOBAL os.system, huge memo indices, deep nesting, a huge
// stack) refused cleanly, storages checked against their files, and a legacy
// program imported and run.
#include "engine/importer/export/torch_save.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/importer/export/exported_program_importer.h"
#include "engine/runtime/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/importer/zip_writer.h"

namespace kiln::importer {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// ------------------------------------------------------------ writing pickles

class Pickle {
 public:
  Pickle& Op(char c) {
    b_.push_back(c);
    return *this;
  }
  Pickle& Byte(uint8_t v) {
    b_.push_back(static_cast<char>(v));
    return *this;
  }
  Pickle& U32(uint32_t v) {
    for (int k = 0; k < 4; ++k) Byte(static_cast<uint8_t>(v >> (8 * k)));
    return *this;
  }
  Pickle& Str(const std::string& s) {
    Op('X').U32(static_cast<uint32_t>(s.size()));
    b_ += s;
    return *this;
  }
  Pickle& Int(int64_t v) {
    if (v >= 0 && v < 256) return Op('K').Byte(static_cast<uint8_t>(v));
    return Op('J').U32(static_cast<uint32_t>(static_cast<int32_t>(v)));
  }
  Pickle& Global(const std::string& module, const std::string& name) {
    b_ += "c" + module + "\n" + name + "\n";
    return *this;
  }
  Pickle& Ints(const std::vector<int64_t>& v) {
    Op('(');
    for (int64_t x : v) Int(x);
    return Op('t');
  }
  // name -> _rebuild_tensor_v2(storage key, offset, sizes, strides), as torch.save writes it.
  Pickle& Tensor(const std::string& name, const std::string& storage_type, const std::string& key,
                 int64_t numel, int64_t offset, const std::vector<int64_t>& sizes,
                 const std::vector<int64_t>& strides, bool parameter = false) {
    Str(name);
    if (parameter) Global("torch._utils", "_rebuild_parameter");
    Rebuild(storage_type, key, numel, offset, sizes, strides);
    if (parameter)
      Byte(0x88).Global("collections", "OrderedDict").Op(')').Op('R').Byte(0x87).Op('R');
    return *this;
  }
  // _rebuild_tensor_v2(storage key, offset, sizes, strides): a tensor with no name.
  Pickle& Rebuild(const std::string& storage_type, const std::string& key, int64_t numel,
                  int64_t offset, const std::vector<int64_t>& sizes,
                  const std::vector<int64_t>& strides) {
    Global("torch._utils", "_rebuild_tensor_v2").Op('(');
    Op('(').Str("storage").Global("torch", storage_type).Str(key).Str("cpu").Int(numel).Op('t');
    Op('Q').Int(offset).Ints(sizes).Ints(strides).Byte(0x89);
    Global("collections", "OrderedDict").Op(')').Op('R');
    return Op('t').Op('R');
  }
  const std::string& bytes() const { return b_; }

 private:
  std::string b_;
};

// {"w": Parameter(2x3 floats, storage 0), "wt": its transpose (a 3x2 view of storage 0),
//  "steps": int64 scalar (storage 1)}
std::string GoodPickle() {
  Pickle p;
  p.Byte(0x80).Byte(2).Op('}').Op('q').Byte(0).Op('(');
  p.Tensor("w", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1}, /*parameter=*/true);
  p.Tensor("wt", "FloatStorage", "0", 6, 0, {3, 2}, {1, 3});
  p.Tensor("steps", "LongStorage", "1", 1, 0, {}, {});
  p.Op('u').Op('.');
  return p.bytes();
}

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::string TorchSave(const std::string& pickle, std::vector<Entry> storages,
                      const std::string& byteorder = "little") {
  std::vector<Entry> e = {{"archive/data.pkl", pickle}, {"archive/byteorder", byteorder}};
  for (Entry& s : storages) e.push_back({"archive/data/" + s.name, s.data});
  e.push_back({"archive/version", "3\n"});
  return Zip(e);
}

std::string GoodArchive() {
  int64_t steps = 7;
  return TorchSave(GoodPickle(), {{"0", Floats({1, 2, 3, 4, 5, 6})},
                                  {"1", std::string(reinterpret_cast<char*>(&steps), 8)}});
}

void ExpectRefused(const std::string& pickle, const std::string& says) {
  auto r = ReadStateDictPickle(pickle);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(says));
}

// ------------------------------------------------------------ the pickle

TEST(TorchPickleTest, ReadsAStateDict) {
  auto r = ReadStateDictPickle(GoodPickle());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].first, "w");
  EXPECT_EQ((*r)[0].second.dtype, DType::kF32);
  EXPECT_EQ((*r)[0].second.sizes, (Dims{2, 3}));
  EXPECT_EQ((*r)[0].second.strides, (Dims{3, 1}));
  EXPECT_EQ((*r)[0].second.storage_key, "0");
  EXPECT_EQ((*r)[0].second.storage_numel, 6);
  EXPECT_EQ((*r)[1].first, "wt");
  EXPECT_EQ((*r)[1].second.strides, (Dims{1, 3}));
  EXPECT_EQ((*r)[2].first, "steps");
  EXPECT_EQ((*r)[2].second.dtype, DType::kInt64);
  EXPECT_TRUE((*r)[2].second.sizes.empty());
}

TEST(TorchPickleTest, ReadsAParameterWithPythonState) {
  // torch 2.6 pickles a module's own Parameter that dynamo tagged this way.
  Pickle p;
  p.Byte(0x80).Byte(2).Op('}').Op('(').Str("weight");
  p.Global("torch._utils", "_rebuild_parameter_with_state").Op('(');
  p.Global("torch._utils", "_rebuild_tensor_v2").Op('(');
  p.Op('(').Str("storage").Global("torch", "FloatStorage").Str("0").Str("cpu").Int(6).Op('t');
  p.Op('Q')
      .Int(0)
      .Ints({6})
      .Ints({1})
      .Byte(0x89)
      .Global("collections", "OrderedDict")
      .Op(')')
      .Op('R');
  p.Op('t').Op('R');
  p.Byte(0x88).Global("collections", "OrderedDict").Op(')').Op('R');
  p.Op('}').Str("_dynamo_static_input_type").Str("unguarded").Op('s');
  p.Op('t').Op('R').Op('u').Op('.');
  auto r = ReadStateDictPickle(p.bytes());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].first, "weight");
  EXPECT_EQ((*r)[0].second.sizes, (Dims{6}));
}

TEST(TorchPickleTest, ReadsTheArchiveAndMaterializesViews) {
  auto r = ReadTorchSaveTensors(GoodArchive(), "state.pt");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  const kiln::Tensor& w = (*r)[0].second;
  const kiln::Tensor& wt = (*r)[1].second;
  ASSERT_EQ(wt.dims(), (Dims{3, 2}));
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(w.data<float>()[i * 3 + j], wt.data<float>()[j * 2 + i]);
  }
  EXPECT_EQ((*r)[2].second.data<int64_t>()[0], 7);
}

TEST(TorchPickleTest, ReadsSampleInputsArgsThenKwargs) {
  // torch.export's sample inputs: ((x, ids), {"mask": m}), as torch.save writes them.
  Pickle p;
  p.Byte(0x80).Byte(2).Op('(').Op('(');
  p.Rebuild("FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
  p.Rebuild("LongStorage", "1", 2, 0, {2}, {1});
  p.Op('t').Op('}').Op('(').Str("mask");
  p.Rebuild("FloatStorage", "0", 6, 3, {3}, {1});
  p.Op('u').Op('t').Op('.');
  int64_t ids[2] = {5, 9};
  auto r = ReadTorchSaveSampleInputs(
      TorchSave(p.bytes(), {{"0", Floats({1, 2, 3, 4, 5, 6})},
                            {"1", std::string(reinterpret_cast<char*>(ids), 16)}}),
      "model.pt");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].first, "");
  EXPECT_EQ((*r)[0].second.dims(), (Dims{2, 3}));
  EXPECT_EQ((*r)[1].first, "");
  EXPECT_EQ((*r)[1].second.data<int64_t>()[1], 9);
  EXPECT_EQ((*r)[2].first, "mask");
  EXPECT_EQ((*r)[2].second.data<float>()[0], 4.0f);
  // A number among the args (not a tensor), or a state dict: refused, named.
  Pickle number;
  number.Byte(0x80).Byte(2).Op('(').Op('(').Int(3).Op('t').Op('}').Op('t').Op('.');
  auto n = ReadTorchSaveSampleInputs(TorchSave(number.bytes(), {}), "model.pt");
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument) << n.status();
  EXPECT_THAT(n.status().message(), HasSubstr("a sample arg is a int"));
  auto dict = ReadTorchSaveSampleInputs(GoodArchive(), "model.pt");
  EXPECT_EQ(dict.status().code(), absl::StatusCode::kInvalidArgument) << dict.status();
}

TEST(TorchPickleTest, EveryTruncationIsRefused) {
  const std::string good = GoodPickle();
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = ReadStateDictPickle(good.substr(0, n));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << "at " << n;
  }
  const std::string archive = GoodArchive();
  for (size_t n = 0; n < archive.size(); n += 7) {
    EXPECT_FALSE(ReadTorchSaveTensors(archive.substr(0, n), "state.pt").ok()) << "at " << n;
  }
}

TEST(TorchPickleTest, BitFlipsFailCleanlyOrReadBoundedTensors) {
  const std::string good = GoodPickle();
  std::mt19937 rng(16);
  int refused = 0;
  for (int k = 0; k < 20000; ++k) {
    std::string p = good;
    for (int flips = 1 + rng() % 3; flips-- > 0;) p[rng() % p.size()] ^= 1 << (rng() % 8);
    auto r = ReadStateDictPickle(p);
    refused += !r.ok();
    if (r.ok()) {
      for (const auto& [name, t] : *r) EXPECT_LE(t.sizes.size(), 16u);
    }
    auto a = ReadTorchSaveTensors(TorchSave(p, {{"0", Floats({1, 2, 3, 4, 5, 6})}}), "s.pt");
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << a.status();
    }
  }
  EXPECT_GT(refused, 10000);
}

TEST(TorchPickleTest, GlobalsOutsideTheAllowListAreRefused) {
  Pickle p;
  p.Byte(0x80)
      .Byte(2)
      .Global("os", "system")
      .Op('(')
      .Str("touch /tmp/pwned")
      .Op('t')
      .Op('R')
      .Op('.');
  ExpectRefused(p.bytes(), "GLOBAL os.system is not one a torch.save state dict uses");
  Pickle q;
  q.Byte(0x80).Byte(2).Global("builtins", "eval").Op('.');
  ExpectRefused(q.bytes(), "GLOBAL builtins.eval");
  Pickle storage_call;  // a storage type is allowed, but not as a callable
  storage_call.Byte(0x80).Byte(2).Global("torch", "FloatStorage").Op(')').Op('R').Op('.');
  ExpectRefused(storage_call.bytes(), "REDUCE on a storage type");
}

TEST(TorchPickleTest, OpcodesOutsideTheListAreNamed) {
  ExpectRefused(std::string("\x80\x02(i__builtin__\nobject\n.", 23), "opcode INST (0x69)");
  ExpectRefused(std::string("\x80\x02\x93.", 4), "opcode STACK_GLOBAL (0x93)");
  ExpectRefused(std::string("\x80\x02]", 3), "opcode EMPTY_LIST");
  ExpectRefused(std::string("\x80\x02\xff", 3), "opcode (unknown) (0xff)");
}

TEST(TorchPickleTest, MemoStackAndNestingAreBounded) {
  Pickle huge_put;
  huge_put.Byte(0x80).Byte(2).Op('N').Op('r').U32(0xFFFFFFFF).Op('.');
  ExpectRefused(huge_put.bytes(), "memo index 4294967295 past the limit");
  Pickle bad_get;
  bad_get.Byte(0x80).Byte(2).Op('j').U32(123456).Op('.');
  ExpectRefused(bad_get.bytes(), "memo index 123456 was never stored");
  Pickle deep;
  deep.Byte(0x80).Byte(2);
  for (int k = 0; k < 100000; ++k) deep.Op('(');
  ExpectRefused(deep.bytes(), "MARKs nest deeper than 64");
  Pickle tall;
  tall.Byte(0x80).Byte(2);
  for (int k = 0; k < 70000; ++k) tall.Op('N');
  ExpectRefused(tall.bytes(), "stack deeper than 65536");
  Pickle underflow;
  underflow.Byte(0x80).Byte(2).Op('R');
  ExpectRefused(underflow.bytes(), "pops an empty stack");
  Pickle huge_string;
  huge_string.Byte(0x80).Byte(2).Op('X').U32(0xFFFFFFF0);
  ExpectRefused(huge_string.bytes(), "truncated");
  PickleLimits few;
  few.max_objects = 10;
  EXPECT_FALSE(ReadStateDictPickle(GoodPickle(), few).ok());
}

TEST(TorchPickleTest, ResultMustBeADictOfTensors) {
  ExpectRefused(std::string("\x80\x02N.", 4), "the pickled object is a None");
  Pickle p;
  p.Byte(0x80).Byte(2).Op('}').Str("k").Int(3).Op('s').Op('.');
  ExpectRefused(p.bytes(), "entry 'k' is a int, not a tensor");
  ExpectRefused(GoodPickle() + "N", "1 bytes after STOP");
}

TEST(TorchPickleTest, StoragesAreCheckedAgainstTheirFiles) {
  auto refused = [](const std::string& archive, const std::string& says) {
    auto r = ReadTorchSaveTensors(archive, "state.pt");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(says));
  };
  int64_t steps = 7;
  const Entry longs{"1", std::string(reinterpret_cast<char*>(&steps), 8)};
  // A file shorter than the storage it declares.
  refused(TorchSave(GoodPickle(), {{"0", Floats({1, 2, 3})}, longs}), "declares 24 bytes");
  // A view past its storage.
  Pickle past;
  past.Byte(0x80).Byte(2).Op('}').Op('(');
  past.Tensor("w", "FloatStorage", "0", 6, 4, {2, 3}, {3, 1});
  past.Op('u').Op('.');
  refused(TorchSave(past.bytes(), {{"0", Floats({1, 2, 3, 4, 5, 6})}}), "reach byte 40");
  // A storage key that would leave data/.
  Pickle escape;
  escape.Byte(0x80).Byte(2).Op('}').Op('(');
  escape.Tensor("w", "FloatStorage", "../x", 6, 0, {6}, {1});
  escape.Op('u').Op('.');
  refused(TorchSave(escape.bytes(), {}), "is not a plain name");
  refused(TorchSave(GoodPickle(), {}), "no archive/data/0");
  refused(TorchSave(GoodPickle(), {{"0", Floats({1, 2, 3, 4, 5, 6})}, longs}, "big"),
          "byte order 'big'");
  refused("not a zip", "not a torch.save zip archive");
}

// ------------------------------------------------------------ a legacy program

json Meta(Dims sizes) {
  json m = {{"dtype", 7},
            {"requires_grad", false},
            {"layout", 7},
            {"device", {{"type", "cpu"}}},
            {"storage_offset", {{"as_int", 0}}}};
  int64_t stride = 1;
  std::vector<json> strides(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = {{"as_int", stride}};
    stride *= sizes[i];
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    m["sizes"].push_back(json{{"as_int", sizes[i]}});
    m["strides"].push_back(strides[i]);
  }
  return m;
}
json T(const std::string& name) { return {{"as_tensor", {{"name", name}}}}; }
json Arg(const std::string& name, json arg) { return {{"name", name}, {"arg", arg}}; }

// linear(x, w, b) + c: w and b from serialized_state_dict.pt, the lifted constant c from
// serialized_constants.pt, as torch 2.6's torch.export.save writes them (schema 8.2).
std::string LegacyProgram(const std::string& state_pickle) {
  json tv = {{"x", Meta({2, 3})},      {"p_w", Meta({2, 3})},
             {"p_b", Meta({2})},       {"c_lifted_tensor_0", Meta({2})},
             {"linear", Meta({2, 2})}, {"add", Meta({2, 2})}};
  json nodes = json::array(
      {{{"target", "torch.ops.aten.linear.default"},
        {"inputs", {Arg("input", T("x")), Arg("weight", T("p_w")), Arg("bias", T("p_b"))}},
        {"outputs", {T("linear")}}},
       {{"target", "torch.ops.aten.add.Tensor"},
        {"inputs", {Arg("self", T("linear")), Arg("other", T("c_lifted_tensor_0"))}},
        {"outputs", {T("add")}}}});
  json signature = {
      {"input_specs",
       {{{"parameter", {{"arg", {{"name", "p_w"}}}, {"parameter_name", "lin.weight"}}}},
        {{"parameter", {{"arg", {{"name", "p_b"}}}, {"parameter_name", "lin.bias"}}}},
        {{"tensor_constant",
          {{"arg", {{"name", "c_lifted_tensor_0"}}}, {"tensor_constant_name", "lifted_tensor_0"}}}},
        {{"user_input", {{"arg", T("x")}}}}}},
      {"output_specs", {{{"user_output", {{"arg", T("add")}}}}}}};
  json mcg =
      json::array({{{"fqn", ""},
                    {"signature",
                     {{"inputs", json::array()},
                      {"outputs", json::array()},
                      {"in_spec", ""},
                      {"out_spec", R"([1, {"type": null, "context": null, "children_spec": []}])"},
                      {"forward_arg_names", {"x"}}}}}});
  json ep = {{"graph_module",
              {{"graph",
                {{"inputs", json::array()},
                 {"outputs", {T("add")}},
                 {"nodes", nodes},
                 {"tensor_values", tv}}},
               {"signature", signature},
               {"module_call_graph", mcg}}},
             {"opset_version", {{"aten", 10}}},
             {"range_constraints", json::object()},
             {"schema_version", {{"major", 8}, {"minor", 2}}},
             {"verifiers", {"TRAINING"}},
             {"torch_version", "2.6.0+debian"}};
  Pickle constants;
  constants.Byte(0x80).Byte(2).Op('}').Op('(');
  constants.Tensor("lifted_tensor_0", "FloatStorage", "0", 2, 0, {2}, {1});
  constants.Op('u').Op('.');
  return Zip(
      {{"serialized_exported_program.json", ep.dump()},
       {"serialized_state_dict.pt",
        TorchSave(state_pickle, {{"0", Floats({1, 0, 0, 0, 1, 0})}, {"1", Floats({10, 20})}})},
       {"serialized_constants.pt", TorchSave(constants.bytes(), {{"0", Floats({100, 200})}})},
       {"version", "8.2"}});
}

std::string LegacyState() {
  Pickle state;
  state.Byte(0x80).Byte(2).Op('}').Op('(');
  state.Tensor("lin.weight", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1}, /*parameter=*/true);
  state.Tensor("lin.bias", "FloatStorage", "1", 2, 0, {2}, {1}, /*parameter=*/true);
  state.Op('u').Op('.');
  return state.bytes();
}

TEST(LegacyExportTest, ImportsAndRunsTheTorch26Layout) {
  ExportedProgramInfo info;
  absl::StatusOr<ir::Graph> g = ImportExportedProgram(LegacyProgram(LegacyState()), {}, &info);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(info.schema_major, 8);
  EXPECT_EQ(info.schema_minor, 2);
  EXPECT_EQ(info.torch_version, "2.6.0+debian");
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->value(g->inputs()[0]).name, "x");
  auto model = runtime::Model::Create(*std::move(g), {});
  ASSERT_TRUE(model.ok()) << model.status();
  kiln::Tensor x = kiln::Tensor::Zeros(DType::kF32, {2, 3});
  const float xs[6] = {1, 2, 3, 4, 5, 6};
  std::memcpy(x.raw_data(), xs, sizeof(xs));
  auto out = (*model)->Infer({{"x", x}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* y = (*out)[0].tensor.data<float>();
  // x @ w^T (w picks x's first two columns) + b + c
  EXPECT_FLOAT_EQ(y[0], 1 + 10 + 100);
  EXPECT_FLOAT_EQ(y[1], 2 + 20 + 200);
  EXPECT_FLOAT_EQ(y[2], 4 + 10 + 100);
  EXPECT_FLOAT_EQ(y[3], 5 + 20 + 200);
}

TEST(LegacyExportTest, RefusesAMissingTensorOrAHostilePickle) {
  Pickle partial;
  partial.Byte(0x80).Byte(2).Op('}').Op('(');
  partial.Tensor("lin.weight", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
  partial.Op('u').Op('.');
  absl::Status s = ImportExportedProgram(LegacyProgram(partial.bytes())).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("parameter 'lin.bias' is in neither"));

  Pickle hostile;
  hostile.Byte(0x80).Byte(2).Global("os", "system").Op('(').Str("id").Op('t').Op('R').Op('.');
  s = ImportExportedProgram(LegacyProgram(hostile.bytes())).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("serialized_state_dict.pt: pickle: GLOBAL os.system"));
}

TEST(LegacyExportTest, OlderSchemaVersionsAreNamed) {
  // torch 2.1-2.5 wrote schema versions before 8.
  json ep = {{"graph_module", {{"graph", json::object()}}},
             {"schema_version", {{"major", 5}, {"minor", 1}}}};
  absl::Status s =
      ImportExportedProgram(Zip({{"serialized_exported_program.json", ep.dump()}})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("schema major version 5"));
}

}  // namespace
}  // namespace kiln::importer
