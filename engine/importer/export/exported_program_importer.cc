// The torch.export front. Stages:
//   1. The archive: find <root>/archive_format ("pt2") and <root>/models/<name>.json,
//      or torch 2.1-2.7's <root>/serialized_exported_program.json (an AOTInductor
//      package or a TorchScript archive are told apart and refused with their own
//      message).
//   2. The program: JSON parsed without exceptions, schema major version checked.
//   3. Unsupported ops: every node's target looked up first, so one error lists all.
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
// Weights: given an owner of the archive's bytes (a mapping of the file), a
// weight entry stored uncompressed whose tensor starts 64-byte aligned (torch
// aligns every entry's data so) becomes a constant that views the archive in
// place; a deflated or misaligned one, or any without an owner, is copied out
// once. The older layout's pickled weights are always copied.
#include "engine/importer/export/exported_program_importer.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"
#include "engine/importer/export/export_call.h"
#include "engine/importer/export/pt2_archive.h"
#include "engine/importer/export/torch_save.h"

namespace kiln::importer {
namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("PT2 archive: ", what));
}

// ------------------------------------------------------------ the archive

struct Program {
  ZipArchive zip;
  std::string root;   // "resnet18/"
  std::string model;  // "model"
  json ep;
  // Keeps the archive's bytes alive for constants that view them; null when
  // the caller's bytes may not outlive the import (every weight is copied).
  std::shared_ptr<const void> owner;
  // The layout of torch 2.1-2.7: serialized_exported_program.json, its
  // parameters and buffers in serialized_state_dict.pt and its lifted
  // constants (and non-persistent buffers) in serialized_constants.pt,
  // both torch.save pickles, read when the inputs are bound.
  bool legacy = false;
};

// The program's JSON: checked to be an ExportedProgram of a schema major
// version Kiln reads. `name` names the entry in messages.
absl::Status ParseProgramJson(Program& p, const std::string& text, const std::string& name) {
  p.ep = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (p.ep.is_discarded()) return Invalid(absl::StrCat(name, " is not JSON"));
  if (!p.ep.is_object() || !p.ep.contains("graph_module") || !p.ep.contains("schema_version") ||
      !p.ep["graph_module"].is_object() || !p.ep["graph_module"].contains("graph")) {
    return Invalid(absl::StrCat(name,
                                " is not a serialized ExportedProgram (no graph_module, "
                                "graph or schema_version)"));
  }
  const json& version = p.ep["schema_version"];
  if (!version.is_object() || !version.contains("major") ||
      !version["major"].is_number_integer()) {
    return Invalid("schema_version has no major version");
  }
  if (version["major"].get<int64_t>() != kExportSchemaMajor) {
    return Invalid(absl::StrCat("schema major version ", version["major"].get<int64_t>(),
                                "; Kiln reads version ", kExportSchemaMajor,
                                " (torch 2.6 to 2.14)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Program> OpenProgram(std::string_view bytes) {
  if (!LooksLikeZip(bytes)) return Invalid("not a zip archive");
  ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::Open(bytes));
  Program p{std::move(zip), "", "", json()};
  const ZipEntry* format = nullptr;
  const ZipEntry* legacy = nullptr;
  bool aoti = false, torchscript = false;
  for (const ZipEntry& e : p.zip.entries()) {
    const std::string& n = e.name;
    if (n == "archive_format" || absl::EndsWith(n, "/archive_format")) {
      if (format == nullptr || n.size() < format->name.size()) format = &e;
    }
    aoti |= absl::StrContains(n, "data/aotinductor/");
    if (n == "serialized_exported_program.json" ||
        absl::EndsWith(n, "/serialized_exported_program.json")) {
      if (legacy == nullptr || n.size() < legacy->name.size()) legacy = &e;
    }
    torchscript |= absl::EndsWith(n, "/data.pkl") && !absl::StrContains(n, "/data/");
  }
  if (format == nullptr) {
    if (legacy != nullptr) {
      // torch 2.1-2.7's layout: the same ExportedProgram JSON, weights pickled.
      p.legacy = true;
      p.root = legacy->name.substr(
          0, legacy->name.size() - std::string("serialized_exported_program.json").size());
      ASSIGN_OR_RETURN(std::string text, p.zip.Read(*legacy));
      RETURN_IF_ERROR(ParseProgramJson(p, text, legacy->name));
      return p;
    }
    if (torchscript) return Invalid("this is a TorchScript archive, not an ExportedProgram");
    return Invalid("no archive_format entry: not written by torch.export.save");
  }
  p.root = format->name.substr(0, format->name.size() - std::string("archive_format").size());
  ASSIGN_OR_RETURN(std::string kind, p.zip.Read(*format));
  if (kind.rfind("pt2", 0) != 0) {
    return Invalid(absl::StrCat("archive_format is '", kind.substr(0, 32), "', not 'pt2'"));
  }
  // models/<name>.json: "model" unless the archive holds only others.
  std::vector<std::string> models;
  const std::string prefix = p.root + "models/";
  for (const ZipEntry& e : p.zip.entries()) {
    if (absl::StartsWith(e.name, prefix) && absl::EndsWith(e.name, ".json") &&
        e.name.find('/', prefix.size()) == std::string::npos) {
      models.push_back(e.name.substr(prefix.size(), e.name.size() - prefix.size() - 5));
    }
  }
  if (models.empty()) {
    if (aoti) {
      return Invalid(
          "this is an AOTInductor package (compiled code, data/aotinductor/), not an "
          "ExportedProgram; save the program itself with torch.export.save");
    }
    return Invalid(absl::StrCat("no ", prefix, "<name>.json (the serialized ExportedProgram)"));
  }
  std::sort(models.begin(), models.end());
  p.model = std::find(models.begin(), models.end(), "model") != models.end() ? "model" : models[0];
  ASSIGN_OR_RETURN(std::string text, p.zip.Read(*p.zip.Find(prefix + p.model + ".json")));
  RETURN_IF_ERROR(ParseProgramJson(p, text, absl::StrCat("models/", p.model, ".json")));
  return p;
}

// ------------------------------------------------------------ tensors

const json& Field(const json& j, const char* key) {
  static const json* const kNull = new json();
  if (!j.is_object()) return *kNull;
  auto it = j.find(key);
  return it == j.end() ? *kNull : *it;
}

// {"as_int": 3} -> 3; nullopt for a symbolic size.
std::optional<int64_t> SymIntLiteral(const json& s) {
  const json& v = Field(s, "as_int");
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

// "Symbol('s43', positive=True, integer=True)" or "s43" -> "s43".
std::string SymbolName(const json& s) {
  const json& e = Field(Field(s, "as_expr"), "expr_str");
  if (!e.is_string()) return "?";
  std::string str = e.get<std::string>();
  const size_t q = str.find('\'');
  if (str.rfind("Symbol(", 0) == 0 && q != std::string::npos) {
    const size_t q2 = str.find('\'', q + 1);
    if (q2 != std::string::npos) return str.substr(q + 1, q2 - q - 1);
  }
  return str;
}

// A weight or constant: the raw file `file` holding storage for `meta`
// (dtype, sizes, strides, storage_offset in elements), as a contiguous tensor.
absl::StatusOr<Tensor> ReadTensor(const Program& p, const std::string& what,
                                  const std::string& file, const json& meta) {
  const json& dtype_j = Field(meta, "dtype");
  if (!dtype_j.is_number_integer()) return Invalid(absl::StrCat(what, ": no dtype"));
  ASSIGN_OR_RETURN(DType dtype, DTypeFromExport(dtype_j.get<int64_t>()));
  const json& layout = Field(meta, "layout");
  if (layout.is_number_integer() && layout.get<int64_t>() != 7) {  // Layout.Strided
    return absl::UnimplementedError(absl::StrCat(what, " is not a dense (strided) tensor"));
  }
  const json& sizes_j = Field(meta, "sizes");
  const json& strides_j = Field(meta, "strides");
  if (!sizes_j.is_array() || !strides_j.is_array() || sizes_j.size() != strides_j.size() ||
      sizes_j.size() > 16) {
    return Invalid(absl::StrCat(what, ": sizes and strides do not match"));
  }
  Dims dims, strides;
  for (size_t i = 0; i < sizes_j.size(); ++i) {
    std::optional<int64_t> size = SymIntLiteral(sizes_j[i]);
    std::optional<int64_t> stride = SymIntLiteral(strides_j[i]);
    if (!size || !stride) return Invalid(absl::StrCat(what, ": size or stride ", i, " is symbolic"));
    dims.push_back(*size);
    strides.push_back(*stride);
  }
  std::optional<int64_t> offset = SymIntLiteral(Field(meta, "storage_offset"));
  const ZipEntry* entry = p.zip.Find(file);
  if (entry == nullptr) return Invalid(absl::StrCat(what, ": the archive has no ", file));
  // A stored entry (torch stores its weights so) is read where it lies in the
  // archive: viewed there when p.owner keeps the bytes and the tensor is
  // contiguous and aligned (TensorFromStorage), else copied once into the
  // constant. A deflated one is inflated first, then copied.
  //
  // Views may overlap: tied weights (two parameters of one storage) name the
  // same file, and both constants then view the same bytes, as they do in
  // torch. That is safe because nothing writes a constant in place: the ir
  // hands constants out only as const Tensor* (Graph::ConstantValue,
  // AttrMap::GetTensor), kernels read their inputs through const Tensor*,
  // constant folding and batch-norm folding write fresh tensors, prepacking
  // reorders into memory of its own, the memory planner gives constants no
  // arena buffer (so no in-place kernel takes one over) and the libtorch
  // fallback clones an argument its schema writes. The mapping is read-only
  // (PROT_READ), so a write that slipped past all this would fault rather
  // than change another constant; and the compiled-graph cache has always
  // served constants from such a mapping. export_importer_test checks that
  // compiling and running a real model leaves the archive's bytes unchanged.
  if (entry->method == 0) {
    ASSIGN_OR_RETURN(std::string_view data, p.zip.View(*entry));
    return TensorFromStorage(what, dtype, dims, strides, offset.value_or(0), data, file, p.owner);
  }
  ASSIGN_OR_RETURN(std::string data, p.zip.Read(*entry));
  return TensorFromStorage(what, dtype, dims, strides, offset.value_or(0), data, file);
}

// The weights (data/weights/) or constants (data/constants/) config:
// fqn -> {path_name, use_pickle, tensor_meta}.
absl::StatusOr<json> ReadConfig(const Program& p, const std::string& dir, const std::string& kind) {
  const std::string name = absl::StrCat(p.root, "data/", dir, "/", p.model, "_", kind, "_config.json");
  const ZipEntry* entry = p.zip.Find(name);
  if (entry == nullptr) return json::object();
  ASSIGN_OR_RETURN(std::string text, p.zip.Read(*entry));
  json cfg = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !Field(cfg, "config").is_object()) {
    return Invalid(absl::StrCat(name, " is not a weights config"));
  }
  return cfg["config"];
}

absl::StatusOr<Tensor> ReadNamed(const Program& p, const json& config, const std::string& dir,
                                 const std::string& fqn, absl::string_view what) {
  const json& entry = Field(config, fqn.c_str());
  if (!entry.is_object()) {
    return Invalid(absl::StrCat(what, " '", fqn, "' is not in data/", dir, "/"));
  }
  if (Field(entry, "use_pickle").is_boolean() && entry["use_pickle"].get<bool>()) {
    return absl::UnimplementedError(absl::StrCat(
        what, " '", fqn, "' is stored as a torch.save pickle; Kiln reads raw tensor files"));
  }
  const json& path = Field(entry, "path_name");
  if (!path.is_string()) return Invalid(absl::StrCat(what, " '", fqn, "' has no path_name"));
  return ReadTensor(p, absl::StrCat(what, " '", fqn, "'"),
                    absl::StrCat(p.root, "data/", dir, "/", path.get<std::string>()),
                    Field(entry, "tensor_meta"));
}

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

// Ops whose result shares its input's storage ("self").
bool IsViewOp(const std::string& op) {
  static const std::set<std::string>* const kViews = new std::set<std::string>{
      "aten::view", "aten::_unsafe_view", "aten::alias", "aten::select", "aten::slice",
      "aten::expand", "aten::transpose", "aten::t", "aten::permute", "aten::unsqueeze",
      "aten::squeeze", "aten::as_strided", "aten::detach", "aten::reshape", "aten::flatten",
      "aten::unflatten", "aten::narrow", "aten::diagonal", "aten::view_as", "aten::expand_as"};
  return kViews->count(op) > 0;
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

// ------------------------------------------------------------ output names

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
  if (type.is_string() && type.get<std::string>() == "builtins.dict") {
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

std::vector<std::string> OutputNames(const json& module_call_graph) {
  std::vector<std::string> names;
  if (!module_call_graph.is_array()) return names;
  for (const json& entry : module_call_graph) {
    const json& fqn = Field(entry, "fqn");
    if (!fqn.is_string() || !fqn.get<std::string>().empty()) continue;
    const json& out_spec = Field(Field(entry, "signature"), "out_spec");
    if (!out_spec.is_string()) break;
    json spec = json::parse(out_spec.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!spec.is_array() || spec.size() != 2) break;
    Leaves(spec[1], std::nullopt, names);
  }
  return names;
}

std::vector<std::string> ForwardArgNames(const json& module_call_graph) {
  std::vector<std::string> names;
  if (!module_call_graph.is_array()) return names;
  for (const json& entry : module_call_graph) {
    const json& fqn = Field(entry, "fqn");
    if (!fqn.is_string() || !fqn.get<std::string>().empty()) continue;
    const json& args = Field(Field(entry, "signature"), "forward_arg_names");
    if (!args.is_array()) break;
    for (const json& a : args) {
      if (a.is_string()) names.push_back(a.get<std::string>());
    }
  }
  return names;
}

// ------------------------------------------------------------ the graph

// torch.cond and torch.ops.higher_order.while_loop: control flow whose
// branches, condition and body are subgraphs among the node's positional
// arguments ({"as_graph": {"name": ..., "graph": {...}}}).
constexpr char kCond[] = "higher_order::cond";
constexpr char kWhileLoop[] = "higher_order::while_loop";
bool IsControlFlow(const std::string& op) { return op == kCond || op == kWhileLoop; }

// Subgraphs nest no deeper (a hostile archive cannot exhaust the stack).
constexpr int kMaxSubgraphDepth = 32;

// The positional arguments of a higher-order op (their names are empty).
std::vector<const json*> PositionalArgs(const json& node) {
  std::vector<const json*> args;
  const json& inputs = Field(node, "inputs");
  if (!inputs.is_array()) return args;
  for (const json& in : inputs) args.push_back(&Field(in, "arg"));
  return args;
}

absl::Status CollectUnsupported(const json& nodes, int depth, std::set<std::string>& missing) {
  if (depth > kMaxSubgraphDepth) {
    return Invalid(absl::StrCat("subgraphs nest more than ", kMaxSubgraphDepth, " deep"));
  }
  if (!nodes.is_array()) return Invalid("a graph has no node list");
  for (const json& node : nodes) {
    const json& target = Field(node, "target");
    if (!target.is_string()) return Invalid("a graph node has no target");
    const Target t = ParseTarget(target.get<std::string>());
    if (IsAssertion(t.op) || SymArithmetic(t.op).has_value()) continue;
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

class ProgramImporter {
 public:
  ProgramImporter(const Program& p, const ImportOptions& options, ExportedProgramInfo* info)
      : p_(p), options_(options), info_(info), cx_(&g_) {}

  absl::StatusOr<ir::Graph> Run() {
    const json& gm = p_.ep["graph_module"];
    const json& graph = gm["graph"];
    const json& nodes = Field(graph, "nodes");
    if (!nodes.is_array()) return Invalid("the graph has no node list");
    values_.tensor_values = &Field(graph, "tensor_values");
    ASSIGN_OR_RETURN(std::vector<std::string> missing, Unsupported(nodes));
    if (!missing.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          "Kiln has no translation for ", missing.size(), " op(s) of this program: ",
          absl::StrJoin(missing, ", ")));
    }
    RETURN_IF_ERROR(Inputs(gm));
    for (const json& node : nodes) RETURN_IF_ERROR(Node(node, next_index_++));
    RETURN_IF_ERROR(Outputs(gm));
    if (absl::Status s = ir::VerifyGraph(g_); !s.ok()) {
      return absl::InternalError(absl::StrCat("imported graph is malformed: ", s.message()));
    }
    return g_.Compacted();
  }

 private:
  // torch 2.1-2.7's layout: the pickled state dict and constants, by name.
  absl::Status ReadLegacyState() {
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

  // A parameter or buffer is in the state dict (a non-persistent buffer in
  // the constants), a lifted constant in the constants.
  absl::StatusOr<Tensor> LegacyTensor(const std::string& name, const std::string& kind) {
    const bool constant = kind == "tensor_constant";
    for (const auto* m : {constant ? &legacy_constants_ : &legacy_state_,
                          constant ? &legacy_state_ : &legacy_constants_}) {
      if (auto it = m->find(name); it != m->end()) return it->second;
    }
    return Invalid(absl::StrCat(kind, " '", name, "' is in neither serialized_state_dict.pt ",
                                "nor serialized_constants.pt"));
  }

  absl::Status Inputs(const json& gm) {
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

  absl::Status Node(const json& node, int index) {
    const Target t = ParseTarget(node["target"].get<std::string>());
    if (IsAssertion(t.op)) return absl::OkStatus();
    ExportCall call(node, index, t.op, t.overload, values_, cx_);
    const json& outputs = Field(node, "outputs");
    if (!outputs.is_array()) return call.InvalidArgument("has no outputs list");
    if (IsControlFlow(t.op)) return ControlFlow(node, t.op, call);
    std::vector<ir::ValueId> results;
    if (std::optional<ir::OpKind> arith = SymArithmetic(t.op)) {
      // _operator.mul(a, b): positional arguments, ints known only at run time.
      const json& inputs = Field(node, "inputs");
      if (!inputs.is_array() || inputs.size() != 2) return call.InvalidArgument("expects 2 operands");
      std::vector<ir::ValueId> operands;
      for (const json& in : inputs) {
        const std::string arg = Field(in, "name").is_string() ? in["name"].get<std::string>() : "";
        ASSIGN_OR_RETURN(ir::ValueId v, call.ScalarValue(arg));
        operands.push_back(v);
      }
      results.push_back(
          cx_.EmitValue(call, *arith, ir::ValueKind::kInt, std::move(operands)));
    } else {
      RETURN_IF_ERROR(RefuseStateMutation(node, call, t.op));
      AtenConverter convert = FindAtenConverter(OutOfPlaceOp(t.op));
      if (convert == nullptr) return call.Unimplemented("has no translation");
      ASSIGN_OR_RETURN(results, convert(call, cx_));
    }
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
      } else if (kind == "as_sym_int" && Field(v, "as_name").is_string()) {
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
    // In-place ops of the training IR (relu_, add_): later readers of the
    // mutated tensor ("self", or dropout_'s "input") see the result.
    if (OutOfPlaceOp(t.op) != t.op && !results.empty()) {
      const std::string mutated = TensorArgName(node, call.Has("self") ? "self" : "input");
      if (!mutated.empty()) values_.bound[mutated] = results[0];
    }
    // A view of a parameter, buffer or constant is that state too.
    if (depth_ == 0 && IsViewOp(t.op) && call.num_outputs() == 1) {
      if (auto it = state_.find(TensorArgName(node, "self")); it != state_.end()) {
        state_[call.OutputName(0)] = it->second;
      }
    }
    return absl::OkStatus();
  }

  // An in-place op (add_) on a parameter, buffer or constant, or a view of
  // one: the training IR keeps such a mutation in the graph (not as a
  // buffer_mutation output), and it is state kept between calls.
  // (Subgraphs of cond and while_loop may not mutate their inputs.)
  absl::Status RefuseStateMutation(const json& node, const ExportCall& call,
                                   const std::string& op) {
    // detach_ changes no data.
    if (OutOfPlaceOp(op) == op || op == "aten::detach_" || depth_ > 0) return absl::OkStatus();
    auto it = state_.find(TensorArgName(node, call.Has("self") ? "self" : "input"));
    if (it == state_.end()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "PT2 archive: the program mutates ", it->second, " in place (", call.Where(),
        "state kept between calls); Kiln serves programs without mutated state"));
  }

  // ---- control flow: torch.cond -> If, while_loop -> Loop ----

  // The names of a control-flow node's tensor results, flattened: each
  // {"as_tensor"} output, or the elements of one {"as_tensors"} output.
  static absl::StatusOr<std::vector<std::string>> ResultNames(const json& outputs,
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

  // The ir values of a {"as_tensors": [...]} argument (cond's operands,
  // while_loop's carried and additional inputs).
  absl::StatusOr<std::vector<ir::ValueId>> TensorList(const json& arg, const ExportCall& call,
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

  // Translates subgraph `arg` ({"as_graph": {"name", "graph"}}) into the
  // insertion block with its inputs bound to `args`, in order. Its names are
  // its own (a subgraph's "x" is not the caller's): it sees only its inputs.
  // Returns the ir values of its outputs.
  absl::StatusOr<std::vector<ir::ValueId>> Subgraph(const json& arg, const ExportCall& call,
                                                    const std::vector<ir::ValueId>& args) {
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

  // cond(pred, true_graph, false_graph, operands) -> If(pred){then}{else};
  // while_loop(cond_graph, body_graph, carried, additional) ->
  //   Loop(max, cond_graph(carried, additional), carried...)
  //     body(i, c...) { n... = body_graph(c..., additional); yield cond_graph(n..., additional), n... }
  absl::Status ControlFlow(const json& node, const std::string& op, const ExportCall& call) {
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

  absl::Status Outputs(const json& gm) {
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

  const Program& p_;
  const ImportOptions& options_;
  ExportedProgramInfo* info_;
  ir::Graph g_;
  ConvertContext cx_;
  ExportValues values_;  // the graph's names, or the subgraph's being translated
  int next_index_ = 0;   // numbers nodes in messages, subgraphs' included
  int depth_ = 0;        // of the subgraph being translated
  // The program's names for its parameters, buffers and constants, and for
  // views of them -> what they are ("buffer 'calls'").
  std::map<std::string, std::string> state_;
  std::map<std::string, Tensor> legacy_state_;      // serialized_state_dict.pt
  std::map<std::string, Tensor> legacy_constants_;  // serialized_constants.pt
};

}  // namespace

absl::StatusOr<ir::Graph> ImportExportedProgram(std::string_view bytes,
                                                const ImportOptions& options,
                                                ExportedProgramInfo* info) {
  return ImportExportedProgram(bytes, nullptr, options, info);
}

absl::StatusOr<ir::Graph> ImportExportedProgram(std::string_view bytes,
                                                std::shared_ptr<const void> owner,
                                                const ImportOptions& options,
                                                ExportedProgramInfo* info) {
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

}  // namespace kiln::importer
