#include "server/core/request_parameters.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace kiln::server {
namespace {

using inference::InferParameter;
using Params = google::protobuf::Map<std::string, InferParameter>;

enum class Type { kBool, kCount, kString };  // kCount: int64 >= 0 or uint64

struct Known {
  const char* name;
  Type type;
};

// Parameters kilnd uses or accepts, by where they appear.
constexpr Known kRequestParams[] = {{"profile", Type::kBool},
                                    {"timeout", Type::kCount},
                                    {"priority", Type::kCount},
                                    {"binary_data_output", Type::kBool}};
constexpr Known kInputParams[] = {{"binary_data_size", Type::kCount},
                                  {"shared_memory_region", Type::kString},
                                  {"shared_memory_byte_size", Type::kCount},
                                  {"shared_memory_offset", Type::kCount}};
constexpr Known kOutputParams[] = {{"binary_data", Type::kBool},
                                   {"shared_memory_region", Type::kString},
                                   {"shared_memory_byte_size", Type::kCount},
                                   {"shared_memory_offset", Type::kCount}};

// Parameters of protocol extensions kilnd does not implement, and the extension.
struct Unsupported {
  const char* name;
  const char* extension;
};
constexpr Unsupported kUnsupported[] = {
    {"classification", "classification"},
    {"sequence_id", "sequences"},
    {"sequence_start", "sequences"},
    {"sequence_end", "sequences"},
};

// The client's text, quoted and escaped (it may hold control bytes), and cut.
std::string Quote(absl::string_view text) {
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, 64)), text.size() > 64 ? "..." : "",
                      "'");
}

absl::Status CheckType(const InferParameter& value, Type type, const std::string& where) {
  switch (type) {
    case Type::kBool:
      if (value.parameter_choice_case() == InferParameter::kBoolParam) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(where, " must be a bool_param"));
    case Type::kString:
      if (value.parameter_choice_case() == InferParameter::kStringParam) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(where, " must be a string_param"));
    case Type::kCount:
      if (value.parameter_choice_case() == InferParameter::kUint64Param) return absl::OkStatus();
      if (value.parameter_choice_case() == InferParameter::kInt64Param &&
          value.int64_param() >= 0) {
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(
          absl::StrCat(where, " must be a non-negative int64_param or a uint64_param"));
  }
  return absl::OkStatus();
}

// Sorts the parameters of one place (`place` as "request", "input 'x'") into
// unknown and unsupported names; checks the known ones' types.
absl::Status Classify(const Params& params, absl::Span<const Known> known, const std::string& place,
                      std::vector<std::string>* unknown, std::vector<std::string>* unsupported) {
  // protobuf's Map has no order; the message lists the names sorted.
  std::vector<const Params::value_type*> sorted;
  for (const auto& entry : params) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const Params::value_type* entry : sorted) {
    const std::string& name = entry->first;
    const InferParameter& value = entry->second;
    bool found = false;
    for (const Known& k : known) {
      if (name != k.name) continue;
      found = true;
      absl::Status typed =
          CheckType(value, k.type, absl::StrCat("parameter '", k.name, "' of the ", place));
      if (!typed.ok()) return typed;
    }
    if (found) continue;
    for (const Unsupported& u : kUnsupported) {
      if (name == u.name) {
        found = true;
        unsupported->push_back(absl::StrCat(Quote(name), " (", place, "; the ", u.extension,
                                            " extension)"));
      }
    }
    if (!found) unknown->push_back(absl::StrCat(Quote(name), " (", place, ")"));
  }
  return absl::OkStatus();
}

std::string Names(absl::Span<const Known> known) {
  std::vector<std::string> names;
  for (const Known& k : known) names.push_back(k.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

uint64_t CountParameter(const InferParameter& value) {
  return value.parameter_choice_case() == InferParameter::kUint64Param
             ? value.uint64_param()
             : static_cast<uint64_t>(value.int64_param());
}

absl::StatusOr<InferParameters> ParseInferParameters(const inference::ModelInferRequest& request) {
  std::vector<std::string> unknown, unsupported;
  absl::Status s = Classify(request.parameters(), kRequestParams, "request", &unknown, &unsupported);
  if (!s.ok()) return s;
  for (const auto& input : request.inputs()) {
    s = Classify(input.parameters(), kInputParams, absl::StrCat("input ", Quote(input.name())),
                 &unknown, &unsupported);
    if (!s.ok()) return s;
  }
  for (const auto& output : request.outputs()) {
    s = Classify(output.parameters(), kOutputParams, absl::StrCat("output ", Quote(output.name())),
                 &unknown, &unsupported);
    if (!s.ok()) return s;
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown parameter", unknown.size() > 1 ? "s " : " ", absl::StrJoin(unknown, ", "),
        "; kilnd understands, on the request: ", Names(kRequestParams),
        "; on an input: ", Names(kInputParams), "; on an output: ", Names(kOutputParams)));
  }
  if (!unsupported.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "kilnd does not implement the parameter", unsupported.size() > 1 ? "s " : " ",
        absl::StrJoin(unsupported, ", ")));
  }
  InferParameters result;
  const Params& params = request.parameters();
  if (auto it = params.find("profile"); it != params.end()) result.profile = it->second.bool_param();
  if (auto it = params.find("timeout"); it != params.end() && CountParameter(it->second) > 0) {
    // Beyond a year it means "no limit of its own" (and cannot overflow).
    const uint64_t us = CountParameter(it->second);
    if (us < uint64_t{365} * 86400 * 1000000) result.timeout = std::chrono::microseconds(us);
  }
  return result;
}

}  // namespace kiln::server
