// The torch.export front. Stages:
//   1. The archive: find <root>/archive_format ("pt2") and <root>/models/<name>.json,
//      or torch 2.1-2.7's <root>/serialized_exported_program.json (an AOTInductor
//      package or a TorchScript archive are told apart and refused with their own
//      message).
//   2. The program: JSON parsed without exceptions, schema major version checked.
//   3. Unsupported ops: every node's target looked up first, so that a strict
//      import's error lists all; otherwise each becomes a Fallback node that
//      runs the op through libtorch (export_fallback.cc).
//   4. Inputs, in signature order: parameters, buffers and lifted constants
//      become Constants read from data/weights and data/constants (sizes,
//      strides and offsets checked against the file), or in the older layout
//      from the torch.save pickles serialized_state_dict.pt and
//      serialized_constants.pt (torch_save.h); user inputs become graph
//      inputs named after forward()'s arguments, typed from tensor_values; a
//      symbolic dim is -1 and its range_constraints travel with the input
//      (ir::Value::dim_ranges), for the model to refuse requests outside them.
//   5. Nodes, through the shared aten table (ExportCall), symbolic-int
//      arithmetic as scalar ops; an in-place op rebinds its mutated input.
//      torch.cond becomes an ir If and while_loop an ir Loop, their subgraphs
//      translated into the blocks, each with names of its own.
//   6. Outputs: user outputs in order, named by the output tree spec; a
//      mutated buffer or input is refused.
// Stages 1, 2 and the weights are in export_archive.cc, 4 and 6 in
// export_signature.cc, 5's control flow in export_control_flow.cc; this file
// holds stage 3, the nodes of stage 5 and the entry points
// (program_importer.h is what they share).
#include "engine/importer/export/exported_program_importer.h"

#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"
#include "engine/importer/aten/view_write.h"
#include "engine/importer/export/program_importer.h"

namespace kiln::importer {
namespace export_internal {
namespace {

// ------------------------------------------------------------ targets

struct Target {
  std::string op;        // "aten::conv2d"
  std::string overload;  // "" for .default
};

// "torch.ops.aten.conv2d.default" -> {"aten::conv2d", ""}; other targets
// ("_operator.mul", "torch.ops.higher_order.cond") keep their full string as op.
Target ParseTarget(const std::string& target) {
  const std::string prefix = "torch.ops.";
  if (target.rfind(prefix, 0) == 0) {
    std::string rest = target.substr(prefix.size());
    const size_t dot1 = rest.find('.');
    const size_t dot2 = rest.rfind('.');
    if (dot1 != std::string::npos && dot2 != dot1) {
      std::string overload = rest.substr(dot2 + 1);
      if (overload == "default") overload.clear();
      return {absl::StrCat(rest.substr(0, dot1), "::", rest.substr(dot1 + 1, dot2 - dot1 - 1)),
              overload};
    }
    if (dot1 != std::string::npos) {  // torch.ops.higher_order.cond
      return {absl::StrCat(rest.substr(0, dot1), "::", rest.substr(dot1 + 1)), ""};
    }
  }
  return {target, ""};
}

// The name of tensor argument `arg` of `node` ("" when it is not one).
std::string TensorArgName(const json& node, const char* arg) {
  const json& inputs = Field(node, "inputs");
  if (!inputs.is_array()) return "";
  for (const json& in : inputs) {
    const json& name = Field(Field(Field(in, "arg"), "as_tensor"), "name");
    if (Field(in, "name") == arg && name.is_string()) return name.get<std::string>();
  }
  return "";
}

// Ops that check shapes and dtypes at trace time and compute nothing.
bool IsAssertion(const std::string& op) {
  return op == "aten::_assert_tensor_metadata" || op == "aten::_assert_scalar" ||
         op == "aten::sym_constrain_range" || op == "aten::sym_constrain_range_for_size" ||
         op == "aten::_assert_async";
}

// Python arithmetic on symbolic ints (a view's b * s): scalar ops.
std::optional<ir::OpKind> SymArithmetic(const std::string& op) {
  if (op == "_operator.add") return ir::OpKind::kAdd;
  if (op == "_operator.sub") return ir::OpKind::kSub;
  if (op == "_operator.mul") return ir::OpKind::kMul;
  if (op == "_operator.floordiv") return ir::OpKind::kFloorDiv;
  return std::nullopt;
}

// Python comparisons of symbolic ints (the range checks torch.export writes
// on a data-dependent size, for _assert_scalar): scalar comparisons.
std::optional<ir::OpKind> SymComparison(const std::string& op) {
  if (op == "_operator.eq") return ir::OpKind::kEqual;
  if (op == "_operator.ne") return ir::OpKind::kNotEqual;
  if (op == "_operator.lt") return ir::OpKind::kLess;
  if (op == "_operator.le") return ir::OpKind::kLessEqual;
  if (op == "_operator.gt") return ir::OpKind::kGreater;
  if (op == "_operator.ge") return ir::OpKind::kGreaterEqual;
  return std::nullopt;
}

// ------------------------------------------------------------ the graph

absl::Status CollectUnsupported(const json& nodes, int depth, std::set<std::string>& missing) {
  if (depth > kMaxSubgraphDepth) {
    return Invalid(absl::StrCat("subgraphs nest more than ", kMaxSubgraphDepth, " deep"));
  }
  if (!nodes.is_array()) return Invalid("a graph has no node list");
  for (const json& node : nodes) {
    const json& target = Field(node, "target");
    if (!target.is_string()) return Invalid("a graph node has no target");
    const Target t = ParseTarget(target.get<std::string>());
    if (IsAssertion(t.op) || SymArithmetic(t.op) || SymComparison(t.op)) continue;
    if (IsControlFlow(t.op)) {
      for (const json* arg : PositionalArgs(node)) {
        const json& sub = Field(Field(*arg, "as_graph"), "graph");
        if (sub.is_object()) RETURN_IF_ERROR(CollectUnsupported(Field(sub, "nodes"), depth + 1, missing));
      }
      continue;
    }
    if (FindAtenConverter(OutOfPlaceOp(t.op)) == nullptr) missing.insert(t.op);
  }
  return absl::OkStatus();
}

// Every op of `nodes` and of the subgraphs in them without a translation, sorted.
absl::StatusOr<std::vector<std::string>> Unsupported(const json& nodes) {
  std::set<std::string> missing;
  RETURN_IF_ERROR(CollectUnsupported(nodes, 0, missing));
  return std::vector<std::string>(missing.begin(), missing.end());
}

}  // namespace

absl::StatusOr<ir::Graph> ProgramImporter::Run() {
  const json& gm = p_.ep["graph_module"];
  const json& graph = gm["graph"];
  const json& nodes = Field(graph, "nodes");
  if (!nodes.is_array()) return Invalid("the graph has no node list");
  values_.tensor_values = &Field(graph, "tensor_values");
  ASSIGN_OR_RETURN(std::vector<std::string> missing, Unsupported(nodes));
  if (!missing.empty() && options_.strict) {
    return absl::UnimplementedError(absl::StrCat(
        "Kiln has no translation for ", missing.size(), " op(s) of this program: ",
        absl::StrJoin(missing, ", ")));
  }
  RETURN_IF_ERROR(Inputs(gm));
  for (const json& node : nodes) {
    const int index = next_index_++;
    RETURN_IF_ERROR(Node(node, index));
    if (trace_ != nullptr) Trace(node, index);
  }
  RETURN_IF_ERROR(Outputs(gm));
  if (absl::Status s = ir::VerifyGraph(g_); !s.ok()) {
    return absl::InternalError(absl::StrCat("imported graph is malformed: ", s.message()));
  }
  if (trace_ == nullptr) return g_.Compacted();
  // The trace follows the renumbering; a value nothing uses is dropped.
  std::vector<ir::ValueId> remap;
  ir::Graph compacted = g_.Compacted(&remap);
  for (ExportTrace::Entry& entry : trace_->nodes) {
    std::vector<std::pair<std::string, ir::ValueId>> kept;
    for (const auto& [name, id] : entry.outputs) {
      if (id < remap.size() && remap[id] != ir::kNoValue) kept.emplace_back(name, remap[id]);
    }
    entry.outputs = std::move(kept);
  }
  return compacted;
}

void ProgramImporter::Trace(const json& node, int index) {
  const json& target = Field(node, "target");
  if (!target.is_string()) return;
  ExportTrace::Entry entry;
  entry.index = index;
  entry.op = ParseTarget(target.get<std::string>()).op;
  const json& outputs = Field(node, "outputs");
  if (!outputs.is_array()) return;
  for (const json& out : outputs) {
    const json& name = Field(Field(out, "as_tensor"), "name");
    if (!name.is_string()) continue;
    auto it = values_.bound.find(name.get<std::string>());
    if (it == values_.bound.end() || cx_.KindOf(it->second) != ir::ValueKind::kTensor) continue;
    entry.outputs.emplace_back(name.get<std::string>(), it->second);
  }
  if (!entry.outputs.empty()) trace_->nodes.push_back(std::move(entry));
}

absl::StatusOr<std::map<std::string, Tensor>> ProgramImporter::State() {
  const json& gm = p_.ep["graph_module"];
  values_.tensor_values = &Field(gm["graph"], "tensor_values");
  RETURN_IF_ERROR(Inputs(gm));
  std::map<std::string, Tensor> state;
  for (const auto& [name, what] : state_) {
    auto it = values_.bound.find(name);
    const Tensor* t = it == values_.bound.end() ? nullptr : g_.ConstantValue(it->second);
    if (t != nullptr) state.emplace(name, *t);
  }
  return state;
}

absl::Status ProgramImporter::Node(const json& node, int index) {
  const Target t = ParseTarget(node["target"].get<std::string>());
  if (IsAssertion(t.op)) return absl::OkStatus();
  ExportCall call(node, index, t.op, t.overload, values_, cx_);
  const json& outputs = Field(node, "outputs");
  if (!outputs.is_array()) return call.InvalidArgument("has no outputs list");
  if (IsControlFlow(t.op)) return ControlFlow(node, t.op, call);
  std::vector<ir::ValueId> results;
  bool native = false;  // translated by the aten table (not the fallback)
  const std::optional<ir::OpKind> compare = SymComparison(t.op);
  if (std::optional<ir::OpKind> arith = compare ? compare : SymArithmetic(t.op)) {
    // _operator.mul(a, b): positional arguments, ints known only at run time.
    const json& inputs = Field(node, "inputs");
    if (!inputs.is_array() || inputs.size() != 2) return call.InvalidArgument("expects 2 operands");
    std::vector<ir::ValueId> operands;
    for (const json& in : inputs) {
      const std::string arg = Field(in, "name").is_string() ? in["name"].get<std::string>() : "";
      ASSIGN_OR_RETURN(ir::ValueId v, call.ScalarValue(arg));
      operands.push_back(v);
    }
    results.push_back(cx_.EmitValue(call, *arith,
                                    compare ? ir::ValueKind::kBool : ir::ValueKind::kInt,
                                    std::move(operands)));
  } else {
    RETURN_IF_ERROR(RefuseStateMutation(node, call, t.op));
    AtenConverter convert = FindAtenConverter(OutOfPlaceOp(t.op));
    if (forced_.count(t.op) > 0) convert = nullptr;  // ImportOptions::force_fallback
    if (convert != nullptr) {
      ASSIGN_OR_RETURN(results, convert(call, cx_));
      native = true;
    } else {
      ASSIGN_OR_RETURN(results, Fallback(node, call));
    }
  }
  if (native) RETURN_IF_ERROR(cx_.PerturbForTest(call, results));
  if (results.size() != outputs.size()) {
    return absl::InternalError(absl::StrCat(call.Where(), "converter returned ", results.size(),
                                            " values for ", outputs.size(), " outputs"));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const json& out = outputs[i];
    if (!out.is_object() || out.size() != 1) return call.InvalidArgument("a malformed output");
    const std::string kind = out.begin().key();
    const json& v = out.begin().value();
    if (kind == "as_tensor" && Field(v, "name").is_string()) {
      values_.bound[v["name"].get<std::string>()] = results[i];
    } else if ((kind == "as_sym_int" || kind == "as_sym_bool") &&
               Field(v, "as_name").is_string()) {
      values_.bound[v["as_name"].get<std::string>()] = results[i];
    } else if (kind == "as_tensors" && v.is_array()) {
      const std::vector<ir::ValueId>* elements = cx_.ListElements(results[i]);
      if (elements == nullptr || elements->size() != v.size()) {
        return call.Unimplemented("returns a tensor list of a length Kiln cannot tell");
      }
      for (size_t e = 0; e < v.size(); ++e) {
        if (Field(v[e], "name").is_string()) {
          values_.bound[v[e]["name"].get<std::string>()] = (*elements)[e];
        }
      }
    } else if (kind != "as_none") {
      return call.Unimplemented(absl::StrCat("returns a '", kind, "'"));
    }
  }
  if (IsViewOp(t.op) && call.num_outputs() == 1) {
    const std::string self = TensorArgName(node, "self");
    // A view of a parameter, buffer or constant is that state too.
    if (auto it = state_.find(self); depth_ == 0 && it != state_.end()) {
      state_[call.OutputName(0)] = it->second;
    }
    // Recorded for writes through it (taken again after one: recorded once).
    const std::string view = call.OutputName(0);
    if (!self.empty() && !view.empty() && values_.view_of.count(view) == 0) {
      values_.view_of[view] = {&node, index, self};
      values_.views_of[self].push_back(view);
    }
  }
  if (IsPieceViewOp(t.op) && outputs.size() == 1 && outputs[0].contains("as_tensors")) {
    // split, chunk, unbind: each piece is a view of self, written back by
    // WriteThroughPiece (q.mul_(s) after q, k = x.chunk(2)).
    const std::string self = TensorArgName(node, "self");
    const json& pieces = outputs[0]["as_tensors"];
    for (size_t k = 0; !self.empty() && pieces.is_array() && k < pieces.size(); ++k) {
      const json& name = Field(pieces[k], "name");
      if (!name.is_string()) continue;
      const std::string piece = name.get<std::string>();
      if (auto it = state_.find(self); depth_ == 0 && it != state_.end()) {
        state_[piece] = it->second;
      }
      if (values_.view_of.count(piece) == 0) {
        values_.view_of[piece] = {&node, index, self, static_cast<int64_t>(k)};
        values_.views_of[self].push_back(piece);
      }
    }
  }
  // In-place ops of the training IR (relu_, add_, fill_ on a slice): later
  // readers of the written tensor ("self", or dropout_'s "input"), of the
  // tensors it is a view of and of their other views see the result.
  if (OutOfPlaceOp(t.op) != t.op && !results.empty()) {
    const std::string mutated = TensorArgName(node, call.Has("self") ? "self" : "input");
    if (!mutated.empty()) RETURN_IF_ERROR(Written(mutated, results[0], call));
  }
  return absl::OkStatus();
}

absl::Status ProgramImporter::Written(const std::string& name, ir::ValueId value,
                                      const ExportCall& call) {
  values_.bound[name] = value;
  std::set<std::string> chain = {name};
  std::vector<std::string> changed = {name};
  for (auto it = values_.view_of.find(name); it != values_.view_of.end();
       it = values_.view_of.find(changed.back())) {
    const ExportValues::View view = it->second;
    if (!chain.insert(view.base).second) {
      return call.InvalidArgument(absl::StrCat("writes through views that form a cycle at '",
                                               view.base, "'"));
    }
    const Target t = ParseTarget(Field(*view.node, "target").get<std::string>());
    ExportCall through(*view.node, view.index, t.op, t.overload, values_, cx_);
    const bool self_is_view = values_.view_of.count(view.base) > 0;
    if (view.piece >= 0) {
      ASSIGN_OR_RETURN(value, WriteThroughPiece(through, view.piece, value, cx_));
    } else {
      ASSIGN_OR_RETURN(value, WriteThroughView(through, self_is_view, value, cx_));
    }
    values_.bound[view.base] = value;
    changed.push_back(view.base);
  }
  std::set<std::string> done = chain;
  for (const std::string& c : changed) RETURN_IF_ERROR(RetakeViews(c, done));
  return absl::OkStatus();
}

absl::Status ProgramImporter::RetakeViews(const std::string& name, std::set<std::string>& done) {
  std::vector<std::string> pending = {name};  // not recursion: a hostile chain may be long
  while (!pending.empty()) {
    auto it = values_.views_of.find(pending.back());
    pending.pop_back();
    if (it == values_.views_of.end()) continue;
    const std::vector<std::string> views = it->second;  // Node() below may add to the map
    for (const std::string& v : views) {
      if (!done.insert(v).second) continue;
      if (++retaken_ > 100000) {
        return absl::UnimplementedError(
            "PT2 archive: the program writes through views more than Kiln takes them again "
            "(100000 views)");
      }
      const ExportValues::View view = values_.view_of.at(v);
      RETURN_IF_ERROR(Node(*view.node, view.index));
      pending.push_back(v);
      if (view.piece < 0) continue;
      // One run of a split-like node takes all its pieces again.
      for (const std::string& other : views) {
        if (values_.view_of.at(other).node == view.node && done.insert(other).second) {
          pending.push_back(other);
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ProgramImporter::RefuseStateMutation(const json& node, const ExportCall& call,
                                                  const std::string& op) {
  // detach_ changes no data.
  if (OutOfPlaceOp(op) == op || op == "aten::detach_" || depth_ > 0) return absl::OkStatus();
  auto it = state_.find(TensorArgName(node, call.Has("self") ? "self" : "input"));
  if (it == state_.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "PT2 archive: the program mutates ", it->second, " in place (", call.Where(),
      "state kept between calls); Kiln serves programs without mutated state"));
}

}  // namespace export_internal

using export_internal::Field;
using export_internal::Invalid;
using export_internal::json;
using export_internal::OpenProgram;
using export_internal::Program;
using export_internal::ProgramImporter;
using export_internal::Unsupported;

absl::StatusOr<ir::Graph> ImportExportedProgram(std::string_view bytes,
                                                const ImportOptions& options,
                                                ExportedProgramInfo* info) {
  return ImportExportedProgram(bytes, nullptr, options, info);
}

absl::StatusOr<ir::Graph> ImportExportedProgram(std::string_view bytes,
                                                std::shared_ptr<const void> owner,
                                                const ImportOptions& options,
                                                ExportedProgramInfo* info, ExportTrace* trace) {
  // nlohmann throws on a type mismatch this code did not foresee (an
  // untrusted archive); no exception leaves the importer.
  try {
    ASSIGN_OR_RETURN(Program p, OpenProgram(bytes));
    p.owner = std::move(owner);
    if (info != nullptr) {
      *info = ExportedProgramInfo();
      const json& v = p.ep["schema_version"];
      info->schema_major = v["major"].get<int>();
      info->schema_minor = Field(v, "minor").is_number_integer() ? v["minor"].get<int>() : 0;
      const json& tv = Field(p.ep, "torch_version");
      if (tv.is_string()) info->torch_version = tv.get<std::string>();
    }
    ProgramImporter importer(p, options, info);
    importer.set_trace(trace);
    return importer.Run();
  } catch (const std::exception& e) {
    return Invalid(absl::StrCat("malformed program: ", e.what()));
  }
}

absl::StatusOr<std::vector<std::string>> UnsupportedExportOps(std::string_view bytes) {
  try {
    ASSIGN_OR_RETURN(Program p, OpenProgram(bytes));
    return Unsupported(Field(Field(p.ep["graph_module"], "graph"), "nodes"));
  } catch (const std::exception& e) {
    return Invalid(absl::StrCat("malformed program: ", e.what()));
  }
}

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ExportedProgramSampleInputs(
    std::string_view bytes) {
  try {
    ASSIGN_OR_RETURN(Program p, OpenProgram(bytes));
    return export_internal::ReadSampleInputs(p);
  } catch (const std::exception& e) {
    return Invalid(absl::StrCat("malformed program: ", e.what()));
  }
}

}  // namespace kiln::importer
