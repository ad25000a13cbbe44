// The torch.export front's signature (program_importer.h): parameters,
// buffers and lifted constants become Constants read from data/weights and
// data/constants, or in the older layout from the torch.save pickles
// serialized_state_dict.pt and serialized_constants.pt (torch_save.h); user
// inputs become graph inputs named after forward()'s arguments, typed from
// tensor_values, a symbolic dim -1 with its range_constraints on the input
// (ir::Value::dim_ranges); user outputs are named by the output tree spec,
// and a mutated buffer or input is refused.
#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/export/program_importer.h"
#include "engine/importer/export/torch_save.h"

namespace kiln::importer::export_internal {

// ------------------------------------------------------------ output names

namespace {

// Leaf names of a pytree spec ([version, {"type", "context", "children_spec"}]),
// as the TorchScript front names a structured result.
void Leaves(const json& spec, const std::optional<std::string>& name, std::vector<std::string>& out) {
  const json& children = Field(spec, "children_spec");
  const json& type = Field(spec, "type");
  if (!children.is_array() || children.empty() || type.is_null()) {
    out.push_back(name.value_or("output0"));
    return;
  }
  std::vector<std::string> keys;
  // A dict's keys name its leaves; torchvision's segmentation models return an OrderedDict.
  if (type.is_string() && (type.get<std::string>() == "builtins.dict" ||
                           type.get<std::string>() == "collections.OrderedDict")) {
    const json& context = Field(spec, "context");
    json parsed = context.is_string()
                      ? json::parse(context.get<std::string>(), nullptr, /*allow_exceptions=*/false)
                      : context;
    if (parsed.is_array()) {
      for (const json& k : parsed) keys.push_back(k.is_string() ? k.get<std::string>() : k.dump());
    }
  }
  for (size_t i = 0; i < children.size(); ++i) {
    std::string part = i < keys.size() ? keys[i] : std::to_string(i);
    std::string leaf = name.has_value()       ? absl::StrCat(*name, ".", part)
                       : i < keys.size()      ? part
                                              : absl::StrCat("output", part);
    Leaves(children[i], leaf, out);
  }
}

}  // namespace

// The signatures of the root module's entries (fqn "") in the module call graph.
std::vector<const json*> RootSignatures(const json& module_call_graph) {
  std::vector<const json*> out;
  if (!module_call_graph.is_array()) return out;
  for (const json& entry : module_call_graph) {
    const json& fqn = Field(entry, "fqn");
    if (fqn.is_string() && fqn.get<std::string>().empty()) out.push_back(&Field(entry, "signature"));
  }
  return out;
}

std::vector<std::string> OutputNames(const json& module_call_graph) {
  std::vector<std::string> names;
  for (const json* signature : RootSignatures(module_call_graph)) {
    const json& out_spec = Field(*signature, "out_spec");
    if (!out_spec.is_string()) break;
    json spec = json::parse(out_spec.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!spec.is_array() || spec.size() != 2) break;
    Leaves(spec[1], std::nullopt, names);
  }
  return names;
}

std::vector<std::string> ForwardArgNames(const json& module_call_graph) {
  std::vector<std::string> names;
  for (const json* signature : RootSignatures(module_call_graph)) {
    const json& args = Field(*signature, "forward_arg_names");
    if (!args.is_array()) break;
    for (const json& a : args) {
      if (a.is_string()) names.push_back(a.get<std::string>());
    }
  }
  return names;
}

// ------------------------------------------------------------ the signature

absl::Status ProgramImporter::ReadLegacyState() {
  const std::pair<const char*, std::map<std::string, Tensor>*> files[] = {
      {"serialized_state_dict.pt", &legacy_state_},
      {"serialized_constants.pt", &legacy_constants_}};
  for (const auto& [file, into] : files) {
    const ZipEntry* entry = p_.zip.Find(p_.root + file);
    if (entry == nullptr) continue;  // a program without parameters or constants
    ASSIGN_OR_RETURN(std::string bytes, p_.zip.Read(*entry));
    ASSIGN_OR_RETURN(auto tensors, ReadTorchSaveTensors(bytes, file));
    for (auto& [name, t] : tensors) (*into)[name] = std::move(t);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ProgramImporter::LegacyTensor(const std::string& name,
                                                     const std::string& kind) {
  const bool constant = kind == "tensor_constant";
  for (const auto* m : {constant ? &legacy_constants_ : &legacy_state_,
                        constant ? &legacy_state_ : &legacy_constants_}) {
    if (auto it = m->find(name); it != m->end()) return it->second;
  }
  return Invalid(absl::StrCat(kind, " '", name, "' is in neither serialized_state_dict.pt ",
                              "nor serialized_constants.pt"));
}

absl::Status ProgramImporter::Inputs(const json& gm) {
  json weights = json::object(), constants = json::object();
  if (p_.legacy) {
    RETURN_IF_ERROR(ReadLegacyState());
  } else {
    ASSIGN_OR_RETURN(weights, ReadConfig(p_, "weights", "weights"));
    ASSIGN_OR_RETURN(constants, ReadConfig(p_, "constants", "constants"));
  }
  const json& specs = Field(Field(gm, "signature"), "input_specs");
  if (!specs.is_array()) return Invalid("the signature has no input_specs");
  const std::vector<std::string> arg_names = ForwardArgNames(Field(gm, "module_call_graph"));
  size_t user_inputs = 0;
  for (const json& spec : specs) user_inputs += spec.is_object() && spec.contains("user_input");
  const bool by_arg_name = arg_names.size() == user_inputs;
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
  const json& rc = Field(p_.ep, "range_constraints");
  if (rc.is_object()) {
    for (auto it = rc.begin(); it != rc.end(); ++it) {
      const json& lo = Field(it.value(), "min_val");
      const json& hi = Field(it.value(), "max_val");
      ranges[it.key()] = {lo.is_number_integer() ? lo.get<int64_t>() : 0,
                          hi.is_number_integer() ? hi.get<int64_t>() : INT64_MAX};
    }
  }
  size_t k = 0;
  for (const json& spec : specs) {
    if (!spec.is_object() || spec.size() != 1) return Invalid("a malformed input spec");
    const std::string kind = spec.begin().key();
    const json& body = spec.begin().value();
    const json& arg_name = Field(Field(body, "arg"), "name");
    if (kind == "parameter" || kind == "buffer" || kind == "tensor_constant") {
      const char* fqn_key = kind == "parameter" ? "parameter_name"
                            : kind == "buffer"  ? "buffer_name"
                                                : "tensor_constant_name";
      const json& fqn = Field(body, fqn_key);
      if (!arg_name.is_string() || !fqn.is_string()) {
        return Invalid(absl::StrCat("a malformed ", kind, " input spec"));
      }
      const std::string name = fqn.get<std::string>();
      // Non-persistent buffers are saved with the constants.
      Tensor t;
      if (p_.legacy) {
        ASSIGN_OR_RETURN(t, LegacyTensor(name, kind));
      } else {
        const bool in_weights =
            kind != "tensor_constant" && Field(weights, name.c_str()).is_object();
        ASSIGN_OR_RETURN(t, ReadNamed(p_, in_weights ? weights : constants,
                                      in_weights ? "weights" : "constants", name, kind));
      }
      const ir::ValueId id = cx_.AddConstant(std::move(t), name);
      values_.bound[arg_name.get<std::string>()] = id;
      state_[arg_name.get<std::string>()] =
          absl::StrCat(kind == "tensor_constant" ? "constant" : kind, " '", name, "'");
    } else if (kind == "user_input") {
      const json& arg = Field(body, "arg");
      const json& tensor = Field(arg, "as_tensor");
      if (!tensor.is_object()) {
        // A number or None forward() argument: torch.export specialized it.
        ++k;
        continue;
      }
      const json& tname = Field(tensor, "name");
      if (!tname.is_string()) return Invalid("a malformed user input");
      std::string name = by_arg_name ? arg_names[k] : tname.get<std::string>();
      if (k < options_.input_names.size() && !options_.input_names[k].empty()) {
        name = options_.input_names[k];
      }
      const json& meta = Field(*values_.tensor_values, tname.get<std::string>().c_str());
      const json& dtype = Field(meta, "dtype");
      const json& sizes = Field(meta, "sizes");
      if (!dtype.is_number_integer() || !sizes.is_array()) {
        return Invalid(absl::StrCat("input '", name, "' has no tensor metadata"));
      }
      ir::TensorType type;
      ASSIGN_OR_RETURN(type.dtype, DTypeFromExport(dtype.get<int64_t>()));
      Dims dims;
      std::vector<ir::DimRange> dim_ranges;
      for (size_t d = 0; d < sizes.size(); ++d) {
        std::optional<int64_t> size = SymIntLiteral(sizes[d]);
        dims.push_back(size.value_or(-1));
        if (size.has_value()) continue;
        // A dynamic dim: its range from range_constraints travels with the
        // graph input, and a request outside it is refused.
        ir::DimRange range{static_cast<int>(d), 0, INT64_MAX, SymbolName(sizes[d])};
        if (range.symbol == "?") range.symbol.clear();
        if (auto r = ranges.find(range.symbol); r != ranges.end()) {
          range.min = r->second.first;
          range.max = r->second.second;
        }
        if (info_ != nullptr) {
          info_->dynamic_dims.push_back(ExportedProgramInfo::DynamicDim{
              name, range.dim, range.symbol, range.min, range.max});
        }
        dim_ranges.push_back(std::move(range));
      }
      type.dims = std::move(dims);
      const ir::ValueId input = g_.AddInput(name, std::move(type));
      g_.mutable_value(input).dim_ranges = std::move(dim_ranges);
      values_.bound[tname.get<std::string>()] = input;
      ++k;
    } else if (kind == "constant_input") {
      continue;  // a specialized constant; nodes carry its value
    } else {
      return absl::UnimplementedError(absl::StrCat(
          "PT2 archive: input kind '", kind, "' (custom objects, effect tokens) is not supported"));
    }
  }
  return absl::OkStatus();
}

absl::Status ProgramImporter::Outputs(const json& gm) {
  const json& specs = Field(Field(gm, "signature"), "output_specs");
  if (!specs.is_array()) return Invalid("the signature has no output_specs");
  std::vector<ir::ValueId> outs;
  for (const json& spec : specs) {
    if (!spec.is_object() || spec.size() != 1) return Invalid("a malformed output spec");
    const std::string kind = spec.begin().key();
    const json& body = spec.begin().value();
    if (kind == "buffer_mutation" || kind == "user_input_mutation" ||
        kind == "parameter_mutation") {
      const json& target = Field(body, kind == "buffer_mutation"       ? "buffer_name"
                                       : kind == "parameter_mutation" ? "parameter_name"
                                                                      : "user_input_name");
      return Invalid(absl::StrCat(
          "the program mutates ", kind.substr(0, kind.find('_')), " '",
          target.is_string() ? target.get<std::string>() : "?",
          "' (state kept between calls); Kiln serves programs without mutated state"));
    }
    if (kind == "token") continue;
    if (kind != "user_output" && kind != "loss_output") {
      return absl::UnimplementedError(
          absl::StrCat("PT2 archive: output kind '", kind, "' is not supported"));
    }
    const json& arg = Field(body, "arg");
    const json& tensor = Field(arg, "as_tensor");
    if (!Field(tensor, "name").is_string()) {
      return absl::UnimplementedError(absl::StrCat(
          "PT2 archive: output ", outs.size(), " is not a tensor (", arg.dump().substr(0, 80),
          ")"));
    }
    auto it = values_.bound.find(tensor["name"].get<std::string>());
    if (it == values_.bound.end()) {
      return Invalid(absl::StrCat("output %", tensor["name"].get<std::string>(),
                                  " is not computed by the graph"));
    }
    outs.push_back(it->second);
  }
  std::vector<std::string> names = OutputNames(Field(gm, "module_call_graph"));
  if (names.size() != outs.size()) {
    names.clear();
    for (size_t i = 0; i < outs.size(); ++i) names.push_back(absl::StrCat("output", i));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string name = i < options_.output_names.size() && !options_.output_names[i].empty()
                           ? options_.output_names[i]
                           : names[i];
    g_.AddOutput(outs[i], std::move(name));
  }
  return absl::OkStatus();
}

}  // namespace kiln::importer::export_internal
