// The torch.export front's internals (exported_program_importer.h is its
// interface), shared by the files it is split into along its stages:
//   export_archive.cc      the archive opened, its program JSON checked, and
//                          the weights and constants read (viewed in place
//                          where they can be);
//   export_signature.cc    the signature: parameters, buffers and constants
//                          bound as constants, user inputs as graph inputs,
//                          user outputs named by the output tree spec;
//   exported_program_importer.cc  the nodes, through the aten table;
//   export_control_flow.cc torch.cond and while_loop as the ir's If and Loop.
// Nothing outside engine/importer/export/ includes this.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "engine/importer/aten/convert_context.h"
#include "engine/importer/export/export_call.h"
#include "engine/importer/export/exported_program_importer.h"
#include "engine/importer/export/pt2_archive.h"

namespace kiln::importer::export_internal {

using nlohmann::json;

// InvalidArgument: "PT2 archive: <what>".
absl::Status Invalid(absl::string_view what);

// ------------------------------------------------------------ the archive (export_archive.cc)


struct Program {
  ZipArchive zip;
  std::string root;   // "resnet18/"
  std::string model;  // "model"
  json ep;
  // Keeps the archive's bytes alive for constants that view them; null when
  // the caller's bytes may not outlive the import (every weight is copied).
  std::shared_ptr<const void> owner;
  // The layout of torch 2.1-2.7: serialized_exported_program.json, its
  // parameters and buffers in serialized_state_dict.pt and its lifted
  // constants (and non-persistent buffers) in serialized_constants.pt,
  // both torch.save pickles, read when the inputs are bound.
  bool legacy = false;
};

// Opens the archive in `bytes`: the PT2 layout or torch 2.1-2.7's, its
// program JSON parsed and its schema major version checked.
absl::StatusOr<Program> OpenProgram(std::string_view bytes);

// The program's sample inputs as torch.export.save stored them
// (data/sample_inputs/<model>.pt; serialized_example_inputs.pt in the older
// layout): forward()'s positional arguments in order (empty names), then
// its keyword arguments by name. NotFound when the archive holds none,
// InvalidArgument when they are not tensors (ReadTorchSaveSampleInputs).
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadSampleInputs(const Program& p);

// j[key], or a null json when j is not an object or has no such key.
const json& Field(const json& j, const char* key);
// {"as_int": 3} -> 3; nullopt for a symbolic size.
std::optional<int64_t> SymIntLiteral(const json& s);
// "Symbol('s43', positive=True, integer=True)" or "s43" -> "s43".
std::string SymbolName(const json& s);

// The weights (data/weights/) or constants (data/constants/) config:
// fqn -> {path_name, use_pickle, tensor_meta}.
absl::StatusOr<json> ReadConfig(const Program& p, const std::string& dir, const std::string& kind);
// The tensor `fqn` of `config` (read from data/<dir>/), `what` naming it in messages.
absl::StatusOr<Tensor> ReadNamed(const Program& p, const json& config, const std::string& dir,
                                 const std::string& fqn, absl::string_view what);

// ------------------------------------------------------------ names (export_signature.cc)

// The leaf names of the program's output tree spec, as the TorchScript front
// names a structured result; empty when it has none.
std::vector<std::string> OutputNames(const json& module_call_graph);
// forward()'s argument names; empty when the program does not record them.
std::vector<std::string> ForwardArgNames(const json& module_call_graph);

// ---------------------------------------------- control flow (export_control_flow.cc)

// torch.cond and torch.ops.higher_order.while_loop: control flow whose
// branches, condition and body are subgraphs among the node's positional
// arguments ({"as_graph": {"name": ..., "graph": {...}}}).
inline constexpr char kCond[] = "higher_order::cond";
inline constexpr char kWhileLoop[] = "higher_order::while_loop";
inline bool IsControlFlow(const std::string& op) { return op == kCond || op == kWhileLoop; }

// Subgraphs nest no deeper (a hostile archive cannot exhaust the stack).
inline constexpr int kMaxSubgraphDepth = 32;

// The positional arguments of a higher-order op (their names are empty).
std::vector<const json*> PositionalArgs(const json& node);

// ------------------------------------------------------------ the importer

// Translates one program into a graph. Run is in exported_program_importer.cc
// with Node; Inputs and Outputs in export_signature.cc; the control-flow
// members in export_control_flow.cc.
class ProgramImporter {
 public:
  ProgramImporter(const Program& p, const ImportOptions& options, ExportedProgramInfo* info)
      : p_(p),
        options_(options),
        info_(info),
        cx_(&g_),
        forced_(options.force_fallback.begin(), options.force_fallback.end()) {}

  absl::StatusOr<ir::Graph> Run();
  // Run records which ir value each top-level node's tensor outputs became.
  void set_trace(ExportTrace* trace) { trace_ = trace; }

  // The parameters, buffers and lifted constants the signature binds, by the
  // graph's names for them ("p_fc_weight"): what the verified import's
  // reference (engine/fallback/export_reference.cc) evaluates the program with.
  absl::StatusOr<std::map<std::string, Tensor>> State();

 private:
  // torch 2.1-2.7's layout: the pickled state dict and constants, by name.
  absl::Status ReadLegacyState();

  // A parameter or buffer is in the state dict (a non-persistent buffer in
  // the constants), a lifted constant in the constants.
  absl::StatusOr<Tensor> LegacyTensor(const std::string& name, const std::string& kind);

  // The signature's inputs, in order (export_signature.cc).
  absl::Status Inputs(const json& gm);

  // One node of the graph or of a subgraph; `index` numbers it in messages.
  absl::Status Node(const json& node, int index);
  // Records top-level node `node`'s tensor outputs in trace_.
  void Trace(const json& node, int index);

  // A Fallback node for a node whose op has no row in the aten table: it
  // runs through libtorch where the server has it (export_fallback.cc).
  absl::StatusOr<std::vector<ir::ValueId>> Fallback(const json& node, ExportCall& call);

  // In-place op `call` left `value` in tensor `name`: rebinds it, writes the
  // value back up the views `name` was taken through, and takes again the
  // other views of every tensor that changed (view_write.h).
  absl::Status Written(const std::string& name, ir::ValueId value, const ExportCall& call);

  // Takes again the views of `name` not yet in `done`, and theirs.
  absl::Status RetakeViews(const std::string& name, std::set<std::string>& done);

  // An in-place op (add_) on a parameter, buffer or constant, or a view of
  // one: the training IR keeps such a mutation in the graph (not as a
  // buffer_mutation output), and it is state kept between calls.
  // (Subgraphs of cond and while_loop may not mutate their inputs.)
  absl::Status RefuseStateMutation(const json& node, const ExportCall& call,
                                   const std::string& op);

  // ---- control flow: torch.cond -> If, while_loop -> Loop (export_control_flow.cc) ----

  // The names of a control-flow node's tensor results, flattened: each
  // {"as_tensor"} output, or the elements of one {"as_tensors"} output.
  static absl::StatusOr<std::vector<std::string>> ResultNames(const json& outputs,
                                                              const ExportCall& call);

  // The ir values of a {"as_tensors": [...]} argument (cond's operands,
  // while_loop's carried and additional inputs).
  absl::StatusOr<std::vector<ir::ValueId>> TensorList(const json& arg, const ExportCall& call,
                                                      const char* what);

  // Translates subgraph `arg` ({"as_graph": {"name", "graph"}}) into the
  // insertion block with its inputs bound to `args`, in order. Its names are
  // its own (a subgraph's "x" is not the caller's): it sees only its inputs.
  // Returns the ir values of its outputs.
  absl::StatusOr<std::vector<ir::ValueId>> Subgraph(const json& arg, const ExportCall& call,
                                                    const std::vector<ir::ValueId>& args);

  // cond(pred, true_graph, false_graph, operands) -> If(pred){then}{else};
  // while_loop(cond_graph, body_graph, carried, additional) ->
  //   Loop(max, cond_graph(carried, additional), carried...)
  //     body(i, c...) { n... = body_graph(c..., additional); yield cond_graph(n..., additional), n... }
  absl::Status ControlFlow(const json& node, const std::string& op, const ExportCall& call);

  // The signature's user outputs, named (export_signature.cc).
  absl::Status Outputs(const json& gm);

  const Program& p_;
  const ImportOptions& options_;
  ExportedProgramInfo* info_;
  ExportTrace* trace_ = nullptr;
  ir::Graph g_;
  ConvertContext cx_;
  ExportValues values_;  // the graph's names, or the subgraph's being translated
  int next_index_ = 0;   // numbers nodes in messages, subgraphs' included
  int depth_ = 0;        // of the subgraph being translated
  // Views taken again after writes (RetakeViews), against a budget that keeps
  // a hostile program of many writes and views from taking quadratic time.
  int64_t retaken_ = 0;
  const std::set<std::string> forced_;  // ops to run through the fallback anyway
  // The program's names for its parameters, buffers and constants, and for
  // views of them -> what they are ("buffer 'calls'").
  std::map<std::string, std::string> state_;
  std::map<std::string, Tensor> legacy_state_;      // serialized_state_dict.pt
  std::map<std::string, Tensor> legacy_constants_;  // serialized_constants.pt
};

}  // namespace kiln::importer::export_internal
