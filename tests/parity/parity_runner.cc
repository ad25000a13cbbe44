// kiln-parity: runs the single-op parity cases that gen_ops.py wrote (each a
// TorchScript file, its sample inputs and libtorch's outputs) through Kiln's
// importer and runtime, compares, and prints a coverage table per family:
// cases passing natively, passing through the libtorch fallback (a Fallback
// node in the imported graph), and failing.
//
// Each case whose imported graph keeps libtorch twins on its native nodes
// (engine/ir/fallback_twin.h: what a compile runs when a kernel refuses one
// signature) runs a second time with every twin swapped in, against the same
// outputs: a twin that passes libtorch the wrong inputs or arguments fails
// its case here, not in a user's request that happens to need it.
//
// Comparison: float outputs by relative error max|got - want| / max|want| <=
// 1e-4 for FP32 and 1e-6 for FP64 (as the issues define it; FP16/BF16 four
// units in the last place), integer and bool outputs exactly, and dims and
// dtypes exactly.
//
// Also: --inspect FILE (native or which ops fell back, and node counts) and
// --time FILE INPUT ITERS THREADS [float64] (Kiln's and libtorch's median
// latency; float64: Kiln's GEMM ops accumulate in double, as the load
// config's "accumulation": "float64" asks), used by run_zoo.py and by hand.
//
// --expect FILE lists cases that are known not to pass natively yet, one
// "case-name  reason" per line; the run fails (exit 1) when any other case
// does not pass natively, and notes listed cases that now pass. Without it
// every non-native case fails the run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <ATen/Parallel.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "client/npy.h"
#include "engine/common/element.h"
#include "engine/common/tolerance.h"
#include "engine/fallback/fallback.h"
#include "engine/ir/fallback_twin.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/passes/pass.h"
#include "engine/runtime/arena_check.h"
#include "engine/runtime/model.h"
#include "tests/support/libtorch_compare.h"

namespace kiln {
namespace {

using json = nlohmann::json;

enum class Outcome { kNative, kFallback, kFail };

struct Result {
  std::string name, family;
  Outcome outcome = Outcome::kFail;
  std::string detail;  // why it failed, or the worst error
  int twins = 0;          // nodes that ran as their libtorch twin in the second run
  std::string twin_error;  // why that run failed; empty when it passed or had no twins
};


bool HasFallback(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes()) {
    if (n.kind == ir::OpKind::kFallback) return true;
  }
  return false;
}

// Compiles `graph`, runs it on `inputs` and compares with libtorch's outputs
// `wants`: "" when they agree (and, with `detail`, the worst error there), else why not.
std::string RunAndCompare(ir::Graph graph, const runtime::ModelOptions& options,
                          const std::vector<runtime::NamedTensor>& inputs,
                          const std::vector<Tensor>& wants, std::string* detail) {
  absl::StatusOr<std::unique_ptr<runtime::Model>> model =
      runtime::Model::Create(std::move(graph), options);
  if (!model.ok()) return absl::StrCat("load: ", model.status().message());
  absl::StatusOr<std::vector<runtime::NamedTensor>> outputs = (*model)->Infer(inputs, {});
  if (!outputs.ok()) return absl::StrCat("run: ", outputs.status().message());
  if (outputs->size() != wants.size()) {
    return absl::StrCat(outputs->size(), " outputs, libtorch ", wants.size());
  }
  double worst = 0, worst_abs = 0;
  for (size_t i = 0; i < wants.size(); ++i) {
    const std::string diff = testing::CompareWithLibtorch((*outputs)[i].tensor, wants[i], &worst, &worst_abs);
    if (!diff.empty()) return absl::StrCat("output ", i, ": ", diff);
  }
  if (detail != nullptr) *detail = absl::StrCat("max relative error ", worst, ", max abs diff ", worst_abs);
  return "";
}

Result RunCase(const std::string& dir, const json& entry, int threads) {
  Result r;
  r.name = entry["name"].get<std::string>();
  r.family = entry["family"].get<std::string>();
  const std::string base = absl::StrCat(dir, "/", r.name);
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScriptFile(base + ".pt");
  if (!graph.ok()) {
    r.detail = absl::StrCat("import: ", graph.status().message());
    return r;
  }
  const bool fallback = HasFallback(*graph);
  runtime::ModelOptions options;
  options.compile.num_threads = threads;
  std::vector<runtime::NamedTensor> inputs;
  const json& ins = entry["inputs"];
  for (size_t i = 0; i < ins.size(); ++i) {
    runtime::TensorSpec spec;
    spec.name = absl::StrCat("input", i);
    spec.dtype = DTypeFromName(ins[i]["dtype"].get<std::string>()).value_or(DType::kUnknown);
    spec.dims = ins[i]["dims"].get<std::vector<int64_t>>();
    options.inputs.push_back(spec);
    absl::StatusOr<Tensor> t = client::ReadNpy(absl::StrCat(base, ".input.", i, ".npy"));
    if (!t.ok()) {
      r.detail = absl::StrCat("sample input: ", t.status().message());
      return r;
    }
    inputs.push_back({spec.name, *std::move(t)});
  }
  // libtorch's outputs, read once for both runs.
  std::vector<Tensor> wants;
  for (size_t i = 0; i < entry["outputs"].size(); ++i) {
    absl::StatusOr<Tensor> want = client::ReadNpy(absl::StrCat(base, ".output", i, ".npy"));
    if (!want.ok()) {
      r.detail = absl::StrCat("expected output: ", want.status().message());
      return r;
    }
    wants.push_back(*std::move(want));
  }
  // The same graph with every native node's libtorch twin swapped in.
  ir::Graph twins = *graph;
  r.twins = ir::SwapInEveryFallbackTwin(twins);
  const std::string mismatch = RunAndCompare(*std::move(graph), options, inputs, wants, &r.detail);
  if (!mismatch.empty()) {
    r.detail = mismatch;
    return r;
  }
  if (r.twins > 0) r.twin_error = RunAndCompare(std::move(twins), options, inputs, wants, nullptr);
  r.outcome = fallback ? Outcome::kFallback : Outcome::kNative;
  return r;
}

std::map<std::string, std::string> ReadExpected(const std::string& path) {
  std::map<std::string, std::string> expected;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, reason;
    fields >> name;
    std::getline(fields, reason);
    expected[name] = reason.substr(std::min(reason.find_first_not_of(' '), reason.size()));
  }
  return expected;
}

// --inspect FILE: imports one archive and prints "native" or the op kinds that
// fell back (run_zoo.py classifies the zoo with it).
int Inspect(const std::string& path) {
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScriptFile(path);
  if (!graph.ok()) {
    std::printf("import failed: %s\n", std::string(graph.status().message()).c_str());
    return 1;
  }
  std::set<std::string> fallback_ops;
  int native_nodes = 0, fallback_nodes = 0;
  for (const ir::Node& n : graph->nodes()) {
    if (n.kind == ir::OpKind::kFallback) {
      fallback_ops.insert(n.source_op);
      ++fallback_nodes;
    } else if (n.kind != ir::OpKind::kConstant) {
      ++native_nodes;
    }
  }
  if (fallback_ops.empty()) {
    std::printf("native\n");
  } else {
    std::string ops;
    for (const std::string& op : fallback_ops) absl::StrAppend(&ops, ops.empty() ? "" : ",", op);
    std::printf("fallback %s\n", ops.c_str());
  }
  // Nodes of the imported graph (nested blocks included, constants not).
  std::printf("nodes %d native, %d fallback\n", native_nodes, fallback_nodes);
  return 0;
}

// --time FILE INPUT.npy ITERS THREADS: median latency of Kiln and of libtorch
// (the same file, frozen, in inference mode) on one model, in this process,
// both limited to THREADS intra-op threads, runs interleaved so machine noise
// hits both alike. Prints "kiln_ms torch_ms".
int Time(const std::string& path, const std::string& input, int iters, int threads,
         bool float64) {
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScriptFile(path);
  absl::StatusOr<Tensor> x = client::ReadNpy(input);
  if (!graph.ok() || !x.ok()) {
    std::printf("cannot load %s or %s\n", path.c_str(), input.c_str());
    return 1;
  }
  if (float64) passes::AccumulateInFloat64(*graph);
  runtime::ModelOptions options;
  options.compile.num_threads = threads;
  runtime::TensorSpec spec{"x", x->dtype(), x->dims()};
  options.inputs = {spec};
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Create(*std::move(graph), options);
  if (!model.ok()) {
    std::printf("%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  at::set_num_threads(threads);
  torch::jit::Module loaded = torch::jit::load(path);
  loaded.eval();
  torch::jit::Module module = torch::jit::freeze(loaded);
  const at::Tensor tx =
      at::from_blob(x->raw_data(), std::vector<int64_t>(x->dims().begin(), x->dims().end()),
                    at::kFloat)
          .clone();
  std::vector<double> kiln_ms, torch_ms;
  for (int i = 0; i < iters + 2; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<runtime::NamedTensor>> out = (*model)->Infer({{"x", *x}}, {});
    auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) {
      std::printf("%s\n", std::string(out.status().message()).c_str());
      return 1;
    }
    if (i >= 2) kiln_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    {
      c10::InferenceMode inference;
      t0 = std::chrono::steady_clock::now();
      module.forward({tx});
      t1 = std::chrono::steady_clock::now();
    }
    if (i >= 2) torch_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(kiln_ms.begin(), kiln_ms.end());
  std::sort(torch_ms.begin(), torch_ms.end());
  std::printf("%.2f %.2f\n", kiln_ms[kiln_ms.size() / 2], torch_ms[torch_ms.size() / 2]);
  return 0;
}

int Main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--inspect") return Inspect(argv[2]);
  if ((argc == 6 || (argc == 7 && std::string(argv[6]) == "float64")) &&
      std::string(argv[1]) == "--time") {
    fallback::InstallFallbackKernel(std::stoi(argv[5]));
    return Time(argv[2], argv[3], std::stoi(argv[4]), std::stoi(argv[5]), argc == 7);
  }
  std::string dir, expect_path, filter;
  int threads = 2;
  // Every plan is checked step by step (runtime/arena_check.h): each arena
  // buffer is filled with 0xFF (NaN as float32) as its step starts and after
  // its last use, so a kernel that reads arena bytes it did not write fails its
  // case here instead of passing on what the block held; a kernel that writes
  // past its output is an error naming it.
  runtime::SetArenaChecks(true);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--cases") {
      dir = value();
    } else if (arg == "--expect") {
      expect_path = value();
    } else if (arg == "--filter") {
      filter = value();
    } else if (arg == "--threads") {
      threads = std::stoi(value());
    } else {
      std::fprintf(stderr, "usage: %s --cases DIR [--expect FILE] [--filter SUBSTR] [--threads N]\n",
                   argv[0]);
      return 2;
    }
  }
  std::ifstream manifest_file(dir + "/manifest.json");
  if (!manifest_file) {
    std::fprintf(stderr, "cannot read %s/manifest.json\n", dir.c_str());
    return 2;
  }
  const json manifest = json::parse(manifest_file);
  fallback::InstallFallbackKernel();
  const std::map<std::string, std::string> expected =
      expect_path.empty() ? std::map<std::string, std::string>() : ReadExpected(expect_path);

  std::vector<Result> results;
  for (const json& entry : manifest) {
    if (!filter.empty() && entry["name"].get<std::string>().find(filter) == std::string::npos) {
      continue;
    }
    results.push_back(RunCase(dir, entry, threads));
  }

  // Per-family table, in order of first appearance.
  std::vector<std::string> families;
  std::map<std::string, int[3]> counts;
  for (const Result& r : results) {
    if (!counts.count(r.family)) {
      families.push_back(r.family);
      std::fill(counts[r.family], counts[r.family] + 3, 0);
    }
    ++counts[r.family][static_cast<int>(r.outcome)];
  }
  int total[3] = {0, 0, 0};
  std::printf("%-14s %8s %10s %8s %7s\n", "family", "native", "fallback", "failing", "cases");
  for (const std::string& f : families) {
    const int* c = counts[f];
    std::printf("%-14s %8d %10d %8d %7d\n", f.c_str(), c[0], c[1], c[2], c[0] + c[1] + c[2]);
    for (int k = 0; k < 3; ++k) total[k] += c[k];
  }
  const int n = total[0] + total[1] + total[2];
  std::printf("%-14s %8d %10d %8d %7d\n", "total", total[0], total[1], total[2], n);
  if (n > 0) std::printf("native coverage: %.1f%%\n", 100.0 * total[0] / n);

  // The runs with the twins swapped in.
  int twin_cases = 0, twin_nodes = 0, twin_failures = 0;
  for (const Result& r : results) {
    if (r.twins == 0 || r.outcome == Outcome::kFail) continue;
    ++twin_cases;
    twin_nodes += r.twins;
    if (!r.twin_error.empty()) {
      ++twin_failures;
      std::printf("TWIN FAILURE %s (%d nodes as their libtorch twin): %s\n", r.name.c_str(), r.twins,
                  r.twin_error.c_str());
    }
  }
  std::printf("libtorch twins: %d nodes in %d cases swapped in, %d cases failing\n", twin_nodes,
              twin_cases, twin_failures);

  int unexpected = twin_failures;
  for (const Result& r : results) {
    if (r.outcome == Outcome::kNative) {
      if (expected.count(r.name)) std::printf("NOW NATIVE (remove from the expect list): %s\n", r.name.c_str());
      // A filtered run (a few cases) shows each case's numbers.
      if (!filter.empty()) std::printf("native %s: %s\n", r.name.c_str(), r.detail.c_str());
      continue;
    }
    const bool known = expected.count(r.name) > 0;
    if (!known) ++unexpected;
    std::printf("%s %s %s: %s%s\n", known ? "expected" : "UNEXPECTED",
                r.outcome == Outcome::kFallback ? "fallback" : "failure", r.name.c_str(),
                r.detail.c_str(), known ? absl::StrCat(" [", expected.at(r.name), "]").c_str() : "");
  }
  return unexpected == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
