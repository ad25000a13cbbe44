// The torch.export front's control flow (program_importer.h): torch.cond
// becomes an ir If and while_loop an ir Loop, their subgraphs translated into
// the node's blocks, each with names of its own.
#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/export/program_importer.h"

namespace kiln::importer::export_internal {

std::vector<const json*> PositionalArgs(const json& node) {
  std::vector<const json*> args;
  const json& inputs = Field(node, "inputs");
  if (!inputs.is_array()) return args;
  for (const json& in : inputs) args.push_back(&Field(in, "arg"));
  return args;
}

absl::StatusOr<std::vector<std::string>> ProgramImporter::ResultNames(const json& outputs,
                                                                      const ExportCall& call) {
  std::vector<std::string> names;
  for (const json& out : outputs) {
    const json& one = Field(Field(out, "as_tensor"), "name");
    const json& many = Field(out, "as_tensors");
    if (one.is_string()) {
      names.push_back(one.get<std::string>());
    } else if (many.is_array()) {
      for (const json& e : many) {
        if (!Field(e, "name").is_string()) return call.InvalidArgument("a malformed output");
        names.push_back(e["name"].get<std::string>());
      }
    } else {
      return call.Unimplemented(
          absl::StrCat("returns a '", out.is_object() && !out.empty() ? out.begin().key() : "?",
                       "'; Kiln's control flow yields tensors"));
    }
  }
  return names;
}

absl::StatusOr<std::vector<ir::ValueId>> ProgramImporter::TensorList(const json& arg,
                                                                     const ExportCall& call,
                                                                     const char* what) {
  const json& list = Field(arg, "as_tensors");
  if (!list.is_array()) {
    return call.Unimplemented(absl::StrCat(
        what, " are not all tensors (", arg.dump().substr(0, 80),
        "); Kiln's control flow carries tensors"));
  }
  std::vector<ir::ValueId> ids;
  for (const json& e : list) {
    const json& name = Field(e, "name");
    if (!name.is_string()) return call.InvalidArgument(absl::StrCat("malformed ", what));
    auto it = values_.bound.find(name.get<std::string>());
    if (it == values_.bound.end()) {
      return call.InvalidArgument(absl::StrCat(what, " read %", name.get<std::string>(),
                                               ", which no earlier node defines"));
    }
    ids.push_back(it->second);
  }
  return ids;
}

absl::StatusOr<std::vector<ir::ValueId>> ProgramImporter::Subgraph(
    const json& arg, const ExportCall& call, const std::vector<ir::ValueId>& args) {
  const json& named = Field(arg, "as_graph");
  const json& graph = Field(named, "graph");
  const std::string name =
      Field(named, "name").is_string() ? named["name"].get<std::string>() : "subgraph";
  const json& inputs = Field(graph, "inputs");
  const json& nodes = Field(graph, "nodes");
  const json& outputs = Field(graph, "outputs");
  if (!inputs.is_array() || !nodes.is_array() || !outputs.is_array()) {
    return call.InvalidArgument(absl::StrCat("expects a subgraph, got ", arg.dump().substr(0, 80)));
  }
  if (inputs.size() != args.size()) {
    return call.InvalidArgument(absl::StrCat("subgraph '", name, "' takes ", inputs.size(),
                                             " inputs, the op passes it ", args.size()));
  }
  if (depth_ >= kMaxSubgraphDepth) {
    return call.InvalidArgument(absl::StrCat("subgraphs nest more than ", kMaxSubgraphDepth,
                                             " deep"));
  }
  ExportValues scope;
  scope.tensor_values = &Field(graph, "tensor_values");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const json& in = Field(Field(inputs[i], "as_tensor"), "name");
    if (!in.is_string()) {
      return call.Unimplemented(absl::StrCat("subgraph '", name, "' input ", i,
                                             " is not a tensor; Kiln's control flow carries tensors"));
    }
    scope.bound[in.get<std::string>()] = args[i];
  }
  std::swap(values_, scope);
  ++depth_;
  absl::Status s;
  for (const json& node : nodes) {
    s = Node(node, next_index_++);
    if (!s.ok()) break;
  }
  std::vector<ir::ValueId> results;
  for (size_t i = 0; s.ok() && i < outputs.size(); ++i) {
    const json& out = Field(Field(outputs[i], "as_tensor"), "name");
    auto it = out.is_string() ? values_.bound.find(out.get<std::string>()) : values_.bound.end();
    if (!out.is_string()) {
      s = call.Unimplemented(absl::StrCat("subgraph '", name, "' output ", i,
                                          " is not a tensor; Kiln's control flow yields tensors"));
    } else if (it == values_.bound.end()) {
      s = call.InvalidArgument(absl::StrCat("subgraph '", name, "' returns %",
                                            out.get<std::string>(), ", which it does not compute"));
    } else {
      results.push_back(it->second);
    }
  }
  --depth_;
  std::swap(values_, scope);
  RETURN_IF_ERROR(s);
  return results;
}

absl::Status ProgramImporter::ControlFlow(const json& node, const std::string& op,
                                          const ExportCall& call) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, ResultNames(Field(node, "outputs"), call));
  const std::vector<const json*> args = PositionalArgs(node);
  const ir::BlockId parent = g_.insertion_block();
  std::vector<ir::ValueId> outs;
  if (op == kCond) {
    if (args.size() != 4) {
      return call.InvalidArgument(absl::StrCat("expects (pred, true_fn, false_fn, operands), got ",
                                               args.size(), " arguments"));
    }
    ir::ValueId pred;
    const json& pred_tensor = Field(Field(*args[0], "as_tensor"), "name");
    const json& pred_sym = Field(Field(*args[0], "as_sym_bool"), "as_name");
    const json& pred_bool = Field(*args[0], "as_bool");
    if (pred_tensor.is_string() || pred_sym.is_string()) {
      const std::string v = pred_tensor.is_string() ? pred_tensor.get<std::string>()
                                                    : pred_sym.get<std::string>();
      auto it = values_.bound.find(v);
      if (it == values_.bound.end()) {
        return call.InvalidArgument(absl::StrCat("the predicate reads %", v,
                                                 ", which no earlier node defines"));
      }
      pred = it->second;
    } else if (pred_bool.is_boolean()) {
      pred = cx_.AddBool(pred_bool.get<bool>());
    } else {
      return call.Unimplemented(absl::StrCat("predicate ", args[0]->dump().substr(0, 80)));
    }
    ASSIGN_OR_RETURN(std::vector<ir::ValueId> operands, TensorList(*args[3], call, "operands"));
    const ir::NodeId id = g_.AddNodeWithOutputs(ir::OpKind::kIf, {pred},
                                                static_cast<int>(names.size()), {}, op, names);
    for (int branch = 0; branch < 2; ++branch) {
      const ir::BlockId b = g_.AddBlock(id);
      g_.SetInsertionBlock(b);
      absl::StatusOr<std::vector<ir::ValueId>> results = Subgraph(*args[1 + branch], call, operands);
      g_.SetInsertionBlock(parent);
      RETURN_IF_ERROR(results.status());
      if (results->size() != names.size()) {
        return call.InvalidArgument(absl::StrCat(branch == 0 ? "true_fn" : "false_fn", " returns ",
                                                 results->size(), " values for ", names.size(),
                                                 " outputs"));
      }
      g_.SetBlockResults(b, *std::move(results));
    }
    outs = g_.node(id).outputs;
  } else {
    if (args.size() != 4 && args.size() != 3) {
      return call.InvalidArgument(absl::StrCat(
          "expects (cond_fn, body_fn, carried_inputs, additional_inputs), got ", args.size(),
          " arguments"));
    }
    ASSIGN_OR_RETURN(std::vector<ir::ValueId> carried,
                     TensorList(*args[2], call, "carried inputs"));
    std::vector<ir::ValueId> extra;
    if (args.size() == 4) {
      ASSIGN_OR_RETURN(extra, TensorList(*args[3], call, "additional inputs"));
    }
    if (carried.size() != names.size()) {
      return call.InvalidArgument(absl::StrCat("carries ", carried.size(), " values but has ",
                                               names.size(), " outputs"));
    }
    auto with_extra = [&](std::vector<ir::ValueId> v) {
      v.insert(v.end(), extra.begin(), extra.end());
      return v;
    };
    // Whether to enter at all: cond_fn on the initial values.
    ASSIGN_OR_RETURN(std::vector<ir::ValueId> enter, Subgraph(*args[0], call, with_extra(carried)));
    if (enter.size() != 1) {
      return call.InvalidArgument(absl::StrCat("cond_fn returns ", enter.size(),
                                               " values, expected one boolean"));
    }
    std::vector<ir::ValueId> inputs = {cx_.AddInt(INT64_MAX), enter[0]};
    inputs.insert(inputs.end(), carried.begin(), carried.end());
    const ir::NodeId id = g_.AddNodeWithOutputs(ir::OpKind::kLoop, inputs,
                                                static_cast<int>(names.size()), {}, op, names);
    const ir::BlockId b = g_.AddBlock(id);
    g_.SetInsertionBlock(b);
    absl::Status s = [&]() -> absl::Status {
      g_.AddBlockParam(b, absl::StrCat(call.OutputName(0), ".iteration"),
                       ir::TensorType{DType::kInt64, Dims{}}, ir::ValueKind::kInt);
      std::vector<ir::ValueId> params;
      for (size_t k = 0; k < carried.size(); ++k) {
        const ir::Value& init = g_.value(carried[k]);
        params.push_back(g_.AddBlockParam(b, absl::StrCat(names[k], ".carried"), init.type,
                                          init.kind));
      }
      ASSIGN_OR_RETURN(std::vector<ir::ValueId> next, Subgraph(*args[1], call, with_extra(params)));
      if (next.size() != carried.size()) {
        return call.InvalidArgument(absl::StrCat("body_fn returns ", next.size(),
                                                 " values for ", carried.size(), " carried"));
      }
      ASSIGN_OR_RETURN(std::vector<ir::ValueId> again, Subgraph(*args[0], call, with_extra(next)));
      if (again.size() != 1) {
        return call.InvalidArgument(absl::StrCat("cond_fn returns ", again.size(),
                                                 " values, expected one boolean"));
      }
      std::vector<ir::ValueId> results = {again[0]};
      results.insert(results.end(), next.begin(), next.end());
      g_.SetBlockResults(b, std::move(results));
      return absl::OkStatus();
    }();
    g_.SetInsertionBlock(parent);
    RETURN_IF_ERROR(s);
    outs = g_.node(id).outputs;
    for (size_t k = 0; k < outs.size(); ++k) {
      const ir::Value& init = g_.value(carried[k]);
      ir::Value& v = g_.mutable_value(outs[k]);
      v.kind = init.kind;
      v.type = init.type;
    }
  }
  for (size_t i = 0; i < names.size(); ++i) values_.bound[names[i]] = outs[i];
  return absl::OkStatus();
}

}  // namespace kiln::importer::export_internal
