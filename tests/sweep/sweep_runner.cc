// kiln-sweep: runs the differential op sweep that gen_sweep.py wrote (one
// TorchScript file per case, its inputs and libtorch's answer) through Kiln's
// importer and runtime in process, and classifies every case:
//
//   native    Kiln's own kernels ran and matched libtorch (value, dtype, shape)
//   fallback  it matched, with some node run through the libtorch fallback
//             (a Fallback node at import, or a kernel that refused the
//             signature at compile time)
//   refused   libtorch raised for this input, and Kiln refused it too
//   lenient   libtorch raised for this input, and Kiln answered anyway
//   FAILED    a mismatch, or Kiln refused an input libtorch runs
//
// A crash (an abort or a fault in Kiln) stops the run and names the case.
//
// A case that passes runs again with every native node's libtorch twin
// swapped in (engine/ir/fallback_twin.h, what a compile runs for a signature a
// kernel refuses), against the same answer; a twin that disagrees fails the run.
//
// --expect FILE lists the cases known not to pass natively, one
// "case  outcome  reason" a line (outcome: failed or fallback). The run fails
// on a failure not listed as failed, on a fallback not listed (a regression
// from native), and when an op of the translation table has no case; it notes
// listed cases that now do better. Floats compare as in kiln-parity: relative
// error max|got - want| / max|want| <= 1e-4 (FP32), 1e-6 (FP64), four units in
// the last place (FP16, BF16); integers and bools exactly.
//
// --write-expect FILE rewrites FILE with this run's failed and fallback cases,
// keeping the reasons of the entries it already has (a new entry's reason is
// what the run saw: edit it into a sentence).
//
// The op x dtype coverage matrix goes between the sweep markers of a Markdown
// file: --write-docs FILE writes it there, --docs FILE fails the run when the
// file's matrix differs from this run's (so docs/ops.md cannot go stale).
#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "engine/common/element.h"
#include "engine/common/status_macros.h"
#include "engine/common/tolerance.h"
#include "engine/fallback/fallback.h"
#include "engine/importer/torchscript/aten_op_table.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/ir/fallback_twin.h"
#include "engine/runtime/arena_check.h"
#include "engine/runtime/model.h"
#include "tests/support/libtorch_compare.h"

namespace kiln {
namespace {

using json = nlohmann::json;

enum class Outcome { kNative, kFallback, kRefused, kLenient, kFailed };
constexpr int kOutcomes = 5;
const char* const kOutcomeNames[kOutcomes] = {"native", "fallback", "refused", "lenient",
                                              "failed"};
// One letter per outcome in the matrix's cells.
const char kOutcomeLetters[kOutcomes] = {'n', 'f', 'r', 'l', 'X'};
const char* const kDTypes[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "b"};

struct Result {
  std::string name, op, dtype;
  Outcome outcome = Outcome::kFailed;
  std::string detail;  // why it failed, what fell back, or libtorch's error
  int twins = 0;           // nodes run as their libtorch twin in the second run
  std::string twin_error;  // how that run disagreed; empty when it agreed
};

// The case being run, for the crash handler.
char g_current_case[256] = "";

void OnCrash(int sig) {
  const char prefix[] = "\nkiln-sweep: crashed in case ";
  ssize_t ignored = write(STDERR_FILENO, prefix, sizeof(prefix) - 1);
  ignored = write(STDERR_FILENO, g_current_case, std::strlen(g_current_case));
  ignored = write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

Tensor FromData(const std::string& data, const json& spec) {
  const DType dtype = DTypeFromName(spec["dtype"].get<std::string>()).value_or(DType::kUnknown);
  Tensor t = Tensor::Zeros(dtype, spec["dims"].get<std::vector<int64_t>>());
  const size_t offset = spec["offset"].get<size_t>(), bytes = spec["bytes"].get<size_t>();
  ENGINE_CHECK(bytes == t.byte_size() && offset + bytes <= data.size());
  if (bytes > 0) std::memcpy(t.raw_data(), data.data() + offset, bytes);
  return t;
}

// The ops that run through libtorch: Fallback nodes of the imported graph, and
// nodes whose kernel refused the signature at compile time.
std::string FallbackOps(std::set<std::string> ops, const runtime::Model& model) {
  for (const auto& [op, count] : model.signature_fallbacks()) ops.insert(op);
  std::string joined;
  for (const std::string& op : ops) absl::StrAppend(&joined, joined.empty() ? "" : ",", op);
  return joined;
}

// "" when `got` is libtorch's answer `wants` (value, dtype, shape), else how it differs.
std::string Compare(const std::string& data, const json& wants,
                    const std::vector<runtime::NamedTensor>& got) {
  if (got.size() != wants.size()) return absl::StrCat(got.size(), " outputs, libtorch ", wants.size());
  for (size_t i = 0; i < wants.size(); ++i) {
    const std::string diff = testing::CompareWithLibtorch(got[i].tensor, FromData(data, wants[i]));
    if (!diff.empty()) return absl::StrCat("output ", i, ": ", diff);
  }
  return "";
}

Result RunCase(const std::string& dir, const std::string& data, const json& entry, int threads) {
  Result r;
  r.name = entry["name"].get<std::string>();
  r.op = entry["op"].get<std::string>();
  r.dtype = entry["dtype"].get<std::string>();
  std::snprintf(g_current_case, sizeof(g_current_case), "%s", r.name.c_str());
  const bool torch_refuses = entry.contains("torch_error");
  // Where Kiln stopped, for a case libtorch refuses too; empty when Kiln answered.
  auto refused = [&](const std::string& stage, const absl::Status& status) {
    r.outcome = torch_refuses ? Outcome::kRefused : Outcome::kFailed;
    r.detail = absl::StrCat(stage, ": ", status.message());
    return r;
  };
  absl::StatusOr<ir::Graph> graph = importer::ImportTorchScriptFile(dir + "/" + r.name + ".pt");
  if (!graph.ok()) return refused("import", graph.status());
  std::set<std::string> imported_fallbacks;
  for (const ir::Node& n : graph->nodes()) {
    if (n.kind == ir::OpKind::kFallback) imported_fallbacks.insert(n.source_op);
  }
  runtime::ModelOptions options;
  options.compile.num_threads = threads;
  std::vector<runtime::NamedTensor> inputs;
  const json& ins = entry["inputs"];
  for (size_t i = 0; i < ins.size(); ++i) {
    runtime::TensorSpec spec;
    spec.name = absl::StrCat("x", i);
    spec.dtype = DTypeFromName(ins[i]["dtype"].get<std::string>()).value_or(DType::kUnknown);
    spec.dims = ins[i]["dims"].get<std::vector<int64_t>>();
    options.inputs.push_back(spec);
    inputs.push_back({spec.name, FromData(data, ins[i])});
  }
  ir::Graph twins = *graph;
  r.twins = ir::SwapInEveryFallbackTwin(twins);
  absl::StatusOr<std::unique_ptr<runtime::Model>> model =
      runtime::Model::Create(*std::move(graph), options);
  if (!model.ok()) return refused("load", model.status());
  absl::StatusOr<std::vector<runtime::NamedTensor>> outputs = (*model)->Infer(inputs, {});
  if (!outputs.ok()) return refused("run", outputs.status());
  const std::string fallback_ops = FallbackOps(imported_fallbacks, **model);
  if (torch_refuses) {
    r.outcome = Outcome::kLenient;
    r.detail = absl::StrCat("libtorch: ", entry["torch_error"].get<std::string>());
    return r;
  }
  const std::string diff = Compare(data, entry["outputs"], *outputs);
  if (!diff.empty()) {
    r.detail = absl::StrCat(diff, fallback_ops.empty() ? "" : " (fallback " + fallback_ops + ")");
    return r;
  }
  r.outcome = fallback_ops.empty() ? Outcome::kNative : Outcome::kFallback;
  r.detail = fallback_ops;
  if (r.twins > 0) {
    model = runtime::Model::Create(std::move(twins), options);
    if (!model.ok()) {
      r.twin_error = absl::StrCat("load: ", model.status().message());
    } else if (outputs = (*model)->Infer(inputs, {}); !outputs.ok()) {
      r.twin_error = absl::StrCat("run: ", outputs.status().message());
    } else {
      r.twin_error = Compare(data, entry["outputs"], *outputs);
    }
  }
  return r;
}

struct Expected {
  Outcome outcome;
  std::string reason;
};

// "case  outcome  reason" lines; '#' starts a comment.
std::map<std::string, Expected> ReadExpected(const std::string& path, bool* ok) {
  std::map<std::string, Expected> expected;
  std::ifstream in(path);
  *ok = static_cast<bool>(in);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, outcome, reason;
    fields >> name >> outcome;
    std::getline(fields, reason);
    reason = reason.substr(std::min(reason.find_first_not_of(' '), reason.size()));
    if (outcome != "failed" && outcome != "fallback") {
      std::fprintf(stderr, "%s: '%s' is not failed or fallback\n", path.c_str(), line.c_str());
      *ok = false;
      continue;
    }
    expected[name] = {outcome == "failed" ? Outcome::kFailed : Outcome::kFallback, reason};
  }
  return expected;
}

// The coverage matrix in Markdown: per op of the translation table, per dtype of
// the case's first input, the outcomes seen (one letter each).
std::string Matrix(const std::vector<Result>& results, const json& ops_info) {
  std::map<std::string, std::map<std::string, std::set<int>>> cells;
  std::map<std::string, int> counts;
  int totals[kOutcomes] = {};
  for (const Result& r : results) {
    cells[r.op][r.dtype].insert(static_cast<int>(r.outcome));
    ++counts[r.op];
    ++totals[static_cast<int>(r.outcome)];
  }
  std::string out = absl::StrCat(
      "Generated by `kiln-sweep --write-docs` from ", results.size(), " cases: ", totals[0],
      " native, ", totals[1], " fallback, ", totals[2], " refused like libtorch, ", totals[3],
      " lenient, ", totals[4], " failed.\n\n",
      "Cells: `n` native, `f` fallback, `r` refused like libtorch, `l` lenient (Kiln answered where"
      " libtorch raised), `X` failed; several letters when the cases of that op and dtype differ;"
      " `.` no case. The dtype is the case's first input's.\n\n| op | cases |");
  for (const char* d : kDTypes) absl::StrAppend(&out, " ", d, " |");
  absl::StrAppend(&out, "\n|---|---|");
  for (size_t i = 0; i < std::size(kDTypes); ++i) absl::StrAppend(&out, "---|");
  absl::StrAppend(&out, "\n");
  std::vector<std::string> ops = importer::SupportedTorchScriptOps();
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  for (const std::string& op : ops) {
    std::string label = absl::StrCat("`", op.substr(6), "`");
    if (ops_info["aliases"].contains(op)) {
      absl::StrAppend(&label, " (as `", ops_info["aliases"][op].get<std::string>().substr(6), "`)");
    }
    if (!cells.count(op)) {
      const std::string why = ops_info["not_covered"].contains(op)
                                  ? ops_info["not_covered"][op].get<std::string>()
                                  : "no case";
      absl::StrAppend(&out, "| ", label, " | 0 | ", why, " |||||||||\n");
      continue;
    }
    absl::StrAppend(&out, "| ", label, " | ", counts[op], " |");
    for (const char* d : kDTypes) {
      std::string cell;
      auto it = cells[op].find(d);
      if (it == cells[op].end()) {
        cell = ".";
      } else {
        for (int o : it->second) cell += kOutcomeLetters[o];
      }
      absl::StrAppend(&out, " ", cell, " |");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

constexpr char kBegin[] = "<!-- sweep-matrix:begin -->\n";
constexpr char kEnd[] = "<!-- sweep-matrix:end -->";

// The text between the markers of `doc` (npos positions when absent).
std::pair<size_t, size_t> Section(const std::string& doc) {
  const size_t b = doc.find(kBegin), e = doc.find(kEnd);
  if (b == std::string::npos || e == std::string::npos || e < b) {
    return {std::string::npos, std::string::npos};
  }
  return {b + std::strlen(kBegin), e};
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Main(int argc, char** argv) {
  std::string dir, expect_path, expect_write, docs_check, docs_write, filter;
  int threads = 1;
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
    } else if (arg == "--write-expect") {
      expect_write = value();
    } else if (arg == "--docs") {
      docs_check = value();
    } else if (arg == "--write-docs") {
      docs_write = value();
    } else if (arg == "--filter") {
      filter = value();
    } else if (arg == "--threads") {
      threads = std::stoi(value());
    } else {
      std::fprintf(stderr,
                   "usage: %s --cases DIR [--expect FILE] [--write-expect FILE] "
                   "[--docs FILE | --write-docs FILE] "
                   "[--filter SUBSTR] [--threads N]\n",
                   argv[0]);
      return 2;
    }
  }
  std::ifstream manifest_file(dir + "/manifest.json");
  std::ifstream ops_file(dir + "/ops.json");
  if (!manifest_file || !ops_file) {
    std::fprintf(stderr, "cannot read %s/manifest.json or ops.json\n", dir.c_str());
    return 2;
  }
  const json manifest = json::parse(manifest_file);
  const json ops_info = json::parse(ops_file);
  const std::string data = ReadFile(dir + "/data.bin");
  bool expect_ok = true;
  const std::map<std::string, Expected> expected =
      expect_path.empty() ? std::map<std::string, Expected>() : ReadExpected(expect_path, &expect_ok);
  if (!expect_ok) {
    std::fprintf(stderr, "cannot read %s\n", expect_path.c_str());
    return 2;
  }
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGILL}) std::signal(sig, OnCrash);
  fallback::InstallFallbackKernel(threads);

  std::vector<Result> results;
  for (const json& entry : manifest) {
    if (!filter.empty() && entry["name"].get<std::string>().find(filter) == std::string::npos) {
      continue;
    }
    results.push_back(RunCase(dir, data, entry, threads));
  }

  int bad = 0;
  int totals[kOutcomes] = {};
  std::map<std::string, int> fallback_by_op;
  for (const Result& r : results) {
    ++totals[static_cast<int>(r.outcome)];
    auto it = expected.find(r.name);
    const bool listed = it != expected.end();
    switch (r.outcome) {
      case Outcome::kNative:
        if (listed) std::printf("NOW NATIVE (remove from the expect list): %s\n", r.name.c_str());
        break;
      case Outcome::kFallback:
        ++fallback_by_op[r.detail];
        if (!listed) {
          ++bad;
          std::printf("UNEXPECTED fallback %s: %s\n", r.name.c_str(), r.detail.c_str());
        } else if (it->second.outcome == Outcome::kFailed) {
          std::printf("NOW PASSING through the fallback (list it as fallback): %s\n",
                      r.name.c_str());
        }
        break;
      case Outcome::kFailed:
        if (!listed || it->second.outcome != Outcome::kFailed) {
          ++bad;
          std::printf("UNEXPECTED FAILURE %s: %s\n", r.name.c_str(), r.detail.c_str());
        } else {
          std::printf("expected failure %s: %s [%s]\n", r.name.c_str(), r.detail.c_str(),
                      it->second.reason.c_str());
        }
        break;
      case Outcome::kRefused:
      case Outcome::kLenient:
        if (listed) std::printf("NOW %s (remove from the expect list): %s\n",
                                kOutcomeNames[static_cast<int>(r.outcome)], r.name.c_str());
        break;
    }
  }
  for (const auto& [ops, n] : fallback_by_op) {
    std::printf("fallback through %s: %d cases\n", ops.c_str(), n);
  }
  int twin_cases = 0, twin_nodes = 0;
  for (const Result& r : results) {
    if (r.twins == 0 || (r.outcome != Outcome::kNative && r.outcome != Outcome::kFallback)) continue;
    ++twin_cases;
    twin_nodes += r.twins;
    if (!r.twin_error.empty()) {
      ++bad;
      std::printf("TWIN FAILURE %s (%d nodes as their libtorch twin): %s\n", r.name.c_str(),
                  r.twins, r.twin_error.c_str());
    }
  }
  std::printf("libtorch twins: %d nodes in %d passing cases swapped in\n", twin_nodes, twin_cases);
  if (filter.empty()) {
    std::set<std::string> ran;
    for (const Result& r : results) ran.insert(r.name);
    for (const auto& [name, e] : expected) {
      if (!ran.count(name)) std::printf("STALE expect entry (no such case): %s\n", name.c_str());
    }
    // Every op of the translation table has a case, or a reason why none.
    for (const std::string& op : importer::SupportedTorchScriptOps()) {
      bool covered = false;
      for (const json& c : ops_info["covered"]) covered |= c.get<std::string>() == op;
      if (!covered && !ops_info["not_covered"].contains(op)) {
        ++bad;
        std::printf("NO CASE for %s: add one to tests/sweep/cases_*.py\n", op.c_str());
      }
    }
  }
  std::printf("%zu cases:", results.size());
  for (int k = 0; k < kOutcomes; ++k) std::printf(" %d %s%s", totals[k], kOutcomeNames[k], k + 1 < kOutcomes ? "," : "\n");

  if (filter.empty() && !expect_write.empty()) {
    std::string text = ReadFile(expect_write);
    std::string header;  // the file's leading comment lines
    for (size_t pos = 0; pos < text.size() && text[pos] == '#';) {
      const size_t eol = text.find('\n', pos);
      header += text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos + 1);
      pos = eol == std::string::npos ? text.size() : eol + 1;
    }
    std::ofstream out(expect_write, std::ios::binary);
    out << header;
    for (const Result& r : results) {
      if (r.outcome != Outcome::kFailed && r.outcome != Outcome::kFallback) continue;
      auto it = expected.find(r.name);
      const bool keep = it != expected.end() && it->second.outcome == r.outcome;
      std::string reason = keep ? it->second.reason : r.detail;
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      out << r.name << "  " << kOutcomeNames[static_cast<int>(r.outcome)] << "  " << reason << "\n";
    }
    std::printf("wrote this run's failed and fallback cases into %s\n", expect_write.c_str());
  }
  if (filter.empty() && (!docs_write.empty() || !docs_check.empty())) {
    const std::string matrix = Matrix(results, ops_info);
    const std::string path = docs_write.empty() ? docs_check : docs_write;
    std::string doc = ReadFile(path);
    auto [b, e] = Section(doc);
    if (b == std::string::npos) {
      std::printf("%s has no %s ... %s section\n", path.c_str(), kBegin, kEnd);
      return 1;
    }
    if (!docs_write.empty()) {
      doc.replace(b, e - b, matrix);
      std::ofstream(path, std::ios::binary) << doc;
      std::printf("wrote the coverage matrix into %s\n", path.c_str());
    } else if (doc.substr(b, e - b) != matrix) {
      ++bad;
      std::printf("STALE coverage matrix in %s: run kiln-sweep --cases DIR --write-docs %s\n",
                  path.c_str(), path.c_str());
    }
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
