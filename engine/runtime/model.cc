#include "engine/runtime/model.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "engine/passes/input_contract.h"

namespace kiln::runtime {
namespace {

// Why a dtype is fixed, for error messages.
std::string SourceText(const std::string& source) {
  if (source == "declared") return "declared in the load config";
  if (source == "implied") return "implied by the ops using it";
  if (source == "model") return "recorded in the model file";
  if (source == "argument") return "the parameter's type";
  return "fixed";
}

// "FP32[-1, 16]", "any datatype[-1, 16]", "INT64[any rank]".
std::string SpecString(const TensorSpec& spec) {
  std::string dims = spec.dims ? DimsToString(*spec.dims) : "[any rank]";
  if (spec.dims && spec.any_leading_dims && !spec.dims->empty()) {
    // [-1, 16] taking any leading dims: "[..., 16]".
    dims = absl::StrCat("[...", spec.dims->size() > 1 ? ", " : "",
                        DimsToString(Dims(spec.dims->begin() + 1, spec.dims->end())).substr(1));
  }
  return absl::StrCat(spec.dtype == DType::kUnknown ? "any datatype" : DTypeName(spec.dtype), dims);
}

// "[1]" for a numeric part of a structured name, "['key']" for any other.
std::string PathPart(absl::string_view part) {
  const bool numeric =
      !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
  return numeric ? absl::StrCat("[", part, "]") : absl::StrCat("['", part, "']");
}

// Where the importer's output name puts the value in forward()'s result:
// "output1.0" -> "result[1][0]", "logits" -> "result['logits']".
std::string OutputPath(const std::string& name) {
  if (name == "output") return "result";  // a list that is the whole result
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  std::string path = "result";
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::string_view part = parts[i];
    if (i == 0 && absl::StartsWith(part, "output") && part.size() > 6 &&
        std::all_of(part.begin() + 6, part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      part.remove_prefix(6);  // "output1" is position 1; "outputs" is a dict key
    }
    absl::StrAppend(&path, PathPart(part));
  }
  return path;
}

// The name element `k` of tensor-list output `name` comes back as:
// "<name>.<k>", or "output<k>" for "output", a result that is a list as a
// whole (its elements are the result's positions, like a tuple's).
std::string ListOutputElement(const std::string& name, size_t k) {
  return name == "output" ? absl::StrCat(name, k) : absl::StrCat(name, ".", k);
}

// A flattened tuple parameter "pair.1" -> "pair[1]".
std::string InputPath(const std::string& name) {
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  std::string path(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) absl::StrAppend(&path, PathPart(parts[i]));
  return path;
}

// The position `name` has as a Triton alias ("INPUT__3" with prefix "INPUT__"), if it is one.
std::optional<size_t> AliasPosition(absl::string_view name, absl::string_view prefix) {
  if (!absl::StartsWith(name, prefix)) return std::nullopt;
  size_t position = 0;
  if (!absl::SimpleAtoi(name.substr(prefix.size()), &position)) return std::nullopt;
  if (absl::StrCat(prefix, position) != name) return std::nullopt;  // "INPUT__01"
  return position;
}

// One probe signature: dynamic dims set to `size`, open dtypes to
// `open_dtype`, each List[Tensor] input `list_length` elements long (the
// signature of the graph with its lists expanded so).
std::optional<std::vector<kernels::TensorInfo>> ProbeSignature(
    const std::vector<TensorSpec>& inputs, int64_t size, DType open_dtype, size_t list_length) {
  std::vector<kernels::TensorInfo> sig;
  for (const TensorSpec& in : inputs) {
    if (!in.dims || in.optional) return std::nullopt;
    Dims dims = *in.dims;
    for (int64_t& d : dims) {
      if (d < 0) d = size;
    }
    const DType dtype = in.dtype == DType::kUnknown ? open_dtype : in.dtype;
    const size_t copies = in.list.empty() ? 1 : list_length;
    for (size_t k = 0; k < copies; ++k) sig.push_back(kernels::TensorInfo{dtype, dims, nullptr, true});
  }
  return sig;
}

// Output specs by compiling for two probe sizes of every dynamic dim: a dim that
// is the same in both is fixed, one that differs is dynamic. Open input dtypes
// are probed as FP32 and as FP64: an output dtype that differs between the two
// depends on the request and is left open. List[Tensor] inputs are probed two
// and three elements long (a dim that follows the length is dynamic). Prepare
// only, no run, so the probes cost nothing. Returns unknown specs when the
// inputs' ranks are open or a probe does not compile.
std::vector<TensorSpec> ProbeOutputs(const ir::Graph& graph, const std::vector<TensorSpec>& inputs,
                                     const CompileOptions& options) {
  std::vector<TensorSpec> outs(graph.outputs().size());
  for (size_t i = 0; i < outs.size(); ++i) outs[i].name = graph.output_names()[i];
  bool open = false;
  for (const TensorSpec& in : inputs) open = open || in.dtype == DType::kUnknown;
  std::vector<std::vector<kernels::TensorInfo>> probes;
  struct Probe {
    int64_t size;
    DType dtype;
    size_t list_length;
  };
  for (const Probe& probe : {Probe{64, DType::kF32, 2}, Probe{65, DType::kF32, 3},
                             Probe{64, DType::kF64, 2}}) {
    if (probe.dtype == DType::kF64 && !open) break;
    std::optional<std::vector<kernels::TensorInfo>> sig =
        ProbeSignature(inputs, probe.size, probe.dtype, probe.list_length);
    if (!sig) return outs;
    std::vector<std::optional<size_t>> lengths(inputs.size());
    bool has_list = false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].list.empty()) {
        lengths[i] = probe.list_length;
        has_list = true;
      }
    }
    const ir::Graph* probed = &graph;
    ir::Graph expanded;
    if (has_list) {
      absl::StatusOr<ir::Graph> e = ExpandListInputs(graph, lengths);
      if (!e.ok()) return outs;
      expanded = *std::move(e);
      probed = &expanded;
    }
    const DType dtype = probe.dtype;
    auto exe = Executable::Compile(*probed, *sig, options);
    if (!exe.ok()) {
      if (dtype == DType::kF64) break;  // FP64 not compiled: output dtypes stay open
      return outs;
    }
    probes.push_back((*exe)->output_infos());
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& a = probes[0][i];
    const auto& b = probes[1][i];
    // Only a run tells the type of a branch's, loop's or fallback's output.
    if (a.dtype == DType::kUnknown || b.dtype == DType::kUnknown || !a.present) continue;
    const bool dtype_fixed = !open || (probes.size() == 3 && probes[2][i].dtype == a.dtype);
    if (dtype_fixed) outs[i].dtype = a.dtype;
    if (a.dims.size() != b.dims.size()) continue;
    Dims dims = a.dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (a.dims[d] != b.dims[d]) dims[d] = -1;
    }
    outs[i].dims = dims;
  }
  return outs;
}

// The most elements a List[Tensor] input takes in one request.
constexpr int64_t kMaxListLength = 4096;

// The k of "<list>.<k>" (digits only, no leading zero unless 0), if `name` is one.
std::optional<size_t> ListElement(absl::string_view name, const std::string& list) {
  if (list.empty() || !absl::StartsWith(name, list) || name.size() <= list.size() + 1 ||
      name[list.size()] != '.') {
    return std::nullopt;
  }
  size_t k = 0;
  absl::string_view digits = name.substr(list.size() + 1);
  if (!absl::SimpleAtoi(digits, &k) || absl::StrCat(k) != digits) return std::nullopt;
  return k;
}

// Per argument: a list's length, nullopt for any other value.
std::vector<std::optional<size_t>> ListLengths(const std::vector<RunValue>& args) {
  std::vector<std::optional<size_t>> lengths;
  for (const RunValue& a : args) {
    lengths.push_back(a.kind == RunValue::Kind::kTensorList ? std::optional<size_t>(a.list.size())
                                                            : std::nullopt);
  }
  return lengths;
}

// The prefix that tells the graphs of list lengths apart in plan and
// signature keys: "lists=2,-;".
std::string ListVariant(const std::vector<std::optional<size_t>>& lengths) {
  std::vector<std::string> shown;
  for (const auto& n : lengths) shown.push_back(n ? absl::StrCat(*n) : "-");
  return absl::StrCat("lists=", absl::StrJoin(shown, ","), ";");
}

}  // namespace

std::string SignatureKey(const std::vector<kernels::TensorInfo>& sig) {
  std::string key;
  for (const auto& t : sig) absl::StrAppend(&key, DTypeName(t.dtype), DimsToString(t.dims), ";");
  return key;
}

std::string DimRangeString(const ir::DimRange& range) {
  if (range.max == INT64_MAX) return absl::StrCat(">= ", range.min);
  return absl::StrCat("[", range.min, ", ", range.max, "]");
}

std::string InputAlias(size_t position) { return absl::StrCat("INPUT__", position); }
std::string OutputAlias(size_t position) { return absl::StrCat("OUTPUT__", position); }

absl::StatusOr<ir::Graph> ExpandListInputs(const ir::Graph& graph,
                                           const std::vector<std::optional<size_t>>& lengths) {
  if (lengths.size() != graph.inputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("ExpandListInputs: ", lengths.size(),
                                                   " lengths for ", graph.inputs().size(),
                                                   " inputs"));
  }
  ir::Graph g = graph;
  g.SetInsertionBlock(ir::kMainBlock);
  std::vector<ir::ValueId> inputs;
  std::vector<ir::NodeId> constructs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const ir::ValueId in = graph.inputs()[i];
    if (!lengths[i].has_value() || graph.value(in).kind != ir::ValueKind::kTensorList) {
      inputs.push_back(in);  // not a list, or an optional list left out (None)
      continue;
    }
    const std::string name = graph.value(in).name;
    std::vector<ir::ValueId> elements;
    for (size_t k = 0; k < *lengths[i]; ++k) {
      elements.push_back(g.AddInput(absl::StrCat(name, ".", k), ir::TensorType{}));
    }
    const ir::NodeId node = g.AddNode(ir::OpKind::kListConstruct, elements, {}, "", {name});
    const ir::ValueId list = g.node(node).outputs[0];
    g.mutable_value(list).kind = ir::ValueKind::kTensorList;
    g.ReplaceAllUses(in, list);
    inputs.insert(inputs.end(), elements.begin(), elements.end());
    constructs.push_back(node);
  }
  g.SetInputs(std::move(inputs));
  // AddNode appended the constructs; their lists are used from the start.
  std::vector<ir::NodeId>& nodes = g.mutable_block(ir::kMainBlock).nodes;
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                             [&](ir::NodeId n) {
                               return std::find(constructs.begin(), constructs.end(), n) !=
                                      constructs.end();
                             }),
              nodes.end());
  nodes.insert(nodes.begin(), constructs.begin(), constructs.end());
  ir::Graph out = g.Compacted();
  RETURN_IF_ERROR(ir::VerifyGraph(out));
  return out;
}

absl::StatusOr<std::unique_ptr<Model>> Model::Create(ir::Graph graph, ModelOptions options) {
  RETURN_IF_ERROR(ir::VerifyGraph(graph));
  std::unique_ptr<Model> model(new Model());
  const auto& gin = graph.inputs();
  if (options.inputs.size() > gin.size()) {
    return absl::InvalidArgumentError(absl::StrCat("config declares ", options.inputs.size(),
                                                   " inputs, the model has ", gin.size()));
  }
  if (options.outputs.size() > graph.outputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("config declares ", options.outputs.size(),
                                                   " outputs, the model has ",
                                                   graph.outputs().size()));
  }
  // Where each value sits in forward()'s signature, from the importer's
  // names, before the config renames anything.
  std::vector<std::string> input_paths, output_paths;
  for (ir::ValueId in : gin) input_paths.push_back(InputPath(graph.value(in).name));
  for (const std::string& name : graph.output_names()) output_paths.push_back(OutputPath(name));
  // Declared names override by position; then the contract the graph implies,
  // with declarations taking precedence.
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    if (!options.inputs[i].name.empty()) graph.mutable_value(gin[i]).name = options.inputs[i].name;
  }
  for (size_t i = 0; i < options.outputs.size(); ++i) {
    if (!options.outputs[i].name.empty()) graph.set_output_name(i, options.outputs[i].name);
  }
  std::vector<ir::TensorType> implied = passes::InferInputContract(graph);
  std::set<std::string> seen;
  for (size_t i = 0; i < gin.size(); ++i) {
    const ir::Value& value = graph.value(gin[i]);
    TensorSpec spec{value.name, implied[i].dtype, implied[i].dims};
    spec.any_leading_dims = passes::TakesAnyLeadingDims(graph, gin[i]);
    spec.optional = value.optional;
    spec.path = input_paths[i];
    spec.dim_ranges = value.dim_ranges;
    if (value.type.dtype != DType::kUnknown) {
      spec.dtype_source = "model";
    } else if (spec.dtype != DType::kUnknown) {
      spec.dtype_source = "implied";
    }
    if (ir::IsScalarKind(value.kind)) {
      // An int/float/bool argument: one element, 0-dim or [1] (Infer takes both).
      spec.dtype = ir::ScalarKindDType(value.kind);
      spec.dtype_source = "argument";
      spec.dims = Dims{1};
      if (value.default_value.has_value()) {
        spec.optional = true;
        spec.default_text = ir::DefaultValueString(value);
      }
    } else if (value.kind == ir::ValueKind::kTensorList) {
      // A List[Tensor] argument (or Optional[List[Tensor]]): the spec is its
      // elements', named "xs.0".
      spec.list = spec.name;
      spec.name = absl::StrCat(spec.list, ".0");
      spec.path = absl::StrCat(spec.path, "[0]");
    } else if (value.kind != ir::ValueKind::kTensor) {
      return absl::UnimplementedError(absl::StrCat("input '", value.name, "' is a ",
                                                   ir::ValueKindName(value.kind),
                                                   "; inputs must be tensors or scalars"));
    }
    if (spec.dtype_source == "implied" && spec.dtype == DType::kInt64 &&
        passes::IsIndexOnlyInput(graph, gin[i])) {
      spec.also_accepts = {DType::kInt32};  // token ids, as embedding takes them
    }
    if (i < options.inputs.size()) {
      const TensorSpec& decl = options.inputs[i];
      if (decl.dtype != DType::kUnknown) {
        spec.dtype = decl.dtype;
        spec.dtype_source = "declared";
        spec.also_accepts.clear();
      }
      if (decl.dims) {
        spec.dims = decl.dims;
        spec.any_leading_dims = false;  // declared dims are the rank
      }
    }
    // Nothing fixes the dtype: it stays open, and each request's dtype is
    // compiled for (never cast to a guessed one).
    if (!seen.insert(spec.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate input name '", spec.name, "'"));
    }
    model->inputs_.push_back(std::move(spec));
  }
  seen.clear();
  for (const std::string& name : graph.output_names()) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate output name '", name, "'"));
    }
  }
  model->outputs_ = ProbeOutputs(graph, model->inputs_, options.compile);
  // Probed with the usual rank of an input that takes any leading dims: an
  // output may have other leading dims too.
  bool any_leading = false;
  for (const TensorSpec& in : model->inputs_) any_leading |= in.any_leading_dims;
  for (TensorSpec& out : model->outputs_) out.any_leading_dims = any_leading && out.dims;
  for (size_t i = 0; i < model->outputs_.size(); ++i) model->outputs_[i].path = output_paths[i];
  // Each output's dtype as declared; a request's output must have it.
  for (size_t i = 0; i < options.outputs.size(); ++i) {
    const TensorSpec& decl = options.outputs[i];
    TensorSpec& out = model->outputs_[i];
    if (decl.dtype != DType::kUnknown) {
      if (out.dtype != DType::kUnknown && out.dtype != decl.dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output '", out.name, "': config declares datatype ", DTypeName(decl.dtype),
            ", the model computes ", DTypeName(out.dtype)));
      }
      out.dtype = decl.dtype;
      out.dtype_source = "declared";
    }
    if (decl.dims) out.dims = decl.dims;
  }
  model->graph_ = std::move(graph);
  model->options_ = std::move(options);
  return model;
}

absl::StatusOr<std::shared_ptr<const Executable>> Model::GetExecutable(
    const std::vector<kernels::TensorInfo>& signature, int num_threads) const {
  return GetExecutableOf(graph_, "", signature, num_threads);
}

absl::StatusOr<std::shared_ptr<const ir::Graph>> Model::GraphForLengths(
    const std::vector<std::optional<size_t>>& lengths) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = list_graphs_.find(lengths);
    if (it != list_graphs_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(ir::Graph expanded, ExpandListInputs(graph_, lengths));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] =
      list_graphs_.emplace(lengths, std::make_shared<const ir::Graph>(std::move(expanded)));
  return it->second;
}

absl::StatusOr<std::shared_ptr<const Executable>> Model::GetExecutableOf(
    const ir::Graph& graph, const std::string& prefix,
    const std::vector<kernels::TensorInfo>& signature, int num_threads) const {
  const std::string key = prefix + SignatureKey(signature);
  CompileOptions options = options_.compile;
  if (!prefix.empty()) options.graph_variant = prefix;
  // Another thread count is another plan (oneDNN sizes its work per thread
  // when it creates a primitive); the fallbacks noted are the same.
  std::string plan_key = key;
  if (num_threads > 0 && num_threads != options.num_threads) {
    options.num_threads = num_threads;
    plan_key = absl::StrCat("threads=", num_threads, ";", key);
  }
  if (options_.executables != nullptr) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe,
                     options_.executables->Get(graph, signature, options));
    NoteSignatureFallbacks(key, *exe);
    return exe;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = executables_.find(plan_key);
    if (it != executables_.end()) return it->second;
  }
  // Compile outside the lock; if two requests race, the first one stored wins.
  ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, Executable::Compile(graph, signature, options));
  NoteSignatureFallbacks(key, *exe);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] =
      executables_.emplace(plan_key, std::shared_ptr<const Executable>(std::move(exe)));
  return it->second;
}

void Model::NoteSignatureFallbacks(const std::string& key, const Executable& exe) const {
  if (exe.libtorch_fallbacks().empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!signature_fallbacks_.emplace(key, exe.libtorch_fallbacks()).second) return;
  spdlog::info("signature {}: through the libtorch fallback, as the kernels refuse it: {}", key,
               absl::StrJoin(exe.libtorch_fallbacks(), "; "));
}

std::map<std::string, int> Model::signature_fallbacks() const {
  std::map<std::string, int> count;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, nodes] : signature_fallbacks_) {
    std::set<std::string> ops;
    for (const std::string& node : nodes) ops.insert(node.substr(0, node.find(' ')));
    for (const std::string& op : ops) ++count[op];
  }
  return count;
}

std::map<std::string, std::string> Model::properties() const {
  if (options_.gate == nullptr) return properties_;
  std::map<std::string, std::string> all = properties_;
  for (auto& [key, value] : options_.gate->Properties()) all[key] = std::move(value);
  return all;
}

absl::StatusOr<std::vector<RunValue>> Model::RunOn(const Executable& exe,
                                                   const std::vector<RunValue>& args,
                                                   const RunOptions& run) const {
  if (run.services == nullptr && options_.services != nullptr) {
    RunOptions with_services = run;
    with_services.services = options_.services;
    return exe.RunValues(args, with_services);
  }
  return exe.RunValues(args, run);
}

absl::StatusOr<std::vector<RunValue>> Model::RunMatched(
    const std::vector<kernels::TensorInfo>& signature, const std::vector<RunValue>& args,
    const RunOptions& run) const {
  const std::vector<std::optional<size_t>> lengths = ListLengths(args);
  if (std::none_of(lengths.begin(), lengths.end(), [](const auto& n) { return n.has_value(); })) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe,
                     GetExecutable(signature, run.num_threads));
    return RunOn(*exe, args, run);
  }
  // The graph with its list inputs expanded runs the lists' elements in their place.
  ASSIGN_OR_RETURN(std::shared_ptr<const ir::Graph> graph, GraphForLengths(lengths));
  std::vector<RunValue> elements;
  for (const RunValue& a : args) {
    if (a.kind != RunValue::Kind::kTensorList) {
      elements.push_back(a);
      continue;
    }
    for (const Tensor& t : a.list) elements.push_back(RunValue::Of(t));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe,
                   GetExecutableOf(*graph, ListVariant(lengths), signature, run.num_threads));
  return RunOn(*exe, elements, run);
}

size_t Model::num_compiled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return executables_.size();
}

absl::StatusOr<MatchedInputs> Model::MatchInputs(const std::vector<NamedTensor>& inputs) const {
  std::vector<const Tensor*> bound(inputs_.size(), nullptr);
  // Of list inputs, by index: a map, since a request may name any index.
  std::vector<std::map<size_t, const Tensor*>> elements(inputs_.size());
  // Lists sent whole: "xs" stacked on a new first dim, [0, ...] when empty.
  std::vector<bool> whole_list(inputs_.size(), false);
  std::deque<Tensor> views;  // scalar inputs reshaped to 0-dim; elements of whole lists
  // Of the dims sharing a declared symbol: the first input seen, its dim and size.
  std::map<std::string, std::tuple<std::string, int, int64_t>> symbols;
  for (const NamedTensor& in : inputs) {
    size_t idx = 0;
    size_t element = 0;  // of a list input
    bool whole = false;  // the list itself, not one element
    while (idx < inputs_.size() && inputs_[idx].name != in.name) ++idx;
    for (size_t j = 0; idx == inputs_.size() && j < inputs_.size(); ++j) {
      if (!inputs_[j].list.empty() && inputs_[j].list == in.name) {
        idx = j;
        whole = true;
      } else if (std::optional<size_t> k = ListElement(in.name, inputs_[j].list)) {
        idx = j;
        element = *k;
      }
    }
    if (idx == inputs_.size()) {
      // Triton's positional name, unless a real input is called that.
      std::optional<size_t> alias = AliasPosition(in.name, "INPUT__");
      if (alias.has_value() && *alias < inputs_.size()) idx = *alias;
    }
    if (idx == inputs_.size()) {
      std::vector<std::string> names;
      for (const auto& s : inputs_) names.push_back(s.name);
      return absl::InvalidArgumentError(absl::StrCat("unknown input '", in.name,
                                                     "'; the model's inputs are: ",
                                                     absl::StrJoin(names, ", ")));
    }
    const TensorSpec& spec = inputs_[idx];
    if (!spec.list.empty() && (whole_list[idx] || (whole && !elements[idx].empty()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "list argument '", spec.list, "' given both whole ('", spec.list, "') and as elements ('",
          spec.list, ".<k>'), or twice; send one or the other"));
    }
    if (elements[idx].count(element) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name,
                                                     "' given twice; expected each input once"));
    }
    if (bound[idx] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", in.name, "' given twice (", inputs_[idx].name, " alias ",
                       InputAlias(idx), "); expected each input once"));
    }
    const Tensor& t = in.tensor;
    if (ir::IsScalarKind(graph_.value(graph_.inputs()[idx]).kind)) {
      if (t.dtype() != spec.dtype || t.num_elements() != 1 || t.rank() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", in.name, "': expected one ", DTypeName(spec.dtype), " value (shape [] or [1]), got ",
            DTypeName(t.dtype()), DimsToString(t.dims())));
      }
      views.push_back(t.Reshaped({}));
      bound[idx] = &views.back();
      continue;
    }
    if (whole && t.rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", in.name, "': a list sent whole is its elements stacked on a new first dim ",
          "(shape [0] for an empty list); got a 0-dim tensor"));
    }
    // Each length compiles its own plan, and empty elements cost no payload:
    // a bound keeps [4000000000, 0] from becoming four billion elements.
    if (whole && t.dim(0) > kMaxListLength) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "': a list of ", t.dim(0),
                                                     " elements; at most ", kMaxListLength));
    }
    // A whole list is checked by its elements' dims.
    const Dims dims = whole ? Dims(t.dims().begin() + 1, t.dims().end()) : t.dims();
    const std::string shown = whole ? absl::StrCat(DimsToString(dims), " per element (",
                                                   DimsToString(t.dims()), " stacked)")
                                    : DimsToString(dims);
    if (spec.dtype != DType::kUnknown && t.dtype() != spec.dtype &&
        std::find(spec.also_accepts.begin(), spec.also_accepts.end(), t.dtype()) ==
            spec.also_accepts.end()) {
      std::string also;
      for (DType d : spec.also_accepts) absl::StrAppend(&also, " or ", DTypeName(d));
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", in.name, "': expected datatype ", DTypeName(spec.dtype), also, ", got ",
          DTypeName(t.dtype()), " (", DTypeName(spec.dtype), " is ", SourceText(spec.dtype_source),
          "; inputs are never cast)"));
    }
    // An empty list has no element to check.
    if (spec.dims && !(whole && t.dim(0) == 0)) {
      // With any leading dims, only dims[1:] are checked, against the last dims.
      const size_t skip = spec.any_leading_dims && !spec.dims->empty() ? 1 : 0;
      const size_t checked = spec.dims->size() - skip;
      bool ok = skip == 1 ? dims.size() >= checked : dims.size() == spec.dims->size();
      for (size_t d = 0; ok && d < checked; ++d) {
        const int64_t want = (*spec.dims)[skip + d];
        ok = want < 0 || want == dims[dims.size() - checked + d];
      }
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "': expected shape ",
                                                       SpecString(spec), ", got ", shown));
      }
    }
    for (const ir::DimRange& r : spec.dim_ranges) {
      if (static_cast<size_t>(r.dim) >= dims.size()) continue;
      const int64_t size = dims[r.dim];
      if (size < r.min || size > r.max) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", in.name, "': dim ", r.dim, " is ", size, ", outside the range ",
            DimRangeString(r), " the model declares for it",
            r.symbol.empty() ? "" : absl::StrCat(" (", r.symbol, ")"), "; shape ", shown));
      }
      if (r.symbol.empty()) continue;
      auto [it, first] = symbols.try_emplace(r.symbol, in.name, r.dim, size);
      if (!first && std::get<2>(it->second) != size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", in.name, "': dim ", r.dim, " is ", size, " but dim ",
            std::get<1>(it->second), " of input '", std::get<0>(it->second), "' is ",
            std::get<2>(it->second), "; the model declares them equal (", r.symbol, ")"));
      }
    }
    if (whole) {
      whole_list[idx] = true;
      const size_t bytes = static_cast<size_t>(NumElements(dims)) * DTypeSize(t.dtype());
      auto* base = static_cast<uint8_t*>(const_cast<void*>(t.raw_data()));
      for (int64_t k = 0; k < t.dim(0); ++k) {
        views.push_back(Tensor::Wrap(t.dtype(), dims, base + k * bytes));
        elements[idx][static_cast<size_t>(k)] = &views.back();
      }
      continue;
    }
    if (!spec.list.empty()) {
      if (static_cast<int64_t>(elements[idx].size()) >= kMaxListLength) {
        return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "': list '", spec.list,
                                                       "' has more than ", kMaxListLength,
                                                       " elements"));
      }
      elements[idx][element] = &t;
      continue;
    }
    bound[idx] = &t;
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::string& list = inputs_[i].list;
    size_t k = 0;  // the map is ordered: a gap is the first key that is not k
    for (const auto& [index, tensor] : elements[i]) {
      if (index != k) {
        return absl::InvalidArgumentError(absl::StrCat(
            "missing input '", list, ".", k, "': list argument '", list, "' is sent as ", list,
            ".0 ... ", list, ".", elements[i].rbegin()->first, ", consecutive from 0"));
      }
      ++k;
    }
    if (!list.empty() && (whole_list[i] || !elements[i].empty())) continue;
    if (bound[i] == nullptr && !inputs_[i].optional) {
      if (!list.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "missing input '", inputs_[i].name, "' (", SpecString(inputs_[i]), "): list argument '",
            list, "' is sent as ", list, ".0, ", list, ".1, ... or whole as '", list,
            "' (elements stacked on a new first dim; shape [0] for an empty list)"));
      }
      return absl::InvalidArgumentError(absl::StrCat("missing input '", inputs_[i].name,
                                                     "' (", SpecString(inputs_[i]), ")"));
    }
  }
  MatchedInputs matched;
  std::vector<kernels::TensorInfo>& signature = matched.signature;
  std::vector<RunValue>& args = matched.args;
  // Per input: a list's length, nullopt for any other input and for an
  // optional list left out (which runs as None).
  std::vector<std::optional<size_t>>& lengths = matched.lengths;
  lengths.assign(inputs_.size(), std::nullopt);
  for (size_t i = 0; i < bound.size(); ++i) {
    const Tensor* t = bound[i];
    if (!inputs_[i].list.empty() && (whole_list[i] || !elements[i].empty())) {
      // One value, the list; the signature has an entry per element (see RunMatched).
      matched.has_list = true;
      lengths[i] = elements[i].size();
      std::vector<Tensor> list;
      for (const auto& [index, e] : elements[i]) {
        signature.push_back(kernels::TensorInfo{e->dtype(), e->dims(), nullptr, true});
        list.push_back(*e);
      }
      args.push_back(RunValue::List(std::move(list)));
      continue;
    }
    if (t == nullptr) {
      if (const auto& d = graph_.value(graph_.inputs()[i]).default_value; d.has_value()) {
        t = &*d;  // a parameter with a default, left out
      } else {  // an optional input left out: None
        signature.push_back(kernels::TensorInfo{DType::kUnknown, {}, nullptr, false});
        args.push_back(RunValue::None());
        continue;
      }
    }
    signature.push_back(kernels::TensorInfo{t->dtype(), t->dims(), nullptr, true});
    args.push_back(RunValue::Of(*t));
  }
  return matched;
}

absl::StatusOr<std::vector<NamedTensor>> Model::Infer(
    const std::vector<NamedTensor>& inputs, const std::vector<std::string>& requested,
    const RunOptions& run) const {
  ASSIGN_OR_RETURN(MatchedInputs matched, MatchInputs(inputs));
  const std::vector<kernels::TensorInfo>& signature = matched.signature;
  const std::vector<RunValue>& args = matched.args;
  std::vector<size_t> wanted;
  const auto& names = graph_.output_names();
  std::vector<std::string> reply_names = names;  // as requested: a name or an alias
  if (requested.empty()) {
    for (size_t i = 0; i < names.size(); ++i) wanted.push_back(i);
  } else {
    std::set<size_t> seen_outputs;
    for (const std::string& r : requested) {
      size_t idx = 0;
      while (idx < names.size() && names[idx] != r) ++idx;
      if (idx == names.size()) {
        std::optional<size_t> alias = AliasPosition(r, "OUTPUT__");
        if (alias.has_value() && *alias < names.size()) idx = *alias;
      }
      if (idx < names.size() && !seen_outputs.insert(idx).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("output '", r, "' requested twice; expected each output once"));
      }
      if (idx < names.size()) reply_names[idx] = r;
      if (idx == names.size()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown output '", r,
                                                       "'; the model's outputs are: ",
                                                       absl::StrJoin(names, ", ")));
      }
      wanted.push_back(idx);
    }
  }

  std::vector<RunValue> outs;
  std::optional<std::vector<RunValue>> gated;
  if (options_.gate != nullptr) {
    // The gate's own runs of the model need its services too.
    RunOptions gate_run = run;
    if (gate_run.services == nullptr) gate_run.services = options_.services;
    const std::string key = (matched.has_list ? ListVariant(matched.lengths) : "") + SignatureKey(signature);
    ASSIGN_OR_RETURN(gated, options_.gate->Admit(*this, key, signature, args, gate_run));
  }
  if (gated.has_value()) {
    outs = *std::move(gated);
  } else {
    ASSIGN_OR_RETURN(outs, RunMatched(signature, args, run));
  }
  if (outs.size() != names.size()) {
    return absl::InternalError(absl::StrCat("the run gave ", outs.size(), " outputs for ",
                                            names.size()));
  }
  std::vector<NamedTensor> result;
  for (size_t i : wanted) {
    RunValue& out = outs[i];
    if (out.kind == RunValue::Kind::kTensor) {
      result.push_back(NamedTensor{reply_names[i], std::move(out.tensor)});
    } else if (out.kind == RunValue::Kind::kTensorList) {
      for (size_t k = 0; k < out.list.size(); ++k) {
        result.push_back(
            NamedTensor{ListOutputElement(reply_names[i], k), std::move(out.list[k])});
      }
    }
  }
  return result;
}

}  // namespace kiln::runtime
