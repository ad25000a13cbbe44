#include "server/torch/torch_reference_codec.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cache/graph_serializer.h"
#include "engine/common/status_macros.h"

namespace kiln::server {
namespace {

void TensorToProto(const Tensor& t, v1::TensorData* out) {
  out->set_dtype(DTypeName(t.dtype()));
  for (int64_t d : t.dims()) out->add_dims(d);
  out->set_data(static_cast<const char*>(t.raw_data()), t.byte_size());
}

absl::StatusOr<Tensor> TensorFromProto(const v1::TensorData& proto) {
  ASSIGN_OR_RETURN(WireTensorType type, WireTensorTypeFromProto(proto.dtype(), proto.dims()));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(type.dtype, type.dims, "a reference tensor"));
  if (proto.data().size() != t.byte_size()) {
    return absl::InvalidArgumentError(absl::StrCat("a ", DTypeName(type.dtype),
                                                   DimsToString(type.dims), " tensor of ",
                                                   proto.data().size(), " bytes"));
  }
  if (t.byte_size() > 0) std::memcpy(t.raw_data(), proto.data().data(), t.byte_size());
  return t;
}

absl::StatusOr<std::vector<Tensor>> TensorsFromProto(
    const google::protobuf::RepeatedPtrField<v1::TensorData>& protos) {
  std::vector<Tensor> out;
  for (const v1::TensorData& p : protos) {
    ASSIGN_OR_RETURN(Tensor t, TensorFromProto(p));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

absl::StatusOr<WireTensorType> WireTensorTypeFromProto(
    const std::string& dtype, const google::protobuf::RepeatedField<int64_t>& dims) {
  const std::optional<DType> parsed = DTypeFromName(dtype);
  if (!parsed.has_value() || *parsed == DType::kUnknown) {
    return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", dtype, "'"));
  }
  WireTensorType type{*parsed, Dims(dims.begin(), dims.end())};
  for (int64_t d : type.dims) {
    if (d < 0) return absl::InvalidArgumentError("a negative dim");
  }
  return type;
}

v1::ReferenceRequest ReferenceRequestToProto(const verify::ReferenceRequest& request) {
  v1::ReferenceRequest proto;
  for (const verify::ReferenceInput& in : request.inputs) {
    v1::ReferenceValue* v = proto.add_inputs();
    v->set_scalar(in.scalar);
    switch (in.value.kind) {
      case runtime::RunValue::Kind::kNone: v->set_none(true); break;
      case runtime::RunValue::Kind::kTensorList:
        v->set_list(true);
        for (const Tensor& t : in.value.list) TensorToProto(t, v->add_tensors());
        break;
      case runtime::RunValue::Kind::kTensor: TensorToProto(in.value.tensor, v->add_tensors()); break;
    }
  }
  proto.set_float64(request.float64);
  proto.set_trace(request.trace);
  for (const std::string& n : request.import.input_names) proto.add_input_names(n);
  for (const std::string& n : request.import.output_names) proto.add_output_names(n);
  for (const std::string& n : request.import.force_fallback) proto.add_force_fallback(n);
  return proto;
}

absl::StatusOr<verify::ReferenceRequest> ReferenceRequestFromProto(
    const v1::ReferenceRequest& proto) {
  verify::ReferenceRequest request;
  for (const v1::ReferenceValue& v : proto.inputs()) {
    verify::ReferenceInput in;
    in.scalar = v.scalar();
    ASSIGN_OR_RETURN(std::vector<Tensor> tensors, TensorsFromProto(v.tensors()));
    if (v.none()) {
      in.value = runtime::RunValue::None();
    } else if (v.list()) {
      in.value = runtime::RunValue::List(std::move(tensors));
    } else if (tensors.size() == 1) {
      in.value = runtime::RunValue::Of(std::move(tensors[0]));
    } else {
      return absl::InvalidArgumentError("a tensor argument without exactly one tensor");
    }
    request.inputs.push_back(std::move(in));
  }
  request.float64 = proto.float64();
  request.trace = proto.trace();
  request.import.input_names.assign(proto.input_names().begin(), proto.input_names().end());
  request.import.output_names.assign(proto.output_names().begin(), proto.output_names().end());
  request.import.force_fallback.assign(proto.force_fallback().begin(),
                                       proto.force_fallback().end());
  return request;
}

absl::StatusOr<v1::ReferenceAnswer> ReferenceResultToProto(const verify::ReferenceResult& result) {
  v1::ReferenceAnswer proto;
  proto.set_rejected(result.rejected);
  proto.set_unavailable(result.unavailable);
  for (const std::vector<Tensor>& output : result.outputs) {
    v1::ReferenceValue* v = proto.add_outputs();
    for (const Tensor& t : output) TensorToProto(t, v->add_tensors());
  }
  for (const Tensor& t : result.float64_outputs) TensorToProto(t, proto.add_float64_outputs());
  proto.set_float64_problem(result.float64_problem);
  proto.set_trace_problem(result.trace_problem);
  if (result.trace_graph.has_value()) {
    absl::StatusOr<cache::SerializedGraph> graph = cache::SerializeGraph(*result.trace_graph);
    if (!graph.ok()) {
      proto.set_trace_problem(
          absl::StrCat("the traced graph cannot be handed over: ", graph.status().message()));
      return proto;
    }
    proto.set_trace_graph(cache::ToString(*graph));
    for (const verify::TraceValue& t : result.trace) {
      v1::TraceValue* p = proto.add_trace();
      p->set_value(t.value);
      p->set_where(t.where);
      p->set_op(t.op);
      if (t.ref.has_value()) TensorToProto(*t.ref, p->mutable_ref());
    }
  }
  return proto;
}

absl::StatusOr<verify::ReferenceResult> ReferenceResultFromProto(const v1::ReferenceAnswer& proto) {
  verify::ReferenceResult result;
  result.rejected = proto.rejected();
  result.unavailable = proto.unavailable();
  for (const v1::ReferenceValue& v : proto.outputs()) {
    ASSIGN_OR_RETURN(std::vector<Tensor> tensors, TensorsFromProto(v.tensors()));
    result.outputs.push_back(std::move(tensors));
  }
  ASSIGN_OR_RETURN(result.float64_outputs, TensorsFromProto(proto.float64_outputs()));
  result.float64_problem = proto.float64_problem();
  result.trace_problem = proto.trace_problem();
  if (!proto.trace_graph().empty()) {
    // The graph's tensors may point into the bytes they are read from.
    auto bytes = std::make_shared<std::string>(proto.trace_graph());
    ASSIGN_OR_RETURN(ir::Graph graph, cache::ParseGraph(*bytes, bytes));
    result.trace_graph = std::move(graph);
    for (const v1::TraceValue& p : proto.trace()) {
      verify::TraceValue t;
      t.value = p.value();
      t.where = p.where();
      t.op = p.op();
      if (p.has_ref()) {
        ASSIGN_OR_RETURN(Tensor ref, TensorFromProto(p.ref()));
        t.ref = std::move(ref);
      }
      result.trace.push_back(std::move(t));
    }
  }
  return result;
}

}  // namespace kiln::server
