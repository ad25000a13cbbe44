// The torch.export front's archive (program_importer.h): the PT2 layout or
// torch 2.1-2.7's found and told apart from an AOTInductor package or a
// TorchScript archive, the program JSON parsed without exceptions and its
// schema major version checked, and the weights and constants read from
// data/weights and data/constants with their sizes, strides and offsets
// checked against the file.
//
// Weights: given an owner of the archive's bytes (a mapping of the file), a
// weight entry stored uncompressed whose tensor starts 64-byte aligned (torch
// aligns every entry's data so) becomes a constant that views the archive in
// place; a deflated or misaligned one, or any without an owner, is copied out
// once. The older layout's pickled weights are always copied.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/export/program_importer.h"
#include "engine/importer/export/torch_save.h"

namespace kiln::importer::export_internal {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("PT2 archive: ", what));
}

// ------------------------------------------------------------ the archive

namespace {

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

}  // namespace

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

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadSampleInputs(const Program& p) {
  const std::string file = p.legacy ? "serialized_example_inputs.pt"
                                    : absl::StrCat("data/sample_inputs/", p.model, ".pt");
  const ZipEntry* entry = p.zip.Find(p.root + file);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("the archive has no ", file));
  ASSIGN_OR_RETURN(std::string bytes, p.zip.Read(*entry));
  return ReadTorchSaveSampleInputs(bytes, file);
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

namespace {

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

}  // namespace

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

}  // namespace kiln::importer::export_internal
