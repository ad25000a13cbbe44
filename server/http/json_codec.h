// The JSON side of the Open Inference Protocol over HTTP/REST: translates
// request bodies into the protobuf messages the core takes
// (server/core/inference_core.h), and its protobuf answers back into JSON, so
// both protocols share one implementation and one set of validation messages
// (server/http/kserve_routes.cc calls it).
//
// Infer bodies follow the KServe v2 REST protocol with Triton's binary tensor
// data extension: the JSON header, then (when the Inference-Header-Content-Length
// header says where the JSON ends) the binary tensors back to back. Every input
// becomes raw bytes in raw_input_contents, whether it came as JSON "data"
// (flat or nested; BOOL as true/false, integers and FP16/BF16/FP32/FP64 as
// numbers, BYTES as strings, length-prefixed as on the wire) or as binary
// data; the shared decoder (server/core/tensor_codec.h) then checks it exactly as
// it checks a gRPC request. Outputs go back as JSON "data" (flattened,
// row-major) or, when asked with "binary_data" / "binary_data_output", in the
// binary section with "binary_data_size". JSON has no NaN or infinity: such
// values are written as null; ask for binary outputs to get them exactly.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "server/core/infer_request_reader.h"
#include "server/core/raw_outputs.h"

namespace kiln::server::http {

// JSON nested deeper than this is refused before it is parsed.
inline constexpr int kMaxJsonDepth = 64;

// Which outputs of an infer request go into the binary section.
struct OutputFormat {
  bool binary_default = false;         // the request's "binary_data_output"
  std::map<std::string, bool> binary;  // an output's own "binary_data"
  bool IsBinary(const std::string& name) const;
};

// Parses an infer request body into `request` (inputs, raw_input_contents,
// requested outputs, id, parameters; not the model name and version, which
// come from the URL). `header_length` is the Inference-Header-Content-Length
// header's value when it was sent. Fails with InvalidArgument for malformed
// JSON, a field of the wrong type, an unknown field, data that does not fit
// its datatype or shape, or binary sizes that do not add up to the body.
//
// With `raw`, the inputs' bytes go there instead of into raw_input_contents:
// a binary input's as a view of `body` (which must outlive it), JSON data
// converted into `raw`'s own strings; the decoder copies each once
// (server/core/infer_request_reader.h).
absl::Status ParseInferRequest(absl::string_view body, std::optional<size_t> header_length,
                               inference::ModelInferRequest* request, OutputFormat* format,
                               RawInputs* raw = nullptr);

// An encoded infer response: the JSON in `body`; when `header_length` is set
// (then it is the JSON's length), the binary section follows it on the wire,
// as `binary`'s pieces in order: views of the outputs' own bytes (the
// response's raw_output_contents, or the tensors of `raw`), not copied, so
// that they must outlive the answer's sending.
struct EncodedResponse {
  std::string body;
  std::optional<size_t> header_length;
  std::vector<absl::string_view> binary;
};

// Encodes `response` as JSON, each output as "data" or, as `format` says, in
// the binary section. The outputs' bytes are in raw_output_contents, or, with
// `raw` (InferCall::raw_outputs), in its tensors.
absl::StatusOr<EncodedResponse> EncodeInferResponse(const inference::ModelInferResponse& response,
                                                    const OutputFormat& format,
                                                    const RawOutputs* raw = nullptr);

// The JSON of the other answers, as Triton's HTTP endpoint writes them.
std::string ServerMetadataJson(const inference::ServerMetadataResponse& response);
std::string ModelMetadataJson(const inference::ModelMetadataResponse& response);
std::string ModelStatisticsJson(const inference::ModelStatisticsResponse& response);
std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& response);
std::string ModelReadyJson(const std::string& name, bool ready);
// Triton's system shared-memory routes: the status array
// [{"name", "key", "offset", "byte_size"}], sorted by name, and the body of a
// register, {"key": "/name", "offset": N, "byte_size": N}.
std::string SharedMemoryStatusJson(const inference::SystemSharedMemoryStatusResponse& response);
absl::Status ParseSharedMemoryRegister(absl::string_view body,
                                       inference::SystemSharedMemoryRegisterRequest* request);

// The body of POST /v2/repository/index: empty or {"ready": bool}.
absl::Status ParseRepositoryIndexRequest(absl::string_view body,
                                         inference::RepositoryIndexRequest* request);

// The parameters of a load or unload body: empty or {"parameters": {...}};
// strings become string_param, except "file:..." ones, which are base64 and
// become bytes_param; a "config" given as a JSON object is passed as its text.
absl::Status ParseRepositoryParameters(
    absl::string_view body,
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter>* parameters);

}  // namespace kiln::server::http
