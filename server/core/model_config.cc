#include "server/core/model_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/dtype.h"
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

absl::StatusOr<VersionPolicy> ParseVersionPolicy(const json& policy) {
  const char* where = "version_policy";
  if (!policy.is_object() || policy.size() != 1) {
    return ConfigError(where, "expected an object with one of 'latest', 'all', 'specific'");
  }
  RETURN_IF_ERROR(CheckKeys(policy, {"latest", "all", "specific"}, where));
  VersionPolicy parsed;
  if (policy.contains("all")) {
    if (!policy["all"].is_object() || !policy["all"].empty()) {
      return ConfigError("version_policy.all", "expected {}");
    }
    parsed.kind = VersionPolicy::Kind::kAll;
  } else if (policy.contains("latest")) {
    const json& latest = policy["latest"];
    if (!latest.is_object()) return ConfigError("version_policy.latest", "expected an object");
    RETURN_IF_ERROR(CheckKeys(latest, {"num_versions"}, "version_policy.latest"));
    parsed.kind = VersionPolicy::Kind::kLatest;
    if (latest.contains("num_versions")) {
      const json& n = latest["num_versions"];
      if (!n.is_number_integer() || n.get<int64_t>() < 1) {
        return ConfigError("version_policy.latest", "'num_versions' must be an integer >= 1");
      }
      parsed.num_versions = n.get<int64_t>();
    }
  } else {
    const json& specific = policy["specific"];
    if (!specific.is_object()) return ConfigError("version_policy.specific", "expected an object");
    RETURN_IF_ERROR(CheckKeys(specific, {"versions"}, "version_policy.specific"));
    parsed.kind = VersionPolicy::Kind::kSpecific;
    const json& versions = specific.contains("versions") ? specific["versions"] : json::array();
    if (!versions.is_array() || versions.empty()) {
      return ConfigError("version_policy.specific", "'versions' must be a non-empty array");
    }
    for (const json& v : versions) {
      if (!v.is_number_integer() || v.get<int64_t>() < 1) {
        return ConfigError("version_policy.specific",
                           absl::StrCat("versions must be integers >= 1, got ", v.dump()));
      }
      parsed.versions.push_back(v.get<int64_t>());
    }
  }
  return parsed;
}

}  // namespace

std::vector<int64_t> VersionPolicy::Select(const std::vector<int64_t>& available) const {
  std::vector<int64_t> sorted = available;
  std::sort(sorted.begin(), sorted.end());
  switch (kind) {
    case Kind::kAll:
      return sorted;
    case Kind::kLatest: {
      const size_t n = std::min<size_t>(sorted.size(), static_cast<size_t>(num_versions));
      return std::vector<int64_t>(sorted.end() - static_cast<std::ptrdiff_t>(n), sorted.end());
    }
    case Kind::kSpecific: {
      std::vector<int64_t> out;
      for (int64_t v : sorted) {
        if (std::find(versions.begin(), versions.end(), v) != versions.end()) out.push_back(v);
      }
      return out;
    }
  }
  return {};
}

std::string VersionPolicy::ToString() const {
  switch (kind) {
    case Kind::kAll:
      return "all";
    case Kind::kLatest:
      return absl::StrCat("latest ", num_versions);
    case Kind::kSpecific:
      return absl::StrCat("specific [", absl::StrJoin(versions, ", "), "]");
  }
  return "";
}

namespace {

// "verify": false | {"enabled", "tolerance", "on_mismatch", "on_first_use", "inputs"}.
absl::StatusOr<VerifyConfig> ParseVerify(const json& v) {
  VerifyConfig verify;
  if (v.is_boolean()) {
    verify.enabled = v.get<bool>();
    return verify;
  }
  if (!v.is_object()) return ConfigError("verify", "expected true, false or an object");
  RETURN_IF_ERROR(
      CheckKeys(v, {"enabled", "tolerance", "on_mismatch", "on_first_use", "inputs"}, "verify"));
  if (v.contains("enabled")) {
    if (!v["enabled"].is_boolean()) return ConfigError("verify.enabled", "expected true or false");
    verify.enabled = v["enabled"].get<bool>();
  }
  if (v.contains("tolerance")) {
    if (!v["tolerance"].is_number() || v["tolerance"].get<double>() < 0) {
      return ConfigError("verify.tolerance", "expected a number >= 0");
    }
    verify.tolerance = v["tolerance"].get<double>();
  }
  if (v.contains("on_mismatch")) {
    const json& m = v["on_mismatch"];
    if (!m.is_string() || (m.get<std::string>() != "fail" && m.get<std::string>() != "fallback")) {
      return ConfigError("verify.on_mismatch", "expected \"fail\" or \"fallback\"");
    }
    verify.fallback_on_mismatch = m.get<std::string>() == "fallback";
  }
  if (v.contains("on_first_use")) {
    if (!v["on_first_use"].is_boolean()) {
      return ConfigError("verify.on_first_use", "expected true or false");
    }
    verify.on_first_use = v["on_first_use"].get<bool>();
  }
  ASSIGN_OR_RETURN(verify.inputs, ParseTensorList(v, "inputs"));
  for (const runtime::TensorSpec& spec : verify.inputs) {
    if (spec.name.empty()) return ConfigError("verify.inputs", "every entry needs a 'name'");
  }
  return verify;
}

absl::StatusOr<uint64_t> ParseCount(const json& v, const std::string& where) {
  // protobuf's JSON writes 64-bit integers as strings: take both.
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  if (v.is_string()) {
    const std::string text = v.get<std::string>();
    uint64_t parsed = 0;
    if (!text.empty() && text.size() < 20 &&
        text.find_first_not_of("0123456789") == std::string::npos) {
      for (char c : text) parsed = parsed * 10 + static_cast<uint64_t>(c - '0');
      return parsed;
    }
  }
  return ConfigError(where, absl::StrCat("expected an integer >= 0, got ", v.dump()));
}

absl::StatusOr<bool> ParseBool(const json& v, const std::string& where) {
  if (!v.is_boolean()) return ConfigError(where, "expected true or false");
  return v.get<bool>();
}

// Triton's "dynamic_batching" object; preferred sizes are checked against
// max_batch_size by the caller.
absl::StatusOr<DynamicBatching> ParseDynamicBatching(const json& d) {
  if (!d.is_object()) return ConfigError("dynamic_batching", "expected an object");
  RETURN_IF_ERROR(CheckKeys(d,
                            {"preferred_batch_size", "allowed_batch_sizes",
                             "max_queue_delay_microseconds", "preserve_ordering",
                             "adaptive_batch_size", "default_queue_policy"},
                            "dynamic_batching"));
  DynamicBatching batching;
  if (d.contains("preferred_batch_size")) {
    const json& sizes = d["preferred_batch_size"];
    if (!sizes.is_array()) {
      return ConfigError("dynamic_batching.preferred_batch_size", "expected an array");
    }
    for (const json& size : sizes) {
      if (!size.is_number_integer() || size.get<int64_t>() < 1) {
        return ConfigError("dynamic_batching.preferred_batch_size",
                           absl::StrCat("sizes must be integers >= 1, got ", size.dump()));
      }
      batching.preferred_batch_size.push_back(size.get<int64_t>());
    }
  }
  if (d.contains("allowed_batch_sizes")) {
    const json& sizes = d["allowed_batch_sizes"];
    if (!sizes.is_array()) {
      return ConfigError("dynamic_batching.allowed_batch_sizes", "expected an array");
    }
    batching.allowed_batch_sizes.emplace();
    for (const json& size : sizes) {
      if (!size.is_number_integer() || size.get<int64_t>() < 1) {
        return ConfigError("dynamic_batching.allowed_batch_sizes",
                           absl::StrCat("sizes must be integers >= 1, got ", size.dump()));
      }
      batching.allowed_batch_sizes->push_back(size.get<int64_t>());
    }
  }
  if (d.contains("max_queue_delay_microseconds")) {
    ASSIGN_OR_RETURN(batching.max_queue_delay_us,
                     ParseCount(d["max_queue_delay_microseconds"],
                                "dynamic_batching.max_queue_delay_microseconds"));
  }
  if (d.contains("preserve_ordering")) {
    ASSIGN_OR_RETURN(batching.preserve_ordering,
                     ParseBool(d["preserve_ordering"], "dynamic_batching.preserve_ordering"));
  }
  if (d.contains("adaptive_batch_size")) {
    ASSIGN_OR_RETURN(batching.adaptive_batch_size,
                     ParseBool(d["adaptive_batch_size"], "dynamic_batching.adaptive_batch_size"));
  }
  if (d.contains("default_queue_policy")) {
    const json& q = d["default_queue_policy"];
    const std::string where = "dynamic_batching.default_queue_policy";
    if (!q.is_object()) return ConfigError(where, "expected an object");
    RETURN_IF_ERROR(CheckKeys(q,
                              {"max_queue_size", "default_timeout_microseconds",
                               "timeout_action", "allow_timeout_override"},
                              where));
    QueuePolicy& policy = batching.default_queue_policy;
    if (q.contains("max_queue_size")) {
      ASSIGN_OR_RETURN(policy.max_queue_size,
                       ParseCount(q["max_queue_size"], where + ".max_queue_size"));
    }
    if (q.contains("default_timeout_microseconds")) {
      ASSIGN_OR_RETURN(policy.default_timeout_us,
                       ParseCount(q["default_timeout_microseconds"],
                                  where + ".default_timeout_microseconds"));
    }
    if (q.contains("timeout_action")) {
      const json& a = q["timeout_action"];
      if (!a.is_string() || (a.get<std::string>() != "REJECT" && a.get<std::string>() != "DELAY")) {
        return ConfigError(where + ".timeout_action", "expected \"REJECT\" or \"DELAY\"");
      }
      policy.timeout_action = a.get<std::string>() == "DELAY" ? QueuePolicy::TimeoutAction::kDelay
                                                              : QueuePolicy::TimeoutAction::kReject;
    }
    // Triton's allow_timeout_override: a request's own "timeout" parameter
    // always bounds it in Kiln (request_parameters.h), so only its form is checked.
    if (q.contains("allow_timeout_override")) {
      RETURN_IF_ERROR(
          ParseBool(q["allow_timeout_override"], where + ".allow_timeout_override").status());
    }
  }
  return batching;
}

// One input of a warm-up sample; `where` names it in messages.
absl::StatusOr<WarmupInput> ParseWarmupInput(const std::string& name, const json& in,
                                             const std::string& where) {
  if (!in.is_object()) return ConfigError(where, "expected an object");
  RETURN_IF_ERROR(CheckKeys(in, {"data_type", "dims", "zero_data", "random_data", "input_data_file"},
                            where));
  WarmupInput input;
  input.name = name;
  if (!in.contains("data_type") || !in["data_type"].is_string()) {
    return ConfigError(where, "'data_type' (e.g. \"TYPE_FP32\") is required");
  }
  // Triton spells them TYPE_FP32; the protocol FP32. Both are taken.
  std::string type = in["data_type"].get<std::string>();
  const std::string spelled = type;
  if (type.rfind("TYPE_", 0) == 0) type = type.substr(5);
  const std::optional<DType> dtype = DTypeFromName(type);
  if (!dtype.has_value()) {
    return ConfigError(where, absl::StrCat("unknown or unsupported data_type '", spelled, "'"));
  }
  input.dtype = *dtype;
  if (!in.contains("dims") || !in["dims"].is_array()) {
    return ConfigError(where, "'dims' (an array of integers >= 0) is required");
  }
  for (const json& d : in["dims"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return ConfigError(where, absl::StrCat("'dims' entries must be integers >= 0 (a warm-up "
                                             "sample has a fixed shape), got ",
                                             d.dump()));
    }
    input.dims.push_back(d.get<int64_t>());
  }
  int sources = 0;
  if (in.contains("zero_data")) {
    ASSIGN_OR_RETURN(bool zero, ParseBool(in["zero_data"], where + ".zero_data"));
    if (zero) ++sources;
    input.source = WarmupInput::Source::kZero;
  }
  if (in.contains("random_data")) {
    ASSIGN_OR_RETURN(bool random, ParseBool(in["random_data"], where + ".random_data"));
    if (random) {
      ++sources;
      input.source = WarmupInput::Source::kRandom;
    }
  }
  if (in.contains("input_data_file")) {
    const json& f = in["input_data_file"];
    if (!f.is_string() || f.get<std::string>().empty()) {
      return ConfigError(where + ".input_data_file", "expected a file name");
    }
    input.file = f.get<std::string>();
    // Relative to the model's warmup folder, and inside it: no absolute
    // path, no "..", so a config cannot make kilnd read files elsewhere.
    if (input.file.front() == '/') {
      return ConfigError(where + ".input_data_file",
                         absl::StrCat("'", input.file, "' must be relative to the model's "
                                      "warmup directory, not absolute"));
    }
    for (absl::string_view part : absl::StrSplit(input.file, '/')) {
      if (part == "..") {
        return ConfigError(where + ".input_data_file",
                           absl::StrCat("'", input.file, "' must stay inside the model's warmup "
                                        "directory ('..' is not allowed)"));
      }
    }
    ++sources;
    input.source = WarmupInput::Source::kFile;
  }
  if (sources != 1) {
    return ConfigError(where, "needs exactly one of \"zero_data\": true, \"random_data\": true, "
                              "\"input_data_file\"");
  }
  return input;
}

// Triton's "model_warmup" list; batch sizes are checked by the caller.
absl::StatusOr<std::vector<WarmupSample>> ParseWarmup(const json& list) {
  if (!list.is_array()) return ConfigError("model_warmup", "expected an array");
  std::vector<WarmupSample> samples;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& entry = list[i];
    const std::string where = absl::StrCat("model_warmup[", i, "]");
    if (!entry.is_object()) return ConfigError(where, "expected an object");
    RETURN_IF_ERROR(CheckKeys(entry, {"name", "batch_size", "inputs", "count"}, where));
    WarmupSample sample;
    if (!entry.contains("name") || !entry["name"].is_string() ||
        entry["name"].get<std::string>().empty()) {
      return ConfigError(where, "'name' (a non-empty string) is required");
    }
    sample.name = entry["name"].get<std::string>();
    if (entry.contains("batch_size")) {
      ASSIGN_OR_RETURN(uint64_t batch, ParseCount(entry["batch_size"], where + ".batch_size"));
      if (batch < 1) return ConfigError(where + ".batch_size", "must be >= 1");
      sample.batch_size = static_cast<int64_t>(batch);
    }
    if (entry.contains("count")) {
      ASSIGN_OR_RETURN(sample.count, ParseCount(entry["count"], where + ".count"));
      sample.count = std::max<uint64_t>(sample.count, 1);  // Triton: 0 runs it once
    }
    if (!entry.contains("inputs") || !entry["inputs"].is_object() || entry["inputs"].empty()) {
      return ConfigError(where, "'inputs' (an object of input name -> sample) is required");
    }
    for (auto it = entry["inputs"].begin(); it != entry["inputs"].end(); ++it) {
      ASSIGN_OR_RETURN(WarmupInput input,
                       ParseWarmupInput(it.key(), it.value(),
                                        absl::StrCat(where, ".inputs.", it.key())));
      sample.inputs.push_back(std::move(input));
    }
    samples.push_back(std::move(sample));
  }
  return samples;
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
  RETURN_IF_ERROR(
      CheckKeys(root,
                {"inputs", "outputs", "version_policy", "strict", "verify", "dry_run",
                 "accumulation", "precision", "max_batch_size", "dynamic_batching",
                 "model_warmup"},
                "top level"));

  ModelConfig config;
  if (root.contains("strict")) {
    if (!root["strict"].is_boolean()) return ConfigError("strict", "expected true or false");
    config.strict = root["strict"].get<bool>();
  }
  if (root.contains("dry_run")) {
    if (!root["dry_run"].is_boolean()) return ConfigError("dry_run", "expected true or false");
    config.dry_run = root["dry_run"].get<bool>();
  }
  if (root.contains("accumulation")) {
    const json& a = root["accumulation"];
    if (!a.is_string() ||
        (a.get<std::string>() != "float32" && a.get<std::string>() != "float64")) {
      return ConfigError("accumulation", "expected \"float32\" or \"float64\"");
    }
    config.accumulate_float64 = a.get<std::string>() == "float64";
  }
  if (root.contains("precision")) {
    const json& p = root["precision"];
    const std::string name = p.is_string() ? p.get<std::string>() : std::string();
    config.precision_forced = name == "bf16_always";
    const std::optional<Precision> precision =
        config.precision_forced ? Precision::kBf16 : ParsePrecision(name);
    if (!p.is_string() || !precision) {
      return ConfigError("precision",
                         "expected \"fp32\", \"fp32_direct\", \"bf16\" or \"bf16_always\"");
    }
    config.precision = *precision;
  }
  if (root.contains("verify")) {
    ASSIGN_OR_RETURN(config.verify, ParseVerify(root["verify"]));
  }
  if (root.contains("version_policy")) {
    ASSIGN_OR_RETURN(config.version_policy, ParseVersionPolicy(root["version_policy"]));
  }
  if (root.contains("max_batch_size")) {
    const json& m = root["max_batch_size"];
    if (!m.is_number_integer() || m.get<int64_t>() < 0) {
      return ConfigError("max_batch_size", "expected an integer >= 0");
    }
    config.max_batch_size = m.get<int64_t>();
  }
  if (root.contains("dynamic_batching")) {
    ASSIGN_OR_RETURN(config.dynamic_batching, ParseDynamicBatching(root["dynamic_batching"]));
    if (config.max_batch_size < 1) {
      return ConfigError("dynamic_batching", "needs \"max_batch_size\" >= 1");
    }
    for (int64_t size : config.dynamic_batching->preferred_batch_size) {
      if (size > config.max_batch_size) {
        return ConfigError("dynamic_batching.preferred_batch_size",
                           absl::StrCat("size ", size, " exceeds max_batch_size ",
                                        config.max_batch_size));
      }
    }
    for (int64_t size : config.dynamic_batching->allowed_batch_sizes.value_or(
             std::vector<int64_t>{})) {
      if (size > config.max_batch_size) {
        return ConfigError("dynamic_batching.allowed_batch_sizes",
                           absl::StrCat("size ", size, " exceeds max_batch_size ",
                                        config.max_batch_size));
      }
    }
  }
  if (root.contains("model_warmup")) {
    ASSIGN_OR_RETURN(config.warmup, ParseWarmup(root["model_warmup"]));
    for (size_t i = 0; i < config.warmup.size(); ++i) {
      const int64_t batch = config.warmup[i].batch_size;
      const int64_t limit = std::max<int64_t>(config.max_batch_size, 1);
      if (batch > limit) {
        return ConfigError(absl::StrCat("model_warmup[", i, "].batch_size"),
                           config.max_batch_size == 0
                               ? absl::StrCat("must be 1 for a model without max_batch_size, got ",
                                              batch)
                               : absl::StrCat(batch, " exceeds max_batch_size ",
                                              config.max_batch_size));
      }
    }
  }
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

std::string GraphSettings(const ModelConfig& config) {
  const std::string accumulation = config.accumulate_float64 ? "accumulation=float64" : "";
  if (!config.verify.enabled) return accumulation;
  auto specs = [](const std::vector<runtime::TensorSpec>& list) {
    json out = json::array();
    for (const runtime::TensorSpec& spec : list) {
      json entry = {{"name", spec.name}, {"datatype", std::string(DTypeName(spec.dtype))}};
      if (spec.dims) entry["dims"] = *spec.dims;
      out.push_back(std::move(entry));
    }
    return out;
  };
  json settings = {{"tolerance", config.verify.tolerance},
                         {"on_mismatch", config.verify.fallback_on_mismatch ? "fallback" : "fail"},
                         {"samples", specs(config.verify.inputs)},
                         {"inputs", specs(config.model.inputs)},
                         {"outputs", specs(config.model.outputs)}};
  // The verified import judges a bfloat16 plan with its own tolerance, so the
  // ops it may move onto the fallback depend on the precision.
  if (config.precision != Precision::kFp32) {
    settings["precision"] = std::string(PrecisionName(config.precision));
  }
  return absl::StrCat(accumulation, accumulation.empty() ? "" : ";", "verify=", settings.dump());
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
