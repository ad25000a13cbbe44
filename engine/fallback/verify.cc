// Verified import (see verify.h).
//
// Both sides run the same prepared torch graph: libtorch through its
// interpreter (torch::jit::Code on the frozen, inlined graph the importer
// translated, so every torch value has a Kiln counterpart), Kiln through the
// model being loaded. Samples are drawn from the model's input contract with
// a fixed seed: floats N(0, 1), integers in [0, 4), bools at random; dims the
// contract leaves open are 1 for the first (batch) dim, 224 for the spatial
// dims of an image-like rank-4 input, else 8.
//
// A float output past the tolerance is judged again against libtorch's
// float64 result (Arbitrate): float32 rounding alone separates two float32
// computations of a deep network by about 1e-4.
//
// To find the first diverging node, the graph is imported again with an
// ImportTrace, every traced value becomes an extra output of the Kiln graph,
// and a clone of every traced value (taken right after it is computed, so a
// later in-place op cannot change it) an extra output of the torch graph.
// One run of each then gives every intermediate value; the first, in graph
// order, past the tolerance is the divergence.
#include "engine/fallback/verify.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/common/tolerance.h"
#include "engine/importer/torchscript/import_context.h"
#include "engine/importer/torchscript/prepared_module.h"

namespace kiln::fallback {
namespace {

// A copy of a Kiln tensor as an at::Tensor.
absl::StatusOr<at::Tensor> CopyToTorch(const Tensor& t) {
  ASSIGN_OR_RETURN(c10::ScalarType st, importer::TorchFromDType(t.dtype()));
  return at::from_blob(const_cast<void*>(t.raw_data()),
                       std::vector<int64_t>(t.dims().begin(), t.dims().end()),
                       at::TensorOptions().dtype(st))
      .clone();
}

std::string Describe(const at::Tensor& t) {
  auto dtype = importer::DTypeFromTorch(t.scalar_type());
  return absl::StrCat(dtype.ok() ? DTypeName(*dtype) : std::string(c10::toString(t.scalar_type())),
                      DimsToString(Dims(t.sizes().begin(), t.sizes().end())));
}

// max |a - b| in double over tensors of the same shape: NaN against NaN is no
// difference, NaN against a number an infinite one.
double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble);
  const at::Tensor y = b.to(at::kDouble);
  return (x - y)
      .abs()
      .masked_fill(at::isnan(x).logical_and(at::isnan(y)), 0.0)
      .nan_to_num(std::numeric_limits<double>::infinity())
      .max()
      .item<double>();
}

// max |t| in double, NaNs left out.
double MaxAbs(const at::Tensor& t) {
  const at::Tensor x = t.to(at::kDouble);
  return x.abs().masked_fill(at::isnan(x), 0.0).max().item<double>();
}

// A libtorch exception's message: its first line, without the backtrace.
std::string FirstLine(const std::exception& e) {
  std::string what = e.what();
  if (const c10::Error* ce = dynamic_cast<const c10::Error*>(&e)) {
    what = ce->what_without_backtrace();
  }
  return what.substr(0, what.find('\n'));
}

// Compares Kiln's value with libtorch's.
OutputCheck Compare(const std::string& name, const at::Tensor& kiln, const at::Tensor& ref,
                    double tolerance) {
  OutputCheck check;
  check.name = name;
  if (kiln.sizes() != ref.sizes() || kiln.scalar_type() != ref.scalar_type()) {
    check.passed = false;
    check.problem = absl::StrCat("Kiln gives ", Describe(kiln), ", libtorch ", Describe(ref));
    return check;
  }
  if (kiln.numel() == 0) return check;
  check.max_abs_diff = MaxAbsDiff(kiln, ref);
  check.max_abs_ref = MaxAbs(ref);
  const bool exact = !ref.is_floating_point();
  if (absl::StatusOr<DType> dtype = importer::DTypeFromTorch(ref.scalar_type()); dtype.ok()) {
    tolerance = std::max(tolerance, StorageRoundingTolerance(*dtype));
  }
  check.passed = exact ? check.max_abs_diff == 0
                       : check.max_abs_diff <= tolerance * check.max_abs_ref + 1e-6;
  return check;
}

// Values of one side, flattened: a tensor list gives its elements, None nothing.
std::vector<at::Tensor> Flatten(const c10::IValue& v) {
  if (v.isTensor()) return {v.toTensor()};
  if (v.isTensorList()) return v.toTensorVector();
  if (v.isInt()) return {at::scalar_tensor(v.toInt(), at::kLong)};
  if (v.isDouble()) return {at::scalar_tensor(v.toDouble(), at::kDouble)};
  if (v.isBool()) return {at::scalar_tensor(v.toBool(), at::kBool)};
  return {};
}

absl::StatusOr<std::vector<at::Tensor>> Flatten(const runtime::RunValue& v) {
  std::vector<at::Tensor> out;
  if (v.kind == runtime::RunValue::Kind::kTensor) {
    ASSIGN_OR_RETURN(at::Tensor t, CopyToTorch(v.tensor));
    out.push_back(std::move(t));
  } else if (v.kind == runtime::RunValue::Kind::kTensorList) {
    for (const Tensor& e : v.list) {
      ASSIGN_OR_RETURN(at::Tensor t, CopyToTorch(e));
      out.push_back(std::move(t));
    }
  }
  return out;
}

struct Samples {
  // Kiln's side runs the graph with its list inputs expanded (one input per
  // element, see runtime::ExpandListInputs); `lengths` says how.
  std::vector<std::optional<size_t>> lengths;
  bool has_list = false;
  std::vector<kernels::TensorInfo> signature;
  std::vector<runtime::RunValue> kiln;
  std::vector<c10::IValue> torch;
  std::string text;
};

// The graph Kiln's side of `samples` runs: `graph` itself, or with its list
// inputs expanded to the sampled lengths.
absl::StatusOr<ir::Graph> GraphForSamples(const ir::Graph& graph, const Samples& samples) {
  if (!samples.has_list) return graph;
  return runtime::ExpandListInputs(graph, samples.lengths);
}

// A sample tensor of `dtype` and `dims`: floats N(0, 1), integers in [0, 4),
// bools at random. Returns Kiln's tensor and libtorch's own copy (its
// in-place ops must not reach Kiln's). Kiln's counts against `memory`: a
// shape too large is refused naming `what` before libtorch allocates any.
absl::StatusOr<std::pair<Tensor, at::Tensor>> SampleTensor(
    DType dtype, const Dims& dims, std::mt19937_64& rng, const std::string& what,
    const std::shared_ptr<MemoryBudget>& memory) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, dims, what, memory));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3);
  ASSIGN_OR_RETURN(c10::ScalarType st, importer::TorchFromDType(dtype));
  at::Tensor tt = at::from_blob(t.raw_data(), std::vector<int64_t>(dims.begin(), dims.end()),
                                at::TensorOptions().dtype(st));
  if (IsFloatingPoint(dtype)) {
    at::Tensor values = at::empty(tt.sizes(), at::kDouble);
    double* p = values.data_ptr<double>();
    for (int64_t k = 0; k < values.numel(); ++k) p[k] = normal(rng);
    tt.copy_(values);
  } else {
    at::Tensor values = at::empty(tt.sizes(), at::kLong);
    int64_t* p = values.data_ptr<int64_t>();
    for (int64_t k = 0; k < values.numel(); ++k) p[k] = small(rng);
    tt.copy_(dtype == DType::kBool ? values.remainder(2) : values);
  }
  at::Tensor copy = tt.clone();
  return std::make_pair(std::move(t), std::move(copy));
}

// "the sample input 'x'", in messages.
std::string SampleName(const std::string& input) {
  return absl::StrCat("the sample input '", input, "'");
}

// Sample inputs from the contract (and the overrides); a reason when none can be made.
absl::StatusOr<Samples> MakeSamples(const runtime::Model& model, const ir::Graph& graph,
                                    const VerifyOptions& options, std::string* skip) {
  Samples s;
  std::mt19937_64 rng(options.seed);
  std::vector<std::string> text;
  for (size_t i = 0; i < model.inputs().size(); ++i) {
    runtime::TensorSpec spec = model.inputs()[i];
    for (const runtime::TensorSpec& o : options.samples) {
      if (o.name != spec.name) continue;
      if (o.dtype != DType::kUnknown) spec.dtype = o.dtype;
      if (o.dims) spec.dims = o.dims;
    }
    s.lengths.push_back(std::nullopt);
    const ir::Value& value = graph.value(graph.inputs()[i]);
    if (ir::IsScalarKind(value.kind)) {
      // An int/float/bool argument: a small positive value.
      Tensor t = Tensor::Zeros(spec.dtype, {});
      c10::IValue iv;
      if (spec.dtype == DType::kInt64) {
        *t.data<int64_t>() = 2;
        iv = c10::IValue(int64_t{2});
      } else if (spec.dtype == DType::kF64) {
        *t.data<double>() = 0.5;
        iv = c10::IValue(0.5);
      } else {
        *t.data<bool>() = true;
        iv = c10::IValue(true);
      }
      s.signature.push_back(kernels::TensorInfo{t.dtype(), t.dims(), nullptr, true});
      s.kiln.push_back(runtime::RunValue::Of(t));
      s.torch.push_back(iv);
      text.push_back(absl::StrCat(spec.name, "=", DTypeName(spec.dtype)));
      continue;
    }
    if (!spec.dims.has_value() || spec.dtype == DType::kUnknown) {
      *skip = absl::StrCat("input '", spec.name,
                           "' has no known shape; give it in the load config's verify.inputs");
      return s;
    }
    Dims dims = *spec.dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] >= 0) continue;
      const bool image = dims.size() == 4 && d >= 2 && (*spec.dims)[1] > 0;
      dims[d] = d == 0 ? 1 : image ? 224 : 8;
    }
    if (!spec.list.empty()) {
      // A List[Tensor] argument: a list of kListSample elements of its spec.
      constexpr size_t kListSample = 2;
      s.lengths.back() = kListSample;
      s.has_list = true;
      c10::List<at::Tensor> list;
      for (size_t k = 0; k < kListSample; ++k) {
        ASSIGN_OR_RETURN(auto sample,
                         SampleTensor(spec.dtype, dims, rng, SampleName(spec.list),
                                      options.run.memory));
        s.signature.push_back(kernels::TensorInfo{spec.dtype, dims, nullptr, true});
        s.kiln.push_back(runtime::RunValue::Of(std::move(sample.first)));
        list.push_back(std::move(sample.second));
      }
      s.torch.push_back(c10::IValue(std::move(list)));
      text.push_back(absl::StrCat(spec.list, "=[", kListSample, " x ", DTypeName(spec.dtype),
                                  DimsToString(dims), "]"));
      continue;
    }
    ASSIGN_OR_RETURN(auto sample, SampleTensor(spec.dtype, dims, rng, SampleName(spec.name),
                                               options.run.memory));
    s.signature.push_back(kernels::TensorInfo{spec.dtype, dims, nullptr, true});
    s.kiln.push_back(runtime::RunValue::Of(std::move(sample.first)));
    s.torch.push_back(std::move(sample.second));
    text.push_back(absl::StrCat(spec.name, "=", DTypeName(spec.dtype), DimsToString(dims)));
  }
  s.text = absl::StrJoin(text, ", ");
  return s;
}

// Runs the torch graph (input 0 is the frozen module) on the samples.
std::vector<c10::IValue> RunTorch(const std::shared_ptr<torch::jit::Graph>& graph,
                                  const importer::PreparedModule& prepared,
                                  const std::vector<c10::IValue>& inputs) {
  c10::InferenceMode inference;
  torch::jit::Code code(graph, "kiln_verify");
  torch::jit::Stack stack;
  stack.push_back(prepared.frozen._ivalue());
  for (const c10::IValue& v : inputs) {
    if (v.isTensorList()) {
      c10::List<at::Tensor> copy;
      for (const at::Tensor& t : v.toTensorVector()) copy.push_back(t.clone());
      stack.push_back(c10::IValue(std::move(copy)));
      continue;
    }
    stack.push_back(v.isTensor() ? c10::IValue(v.toTensor().clone()) : v);
  }
  torch::jit::InterpreterState(code).run(stack);
  return stack;
}

// Kiln's side: `graph` (with its list inputs expanded as the samples are)
// compiled for the samples and run on them, bounded by options.run.
absl::StatusOr<std::vector<runtime::RunValue>> RunKiln(const ir::Graph& graph,
                                                       const Samples& samples,
                                                       const VerifyOptions& options) {
  ASSIGN_OR_RETURN(ir::Graph expanded, GraphForSamples(graph, samples));
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> exe,
                   runtime::Executable::Compile(expanded, samples.signature, {}));
  return exe->RunValues(samples.kiln, options.run);
}

// Whether Kiln's run was stopped by its bounds (the load's deadline, the
// server stopping, the memory limit) rather than by the model.
bool StoppedByBounds(const absl::Status& s) {
  return absl::IsDeadlineExceeded(s) || absl::IsCancelled(s) || absl::IsResourceExhausted(s);
}

// Whether two graphs have the same nodes and wiring (attributes and names may differ).
bool SameStructure(const ir::Graph& a, const ir::Graph& b) {
  if (a.nodes().size() != b.nodes().size() || a.values().size() != b.values().size() ||
      a.inputs() != b.inputs() || a.outputs() != b.outputs()) {
    return false;
  }
  for (size_t n = 0; n < a.nodes().size(); ++n) {
    const ir::Node& x = a.nodes()[n];
    const ir::Node& y = b.nodes()[n];
    if (x.kind != y.kind || x.inputs != y.inputs || x.outputs != y.outputs ||
        x.blocks != y.blocks) {
      return false;
    }
  }
  return true;
}

// The first traced node whose outputs diverge, as the report's divergence.
// The values compared are the served graph's own (the import is repeated only
// to learn which torch value each ir value stands for).
absl::Status Bisect(importer::PreparedModule& prepared, const importer::ImportOptions& import,
                    const ir::Graph& served, const Samples& samples,
                    const VerifyOptions& options, VerifyReport& report) {
  importer::ImportTrace trace;
  ASSIGN_OR_RETURN(ir::Graph graph,
                   importer::ImportTorchGraph(*prepared.graph, import, /*has_self=*/true, &trace));
  if (SameStructure(graph, served)) graph = served;
  torch::jit::Graph& tg = *prepared.graph;
  std::vector<std::pair<const importer::ImportTrace::Entry*, size_t>> order;
  for (const importer::ImportTrace::Entry& entry : trace.nodes) {
    for (size_t o = 0; o < entry.outputs.size(); ++o) {
      graph.AddOutput(entry.outputs[o].second, absl::StrCat("trace.", order.size()));
      torch::jit::Value* v = const_cast<torch::jit::Value*>(entry.outputs[o].first);
      torch::jit::WithInsertPoint guard(v->node()->next());
      torch::jit::Value* none = tg.insertConstant(c10::IValue());
      torch::jit::Node* clone = tg.create(c10::aten::clone, {v, none});
      tg.insertNode(clone);
      clone->output()->setType(v->type());
      tg.registerOutput(clone->output());
      order.push_back({&entry, o});
    }
  }
  const size_t first_trace = graph.outputs().size() - order.size();
  ASSIGN_OR_RETURN(std::vector<runtime::RunValue> kiln, RunKiln(graph, samples, options));
  const std::vector<c10::IValue> torch = RunTorch(prepared.graph, prepared, samples.torch);
  const size_t torch_first = torch.size() - order.size();
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& [entry, o] = order[k];
    ASSIGN_OR_RETURN(std::vector<at::Tensor> mine, Flatten(kiln[first_trace + k]));
    const c10::IValue& ref = torch[torch_first + k];
    if (mine.size() != 1 || !ref.isTensor()) continue;
    OutputCheck check = Compare("", mine[0], ref.toTensor(), options.tolerance);
    if (check.passed) continue;
    const std::string kind = entry->node->kind().toQualString();
    report.divergent_op = kind;
    report.divergence = absl::StrCat(
        "node ", entry->index, " (", kind, ") output %", entry->outputs[o].first->debugName(),
        ": ",
        check.problem.empty()
            ? absl::StrFormat("max |diff| %.3g (max |ref| %.3g)", check.max_abs_diff,
                              check.max_abs_ref)
            : check.problem);
    return absl::OkStatus();
  }
  report.divergence = "the outputs differ, but no intermediate value of forward()'s top level does";
  return absl::OkStatus();
}

// The float64 reference (VerifyOptions::tolerance): re-judges the float
// outputs past the tolerance against libtorch's float64 result for the same
// model (its parameters and buffers converted) and samples (float inputs
// converted). `kiln` and `torch` hold the compared tensors, one per
// report.outputs entry.
void Arbitrate(std::string_view model_bytes, const Samples& samples,
               const std::vector<at::Tensor>& kiln, const std::vector<at::Tensor>& torch,
               const VerifyOptions& options, VerifyReport& report) {
  for (size_t i = 0; i < report.outputs.size(); ++i) {
    const OutputCheck& check = report.outputs[i];
    if (check.passed) continue;
    // Only float values that differ in value, not in dtype or shape, are rounding candidates.
    if (!check.problem.empty() || !torch[i].defined() || !torch[i].is_floating_point()) return;
  }
  std::vector<at::Tensor> exact;
  try {
    const importer::PreparedModule prepared = importer::LoadAndPrepare(model_bytes, true);
    std::vector<c10::IValue> inputs;
    for (const c10::IValue& v : samples.torch) {
      if (v.isTensor() && v.toTensor().is_floating_point()) {
        inputs.push_back(v.toTensor().to(at::kDouble));
      } else if (v.isTensorList()) {
        c10::List<at::Tensor> list;
        for (const at::Tensor& t : v.toTensorVector()) {
          list.push_back(t.is_floating_point() ? t.to(at::kDouble) : t);
        }
        inputs.push_back(c10::IValue(std::move(list)));
      } else {
        inputs.push_back(v);
      }
    }
    for (const c10::IValue& v : RunTorch(prepared.graph, prepared, inputs)) {
      for (at::Tensor& t : Flatten(v)) exact.push_back(std::move(t));
    }
  } catch (const std::exception& e) {
    report.float64_problem = FirstLine(e).substr(0, 200);
    return;
  }
  if (exact.size() != report.outputs.size()) {
    report.float64_problem = absl::StrCat("the float64 run gives ", exact.size(), " outputs, not ",
                                          report.outputs.size());
    return;
  }
  bool passed = true;
  for (size_t i = 0; i < report.outputs.size(); ++i) {
    OutputCheck& check = report.outputs[i];
    if (check.passed) continue;
    if (exact[i].sizes() != kiln[i].sizes() || !exact[i].is_floating_point()) {
      report.float64_problem = "the float64 run gives other outputs";
      return;
    }
    const double scale = std::max(MaxAbs(exact[i]), 1e-30);
    const double kiln_distance = MaxAbsDiff(kiln[i], exact[i]);
    const double torch_distance = MaxAbsDiff(torch[i], exact[i]);
    check.kiln_vs_float64 = kiln_distance / scale;
    check.libtorch_vs_float64 = torch_distance / scale;
    check.passed = kiln_distance <= std::max(options.tolerance * scale + 1e-6,
                                             VerifyOptions::kFloat64Margin * torch_distance);
    passed &= check.passed;
  }
  report.passed = passed;
}

absl::StatusOr<VerifyReport> VerifyOnceImpl(std::string_view model_bytes,
                                            const importer::ImportOptions& import,
                                            const runtime::Model& model,
                                            const VerifyOptions& options) {
  VerifyReport report;
  importer::PreparedModule prepared = importer::LoadAndPrepare(model_bytes);
  std::string skip;
  ASSIGN_OR_RETURN(Samples samples, MakeSamples(model, model.graph(), options, &skip));
  if (!skip.empty()) {
    report.skipped = true;
    report.skip_reason = skip;
    return report;
  }
  report.samples = samples.text;

  // Kiln's side first: a model that runs past the load's deadline (a loop
  // that never ends) or past the memory limit is stopped here, before
  // libtorch, whose run cannot be interrupted, gets it. Any other failure is
  // reported once libtorch has had its say about the samples.
  // Compiled here rather than through the model, so the sample's signature
  // takes no room in the model's plan cache and counts as no request.
  absl::StatusOr<std::vector<runtime::RunValue>> kiln_run = RunKiln(model.graph(), samples, options);
  if (!kiln_run.ok() && StoppedByBounds(kiln_run.status())) return kiln_run.status();
  std::vector<c10::IValue> torch;
  try {
    torch = RunTorch(prepared.graph, prepared, samples.torch);
  } catch (const std::exception& e) {
    // The model itself rejects the sample (a fixed image size, a value range).
    report.skipped = true;
    report.skip_reason = absl::StrCat("libtorch rejected the sample inputs (", samples.text,
                                      "): ", FirstLine(e),
                                      "; give their shapes in the load config's verify.inputs");
    return report;
  }
  if (!kiln_run.ok()) return kiln_run.status();
  std::vector<runtime::RunValue>& kiln = *kiln_run;
  const ir::Graph& graph = model.graph();
  if (kiln.size() != torch.size()) {
    return absl::InternalError(absl::StrCat("Kiln's graph has ", kiln.size(),
                                            " outputs, libtorch's ", torch.size()));
  }
  // One entry per report.outputs entry; undefined where the sides differ in count.
  std::vector<at::Tensor> kiln_flat, torch_flat;
  for (size_t k = 0; k < kiln.size(); ++k) {
    ASSIGN_OR_RETURN(std::vector<at::Tensor> mine, Flatten(kiln[k]));
    std::vector<at::Tensor> ref = Flatten(torch[k]);
    const std::string& name = graph.output_names()[k];
    if (mine.size() != ref.size()) {
      OutputCheck check;
      check.name = name;
      check.passed = false;
      check.problem = absl::StrCat("Kiln gives ", mine.size(), " tensors, libtorch ", ref.size());
      report.outputs.push_back(check);
      report.passed = false;
      kiln_flat.emplace_back();
      torch_flat.emplace_back();
      continue;
    }
    for (size_t e = 0; e < mine.size(); ++e) {
      OutputCheck check = Compare(mine.size() == 1 && kiln[k].kind == runtime::RunValue::Kind::kTensor
                                      ? name
                                      : absl::StrCat(name, ".", e),
                                  mine[e], ref[e], options.tolerance);
      report.passed &= check.passed;
      report.outputs.push_back(std::move(check));
      kiln_flat.push_back(mine[e]);
      torch_flat.push_back(ref[e]);
    }
  }
  if (!report.passed) Arbitrate(model_bytes, samples, kiln_flat, torch_flat, options, report);
  if (!report.passed) {
    importer::ImportOptions named = import;
    named.input_names.clear();
    for (ir::ValueId v : graph.inputs()) named.input_names.push_back(graph.value(v).name);
    named.output_names = graph.output_names();
    absl::Status s = Bisect(prepared, named, graph, samples, options, report);
    if (!s.ok()) report.divergence = absl::StrCat("(cannot locate: ", s.message(), ")");
  }
  return report;
}

}  // namespace

std::string VerifyReport::Summary() const {
  if (skipped) return absl::StrCat("skipped: ", skip_reason);
  std::vector<std::string> parts;
  for (const OutputCheck& o : outputs) {
    std::string part = o.problem.empty()
                           ? absl::StrFormat("%s max |diff| %.3g", o.name, o.max_abs_diff)
                           : absl::StrCat(o.name, ": ", o.problem);
    if (o.kiln_vs_float64.has_value()) {
      absl::StrAppend(&part, absl::StrFormat(" (%s: Kiln %.2g and libtorch %.2g of max |ref| from "
                                             "libtorch's float64 result)",
                                             o.passed ? "float32 rounding" : "vs float64",
                                             *o.kiln_vs_float64, *o.libtorch_vs_float64));
    }
    parts.push_back(std::move(part));
  }
  std::string s = absl::StrCat(passed ? "passed" : "FAILED", " on ", samples, ": ",
                               absl::StrJoin(parts, ", "));
  if (!passed && !float64_problem.empty()) {
    absl::StrAppend(&s, "; no float64 reference: ", float64_problem);
  }
  if (!divergence.empty()) absl::StrAppend(&s, "; first divergence: ", divergence);
  if (!forced_fallback.empty()) {
    absl::StrAppend(&s, "; served through the fallback: ", absl::StrJoin(forced_fallback, ", "));
  }
  return s;
}

absl::StatusOr<VerifyReport> VerifyOnce(std::string_view model_bytes,
                                        const importer::ImportOptions& import,
                                        const runtime::Model& model,
                                        const VerifyOptions& options) {
  try {
    return VerifyOnceImpl(model_bytes, import, model, options);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("verification failed in libtorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("verification failed: ", e.what()));
  }
}

absl::StatusOr<VerifiedModel> VerifyModel(std::string_view model_bytes,
                                          const importer::ImportOptions& import,
                                          std::unique_ptr<runtime::Model> model,
                                          const ModelBuilder& build,
                                          const VerifyOptions& options) {
  ASSIGN_OR_RETURN(VerifyReport report, VerifyOnce(model_bytes, import, *model, options));
  importer::ImportOptions forced = import;
  std::vector<std::string> added;
  while (!report.passed && static_cast<int>(added.size()) < options.fallback_on_mismatch &&
         report.divergent_op.rfind("aten::", 0) == 0 &&
         std::find(forced.force_fallback.begin(), forced.force_fallback.end(),
                   report.divergent_op) == forced.force_fallback.end()) {
    forced.force_fallback.push_back(report.divergent_op);
    added.push_back(report.divergent_op);
    ASSIGN_OR_RETURN(ir::Graph graph, importer::ImportTorchScript(model_bytes, forced));
    ASSIGN_OR_RETURN(model, build(std::move(graph)));
    ASSIGN_OR_RETURN(report, VerifyOnce(model_bytes, forced, *model, options));
  }
  report.forced_fallback = added;
  if (!report.passed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "verified import failed: Kiln's outputs differ from libtorch's (", report.Summary(),
        "). Set \"verify\": {\"on_mismatch\": \"fallback\"} in the load config to serve the "
        "diverging ops through libtorch"));
  }
  return VerifiedModel{std::move(model), std::move(report)};
}

}  // namespace kiln::fallback
