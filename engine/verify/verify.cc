// Verified import, the comparing half (see verify.h).
//
// Samples are drawn from the model's input contract with a fixed seed:
// floats N(0, 1), integers in [0, 4), bools at random; dims the contract
// leaves open are 1 for the first (batch) dim, 224 for the spatial dims of an
// image-like rank-4 input, else 8. Kiln runs them first, bounded by the
// load's deadline and memory limit; then libtorch (TorchReference) runs the
// same samples through the uploaded program.
//
// A float output past the tolerance is judged again against libtorch's
// float64 result (Arbitrate): float32 rounding alone separates two float32
// computations of a deep network by about 1e-4.
//
// To find the first diverging node, libtorch imports the program again with
// an import trace and returns its value of every traced node output; every
// traced value becomes an extra output of the Kiln graph, one run gives
// Kiln's, and the first, in graph order, past the tolerance is the
// divergence.
#include "engine/verify/verify.h"
#include "engine/verify/sample_tensor.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/common/element.h"
#include "engine/common/half.h"
#include "engine/common/status_macros.h"
#include "engine/common/tolerance.h"

namespace kiln::verify {
namespace {

std::string Describe(const Tensor& t) { return absl::StrCat(DTypeName(t.dtype()), DimsToString(t.dims())); }

// max |a - b| in double over tensors of the same shape: NaN against NaN is no
// difference, NaN against a number an infinite one.
double MaxAbsDiff(const Tensor& a, const Tensor& b) {
  double max = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const double x = LoadAsDouble(a.raw_data(), a.dtype(), i);
    const double y = LoadAsDouble(b.raw_data(), b.dtype(), i);
    double d = std::fabs(x - y);
    if (std::isnan(x) && std::isnan(y)) d = 0;
    if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
    max = std::max(max, d);
  }
  return max;
}

// max |t| in double, NaNs left out.
double MaxAbs(const Tensor& t) {
  double max = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double x = std::fabs(LoadAsDouble(t.raw_data(), t.dtype(), i));
    if (!std::isnan(x)) max = std::max(max, x);
  }
  return max;
}

// Compares Kiln's value with libtorch's.
OutputCheck Compare(const std::string& name, const Tensor& kiln, const Tensor& ref,
                    double tolerance) {
  OutputCheck check;
  check.name = name;
  if (kiln.dims() != ref.dims() || kiln.dtype() != ref.dtype()) {
    check.passed = false;
    check.problem = absl::StrCat("Kiln gives ", Describe(kiln), ", libtorch ", Describe(ref));
    return check;
  }
  if (kiln.num_elements() == 0) return check;
  check.max_abs_diff = MaxAbsDiff(kiln, ref);
  check.max_abs_ref = MaxAbs(ref);
  const bool exact = !IsFloatingPoint(ref.dtype());
  tolerance = std::max(tolerance, StorageRoundingTolerance(ref.dtype()));
  check.passed = exact ? check.max_abs_diff == 0
                       : check.max_abs_diff <= tolerance * check.max_abs_ref + 1e-6;
  return check;
}

// Kiln's value flattened as libtorch's (ReferenceResult::outputs).
std::vector<Tensor> Flatten(const runtime::RunValue& v) {
  if (v.kind == runtime::RunValue::Kind::kTensor) return {v.tensor};
  if (v.kind == runtime::RunValue::Kind::kTensorList) return v.list;
  return {};
}

struct Samples {
  // Kiln's side runs the graph with its list inputs expanded (one input per
  // element, see runtime::ExpandListInputs); `lengths` says how.
  std::vector<std::optional<size_t>> lengths;
  bool has_list = false;
  std::vector<kernels::TensorInfo> signature;
  std::vector<runtime::RunValue> kiln;
  // libtorch's: one per forward() argument.
  std::vector<ReferenceInput> torch;
  std::string text;
};

// Writes `v` as element `i` of a buffer of `dtype`.
void StoreDouble(void* data, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::kBool: static_cast<bool*>(data)[i] = v != 0; break;
    case DType::kUInt8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v); break;
    case DType::kInt8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v); break;
    case DType::kInt16: static_cast<int16_t*>(data)[i] = static_cast<int16_t>(v); break;
    case DType::kInt32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v); break;
    case DType::kInt64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v); break;
    case DType::kF32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(data)[i] = v; break;
    case DType::kF16: static_cast<uint16_t*>(data)[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBF16: static_cast<uint16_t*>(data)[i] = FloatToBF16(static_cast<float>(v)); break;
    default: break;
  }
}

// A copy libtorch may have: Kiln's own stays as Kiln's run left it.
Tensor Copy(const Tensor& t) {
  Tensor c = Tensor::Zeros(t.dtype(), t.dims());
  if (t.byte_size() > 0) std::memcpy(c.raw_data(), t.raw_data(), t.byte_size());
  return c;
}

// "the sample input 'x'", in messages.
std::string SampleName(const std::string& input) {
  return absl::StrCat("the sample input '", input, "'");
}

// A request's own values as the samples (VerifyOptions::values).
absl::StatusOr<Samples> RequestSamples(const runtime::Model& model, const ir::Graph& graph,
                                       const std::vector<runtime::RunValue>& values) {
  if (values.size() != graph.inputs().size()) {
    return absl::InternalError(absl::StrCat("verifying a request of ", values.size(),
                                            " inputs on a graph of ", graph.inputs().size()));
  }
  Samples s;
  std::vector<std::string> text;
  for (size_t i = 0; i < values.size(); ++i) {
    const runtime::RunValue& v = values[i];
    const std::string& name =
        i < model.inputs().size() ? model.inputs()[i].name : graph.value(graph.inputs()[i]).name;
    if (v.kind == runtime::RunValue::Kind::kTensorList) {
      // Kiln's side runs the elements in place of the list (as MakeSamples'
      // lists do); libtorch's gets the list.
      s.lengths.push_back(v.list.size());
      s.has_list = true;
      std::vector<Tensor> list;
      std::vector<std::string> shown;
      for (const Tensor& e : v.list) {
        s.signature.push_back(kernels::TensorInfo{e.dtype(), e.dims(), nullptr, true});
        s.kiln.push_back(runtime::RunValue::Of(e));
        list.push_back(Copy(e));
        shown.push_back(absl::StrCat(DTypeName(e.dtype()), DimsToString(e.dims())));
      }
      s.torch.push_back(ReferenceInput{runtime::RunValue::List(std::move(list)), false});
      const std::string& list_name =
          i < model.inputs().size() && !model.inputs()[i].list.empty() ? model.inputs()[i].list
                                                                       : name;
      text.push_back(absl::StrCat(list_name, "=[", absl::StrJoin(shown, ", "), "]"));
      continue;
    }
    s.lengths.push_back(std::nullopt);
    if (v.kind == runtime::RunValue::Kind::kNone) {
      s.signature.push_back(kernels::TensorInfo{DType::kUnknown, {}, nullptr, false});
      s.kiln.push_back(runtime::RunValue::None());
      s.torch.push_back(ReferenceInput{runtime::RunValue::None(), false});
      text.push_back(absl::StrCat(name, "=None"));
      continue;
    }
    const bool scalar = ir::IsScalarKind(graph.value(graph.inputs()[i]).kind);
    s.signature.push_back(kernels::TensorInfo{v.tensor.dtype(), v.tensor.dims(), nullptr, true});
    s.kiln.push_back(runtime::RunValue::Of(v.tensor));
    s.torch.push_back(ReferenceInput{runtime::RunValue::Of(Copy(v.tensor)), scalar});
    text.push_back(absl::StrCat(name, "=", DTypeName(v.tensor.dtype()),
                                scalar ? "" : DimsToString(v.tensor.dims())));
  }
  s.text = absl::StrJoin(text, ", ");
  return s;
}

// Sample inputs from the contract (and the overrides); a reason when none can be made.
absl::StatusOr<Samples> MakeSamples(const runtime::Model& model, const ir::Graph& graph,
                                    const VerifyOptions& options, std::string* skip) {
  Samples s;
  std::mt19937_64 rng(options.seed);
  std::vector<std::string> text;
  if (options.values.has_value()) return RequestSamples(model, graph, *options.values);
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
      if (spec.dtype == DType::kInt64) {
        *t.data<int64_t>() = 2;
      } else if (spec.dtype == DType::kF64) {
        *t.data<double>() = 0.5;
      } else {
        *t.data<bool>() = true;
      }
      s.signature.push_back(kernels::TensorInfo{t.dtype(), t.dims(), nullptr, true});
      s.kiln.push_back(runtime::RunValue::Of(t));
      s.torch.push_back(ReferenceInput{runtime::RunValue::Of(Copy(t)), true});
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
      std::vector<Tensor> list;
      for (size_t k = 0; k < kListSample; ++k) {
        ASSIGN_OR_RETURN(Tensor sample, SampleTensor(spec.dtype, dims, rng, SampleName(spec.list),
                                                     options.run.memory));
        s.signature.push_back(kernels::TensorInfo{spec.dtype, dims, nullptr, true});
        list.push_back(Copy(sample));
        s.kiln.push_back(runtime::RunValue::Of(std::move(sample)));
      }
      s.torch.push_back(ReferenceInput{runtime::RunValue::List(std::move(list)), false});
      text.push_back(absl::StrCat(spec.list, "=[", kListSample, " x ", DTypeName(spec.dtype),
                                  DimsToString(dims), "]"));
      continue;
    }
    ASSIGN_OR_RETURN(Tensor sample, SampleTensor(spec.dtype, dims, rng, SampleName(spec.name),
                                                 options.run.memory));
    s.signature.push_back(kernels::TensorInfo{spec.dtype, dims, nullptr, true});
    s.torch.push_back(ReferenceInput{runtime::RunValue::Of(Copy(sample)), false});
    s.kiln.push_back(runtime::RunValue::Of(std::move(sample)));
    text.push_back(absl::StrCat(spec.name, "=", DTypeName(spec.dtype), DimsToString(dims)));
  }
  s.text = absl::StrJoin(text, ", ");
  return s;
}

// Kiln's side: `graph` (with its list inputs expanded as the samples are)
// compiled for the samples and run on them, bounded by options.run.
absl::StatusOr<std::vector<runtime::RunValue>> RunKiln(const ir::Graph& graph,
                                                       const Samples& samples,
                                                       const VerifyOptions& options) {
  ir::Graph expanded = graph;
  if (samples.has_list) {
    ASSIGN_OR_RETURN(expanded, runtime::ExpandListInputs(graph, samples.lengths));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> exe,
                   runtime::Executable::Compile(expanded, samples.signature, options.compile));
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
// The values compared are the served graph's own when the re-import has its
// structure (the import is repeated only to learn which torch value each ir
// value stands for).
absl::Status Bisect(TorchReference& reference, const importer::ImportOptions& import,
                    const ir::Graph& served, const Samples& samples,
                    const VerifyOptions& options, VerifyReport& report) {
  ReferenceRequest request;
  request.inputs = samples.torch;
  request.trace = true;
  request.import = import;
  ASSIGN_OR_RETURN(ReferenceResult traced, reference.Run(request));
  if (!traced.trace_problem.empty() || !traced.trace_graph.has_value()) {
    return absl::InvalidArgumentError(traced.trace_problem);
  }
  ir::Graph graph = SameStructure(*traced.trace_graph, served) ? served : *traced.trace_graph;
  const size_t first_trace = graph.outputs().size();
  for (size_t k = 0; k < traced.trace.size(); ++k) {
    const int32_t v = traced.trace[k].value;
    if (v < 0 || static_cast<size_t>(v) >= graph.values().size()) {
      return absl::InternalError("the trace names a value the graph does not have");
    }
    graph.AddOutput(static_cast<ir::ValueId>(v), absl::StrCat("trace.", k));
  }
  ASSIGN_OR_RETURN(std::vector<runtime::RunValue> kiln, RunKiln(graph, samples, options));
  for (size_t k = 0; k < traced.trace.size(); ++k) {
    const TraceValue& t = traced.trace[k];
    const std::vector<Tensor> mine = Flatten(kiln[first_trace + k]);
    if (mine.size() != 1 || !t.ref.has_value()) continue;
    OutputCheck check = Compare("", mine[0], *t.ref, options.tolerance);
    if (check.passed) continue;
    report.divergent_op = t.op;
    report.divergence = absl::StrCat(
        t.where, ": ",
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
// report.outputs entry (none where the sides differ in count).
absl::Status Arbitrate(TorchReference& reference, const Samples& samples,
                       const std::vector<std::optional<Tensor>>& kiln,
                       const std::vector<std::optional<Tensor>>& torch,
                       const VerifyOptions& options, VerifyReport& report) {
  for (size_t i = 0; i < report.outputs.size(); ++i) {
    const OutputCheck& check = report.outputs[i];
    if (check.passed) continue;
    // Only float values that differ in value, not in dtype or shape, are rounding candidates.
    if (!check.problem.empty() || !torch[i].has_value() || !IsFloatingPoint(torch[i]->dtype())) {
      return absl::OkStatus();
    }
  }
  ReferenceRequest request;
  request.inputs = samples.torch;
  request.float64 = true;
  ASSIGN_OR_RETURN(ReferenceResult result, reference.Run(request));
  if (!result.float64_problem.empty()) {
    report.float64_problem = result.float64_problem.substr(0, 200);
    return absl::OkStatus();
  }
  const std::vector<Tensor>& exact = result.float64_outputs;
  if (exact.size() != report.outputs.size()) {
    report.float64_problem = absl::StrCat("the float64 run gives ", exact.size(), " outputs, not ",
                                          report.outputs.size());
    return absl::OkStatus();
  }
  bool passed = true;
  for (size_t i = 0; i < report.outputs.size(); ++i) {
    OutputCheck& check = report.outputs[i];
    if (check.passed) continue;
    if (exact[i].dims() != kiln[i]->dims() || !IsFloatingPoint(exact[i].dtype())) {
      report.float64_problem = "the float64 run gives other outputs";
      return absl::OkStatus();
    }
    const double scale = std::max(MaxAbs(exact[i]), 1e-30);
    const double kiln_distance = MaxAbsDiff(*kiln[i], exact[i]);
    const double torch_distance = MaxAbsDiff(*torch[i], exact[i]);
    check.kiln_vs_float64 = kiln_distance / scale;
    check.libtorch_vs_float64 = torch_distance / scale;
    check.passed = kiln_distance <= std::max(options.tolerance * scale + 1e-6,
                                             VerifyOptions::kFloat64Margin * torch_distance);
    passed &= check.passed;
  }
  report.passed = passed;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> SampleTensor(DType dtype, const Dims& dims, std::mt19937_64& rng,
                                    const std::string& what,
                                    const std::shared_ptr<MemoryBudget>& memory) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, dims, what, memory));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3);
  const bool real = IsFloatingPoint(dtype);
  for (int64_t k = 0; k < t.num_elements(); ++k) {
    double v = real ? normal(rng) : small(rng);
    if (dtype == DType::kBool) v = static_cast<int64_t>(v) % 2;
    StoreDouble(t.raw_data(), dtype, k, v);
  }
  return t;
}


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

absl::StatusOr<VerifyReport> VerifyOnce(TorchReference& reference,
                                        const importer::ImportOptions& import,
                                        const runtime::Model& model,
                                        const VerifyOptions& options) {
  VerifyReport report;
  std::string skip;
  ASSIGN_OR_RETURN(Samples samples, MakeSamples(model, model.graph(), options, &skip));
  if (!skip.empty()) {
    report.skipped = true;
    report.skip_reason = skip;
    return report;
  }
  report.samples = options.values_source.empty()
                       ? samples.text
                       : absl::StrCat(options.values_source, " ", samples.text);
  report.signature = samples.signature;

  // Kiln's side first: a model that runs past the load's deadline (a loop
  // that never ends) or past the memory limit is stopped here, before
  // libtorch gets it. Any other failure is reported once libtorch has had
  // its say about the samples. Compiled here rather than through the model,
  // so the sample's signature takes no room in the model's plan cache and
  // counts as no request; on first use, the outputs the serving plan already
  // gave the request (options.kiln_outputs) are judged instead.
  absl::StatusOr<std::vector<runtime::RunValue>> kiln_run =
      options.kiln_outputs.has_value() ? *options.kiln_outputs
                                       : RunKiln(model.graph(), samples, options);
  if (!kiln_run.ok() && StoppedByBounds(kiln_run.status())) return kiln_run.status();
  ReferenceRequest request;
  request.inputs = samples.torch;
  ASSIGN_OR_RETURN(ReferenceResult torch, reference.Run(request));
  if (!torch.unavailable.empty()) {
    report.skipped = true;
    report.skip_reason = absl::StrCat("no reference to compare with: ", torch.unavailable);
    return report;
  }
  if (!torch.rejected.empty()) {
    // The model itself rejects the sample (a fixed image size, a value range).
    report.skipped = true;
    report.skip_reason = absl::StrCat("libtorch rejected the sample inputs (", samples.text,
                                      "): ", torch.rejected,
                                      "; give their shapes in the load config's verify.inputs");
    return report;
  }
  report.reference_outputs = torch.outputs;
  if (!kiln_run.ok()) return kiln_run.status();
  std::vector<runtime::RunValue>& kiln = *kiln_run;
  const ir::Graph& graph = model.graph();
  if (kiln.size() != torch.outputs.size()) {
    return absl::InternalError(absl::StrCat("Kiln's graph has ", kiln.size(),
                                            " outputs, libtorch's ", torch.outputs.size()));
  }
  // One entry per report.outputs entry; none where the sides differ in count.
  std::vector<std::optional<Tensor>> kiln_flat, torch_flat;
  for (size_t k = 0; k < kiln.size(); ++k) {
    std::vector<Tensor> mine = Flatten(kiln[k]);
    const std::vector<Tensor>& ref = torch.outputs[k];
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
  if (!report.passed) {
    RETURN_IF_ERROR(Arbitrate(reference, samples, kiln_flat, torch_flat, options, report));
  }
  if (!report.passed) {
    importer::ImportOptions named = import;
    named.input_names.clear();
    for (ir::ValueId v : graph.inputs()) named.input_names.push_back(graph.value(v).name);
    named.output_names = graph.output_names();
    absl::Status s = Bisect(reference, named, graph, samples, options, report);
    if (!s.ok()) {
      if (StoppedByBounds(s)) return s;
      report.divergence = absl::StrCat("(cannot locate: ", s.message(), ")");
    }
  }
  return report;
}

absl::StatusOr<VerifiedModel> RepairWithFallback(TorchReference& reference,
                                                 const importer::ImportOptions& import,
                                                 VerifyReport report,
                                                 const ModelRebuilder& rebuild,
                                                 const VerifyOptions& given) {
  // Each rebuilt model is run afresh: outputs given for the first are not its.
  VerifyOptions options = given;
  options.kiln_outputs.reset();
  VerifiedModel out;
  importer::ImportOptions forced = import;
  std::vector<std::string> added;
  while (!report.passed && static_cast<int>(added.size()) < options.fallback_on_mismatch &&
         report.divergent_op.rfind("aten::", 0) == 0 &&
         std::find(forced.force_fallback.begin(), forced.force_fallback.end(),
                   report.divergent_op) == forced.force_fallback.end()) {
    forced.force_fallback.push_back(report.divergent_op);
    added.push_back(report.divergent_op);
    ASSIGN_OR_RETURN(out.model, rebuild(forced));
    ASSIGN_OR_RETURN(report, VerifyOnce(reference, forced, *out.model, options));
  }
  report.forced_fallback = added;
  out.report = std::move(report);
  return out;
}

absl::StatusOr<VerifiedModel> VerifyModel(TorchReference& reference,
                                          const importer::ImportOptions& import,
                                          std::unique_ptr<runtime::Model> model,
                                          const ModelRebuilder& rebuild,
                                          const VerifyOptions& options) {
  ASSIGN_OR_RETURN(VerifyReport first, VerifyOnce(reference, import, *model, options));
  ASSIGN_OR_RETURN(VerifiedModel verified,
                   RepairWithFallback(reference, import, std::move(first), rebuild, options));
  if (verified.model == nullptr) verified.model = std::move(model);
  const VerifyReport& report = verified.report;
  if (!report.passed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "verified import failed: Kiln's outputs differ from libtorch's (", report.Summary(),
        "). Set \"verify\": {\"on_mismatch\": \"fallback\"} in the load config to serve the "
        "diverging ops through libtorch"));
  }
  return verified;
}

}  // namespace kiln::verify
