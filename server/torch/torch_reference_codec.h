// The verified import's reference run (engine/verify/verify.h) as the
// messages of proto/kiln/v1/torch_worker.proto, which carry it between kilnd
// and its sandboxed worker process. Tensors travel as dense bytes; the
// re-imported graph of a trace in engine/cache's graph format.
#pragma once

#include "absl/status/statusor.h"
#include "engine/verify/verify.h"
#include "kiln/v1/torch_worker.pb.h"

namespace kiln::server {

// A tensor's dtype and dims as the torch worker's messages carry them
// (TensorData, ArenaTensor), checked: InvalidArgument for an unknown dtype or
// a negative dim.
struct WireTensorType {
  DType dtype = DType::kUnknown;
  Dims dims;
};
absl::StatusOr<WireTensorType> WireTensorTypeFromProto(
    const std::string& dtype, const google::protobuf::RepeatedField<int64_t>& dims);

v1::ReferenceRequest ReferenceRequestToProto(const verify::ReferenceRequest& request);
// InvalidArgument for a malformed message.
absl::StatusOr<verify::ReferenceRequest> ReferenceRequestFromProto(
    const v1::ReferenceRequest& proto);

// Fails when the trace's graph cannot be serialized.
absl::StatusOr<v1::ReferenceAnswer> ReferenceResultToProto(const verify::ReferenceResult& result);
absl::StatusOr<verify::ReferenceResult> ReferenceResultFromProto(const v1::ReferenceAnswer& proto);

}  // namespace kiln::server
