// A node of an ExportedProgram whose op has no row in the shared aten table
// becomes a Fallback node: the op runs through libtorch's operator registry
// (engine/fallback/fallback_kernel.cc) where the server has libtorch. The
// node's arguments are named, in schema order, and those at their defaults
// are left out (the serializer drops them), so the Fallback node records
// their names ("arg_names") beside the spec of engine/importer/torchscript/
// fallback_convert.cc, and libtorch's schema supplies the defaults when the
// op is prepared. Nothing here needs libtorch.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/importer/export/program_importer.h"

namespace kiln::importer::export_internal {

absl::StatusOr<std::vector<ir::ValueId>> ProgramImporter::Fallback(const json& node,
                                                                   ExportCall& call) {
  ir::Attributes attrs;
  attrs.SetString("op", std::string(call.op()));
  attrs.SetString("overload", std::string(call.overload()));
  std::vector<ir::ValueId> inputs;
  std::vector<std::string> spec, names;
  const json& args = Field(node, "inputs");
  if (!args.is_array()) return call.InvalidArgument("has no argument list");
  for (const json& in : args) {
    const json& name_json = Field(in, "name");
    const json& arg = Field(in, "arg");
    if (!name_json.is_string() || name_json.get<std::string>().empty() || !arg.is_object() ||
        arg.size() != 1) {
      return call.Unimplemented("has an argument without a name, which Kiln cannot pass to libtorch");
    }
    const std::string name = name_json.get<std::string>();
    const std::string kind = arg.begin().key();
    const json& v = arg.begin().value();
    const std::string attr = absl::StrCat("arg", names.size());
    std::string what = "const";
    if (kind == "as_tensor") {
      ASSIGN_OR_RETURN(ir::ValueId id, call.Tensor(name));
      inputs.push_back(id);
      what = "in";
    } else if (kind == "as_tensors" || kind == "as_optional_tensors") {
      std::vector<ir::ValueId> ids;
      if (kind == "as_tensors") {
        ASSIGN_OR_RETURN(ids, call.Tensors(name));
      } else {
        ASSIGN_OR_RETURN(ids, call.OptionalTensors(name, nullptr));
      }
      inputs.insert(inputs.end(), ids.begin(), ids.end());
      what = absl::StrCat("list:", ids.size());
    } else if (kind == "as_none") {
      what = "none";
    } else if (kind == "as_int" && v.is_number_integer()) {
      attrs.SetInt(attr, v.get<int64_t>());
    } else if (kind == "as_float" && ExportFloat(v).has_value()) {
      attrs.SetFloat(attr, *ExportFloat(v));
    } else if (kind == "as_bool" && v.is_boolean()) {
      attrs.SetBool(attr, v.get<bool>());
    } else if (kind == "as_string" && v.is_string()) {
      attrs.SetString(attr, v.get<std::string>());
    } else if (kind == "as_ints" || kind == "as_sym_ints") {
      ASSIGN_OR_RETURN(IntsArg ints, call.IntsOrValue(name));
      if (ints.values.has_value()) {
        attrs.SetInts(attr, *ints.values);
      } else {
        inputs.push_back(ints.value);
        what = "in";
      }
    } else if (kind == "as_floats" && v.is_array()) {
      std::vector<double> floats;
      for (const json& f : v) {
        if (!f.is_number()) return call.InvalidArgument(absl::StrCat(name, ": a malformed float list"));
        floats.push_back(f.get<double>());
      }
      attrs.SetFloats(attr, std::move(floats));
    } else if (kind == "as_bools" && v.is_array()) {
      std::vector<int64_t> bools;
      for (const json& b : v) {
        if (!b.is_boolean()) return call.InvalidArgument(absl::StrCat(name, ": a malformed bool list"));
        bools.push_back(b.get<bool>() ? 1 : 0);
      }
      attrs.SetInts(attr, std::move(bools));
    } else if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
      ASSIGN_OR_RETURN(ir::ValueId id, call.ScalarValue(name));
      inputs.push_back(id);
      what = "in";
    } else if ((kind == "as_scalar_type" || kind == "as_memory_format") && v.is_number_integer()) {
      std::optional<int64_t> c10 = kind == "as_scalar_type"
                                       ? C10ScalarTypeFromExport(v.get<int64_t>())
                                       : C10MemoryFormatFromExport(v.get<int64_t>());
      if (!c10.has_value()) {
        return call.Unimplemented(absl::StrCat(name, ": ", kind.substr(3), " ", v.dump(),
                                               ", which Kiln cannot pass to libtorch"));
      }
      attrs.SetInt(attr, *c10);
    } else if (kind == "as_layout" && v.is_number_integer() && v.get<int64_t>() == 7) {
      attrs.SetInt(attr, 0);  // Strided
    } else if (kind == "as_device" && v.is_object() && Field(v, "type") == "cpu") {
      attrs.SetString(attr, "cpu");
    } else {
      return call.Unimplemented(absl::StrCat("argument '", name, "' is a '", kind,
                                             "', which Kiln cannot pass to libtorch"));
    }
    spec.push_back(what);
    names.push_back(name);
  }
  attrs.SetString("args", absl::StrJoin(spec, ";"));
  attrs.SetString("arg_names", absl::StrJoin(names, ";"));
  const std::string op_name = call.overload().empty()
                                  ? std::string(call.op())
                                  : absl::StrCat(std::string(call.op()), ".", std::string(call.overload()));
  attrs.SetString("schema", absl::StrCat(op_name, "(", absl::StrJoin(names, ", "),
                                         ") (named by torch.export; libtorch's schema applies)"));
  // Results: tensors, or one tensor list whose elements the program names.
  const json& outputs = Field(node, "outputs");
  std::vector<std::string> out_names;
  int unpack = -1;
  for (const json& out : outputs) {
    const std::string kind = out.is_object() && out.size() == 1 ? out.begin().key() : "";
    if (kind == "as_tensor") {
      out_names.push_back(call.OutputName(out_names.size()));
    } else if (kind == "as_tensors" && outputs.size() == 1 && out.begin().value().is_array()) {
      unpack = static_cast<int>(out.begin().value().size());
      for (int e = 0; e < unpack; ++e) out_names.push_back(absl::StrCat(call.OutputName(0), ".", e));
    } else {
      return call.Unimplemented(absl::StrCat("returns a '", kind,
                                             "', which Kiln cannot take from libtorch"));
    }
  }
  if (unpack >= 0) attrs.SetInt("unpack", unpack);
  ir::Graph& g = cx_.graph();
  const int num_outputs = static_cast<int>(out_names.size());
  const ir::NodeId id = g.AddNodeWithOutputs(ir::OpKind::kFallback, std::move(inputs),
                                             num_outputs, std::move(attrs),
                                             std::string(call.op()), std::move(out_names));
  std::vector<ir::ValueId> outs = g.node(id).outputs;
  if (unpack >= 0) return std::vector<ir::ValueId>{cx_.MakeTensorList(call, std::move(outs))};
  return outs;
}

}  // namespace kiln::importer::export_internal
