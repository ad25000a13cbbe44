// ExportCall: NamedArguments of a serialized ExportedProgram node, by name.
#include "engine/importer/export/export_call.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace kiln::importer {

using nlohmann::json;

absl::StatusOr<DType> DTypeFromExport(int64_t t) {
  // ScalarType in torch/_export/serde/schema.py (not c10::ScalarType's numbering).
  switch (t) {
    case 1: return DType::kUInt8;
    case 2: return DType::kInt8;
    case 3: return DType::kInt16;
    case 4: return DType::kInt32;
    case 5: return DType::kInt64;
    case 6: return DType::kF16;
    case 7: return DType::kF32;
    case 8: return DType::kF64;
    case 12: return DType::kBool;
    case 13: return DType::kBF16;
    default: break;
  }
  return absl::UnimplementedError(
      absl::StrCat("scalar type ", t, " (complex, float8, uint16+ ...) has no Kiln dtype"));
}

std::optional<int64_t> C10ScalarTypeFromExport(int64_t t) {
  // BYTE=1 ... BOOL=12 are c10's Byte=0 ... Bool=11; c10 puts its quantized
  // types before BFloat16=15.
  if (t >= 1 && t <= 12) return t - 1;
  if (t == 13) return 15;
  return std::nullopt;
}

std::optional<int64_t> C10MemoryFormatFromExport(int64_t f) {
  switch (f) {
    case 1: return 0;  // ContiguousFormat -> Contiguous
    case 2: return 2;  // ChannelsLast
    case 3: return 3;  // ChannelsLast3d
    case 4: return 1;  // PreserveFormat -> Preserve
    default: return std::nullopt;
  }
}

std::optional<double> ExportFloat(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  if (s == "inf" || s == "Infinity") return HUGE_VAL;
  if (s == "-inf" || s == "-Infinity") return -HUGE_VAL;
  if (s == "nan" || s == "NaN") return NAN;
  return std::nullopt;
}

ExportCall::ExportCall(const json& node, int index, std::string op, std::string overload,
                       ExportValues& values, ConvertContext& cx)
    : index_(index), op_(std::move(op)), overload_(std::move(overload)), values_(values), cx_(cx) {
  if (auto it = node.find("inputs"); it != node.end() && it->is_array()) {
    for (const json& named : *it) {
      if (!named.is_object()) continue;
      auto name = named.find("name");
      auto arg = named.find("arg");
      if (name == named.end() || !name->is_string() || arg == named.end()) continue;
      args_[name->get<std::string>()] = &*arg;
    }
  }
  std::string node_name;
  if (auto it = node.find("name"); it != node.end() && it->is_string()) node_name = *it;
  if (auto it = node.find("outputs"); it != node.end() && it->is_array()) {
    for (const json& out : *it) {
      std::string name = node_name;
      std::optional<size_t> list_length;
      if (out.is_object() && out.size() == 1) {
        const json& v = out.begin().value();
        if (out.contains("as_tensors") && v.is_array()) list_length = v.size();
        if (out.contains("as_tensor") && v.is_object() && v.contains("name") &&
            v["name"].is_string()) {
          name = v["name"].get<std::string>();
        } else if (out.contains("as_sym_int") && v.is_object() && v.contains("as_name") &&
                   v["as_name"].is_string()) {
          name = v["as_name"].get<std::string>();
        }
      }
      output_names_.push_back(std::move(name));
      list_lengths_.push_back(list_length);
    }
  }
}

std::string ExportCall::Where() const {
  return absl::StrCat("node ", index_, " (", op_, overload_.empty() ? "" : ".", overload_, "): ");
}

const json* ExportCall::Arg(std::string_view name, std::string* kind) const {
  auto it = args_.find(name);
  if (it == args_.end() || !it->second->is_object() || it->second->size() != 1) return nullptr;
  *kind = it->second->begin().key();
  return &it->second->begin().value();
}

absl::Status ExportCall::Missing(std::string_view name) const {
  return InvalidArgument(absl::StrCat("argument '", std::string(name), "' is missing"));
}

absl::Status ExportCall::WrongKind(std::string_view name, std::string_view expected,
                                   std::string_view got) const {
  return InvalidArgument(absl::StrCat("argument '", std::string(name), "' must be ", std::string(expected), ", got ", std::string(got)));
}

bool ExportCall::Has(std::string_view name) const {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr || kind == "as_none") return false;
  if (kind == "as_optional_tensor" && v->is_object() && v->contains("as_none")) return false;
  return true;
}

absl::StatusOr<ir::ValueId> ExportCall::Named(std::string_view arg, const std::string& value) {
  auto it = values_.bound.find(value);
  if (it == values_.bound.end()) {
    return InvalidArgument(
        absl::StrCat("argument '", std::string(arg), "' reads %", value, ", which no earlier node defines"));
  }
  return it->second;
}

absl::StatusOr<ir::ValueId> ExportCall::Tensor(std::string_view name) {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr) return Missing(name);
  if (kind == "as_optional_tensor" && v->is_object() && v->contains("as_tensor")) {
    v = &(*v)["as_tensor"];
    kind = "as_tensor";
  }
  if (kind != "as_tensor" || !v->is_object() || !v->contains("name") ||
      !(*v)["name"].is_string()) {
    return WrongKind(name, "a tensor", kind);
  }
  return Named(name, (*v)["name"].get<std::string>());
}

absl::StatusOr<std::vector<ir::ValueId>> ExportCall::Tensors(std::string_view name) {
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> ids, OptionalTensors(name, nullptr));
  for (ir::ValueId id : ids) {
    if (id == ir::kNoValue) {
      return Unimplemented(absl::StrCat("argument '", std::string(name), "' holds None entries"));
    }
  }
  return ids;
}

absl::StatusOr<std::vector<ir::ValueId>> ExportCall::OptionalTensors(std::string_view name,
                                                                      std::vector<bool>* masks) {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr) return Missing(name);
  if ((kind != "as_tensors" && kind != "as_optional_tensors") || !v->is_array()) {
    return WrongKind(name, "a tensor list", kind);
  }
  std::vector<ir::ValueId> ids;
  if (masks != nullptr) masks->clear();
  for (const json& t : *v) {
    const json* named = &t;
    if (kind == "as_optional_tensors") {
      if (t.is_object() && t.contains("as_none")) {
        ids.push_back(ir::kNoValue);
        if (masks != nullptr) masks->push_back(false);
        continue;
      }
      if (!t.is_object() || !t.contains("as_tensor")) {
        return WrongKind(name, "a list of optional tensors", "a malformed entry");
      }
      named = &t["as_tensor"];
    }
    if (!named->is_object() || !named->contains("name") || !(*named)["name"].is_string()) {
      return WrongKind(name, "a tensor list", "a malformed entry");
    }
    const std::string value = (*named)["name"].get<std::string>();
    ASSIGN_OR_RETURN(ir::ValueId id, Named(name, value));
    ids.push_back(id);
    if (masks != nullptr) {
      // The program's tensor metadata says which indices are BOOL.
      bool mask = false;
      if (values_.tensor_values != nullptr && values_.tensor_values->is_object()) {
        auto meta = values_.tensor_values->find(value);
        if (meta != values_.tensor_values->end() && meta->contains("dtype") &&
            (*meta)["dtype"].is_number_integer()) {
          absl::StatusOr<DType> d = DTypeFromExport((*meta)["dtype"].get<int64_t>());
          mask = d.ok() && *d == DType::kBool;
        }
      }
      masks->push_back(mask);
    }
  }
  return ids;
}

std::optional<Dims> ExportCall::StaticShape(std::string_view name) const {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr || kind != "as_tensor" || values_.tensor_values == nullptr ||
      !v->is_object() || !v->contains("name") || !(*v)["name"].is_string() ||
      !values_.tensor_values->is_object()) {
    return std::nullopt;
  }
  const json& tv = *values_.tensor_values;
  auto meta = tv.find((*v)["name"].get<std::string>());
  if (meta == tv.end() || !meta->contains("sizes") || !(*meta)["sizes"].is_array()) {
    return std::nullopt;
  }
  Dims dims;
  for (const json& s : (*meta)["sizes"]) {
    if (!s.is_object() || !s.contains("as_int") || !s["as_int"].is_number_integer()) {
      return std::nullopt;
    }
    dims.push_back(s["as_int"].get<int64_t>());
  }
  return dims;
}

std::optional<Number> ExportCall::ConstNumber(std::string_view name) const {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr) return std::nullopt;
  if ((kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool" ||
       kind == "as_scalar") &&
      v->is_object() && v->size() == 1) {
    // A symbolic value that is a literal after all: {"as_int": 3}.
    kind = v->begin().key();
    v = &v->begin().value();
  }
  Number n;
  if (kind == "as_int" && v->is_number_integer()) {
    n.kind = Number::kInt;
    n.i = v->get<int64_t>();
  } else if (kind == "as_float" && ExportFloat(*v).has_value()) {
    n.kind = Number::kFloat;
    n.f = *ExportFloat(*v);
  } else if (kind == "as_bool" && v->is_boolean()) {
    n.kind = Number::kBool;
    n.b = v->get<bool>();
  } else {
    return std::nullopt;
  }
  return n;
}

absl::StatusOr<int64_t> ExportCall::Int(std::string_view name, std::optional<int64_t> def) const {
  if (!Has(name)) {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  std::optional<Number> n = ConstNumber(name);
  if (!n || n->kind == Number::kFloat) {
    std::string kind;
    Arg(name, &kind);
    if (kind == "as_sym_int") {
      return Unimplemented(absl::StrCat("argument '", std::string(name), "' is a size known only at run time"));
    }
    return WrongKind(name, "an int", kind);
  }
  return n->kind == Number::kInt ? n->i : static_cast<int64_t>(n->b);
}

absl::StatusOr<double> ExportCall::Double(std::string_view name, std::optional<double> def) const {
  if (!Has(name)) {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  std::optional<Number> n = ConstNumber(name);
  if (!n) {
    std::string kind;
    Arg(name, &kind);
    return WrongKind(name, "a number", kind);
  }
  return n->ToDouble();
}

absl::StatusOr<bool> ExportCall::Bool(std::string_view name, std::optional<bool> def) const {
  if (!Has(name)) {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  std::optional<Number> n = ConstNumber(name);
  if (!n || n->kind == Number::kFloat) {
    std::string kind;
    Arg(name, &kind);
    return WrongKind(name, "a bool", kind);
  }
  return n->kind == Number::kBool ? n->b : n->i != 0;
}

absl::StatusOr<std::string> ExportCall::String(std::string_view name,
                                               std::optional<std::string> def) const {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr || kind == "as_none") {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  if (kind != "as_string" || !v->is_string()) return WrongKind(name, "a string", kind);
  return v->get<std::string>();
}

absl::StatusOr<std::vector<int64_t>> ExportCall::Ints(
    std::string_view name, std::optional<std::vector<int64_t>> def) const {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr || kind == "as_none") {
    if (def.has_value()) return *def;
    return Missing(name);
  }
  std::vector<int64_t> out;
  if (kind == "as_int" && v->is_number_integer()) return std::vector<int64_t>{v->get<int64_t>()};
  if ((kind == "as_ints" || kind == "as_sym_ints") && v->is_array()) {
    for (const json& e : *v) {
      if (e.is_number_integer()) {
        out.push_back(e.get<int64_t>());
      } else if (e.is_object() && e.contains("as_int") && e["as_int"].is_number_integer()) {
        out.push_back(e["as_int"].get<int64_t>());
      } else {
        return Unimplemented(
            absl::StrCat("argument '", std::string(name), "' holds sizes known only at run time"));
      }
    }
    return out;
  }
  return WrongKind(name, "an int list", kind);
}

absl::StatusOr<ir::ValueId> ExportCall::SymIntValue(std::string_view arg, const json& sym) {
  if (sym.is_object() && sym.contains("as_int") && sym["as_int"].is_number_integer()) {
    return cx_.AddInt(sym["as_int"].get<int64_t>());
  }
  if (sym.is_object() && sym.contains("as_name") && sym["as_name"].is_string()) {
    return Named(arg, sym["as_name"].get<std::string>());
  }
  return WrongKind(arg, "a symbolic int", "a malformed one");
}

absl::StatusOr<IntsArg> ExportCall::IntsOrValue(std::string_view name) {
  IntsArg arg;
  absl::StatusOr<std::vector<int64_t>> constant = Ints(name, std::nullopt);
  if (constant.ok()) {
    arg.values = *std::move(constant);
    return arg;
  }
  if (!absl::IsUnimplemented(constant.status())) return constant.status();
  std::string kind;
  const json* v = Arg(name, &kind);
  std::vector<ir::ValueId> elements;
  for (const json& e : *v) {
    ASSIGN_OR_RETURN(ir::ValueId id, SymIntValue(name, e));
    elements.push_back(id);
  }
  arg.value = cx_.EmitValue(*this, ir::OpKind::kListConstruct, ir::ValueKind::kIntList,
                            std::move(elements));
  return arg;
}

absl::StatusOr<std::optional<std::vector<double>>> ExportCall::OptionalDoubles(
    std::string_view name) const {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr || kind == "as_none") return std::optional<std::vector<double>>();
  if (kind != "as_floats" || !v->is_array()) return WrongKind(name, "a float list", kind);
  std::vector<double> out;
  for (const json& e : *v) {
    if (!e.is_number()) {
      return Unimplemented(
          absl::StrCat("argument '", std::string(name), "' holds values known only at run time"));
    }
    out.push_back(e.get<double>());
  }
  return std::optional<std::vector<double>>(std::move(out));
}

absl::StatusOr<std::optional<DType>> ExportCall::ScalarType(std::string_view name) const {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr || kind == "as_none") return std::optional<DType>();
  if (kind != "as_scalar_type" || !v->is_number_integer()) {
    return WrongKind(name, "a scalar type", kind);
  }
  ASSIGN_OR_RETURN(DType d, DTypeFromExport(v->get<int64_t>()));
  return std::optional<DType>(d);
}

bool ExportCall::IsScalar(std::string_view name) const {
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr) return false;
  return kind == "as_int" || kind == "as_float" || kind == "as_bool" || kind == "as_sym_int" ||
         kind == "as_sym_float" || kind == "as_sym_bool" || kind == "as_scalar";
}

absl::StatusOr<ir::ValueId> ExportCall::ScalarValue(std::string_view name) {
  if (std::optional<Number> n = ConstNumber(name)) return cx_.AddNumber(*n);
  std::string kind;
  const json* v = Arg(name, &kind);
  if (v == nullptr) return Missing(name);
  if ((kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") &&
      v->is_object() && v->contains("as_name") && (*v)["as_name"].is_string()) {
    return Named(name, (*v)["as_name"].get<std::string>());
  }
  return WrongKind(name, "a number", kind);
}

}  // namespace kiln::importer
