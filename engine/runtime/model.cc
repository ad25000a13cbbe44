#include "engine/runtime/model.h"

#include <deque>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/passes/input_contract.h"

namespace kiln::runtime {
namespace {

std::string SpecString(const TensorSpec& spec) {
  return ir::TensorType{spec.dtype, spec.dims}.ToString();
}

// Signature key for the executable cache: "FP32[1, 3, 224, 224];...".
std::string SignatureKey(const std::vector<kernels::TensorInfo>& sig) {
  std::string key;
  for (const auto& t : sig) absl::StrAppend(&key, DTypeName(t.dtype), DimsToString(t.dims), ";");
  return key;
}

// Output specs by compiling for two probe sizes of every dynamic dim: a dim that
// is the same in both is fixed, one that differs is dynamic. Prepare only, no
// run, so the probe sizes cost nothing. Returns unknown specs when the inputs'
// ranks are open or a probe does not compile.
std::vector<TensorSpec> ProbeOutputs(const ir::Graph& graph, const std::vector<TensorSpec>& inputs,
                                     const CompileOptions& options) {
  std::vector<TensorSpec> outs(graph.outputs().size());
  for (size_t i = 0; i < outs.size(); ++i) outs[i].name = graph.output_names()[i];
  std::vector<std::vector<kernels::TensorInfo>> probes;
  for (int64_t probe : {64, 65}) {
    std::vector<kernels::TensorInfo> sig;
    for (const TensorSpec& in : inputs) {
      if (!in.dims || in.dtype == DType::kUnknown || in.optional) return outs;
      Dims dims = *in.dims;
      for (int64_t& d : dims) {
        if (d < 0) d = probe;
      }
      sig.push_back(kernels::TensorInfo{in.dtype, dims, nullptr, true});
    }
    auto exe = Executable::Compile(graph, sig, options);
    if (!exe.ok()) return outs;
    probes.push_back((*exe)->output_infos());
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& a = probes[0][i];
    const auto& b = probes[1][i];
    // Only a run tells the type of a branch's, loop's or fallback's output.
    if (a.dtype == DType::kUnknown || b.dtype == DType::kUnknown || !a.present) continue;
    outs[i].dtype = a.dtype;
    if (a.dims.size() != b.dims.size()) continue;
    Dims dims = a.dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (a.dims[d] != b.dims[d]) dims[d] = -1;
    }
    outs[i].dims = dims;
  }
  return outs;
}

}  // namespace

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
    TensorSpec spec{value.name, implied[i].dtype, implied[i].dims, value.optional};
    if (ir::IsScalarKind(value.kind)) {
      // An int/float/bool argument: one element, 0-dim or [1] (Infer takes both).
      spec.dtype = ir::ScalarKindDType(value.kind);
      spec.dims = Dims{1};
    } else if (value.kind != ir::ValueKind::kTensor) {
      return absl::UnimplementedError(absl::StrCat("input '", value.name, "' is a ",
                                                   ir::ValueKindName(value.kind),
                                                   "; inputs must be tensors or scalars"));
    }
    if (i < options.inputs.size()) {
      const TensorSpec& decl = options.inputs[i];
      if (decl.dtype != DType::kUnknown) spec.dtype = decl.dtype;
      if (decl.dims) spec.dims = decl.dims;
    }
    // Until the typing issue lets a request choose, an open dtype means PyTorch's default.
    if (spec.dtype == DType::kUnknown) spec.dtype = DType::kF32;
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
  model->graph_ = std::move(graph);
  model->options_ = std::move(options);
  return model;
}

absl::StatusOr<std::shared_ptr<const Executable>> Model::GetExecutable(
    const std::vector<kernels::TensorInfo>& signature) const {
  if (options_.executables != nullptr) {
    return options_.executables->Get(graph_, signature, options_.compile);
  }
  const std::string key = SignatureKey(signature);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = executables_.find(key);
    if (it != executables_.end()) return it->second;
  }
  // Compile outside the lock; if two requests race, the first one stored wins.
  ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe,
                   Executable::Compile(graph_, signature, options_.compile));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = executables_.emplace(key, std::shared_ptr<const Executable>(std::move(exe)));
  return it->second;
}

size_t Model::num_compiled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return executables_.size();
}

absl::StatusOr<std::vector<NamedTensor>> Model::Infer(
    const std::vector<NamedTensor>& inputs, const std::vector<std::string>& requested) const {
  std::vector<const Tensor*> bound(inputs_.size(), nullptr);
  std::deque<Tensor> scalars;  // scalar inputs reshaped to 0-dim
  for (const NamedTensor& in : inputs) {
    size_t idx = 0;
    while (idx < inputs_.size() && inputs_[idx].name != in.name) ++idx;
    if (idx == inputs_.size()) {
      std::vector<std::string> names;
      for (const auto& s : inputs_) names.push_back(s.name);
      return absl::InvalidArgumentError(absl::StrCat("unknown input '", in.name,
                                                     "'; the model's inputs are: ",
                                                     absl::StrJoin(names, ", ")));
    }
    if (bound[idx] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "' given twice"));
    }
    const TensorSpec& spec = inputs_[idx];
    const Tensor& t = in.tensor;
    if (ir::IsScalarKind(graph_.value(graph_.inputs()[idx]).kind)) {
      if (t.dtype() != spec.dtype || t.num_elements() != 1 || t.rank() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", in.name, "': expected one ", DTypeName(spec.dtype), " value (shape [] or [1]), got ",
            DTypeName(t.dtype()), DimsToString(t.dims())));
      }
      scalars.push_back(t.Reshaped({}));
      bound[idx] = &scalars.back();
      continue;
    }
    if (t.dtype() != spec.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "': expected datatype ",
                                                     DTypeName(spec.dtype), ", got ",
                                                     DTypeName(t.dtype())));
    }
    if (spec.dims) {
      bool ok = t.rank() == static_cast<int64_t>(spec.dims->size());
      for (size_t d = 0; ok && d < spec.dims->size(); ++d) {
        ok = (*spec.dims)[d] < 0 || (*spec.dims)[d] == t.dim(d);
      }
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "': expected shape ",
                                                       SpecString(spec), ", got ",
                                                       DimsToString(t.dims())));
      }
    }
    bound[idx] = &t;
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (bound[i] == nullptr && !inputs_[i].optional) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", inputs_[i].name,
                                                     "' (", SpecString(inputs_[i]), ")"));
    }
  }
  std::vector<size_t> wanted;
  const auto& names = graph_.output_names();
  if (requested.empty()) {
    for (size_t i = 0; i < names.size(); ++i) wanted.push_back(i);
  } else {
    for (const std::string& r : requested) {
      size_t idx = 0;
      while (idx < names.size() && names[idx] != r) ++idx;
      if (idx == names.size()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown output '", r,
                                                       "'; the model's outputs are: ",
                                                       absl::StrJoin(names, ", ")));
      }
      wanted.push_back(idx);
    }
  }

  std::vector<kernels::TensorInfo> signature;
  std::vector<RunValue> args;
  for (const Tensor* t : bound) {
    if (t == nullptr) {  // an optional input left out
      signature.push_back(kernels::TensorInfo{DType::kUnknown, {}, nullptr, false});
      args.push_back(RunValue::None());
      continue;
    }
    signature.push_back(kernels::TensorInfo{t->dtype(), t->dims(), nullptr, true});
    args.push_back(RunValue::Of(*t));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe, GetExecutable(signature));
  ASSIGN_OR_RETURN(std::vector<RunValue> outs, exe->RunValues(args));
  std::vector<NamedTensor> result;
  for (size_t i : wanted) {
    RunValue& out = outs[i];
    if (out.kind == RunValue::Kind::kTensor) {
      result.push_back(NamedTensor{names[i], std::move(out.tensor)});
    } else if (out.kind == RunValue::Kind::kTensorList) {
      for (size_t k = 0; k < out.list.size(); ++k) {
        result.push_back(NamedTensor{absl::StrCat(names[i], ".", k), std::move(out.list[k])});
      }
    }
  }
  return result;
}

}  // namespace kiln::runtime
