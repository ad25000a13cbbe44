// The libtorch half of the verified import (see torch_reference.h).
//
// For the trace (ReferenceRequest::trace), the program is imported again
// with an ImportTrace, and a clone of every traced value (taken right after
// it is computed, so a later in-place op cannot change it) becomes an extra
// output of the torch graph: one run gives every intermediate value.
#include "engine/fallback/torch_reference.h"

#include "engine/fallback/export_reference.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/import_context.h"
#include "engine/importer/torchscript/prepared_module.h"

namespace kiln::fallback {

// A copy of a Kiln tensor as an at::Tensor (libtorch's in-place ops must not
// reach the caller's buffers).
absl::StatusOr<at::Tensor> ToTorch(const Tensor& t) {
  ASSIGN_OR_RETURN(c10::ScalarType st, importer::TorchFromDType(t.dtype()));
  return at::from_blob(const_cast<void*>(t.raw_data()),
                       std::vector<int64_t>(t.dims().begin(), t.dims().end()),
                       at::TensorOptions().dtype(st))
      .clone();
}

// A copy of an at::Tensor as a Kiln tensor.
absl::StatusOr<Tensor> FromTorch(const at::Tensor& value) {
  const at::Tensor t = value.contiguous();
  ASSIGN_OR_RETURN(DType dtype, importer::DTypeFromTorch(t.scalar_type()));
  Tensor out = Tensor::Zeros(dtype, Dims(t.sizes().begin(), t.sizes().end()));
  if (out.byte_size() > 0) std::memcpy(out.raw_data(), t.data_ptr(), out.byte_size());
  return out;
}

// One result flattened: a tensor gives one, a list its elements, an
// int/float/bool a 0-dim tensor, anything else none.
absl::StatusOr<std::vector<Tensor>> Flatten(const c10::IValue& v) {
  std::vector<at::Tensor> ts;
  if (v.isTensor()) ts = {v.toTensor()};
  if (v.isTensorList()) ts = v.toTensorVector();
  if (v.isInt()) ts = {at::scalar_tensor(v.toInt(), at::kLong)};
  if (v.isDouble()) ts = {at::scalar_tensor(v.toDouble(), at::kDouble)};
  if (v.isBool()) ts = {at::scalar_tensor(v.toBool(), at::kBool)};
  std::vector<Tensor> out;
  for (const at::Tensor& t : ts) {
    ASSIGN_OR_RETURN(Tensor k, FromTorch(t));
    out.push_back(std::move(k));
  }
  return out;
}

// Whether libtorch failed for want of memory (the worker's address-space
// limit): that ends the run, it is not the model rejecting the samples.
bool OutOfMemory(const std::exception& e) {
  const std::string what = e.what();
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
         what.find("can't allocate memory") != std::string::npos;
}

// A libtorch exception's message: its first line, without the backtrace.
std::string FirstLine(const std::exception& e) {
  std::string what = e.what();
  if (const c10::Error* ce = dynamic_cast<const c10::Error*>(&e)) {
    what = ce->what_without_backtrace();
  }
  return what.substr(0, what.find('\n'));
}

namespace {

using verify::ReferenceInput;
using verify::ReferenceRequest;
using verify::ReferenceResult;

// libtorch's inputs for the request, floats converted to double when `float64`.
absl::StatusOr<std::vector<c10::IValue>> ToIValues(const std::vector<ReferenceInput>& inputs,
                                                   bool float64) {
  auto convert = [&](const Tensor& t) -> absl::StatusOr<at::Tensor> {
    ASSIGN_OR_RETURN(at::Tensor x, ToTorch(t));
    return float64 && x.is_floating_point() ? x.to(at::kDouble) : x;
  };
  std::vector<c10::IValue> out;
  for (const ReferenceInput& in : inputs) {
    const runtime::RunValue& v = in.value;
    if (v.kind == runtime::RunValue::Kind::kNone) {
      out.emplace_back();
    } else if (v.kind == runtime::RunValue::Kind::kTensorList) {
      c10::List<at::Tensor> list;
      for (const Tensor& t : v.list) {
        ASSIGN_OR_RETURN(at::Tensor x, convert(t));
        list.push_back(std::move(x));
      }
      out.emplace_back(std::move(list));
    } else if (in.scalar) {
      switch (v.tensor.dtype()) {
        case DType::kInt64: out.emplace_back(*v.tensor.data<int64_t>()); break;
        case DType::kF64: out.emplace_back(*v.tensor.data<double>()); break;
        case DType::kBool: out.emplace_back(*v.tensor.data<bool>()); break;
        default:
          return absl::InvalidArgumentError(
              absl::StrCat("a scalar argument of dtype ", DTypeName(v.tensor.dtype())));
      }
    } else {
      ASSIGN_OR_RETURN(at::Tensor x, convert(v.tensor));
      out.emplace_back(std::move(x));
    }
  }
  return out;
}

// Runs the torch graph (input 0 is the frozen module) on `inputs`.
std::vector<c10::IValue> RunTorch(const std::shared_ptr<torch::jit::Graph>& graph,
                                  const importer::PreparedModule& prepared,
                                  const std::vector<c10::IValue>& inputs) {
  c10::InferenceMode inference;
  torch::jit::Code code(graph, "kiln_verify");
  torch::jit::Stack stack;
  stack.push_back(prepared.frozen._ivalue());
  for (const c10::IValue& v : inputs) stack.push_back(v);
  torch::jit::InterpreterState(code).run(stack);
  return stack;
}

absl::Status RunFloat64(std::string_view bytes, const ReferenceRequest& request,
                        ReferenceResult& result) {
  const importer::PreparedModule prepared = importer::LoadAndPrepare(bytes, true);
  ASSIGN_OR_RETURN(std::vector<c10::IValue> inputs, ToIValues(request.inputs, true));
  for (const c10::IValue& v : RunTorch(prepared.graph, prepared, inputs)) {
    ASSIGN_OR_RETURN(std::vector<Tensor> flat, Flatten(v));
    for (Tensor& t : flat) result.float64_outputs.push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status RunTraced(std::string_view bytes, const ReferenceRequest& request,
                       ReferenceResult& result) {
  importer::PreparedModule prepared = importer::LoadAndPrepare(bytes);
  importer::ImportTrace trace;
  ASSIGN_OR_RETURN(ir::Graph graph, importer::ImportTorchGraph(*prepared.graph, request.import,
                                                               /*has_self=*/true, &trace));
  torch::jit::Graph& tg = *prepared.graph;
  for (const importer::ImportTrace::Entry& entry : trace.nodes) {
    for (const auto& [value, id] : entry.outputs) {
      torch::jit::Value* v = const_cast<torch::jit::Value*>(value);
      torch::jit::WithInsertPoint guard(v->node()->next());
      torch::jit::Value* none = tg.insertConstant(c10::IValue());
      torch::jit::Node* clone = tg.create(c10::aten::clone, {v, none});
      tg.insertNode(clone);
      clone->output()->setType(v->type());
      tg.registerOutput(clone->output());
      const std::string kind = entry.node->kind().toQualString();
      verify::TraceValue traced;
      traced.value = static_cast<int32_t>(id);
      traced.op = kind;
      traced.where = absl::StrCat("node ", entry.index, " (", kind, ") output %", v->debugName());
      result.trace.push_back(std::move(traced));
    }
  }
  ASSIGN_OR_RETURN(std::vector<c10::IValue> inputs, ToIValues(request.inputs, false));
  const std::vector<c10::IValue> torch = RunTorch(prepared.graph, prepared, inputs);
  const size_t first = torch.size() - result.trace.size();
  for (size_t k = 0; k < result.trace.size(); ++k) {
    const c10::IValue& ref = torch[first + k];
    if (!ref.isTensor()) continue;
    absl::StatusOr<Tensor> t = FromTorch(ref.toTensor());
    if (t.ok()) result.trace[k].ref = *std::move(t);
  }
  result.trace_graph = std::move(graph);
  return absl::OkStatus();
}

absl::StatusOr<ReferenceResult> RunReferenceImpl(std::string_view bytes,
                                                 const ReferenceRequest& request) {
  const importer::ModelFormat format = importer::DetectFormat(bytes);
  if (format == importer::ModelFormat::kExportedProgram ||
      format == importer::ModelFormat::kLegacyExportedProgram) {
    return RunExportReference(bytes, request);
  }
  ReferenceResult result;
  if (request.float64) {
    try {
      if (absl::Status s = RunFloat64(bytes, request, result); !s.ok()) {
        result.float64_problem = std::string(s.message());
      }
    } catch (const std::exception& e) {
      if (OutOfMemory(e)) throw;
      result.float64_problem = FirstLine(e).substr(0, 200);
    }
    return result;
  }
  if (request.trace) {
    try {
      if (absl::Status s = RunTraced(bytes, request, result); !s.ok()) {
        result.trace_problem = std::string(s.message());
      }
    } catch (const std::exception& e) {
      if (OutOfMemory(e)) throw;
      result.trace_problem = FirstLine(e).substr(0, 200);
    }
    if (!result.trace_problem.empty()) result.trace.clear();
    return result;
  }
  const importer::PreparedModule prepared = importer::LoadAndPrepare(bytes);
  ASSIGN_OR_RETURN(std::vector<c10::IValue> inputs, ToIValues(request.inputs, false));
  std::vector<c10::IValue> torch;
  try {
    torch = RunTorch(prepared.graph, prepared, inputs);
  } catch (const std::exception& e) {
    if (OutOfMemory(e)) throw;
    // The model itself rejects the sample (a fixed image size, a value range).
    result.rejected = FirstLine(e);
    return result;
  }
  for (const c10::IValue& v : torch) {
    ASSIGN_OR_RETURN(std::vector<Tensor> flat, Flatten(v));
    result.outputs.push_back(std::move(flat));
  }
  return result;
}

}  // namespace

absl::StatusOr<verify::ReferenceResult> RunReference(std::string_view model_bytes,
                                                     const verify::ReferenceRequest& request) {
  try {
    return RunReferenceImpl(model_bytes, request);
  } catch (const std::exception& e) {
    if (OutOfMemory(e)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("libtorch ran out of memory: ", FirstLine(e)));
    }
    if (const c10::Error* ce = dynamic_cast<const c10::Error*>(&e)) {
      return absl::InvalidArgumentError(
          absl::StrCat("verification failed in libtorch: ", ce->what_without_backtrace()));
    }
    return absl::InvalidArgumentError(absl::StrCat("verification failed: ", e.what()));
  }
}

}  // namespace kiln::fallback
