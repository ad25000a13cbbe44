#include "server/core/host_effect_ops.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::server {
namespace {

// TorchScript ops that touch the host, with what they do. prim::Print and
// aten::warn never reach the graph (the importer drops them).
constexpr struct {
  const char* op;
  const char* effect;
} kHostEffectOps[] = {
    {"aten::from_file", "maps a file of the host (reads it, or creates and writes it)"},
};

}  // namespace

absl::Status RefuseHostEffectOps(const ir::Graph& graph) {
  std::map<std::string, size_t> first_node;  // op -> index of its first node
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const ir::Node& node = graph.nodes()[i];
    if (node.kind != ir::OpKind::kFallback) continue;
    for (const auto& h : kHostEffectOps) {
      if (node.source_op == h.op) first_node.emplace(h.op, i);
    }
  }
  if (first_node.empty()) return absl::OkStatus();
  std::vector<std::string> found;
  for (const auto& [op, node] : first_node) {
    for (const auto& h : kHostEffectOps) {
      if (op == h.op) found.push_back(absl::StrCat(op, " (node ", node, ": ", h.effect, ")"));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the model uses op", found.size() > 1 ? "s" : "",
                   " with effects on the server's host, which Kiln refuses: ",
                   absl::StrJoin(found, ", ")));
}

}  // namespace kiln::server
