// Parsing is strict: every field is checked for its type, unknown fields are
// refused (a misspelt "ouputs" must not silently mean "all outputs"), and the
// element count of JSON data is checked against the shape here, where the
// message can name "data"; what the shared decoder checks anyway (datatype,
// negative dims, binary byte counts, the model's own contract) is left to it so
// both protocols report it the same way.
#include "server/http/json_codec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/dtype.h"
#include "engine/common/half.h"
#include "engine/common/json_text.h"
#include "engine/common/status_macros.h"

namespace kiln::server::http {
namespace {

using json = nlohmann::json;
using inference::InferParameter;
using inference::ModelInferRequest;

// The JSON text of a string (quoted, escaped).
std::string Quoted(absl::string_view text) { return JsonText(json(std::string(text))); }

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// The deepest nesting of arrays and objects in `text`, counted before parsing:
// values nested without bound would exhaust the stack of whoever walks them.
absl::Status CheckDepth(absl::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return absl::InvalidArgumentError(
            absl::StrCat("malformed JSON: nested deeper than ", kMaxJsonDepth, " levels"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<json> ParseJson(absl::string_view text) {
  RETURN_IF_ERROR(CheckDepth(text));
  json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Parse again for the position; only failures pay for the exception.
    // Any of the parser's exceptions: a number past double's range is an
    // out_of_range (406), not a parse_error.
    try {
      json reparsed = json::parse(text.begin(), text.end());
      (void)reparsed;
    } catch (const json::exception& e) {
      std::string what = e.what();
      // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
      if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
      return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", what));
    }
    return absl::InvalidArgumentError("malformed JSON");
  }
  return value;
}

// Refuses members of `object` not in `known`.
absl::Status CheckFields(const json& object, std::initializer_list<const char*> known,
                         absl::string_view where) {
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) {
      return Invalid(where, absl::StrCat("unknown field ", Quoted(key), " (expected one of ",
                                         absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseParameters(const json& value, absl::string_view where,
                             google::protobuf::Map<std::string, InferParameter>* out) {
  if (!value.is_object()) return Invalid(where, "\"parameters\" must be an object");
  for (const auto& [key, v] : value.items()) {
    InferParameter& p = (*out)[key];
    if (v.is_boolean()) {
      p.set_bool_param(v.get<bool>());
    } else if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        p.set_int64_param(static_cast<int64_t>(u));
      } else {
        p.set_uint64_param(u);
      }
    } else if (v.is_number_integer()) {
      p.set_int64_param(v.get<int64_t>());
    } else if (v.is_number_float()) {
      p.set_double_param(v.get<double>());
    } else if (v.is_string()) {
      p.set_string_param(v.get<std::string>());
    } else {
      return Invalid(where, absl::StrCat("parameter ", Quoted(key),
                                         " must be a bool, a number or a string"));
    }
  }
  return absl::OkStatus();
}

// ----------------------------------------------------------------- JSON data -> raw bytes

template <typename T>
void Append(std::string* raw, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  raw->append(bytes, sizeof(T));
}

template <typename T>
absl::Status AppendInteger(const json& v, std::string* raw) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      Append<T>(raw, static_cast<T>(u));
      return absl::OkStatus();
    }
  } else if (v.is_number_integer()) {
    const int64_t s = v.get<int64_t>();
    if constexpr (std::is_signed_v<T>) {
      if (s >= std::numeric_limits<T>::min() && s <= std::numeric_limits<T>::max()) {
        Append<T>(raw, static_cast<T>(s));
        return absl::OkStatus();
      }
    }
  } else {
    return absl::InvalidArgumentError("is not an integer");
  }
  return absl::InvalidArgumentError("is out of range");
}

// Appends one JSON value as an element of `dtype` (nullopt: BYTES).
absl::Status AppendElement(const json& v, std::optional<DType> dtype, std::string* raw) {
  if (!dtype.has_value()) {  // BYTES: a 4-byte little-endian length, then the bytes
    if (!v.is_string()) return absl::InvalidArgumentError("is not a string");
    const std::string& s = v.get_ref<const std::string&>();
    Append<uint32_t>(raw, static_cast<uint32_t>(s.size()));
    raw->append(s);
    return absl::OkStatus();
  }
  switch (*dtype) {
    case DType::kBool:
      if (!v.is_boolean()) return absl::InvalidArgumentError("is not true or false");
      Append<uint8_t>(raw, v.get<bool>() ? 1 : 0);
      return absl::OkStatus();
    case DType::kUInt8:
      return AppendInteger<uint8_t>(v, raw);
    case DType::kInt8:
      return AppendInteger<int8_t>(v, raw);
    case DType::kInt16:
      return AppendInteger<int16_t>(v, raw);
    case DType::kInt32:
      return AppendInteger<int32_t>(v, raw);
    case DType::kInt64:
      return AppendInteger<int64_t>(v, raw);
    default:
      break;
  }
  if (!v.is_number()) return absl::InvalidArgumentError("is not a number");
  const double d = v.get<double>();
  switch (*dtype) {
    case DType::kF16:
      Append<uint16_t>(raw, FloatToHalf(static_cast<float>(d)));
      return absl::OkStatus();
    case DType::kBF16:
      Append<uint16_t>(raw, FloatToBF16(static_cast<float>(d)));
      return absl::OkStatus();
    case DType::kF32:
      Append<float>(raw, static_cast<float>(d));
      return absl::OkStatus();
    case DType::kF64:
      Append<double>(raw, d);
      return absl::OkStatus();
    default:
      return absl::InternalError("no JSON decoder for this datatype");
  }
}

// Appends `data` (a value or arrays of values nested in any way) in row-major
// order; counts the elements.
absl::Status AppendData(const json& data, std::optional<DType> dtype, std::string* raw,
                        int64_t* count) {
  if (data.is_array()) {
    for (const json& item : data) RETURN_IF_ERROR(AppendData(item, dtype, raw, count));
    return absl::OkStatus();
  }
  absl::Status status = AppendElement(data, dtype, raw);
  if (!status.ok()) {
    std::string text = JsonText(data);
    if (text.size() > 64) text = absl::StrCat(text.substr(0, 64), "...");
    return absl::InvalidArgumentError(
        absl::StrCat("value ", text, " at index ", *count, " ", status.message()));
  }
  ++*count;
  return absl::OkStatus();
}

// Elements of `shape`, or nullopt when a dim is negative or the product
// overflows (the shared decoder reports those).
std::optional<int64_t> ElementCount(const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(count, d, &count)) return std::nullopt;
  }
  return count;
}

std::string ShapeText(const google::protobuf::RepeatedField<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status ParseInput(const json& in, int index, ModelInferRequest* request,
                        absl::string_view* binary, RawInputs* outside) {
  const std::string where = absl::StrCat("inputs[", index, "]");
  if (!in.is_object()) return Invalid(where, "must be an object");
  RETURN_IF_ERROR(CheckFields(in, {"name", "shape", "datatype", "parameters", "data"}, where));
  auto* input = request->add_inputs();
  if (!in.contains("name") || !in["name"].is_string()) {
    return Invalid(where, "\"name\" must be a string");
  }
  input->set_name(in["name"].get<std::string>());
  const std::string tensor = absl::StrCat("input '", absl::CHexEscape(input->name()), "'");
  if (!in.contains("datatype") || !in["datatype"].is_string()) {
    return Invalid(tensor, "\"datatype\" must be a string");
  }
  input->set_datatype(in["datatype"].get<std::string>());
  if (!in.contains("shape") || !in["shape"].is_array()) {
    return Invalid(tensor, "\"shape\" must be an array of integers");
  }
  for (const json& d : in["shape"]) {
    if (!d.is_number_integer()) return Invalid(tensor, "\"shape\" must be an array of integers");
    input->add_shape(d.get<int64_t>());
  }
  if (in.contains("parameters")) {
    RETURN_IF_ERROR(ParseParameters(in["parameters"], tensor, input->mutable_parameters()));
  }
  if (input->parameters().count("shared_memory_region") > 0) {
    // The bytes wait in a registered region (server/core/shared_memory.h).
    if (in.contains("data") || input->parameters().count("binary_data_size") > 0) {
      return Invalid(tensor, "has shared_memory_region and data of its own");
    }
    return absl::OkStatus();
  }
  // The input's bytes: in the message, or (`outside`) a view of the body's
  // binary part or of the JSON data converted.
  std::string* raw = outside == nullptr ? request->add_raw_input_contents() : nullptr;
  const auto size_param = input->parameters().find("binary_data_size");
  if (size_param != input->parameters().end()) {
    if (in.contains("data")) {
      return Invalid(tensor, "has both \"data\" and the \"binary_data_size\" parameter");
    }
    if (size_param->second.parameter_choice_case() != InferParameter::kInt64Param ||
        size_param->second.int64_param() < 0) {
      return Invalid(tensor, "parameter 'binary_data_size' must be a non-negative integer");
    }
    const uint64_t size = static_cast<uint64_t>(size_param->second.int64_param());
    if (size > binary->size()) {
      return Invalid(tensor, absl::StrCat("binary_data_size ", size, " goes past the end of the "
                                          "body (", binary->size(), " bytes of binary data left)"));
    }
    if (outside != nullptr) {
      outside->entries.push_back({binary->substr(0, size)});
    } else {
      raw->assign(binary->data(), size);
    }
    binary->remove_prefix(size);
    return absl::OkStatus();
  }
  if (!in.contains("data")) {
    return Invalid(tensor, "needs \"data\" or the \"binary_data_size\" parameter");
  }
  std::optional<DType> dtype;
  if (input->datatype() != "BYTES") {
    dtype = DTypeFromName(input->datatype());
    if (!dtype.has_value()) {  // the shared decoder's words
      return Invalid(tensor, absl::StrCat("unsupported datatype '",
                                          absl::CHexEscape(input->datatype()), "'"));
    }
  }
  int64_t count = 0;
  if (outside != nullptr) raw = &outside->owned.emplace_back();
  absl::Status data = AppendData(in["data"], dtype, raw, &count);
  if (!data.ok()) return Invalid(tensor, absl::StrCat("\"data\": ", data.message()));
  if (outside != nullptr) outside->entries.push_back({absl::string_view(*raw)});
  const std::optional<int64_t> expected = ElementCount(input->shape());
  if (expected.has_value() && *expected != count) {
    return Invalid(tensor, absl::StrCat("shape ", ShapeText(input->shape()), " needs ", *expected,
                                        " values in \"data\", got ", count));
  }
  return absl::OkStatus();
}

// ----------------------------------------------------------------- raw bytes -> JSON data

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Shortest text that reads back as the same float (or double); null for NaN
// and infinities, which JSON cannot write.
template <typename F>
void AppendFloat(F value, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
    return;
  }
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, result.ptr);
}

template <typename I>
void AppendInt(I value, std::string* out) {
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, result.ptr);
}

// Appends `raw` as a flat JSON array of `datatype` elements.
absl::Status AppendJsonData(const std::string& name, const std::string& datatype,
                            absl::string_view raw, std::string* out) {
  const std::optional<DType> dtype = DTypeFromName(datatype);
  if (!dtype.has_value()) {
    return absl::InternalError(absl::StrCat("output '", name, "': no JSON encoding for datatype ",
                                            datatype));
  }
  const size_t size = DTypeSize(*dtype);
  if (raw.size() % size != 0) {
    return absl::InternalError(absl::StrCat("output '", name, "': ", raw.size(),
                                            " bytes is no whole number of ", datatype));
  }
  out->push_back('[');
  for (size_t at = 0; at < raw.size(); at += size) {
    if (at > 0) out->push_back(',');
    const char* p = raw.data() + at;
    switch (*dtype) {
      case DType::kBool:
        out->append(p[0] != 0 ? "true" : "false");
        break;
      case DType::kUInt8:
        AppendInt(static_cast<unsigned>(Load<uint8_t>(p)), out);
        break;
      case DType::kInt8:
        AppendInt(static_cast<int>(Load<int8_t>(p)), out);
        break;
      case DType::kInt16:
        AppendInt(Load<int16_t>(p), out);
        break;
      case DType::kInt32:
        AppendInt(Load<int32_t>(p), out);
        break;
      case DType::kInt64:
        AppendInt(Load<int64_t>(p), out);
        break;
      case DType::kF16:
        AppendFloat(HalfToFloat(Load<uint16_t>(p)), out);
        break;
      case DType::kBF16:
        AppendFloat(BF16ToFloat(Load<uint16_t>(p)), out);
        break;
      case DType::kF32:
        AppendFloat(Load<float>(p), out);
        break;
      case DType::kF64:
        AppendFloat(Load<double>(p), out);
        break;
      default:
        return absl::InternalError(absl::StrCat("output '", name, "': no JSON encoding for ",
                                                datatype));
    }
  }
  out->push_back(']');
  return absl::OkStatus();
}

json ParametersJson(const google::protobuf::Map<std::string, InferParameter>& params) {
  json out = json::object();
  for (const auto& [key, p] : params) {
    switch (p.parameter_choice_case()) {
      case InferParameter::kBoolParam:
        out[key] = p.bool_param();
        break;
      case InferParameter::kInt64Param:
        out[key] = p.int64_param();
        break;
      case InferParameter::kUint64Param:
        out[key] = p.uint64_param();
        break;
      case InferParameter::kDoubleParam:
        out[key] = p.double_param();
        break;
      case InferParameter::kStringParam:
        out[key] = p.string_param();
        break;
      default:
        break;
    }
  }
  return out;
}

json DurationJson(const inference::StatisticDuration& d) {
  return json{{"count", d.count()}, {"ns", d.ns()}};
}

}  // namespace

bool OutputFormat::IsBinary(const std::string& name) const {
  const auto it = binary.find(name);
  return it != binary.end() ? it->second : binary_default;
}

absl::Status ParseInferRequest(absl::string_view body, std::optional<size_t> header_length,
                               ModelInferRequest* request, OutputFormat* format,
                               RawInputs* raw) {
  absl::string_view header = body;
  absl::string_view binary;
  if (header_length.has_value()) {
    if (*header_length > body.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Inference-Header-Content-Length ", *header_length,
                       " is larger than the body (", body.size(), " bytes)"));
    }
    header = body.substr(0, *header_length);
    binary = body.substr(*header_length);
  }
  ASSIGN_OR_RETURN(json root, ParseJson(header));
  if (!root.is_object()) return absl::InvalidArgumentError("the request must be a JSON object");
  RETURN_IF_ERROR(CheckFields(root, {"id", "parameters", "inputs", "outputs"}, "request"));
  if (root.contains("id")) {
    if (!root["id"].is_string()) return absl::InvalidArgumentError("\"id\" must be a string");
    request->set_id(root["id"].get<std::string>());
  }
  if (root.contains("parameters")) {
    RETURN_IF_ERROR(ParseParameters(root["parameters"], "request", request->mutable_parameters()));
    const auto it = request->parameters().find("binary_data_output");
    if (it != request->parameters().end()) {
      if (it->second.parameter_choice_case() != InferParameter::kBoolParam) {
        return absl::InvalidArgumentError(
            "request: parameter 'binary_data_output' must be true or false");
      }
      format->binary_default = it->second.bool_param();
    }
  }
  if (!root.contains("inputs") || !root["inputs"].is_array()) {
    return absl::InvalidArgumentError("\"inputs\" must be an array of tensors");
  }
  int index = 0;
  for (const json& in : root["inputs"]) {
    RETURN_IF_ERROR(ParseInput(in, index++, request, &binary, raw));
  }
  if (!binary.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body holds ", binary.size(),
                     " bytes of binary data that no input's binary_data_size claims"));
  }
  if (root.contains("outputs")) {
    if (!root["outputs"].is_array()) {
      return absl::InvalidArgumentError("\"outputs\" must be an array");
    }
    index = 0;
    for (const json& out : root["outputs"]) {
      const std::string where = absl::StrCat("outputs[", index++, "]");
      if (!out.is_object()) return Invalid(where, "must be an object");
      RETURN_IF_ERROR(CheckFields(out, {"name", "parameters"}, where));
      if (!out.contains("name") || !out["name"].is_string()) {
        return Invalid(where, "\"name\" must be a string");
      }
      auto* requested = request->add_outputs();
      requested->set_name(out["name"].get<std::string>());
      if (out.contains("parameters")) {
        RETURN_IF_ERROR(ParseParameters(out["parameters"], where, requested->mutable_parameters()));
        const auto it = requested->parameters().find("binary_data");
        if (it != requested->parameters().end()) {
          if (it->second.parameter_choice_case() != InferParameter::kBoolParam) {
            return Invalid(where, "parameter 'binary_data' must be true or false");
          }
          format->binary[requested->name()] = it->second.bool_param();
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<EncodedResponse> EncodeInferResponse(const inference::ModelInferResponse& response,
                                                    const OutputFormat& format,
                                                    const RawOutputs* raw) {
  const size_t contents = raw != nullptr ? raw->entries.size()
                                         : static_cast<size_t>(response.raw_output_contents_size());
  if (contents != static_cast<size_t>(response.outputs_size())) {
    return absl::InternalError("the response's outputs and their contents do not pair up");
  }
  std::string out = "{\"model_name\":";
  out += Quoted(response.model_name());
  out += ",\"model_version\":";
  out += Quoted(response.model_version());
  if (!response.id().empty()) {
    out += ",\"id\":";
    out += Quoted(response.id());
  }
  if (!response.parameters().empty()) {
    out += ",\"parameters\":";
    out += JsonText(ParametersJson(response.parameters()));
  }
  out += ",\"outputs\":[";
  EncodedResponse encoded;
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& output = response.outputs(i);
    const absl::string_view bytes =
        raw != nullptr ? raw->bytes(i) : absl::string_view(response.raw_output_contents(i));
    if (i > 0) out.push_back(',');
    json meta = {{"name", output.name()}, {"datatype", output.datatype()}};
    meta["shape"] = json::array();
    for (int64_t d : output.shape()) meta["shape"].push_back(d);
    json params = ParametersJson(output.parameters());
    if (output.parameters().count("shared_memory_region") > 0) {
      meta["parameters"] = std::move(params);  // written into the region, as Triton answers
      out += JsonText(meta);
      continue;
    }
    const bool is_binary = format.IsBinary(output.name());
    if (is_binary) params["binary_data_size"] = bytes.size();
    if (!params.empty()) meta["parameters"] = std::move(params);
    std::string text = JsonText(meta);
    if (is_binary) {
      out += text;
      encoded.binary.push_back(bytes);
      continue;
    }
    text.pop_back();  // the closing brace: "data" goes in before it
    out += text;
    out += ",\"data\":";
    RETURN_IF_ERROR(AppendJsonData(output.name(), output.datatype(), bytes, &out));
    out.push_back('}');
  }
  out += "]}";
  if (!encoded.binary.empty()) encoded.header_length = out.size();
  encoded.body = std::move(out);
  return encoded;
}

std::string ServerMetadataJson(const inference::ServerMetadataResponse& response) {
  json out = {{"name", response.name()}, {"version", response.version()}};
  out["extensions"] = json::array();
  for (const std::string& e : response.extensions()) out["extensions"].push_back(e);
  return JsonText(out);
}

std::string ModelMetadataJson(const inference::ModelMetadataResponse& response) {
  json out = {{"name", response.name()}, {"platform", response.platform()}};
  out["versions"] = json::array();
  for (const std::string& v : response.versions()) out["versions"].push_back(v);
  for (const char* kind : {"inputs", "outputs"}) {
    const auto& tensors =
        std::string(kind) == "inputs" ? response.inputs() : response.outputs();
    json list = json::array();
    for (const auto& t : tensors) {
      json shape = json::array();
      for (int64_t d : t.shape()) shape.push_back(d);
      list.push_back({{"name", t.name()}, {"datatype", t.datatype()}, {"shape", shape}});
    }
    out[kind] = std::move(list);
  }
  // The Open Inference Protocol's gRPC "properties" (Kiln's contract, the
  // fallback ops, the graph), under the same name.
  json properties = json::object();
  for (const auto& [key, value] : response.properties()) properties[key] = value;
  out["properties"] = std::move(properties);
  return JsonText(out);
}

std::string ModelStatisticsJson(const inference::ModelStatisticsResponse& response) {
  json models = json::array();
  for (const auto& s : response.model_stats()) {
    const auto& i = s.inference_stats();
    json m = {{"name", s.name()},
              {"version", s.version()},
              {"last_inference", s.last_inference()},
              {"inference_count", s.inference_count()},
              {"execution_count", s.execution_count()}};
    m["inference_stats"] = {{"success", DurationJson(i.success())},
                            {"fail", DurationJson(i.fail())},
                            {"queue", DurationJson(i.queue())},
                            {"compute_input", DurationJson(i.compute_input())},
                            {"compute_infer", DurationJson(i.compute_infer())},
                            {"compute_output", DurationJson(i.compute_output())},
                            {"cache_hit", DurationJson(i.cache_hit())},
                            {"cache_miss", DurationJson(i.cache_miss())}};
    m["batch_stats"] = json::array();
    for (const auto& b : s.batch_stats()) {
      m["batch_stats"].push_back({{"batch_size", b.batch_size()},
                                  {"compute_input", DurationJson(b.compute_input())},
                                  {"compute_infer", DurationJson(b.compute_infer())},
                                  {"compute_output", DurationJson(b.compute_output())}});
    }
    m["memory_usage"] = json::array();
    for (const auto& u : s.memory_usage()) {
      m["memory_usage"].push_back(
          {{"type", u.type()}, {"id", u.id()}, {"byte_size", u.byte_size()}});
    }
    models.push_back(std::move(m));
  }
  return JsonText(json{{"model_stats", std::move(models)}});
}

std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& response) {
  json out = json::array();
  for (const auto& m : response.models()) {
    json entry = {{"name", m.name()}, {"version", m.version()}, {"state", m.state()}};
    if (!m.reason().empty()) entry["reason"] = m.reason();
    out.push_back(std::move(entry));
  }
  return JsonText(out);
}

std::string ModelReadyJson(const std::string& name, bool ready) {
  return JsonText(json{{"name", name}, {"ready", ready}});
}

absl::Status ParseRepositoryIndexRequest(absl::string_view body,
                                         inference::RepositoryIndexRequest* request) {
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return absl::OkStatus();
  ASSIGN_OR_RETURN(json root, ParseJson(body));
  if (!root.is_object()) return absl::InvalidArgumentError("the request must be a JSON object");
  RETURN_IF_ERROR(CheckFields(root, {"ready"}, "request"));
  if (root.contains("ready")) {
    if (!root["ready"].is_boolean()) {
      return absl::InvalidArgumentError("\"ready\" must be true or false");
    }
    request->set_ready(root["ready"].get<bool>());
  }
  return absl::OkStatus();
}

absl::Status ParseRepositoryParameters(
    absl::string_view body,
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter>* parameters) {
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return absl::OkStatus();
  ASSIGN_OR_RETURN(json root, ParseJson(body));
  if (!root.is_object()) return absl::InvalidArgumentError("the request must be a JSON object");
  RETURN_IF_ERROR(CheckFields(root, {"parameters"}, "request"));
  if (!root.contains("parameters")) return absl::OkStatus();
  if (!root["parameters"].is_object()) {
    return absl::InvalidArgumentError("\"parameters\" must be an object");
  }
  for (const auto& [key, v] : root["parameters"].items()) {
    inference::ModelRepositoryParameter& p = (*parameters)[key];
    const std::string where = absl::StrCat("parameter ", Quoted(key));
    if (absl::StartsWith(key, "file:")) {
      // Triton's HTTP form of the file override: the bytes in base64.
      std::string bytes;
      if (!v.is_string() || !absl::Base64Unescape(v.get_ref<const std::string&>(), &bytes)) {
        return Invalid(where, "must be the file's content in base64");
      }
      p.set_bytes_param(std::move(bytes));
    } else if (key == "config" && v.is_object()) {
      p.set_string_param(JsonText(v));  // Triton wants the text; the object is accepted too
    } else if (v.is_string()) {
      p.set_string_param(v.get<std::string>());
    } else if (v.is_boolean()) {
      p.set_bool_param(v.get<bool>());
    } else if (v.is_number_integer()) {
      p.set_int64_param(v.get<int64_t>());
    } else {
      return Invalid(where, "must be a string, a bool or an integer");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseSharedMemoryRegister(absl::string_view body,
                                       inference::SystemSharedMemoryRegisterRequest* request) {
  ASSIGN_OR_RETURN(json root, ParseJson(body));
  if (!root.is_object()) return absl::InvalidArgumentError("the request must be a JSON object");
  RETURN_IF_ERROR(CheckFields(root, {"key", "offset", "byte_size"}, "request"));
  if (!root.contains("key") || !root["key"].is_string()) {
    return absl::InvalidArgumentError("\"key\" must be a string");
  }
  request->set_key(root["key"].get<std::string>());
  for (const char* field : {"offset", "byte_size"}) {
    if (!root.contains(field)) continue;
    if (!root[field].is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" must be a byte count"));
    }
    const uint64_t v = root[field].get<uint64_t>();
    if (std::string(field) == "offset") {
      request->set_offset(v);
    } else {
      request->set_byte_size(v);
    }
  }
  return absl::OkStatus();
}

std::string SharedMemoryStatusJson(const inference::SystemSharedMemoryStatusResponse& response) {
  std::vector<const inference::SystemSharedMemoryStatusResponse::RegionStatus*> regions;
  for (const auto& [name, region] : response.regions()) regions.push_back(&region);
  std::sort(regions.begin(), regions.end(), [](auto* a, auto* b) { return a->name() < b->name(); });
  json out = json::array();
  for (const auto* r : regions) {
    out.push_back({{"name", r->name()}, {"key", r->key()}, {"offset", r->offset()},
                   {"byte_size", r->byte_size()}});
  }
  return JsonText(out);
}

}  // namespace kiln::server::http
