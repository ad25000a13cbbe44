#include "client/cli/inspect_command.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/mapped_file.h"
#include "engine/common/status_macros.h"
#ifdef KILN_WITH_IMPORTER
#include "engine/importer/export/exported_program_importer.h"
#include "engine/importer/import.h"
#include "engine/ir/graph.h"
#endif
#ifdef KILN_WITH_TORCHSCRIPT
#include "engine/importer/torchscript/torchscript_importer.h"
#endif

namespace kiln::cli {
namespace {

// Op name -> count, from the printed graph's node lines ("%y : T = Relu(%x)").
std::map<std::string, int> HistogramOfText(const std::string& text) {
  std::map<std::string, int> counts;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t eq = line.find(" = ");
    const size_t paren = line.find('(', eq == absl::string_view::npos ? 0 : eq);
    if (eq == absl::string_view::npos || paren == absl::string_view::npos) continue;
    absl::string_view op = line.substr(eq + 3, paren - eq - 3);
    if (op.empty() || op.find(' ') != absl::string_view::npos) continue;
    ++counts[std::string(op)];
  }
  return counts;
}

void PrintHistogram(const std::map<std::string, int>& counts) {
  std::vector<std::pair<int, std::string>> sorted;
  int total = 0;
  for (const auto& [op, n] : counts) {
    sorted.push_back({-n, op});
    total += n;
  }
  std::sort(sorted.begin(), sorted.end());
  std::printf("op histogram (%d nodes):\n", total);
  for (const auto& [n, op] : sorted) std::printf("  %-16s %d\n", op.c_str(), -n);
}

}  // namespace

absl::Status InspectFile(const std::string& path, const std::string& dot_path, bool strict) {
#ifdef KILN_WITH_IMPORTER
  importer::ImportOptions options;
  options.strict = strict;
  // Mapped, not read: a .pt2 archive's aligned weights are then viewed where
  // they lie in the file instead of being copied (ImportExportedProgram).
  absl::StatusOr<std::shared_ptr<const MappedFile>> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  const std::string_view bytes((*mapped)->data() != nullptr ? (*mapped)->data() : "",
                               (*mapped)->size());
  // The format by content, never by the file's name.
  const importer::ModelFormat format = importer::DetectFormat(bytes);
  ir::Graph graph;
  importer::ExportedProgramInfo info;
  if (format == importer::ModelFormat::kExportedProgram ||
      format == importer::ModelFormat::kLegacyExportedProgram) {
    ASSIGN_OR_RETURN(graph, importer::ImportExportedProgram(bytes, *mapped, options, &info));
  } else {
#ifdef KILN_WITH_TORCHSCRIPT
    ASSIGN_OR_RETURN(graph, importer::ImportTorchScript(bytes, options));
#else
    return absl::UnimplementedError(
        "this kiln was built without libtorch: it inspects torch.export (.pt2) archives only");
#endif
  }
  std::printf("format: %s\n", importer::ModelFormatName(format));
  for (const auto& d : info.dynamic_dims) {
    std::printf("dynamic dim: %s[%d] (%s) in [%lld, %s]\n", d.input.c_str(), d.dim,
                d.symbol.c_str(), static_cast<long long>(d.min),
                d.max == INT64_MAX ? "inf" : std::to_string(d.max).c_str());
  }
  const std::string text = ir::PrintGraph(graph);
  std::printf("%s", text.c_str());
  std::map<std::string, int> counts;
  std::set<std::string> native, fallback;
  for (const ir::Node& node : graph.nodes()) {
    ++counts[ir::OpName(node.kind)];
    if (node.source_op.empty() || node.kind == ir::OpKind::kConstant) continue;
    (node.kind == ir::OpKind::kFallback ? fallback : native).insert(node.source_op);
  }
  std::printf("\n");
  PrintHistogram(counts);
  std::printf("native ops (%zu): %s\n", native.size(), absl::StrJoin(native, ", ").c_str());
  std::printf("fallback ops (%zu): %s\n", fallback.size(),
              fallback.empty() ? "none" : absl::StrJoin(fallback, ", ").c_str());
  std::printf("weights: %.1f MB in %zu inputs, %zu outputs\n",
              static_cast<double>(graph.ConstantBytes()) / 1e6, graph.inputs().size(),
              graph.outputs().size());
  if (!dot_path.empty()) {
    std::ofstream dot(dot_path);
    dot << ir::PrintGraphviz(graph);
    if (!dot) return absl::InternalError(absl::StrCat("cannot write '", dot_path, "'"));
    std::printf("graphviz: %s (render with: dot -Tsvg %s -o graph.svg)\n", dot_path.c_str(),
                dot_path.c_str());
  }
  return absl::OkStatus();
#else
  (void)path;
  (void)dot_path;
  (void)strict;
  return absl::UnimplementedError(
      "this kiln was built without the importer; use 'kiln inspect NAME --remote' against a server");
#endif
}

absl::Status RunInspectBinary(const std::vector<std::string>& args) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path binary = self.parent_path() / "kiln-inspect";
  if (ec || !std::filesystem::exists(binary)) {
    return absl::UnimplementedError(
        "offline inspection needs kiln-inspect next to kiln; "
        "'kiln inspect NAME --remote' asks a server instead");
  }
  std::vector<std::string> argv_strings = {binary.string()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  return absl::InternalError(absl::StrCat("cannot run ", binary.string(), ": ",
                                          std::strerror(errno)));
}

absl::Status InspectRemote(client::InferenceClient& client, const std::string& name,
                           const std::string& version) {
  ASSIGN_OR_RETURN(auto metadata, client.Metadata(name, version));
  auto graph = metadata.properties.find("graph");
  if (graph == metadata.properties.end()) {
    return absl::UnimplementedError(
        absl::StrCat("the server publishes no graph for '", name, "' (not a Kiln server?)"));
  }
  std::printf("%s\n", graph->second.c_str());
  PrintHistogram(HistogramOfText(graph->second));
  auto fallback = metadata.properties.find("fallback_ops");
  std::printf("fallback ops: %s\n", fallback == metadata.properties.end() || fallback->second.empty()
                                        ? "none"
                                        : fallback->second.c_str());
  auto verify = metadata.properties.find("verify");
  if (verify != metadata.properties.end()) std::printf("verify: %s\n", verify->second.c_str());
  return absl::OkStatus();
}

}  // namespace kiln::cli
