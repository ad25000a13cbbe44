#include "server/core/model_contract.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/json_text.h"

namespace kiln::server {
namespace {

using nlohmann::json;

std::vector<size_t> DynamicDims(const runtime::TensorSpec& spec) {
  std::vector<size_t> dynamic;
  if (!spec.dims) return dynamic;
  for (size_t d = 0; d < spec.dims->size(); ++d) {
    if ((*spec.dims)[d] < 0) dynamic.push_back(d);
  }
  return dynamic;
}

std::string DatatypeProperty(const runtime::TensorSpec& spec) {
  if (spec.dtype == DType::kUnknown) return "open";
  std::string also;
  for (DType d : spec.also_accepts) absl::StrAppend(&also, "; ", DTypeName(d), " also accepted");
  if (spec.dtype_source.empty()) return "fixed" + also;
  return absl::StrCat("fixed (", spec.dtype_source, ")", also);
}

std::string ShapeProperty(const runtime::TensorSpec& spec) {
  if (!spec.dims) return "any rank";
  if (spec.any_leading_dims && !spec.dims->empty()) {
    // A Linear's input: [-1, 16] shown, [..., 16] taken.
    return absl::StrCat("any leading dims, then [",
                        absl::StrJoin(spec.dims->begin() + 1, spec.dims->end(), ", "), "]");
  }
  const std::vector<size_t> dynamic = DynamicDims(spec);
  if (dynamic.empty()) return "fixed";
  return absl::StrCat(dynamic.size() == 1 ? "dynamic dim " : "dynamic dims ",
                      absl::StrJoin(dynamic, ", "));
}

// "dim 0: [1, 64] (s77); dim 1: >= 2 (s78)".
std::string DimRangesProperty(const runtime::TensorSpec& spec) {
  std::vector<std::string> parts;
  for (const ir::DimRange& r : spec.dim_ranges) {
    parts.push_back(absl::StrCat("dim ", r.dim, ": ", runtime::DimRangeString(r),
                                 r.symbol.empty() ? "" : absl::StrCat(" (", r.symbol, ")")));
  }
  return absl::StrJoin(parts, "; ");
}

void AddTensorProperties(const runtime::TensorSpec& spec, const std::string& kind,
                         const std::string& alias,
                         std::map<std::string, std::string>& properties) {
  const std::string prefix = absl::StrCat(kind, ".", spec.name, ".");
  properties[prefix + "datatype"] = DatatypeProperty(spec);
  properties[prefix + "shape"] = ShapeProperty(spec);
  properties[prefix + "alias"] = alias;
  if (!spec.path.empty()) properties[prefix + "path"] = spec.path;
  if (!spec.dim_ranges.empty()) properties[prefix + "dim_ranges"] = DimRangesProperty(spec);
  if (spec.optional) properties[prefix + "optional"] = "true";
  if (!spec.default_text.empty()) properties[prefix + "default"] = spec.default_text;
  if (!spec.list.empty()) {
    // The spec stands for every element of a List[Tensor] argument.
    properties[prefix + "list"] =
        absl::StrCat(spec.list, spec.optional ? ": Optional[List[Tensor]]" : ": List[Tensor]",
                     ", sent as ", spec.list, ".0, ", spec.list,
                     ".1, ... (consecutive from 0) or whole as ", spec.list,
                     " (the elements stacked on a new first dim; shape [0] for an empty list)",
                     spec.optional ? "; left out, it is None" : "");
  }
}

json TensorJson(const runtime::TensorSpec& spec, const std::string& alias) {
  json t;
  t["name"] = spec.name;
  t["datatype"] = ContractDatatype(spec);
  t["datatype_fixed"] = spec.dtype != DType::kUnknown;
  t["dtype_source"] = spec.dtype_source;
  std::vector<std::string> also;
  for (DType d : spec.also_accepts) also.push_back(DTypeName(d));
  t["also_accepts"] = also;  // token ids: INT32 as well as the INT64 shown
  t["shape"] = spec.dims ? json(*spec.dims) : json(nullptr);
  t["dynamic_dims"] = DynamicDims(spec);
  t["any_leading_dims"] = spec.any_leading_dims;  // shape[1:] after any number of dims
  t["alias"] = alias;
  t["path"] = spec.path;
  t["dim_ranges"] = json::array();  // bounds of dynamic dims; "max" null when unbounded
  for (const ir::DimRange& r : spec.dim_ranges) {
    t["dim_ranges"].push_back({{"dim", r.dim}, {"min", r.min},
                               {"max", r.max == INT64_MAX ? json(nullptr) : json(r.max)},
                               {"symbol", r.symbol}});
  }
  t["optional"] = spec.optional;
  if (!spec.default_text.empty()) t["default"] = spec.default_text;  // used when left out
  t["list"] = spec.list;  // a List[Tensor] argument's name: send <list>.0, ... or <list> whole
  return t;
}

}  // namespace

std::string ContractDatatype(const runtime::TensorSpec& spec) {
  return spec.dtype == DType::kUnknown ? "ANY" : DTypeName(spec.dtype);
}

void AddContractProperties(const runtime::Model& model,
                           std::map<std::string, std::string>& properties) {
  for (size_t i = 0; i < model.inputs().size(); ++i) {
    AddTensorProperties(model.inputs()[i], "input", runtime::InputAlias(i), properties);
  }
  for (size_t i = 0; i < model.outputs().size(); ++i) {
    AddTensorProperties(model.outputs()[i], "output", runtime::OutputAlias(i), properties);
  }
  // Ops whose kernel refused a request's signature, run through libtorch for it.
  std::vector<std::string> refused;
  for (const auto& [op, signatures] : model.signature_fallbacks()) {
    refused.push_back(absl::StrCat(op, " (", signatures, signatures == 1 ? " signature)"
                                                                           : " signatures)"));
  }
  if (!refused.empty()) properties["fallback_ops.per_signature"] = absl::StrJoin(refused, ", ");
}

std::string ContractJson(const runtime::Model& model, const std::string& name, int64_t version,
                         bool dry_run) {
  json root;
  root["model"] = name;
  root["version"] = version;
  root["dry_run"] = dry_run;
  root["inputs"] = json::array();
  for (size_t i = 0; i < model.inputs().size(); ++i) {
    root["inputs"].push_back(TensorJson(model.inputs()[i], runtime::InputAlias(i)));
  }
  root["outputs"] = json::array();
  for (size_t i = 0; i < model.outputs().size(); ++i) {
    root["outputs"].push_back(TensorJson(model.outputs()[i], runtime::OutputAlias(i)));
  }
  root["fallback_ops"] = json::array();
  const auto& properties = model.properties();
  if (auto it = properties.find("fallback_ops"); it != properties.end() && !it->second.empty()) {
    for (absl::string_view op : absl::StrSplit(it->second, ',')) {
      root["fallback_ops"].push_back(std::string(op));
    }
  }
  if (auto it = properties.find("verify"); it != properties.end()) root["verify"] = it->second;
  // ASCII only: the answer may travel in gRPC metadata.
  return JsonText(root, /*ascii=*/true);
}

}  // namespace kiln::server
