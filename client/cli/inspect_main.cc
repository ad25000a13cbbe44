// kiln-inspect MODEL.pt [--dot FILE] [--strict]: `kiln inspect` offline. A
// separate binary because it links the importer (libtorch); `kiln` runs it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "client/cli/inspect_command.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln-inspect: the graph Kiln imports from a model file"};
  std::string file, dot_file;
  bool strict = false;
  app.add_option("MODEL", file, "TorchScript (.pt) or torch.export (.pt2) file")->required();
  app.add_option("--dot", dot_file, "Also write the graph as Graphviz to this file");
  app.add_flag("--strict", strict, "Fail listing every op without a native translation");
  CLI11_PARSE(app, argc, argv);
  absl::Status s = kiln::cli::InspectFile(file, dot_file, strict);
  if (!s.ok()) {
    std::fprintf(stderr, "kiln: error: %s: %s\n", absl::StatusCodeToString(s.code()).c_str(),
                 std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
