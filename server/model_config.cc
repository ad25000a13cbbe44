#include "server/model_config.h"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace kiln::server {
namespace {

using nlohmann::json;

absl::Status ConfigError(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model config: ", where, ": ", what));
}

// Unknown keys are errors rather than ignored: a Triton-style "input" where
// "inputs" was meant would otherwise silently configure nothing.
absl::Status CheckKeys(const json& object, std::initializer_list<absl::string_view> allowed,
                       absl::string_view where) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool known = false;
    for (absl::string_view key : allowed) known = known || it.key() == key;
    if (!known) return ConfigError(where, absl::StrCat("unknown key '", it.key(), "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<runtime::TensorSpec> ParseTensor(const json& entry, const std::string& where) {
  if (!entry.is_object()) return ConfigError(where, "expected an object");
  RETURN_IF_ERROR(CheckKeys(entry, {"name", "datatype", "dims"}, where));
  runtime::TensorSpec spec;
  if (entry.contains("name")) {
    if (!entry["name"].is_string()) return ConfigError(where, "'name' must be a string");
    spec.name = entry["name"].get<std::string>();
  }
  if (entry.contains("datatype")) {
    if (!entry["datatype"].is_string()) return ConfigError(where, "'datatype' must be a string");
    const std::string name = entry["datatype"].get<std::string>();
    std::optional<DType> dtype = DTypeFromName(name);
    if (!dtype.has_value()) {
      return ConfigError(where, absl::StrCat("unknown datatype '", name, "'"));
    }
    spec.dtype = *dtype;
  }
  if (entry.contains("dims")) {
    const json& dims = entry["dims"];
    if (!dims.is_array()) return ConfigError(where, "'dims' must be an array of integers");
    Dims parsed;
    for (const json& d : dims) {
      if (!d.is_number_integer() || d.get<int64_t>() < -1) {
        return ConfigError(where, absl::StrCat("'dims' entries must be integers >= -1 (-1 = "
                                               "dynamic), got ",
                                               d.dump()));
      }
      parsed.push_back(d.get<int64_t>());
    }
    spec.dims = std::move(parsed);
  }
  return spec;
}

absl::StatusOr<std::vector<runtime::TensorSpec>> ParseTensorList(const json& root,
                                                                 const char* key) {
  std::vector<runtime::TensorSpec> specs;
  if (!root.contains(key)) return specs;
  const json& list = root[key];
  if (!list.is_array()) return ConfigError(key, "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    ASSIGN_OR_RETURN(runtime::TensorSpec spec,
                     ParseTensor(list[i], absl::StrCat(key, "[", i, "]")));
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view text) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // nlohmann reports the byte position; keep it, but stop the exception here.
    return absl::InvalidArgumentError(absl::StrCat("model config is not valid JSON: ", e.what()));
  }
  if (!root.is_object()) return ConfigError("top level", "expected a JSON object");
  RETURN_IF_ERROR(CheckKeys(root, {"inputs", "outputs"}, "top level"));

  ModelConfig config;
  ASSIGN_OR_RETURN(config.model.inputs, ParseTensorList(root, "inputs"));
  ASSIGN_OR_RETURN(config.model.outputs, ParseTensorList(root, "outputs"));
  for (const runtime::TensorSpec& spec : config.model.inputs) {
    config.import.input_names.push_back(spec.name);
  }
  for (const runtime::TensorSpec& spec : config.model.outputs) {
    config.import.output_names.push_back(spec.name);
  }
  return config;
}

absl::Status FillDeclaredNames(const ir::Graph& graph, runtime::ModelOptions& options) {
  if (options.inputs.size() > graph.inputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("model config declares ", options.inputs.size(),
                                                   " inputs, the model has ",
                                                   graph.inputs().size()));
  }
  if (options.outputs.size() > graph.outputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("model config declares ", options.outputs.size(),
                                                   " outputs, the model has ",
                                                   graph.outputs().size()));
  }
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    if (options.inputs[i].name.empty()) {
      options.inputs[i].name = graph.value(graph.inputs()[i]).name;
    }
  }
  for (size_t i = 0; i < options.outputs.size(); ++i) {
    if (options.outputs[i].name.empty()) options.outputs[i].name = graph.output_names()[i];
  }
  return absl::OkStatus();
}

}  // namespace kiln::server
