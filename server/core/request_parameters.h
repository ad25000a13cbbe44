// The parameters of a ModelInfer request: the request's own, each input's and
// each requested output's. kilnd answers every parameter it is sent: it uses
// it, accepts it as harmless, or refuses the request, so a client never
// believes a setting took effect when it did not.
//
//   request  "profile" (bool)                  run with the profiler (`kiln profile`)
//            "timeout" (int64/uint64, µs)       the request's own time limit, as
//                                              Triton's; 0 means none
//            "priority" (int64 >= 0/uint64)     accepted; kilnd has no queue to order
//            "binary_data_output" (bool)        accepted; gRPC outputs are always binary
//   input    "binary_data_size" (int64/uint64)  accepted (HTTP's; harmless here)
//   output   "binary_data" (bool)               accepted, as above
//   input and output: "shared_memory_region" (string), "shared_memory_byte_size"
//            and "shared_memory_offset" (int64/uint64): the tensor's bytes are
//            in a registered shared-memory region (server/core/shared_memory.h;
//            checked by tensor_codec.h)
//
// Refused: "classification" and the
// sequence parameters ("sequence_id", "sequence_start", "sequence_end") name
// extensions kilnd does not implement: Unimplemented. Any other name, or a
// known one of the wrong type, is InvalidArgument naming it. Unknown names
// are reported before unimplemented ones, all of them in one message.
#pragma once

#include <chrono>
#include <optional>

#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"

namespace kiln::server {

struct InferParameters {
  bool profile = false;
  // The "timeout" parameter, when positive.
  std::optional<std::chrono::microseconds> timeout;
};

// The value of a count parameter (a non-negative int64_param or a uint64_param,
// as ParseInferParameters checked it).
uint64_t CountParameter(const inference::InferParameter& value);

// Checks every parameter of `request` as above and returns what they ask for.
absl::StatusOr<InferParameters> ParseInferParameters(const inference::ModelInferRequest& request);

}  // namespace kiln::server
