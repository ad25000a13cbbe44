// Translates tensors between the Open Inference Protocol messages and Kiln's
// kiln::Tensor. Inputs may arrive as typed `contents` or as
// `raw_input_contents` (not both); outputs always leave as
// `raw_output_contents`, as Triton sends them.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/model.h"
#include "inference/grpc_service.pb.h"
#include "server/core/infer_request_reader.h"
#include "server/core/raw_outputs.h"
#include "server/core/shared_memory.h"

namespace kiln::server {

// Decodes every input of `request` into a freshly allocated tensor (64-byte
// aligned, so kernels never see protobuf's buffers). Fails with
// InvalidArgument naming the input, expected versus got, for an unknown
// datatype, a negative dim, a byte or element count that does not match the
// shape, data in the wrong typed field, a value out of range of the datatype,
// FP16/BF16 in typed contents, or raw and typed contents mixed.
//
// An input with the parameter "shared_memory_region" is read (copied) from
// that region of `shared_memory` at "shared_memory_offset" (default 0);
// "shared_memory_byte_size" must equal its byte size; it carries no contents
// and has no raw_input_contents entry (the raw entries belong, in order, to
// the other inputs). No registry, or an unknown region: the request fails.
//
// `raw` (may be null): the raw_input_contents entries a front left in its
// receive buffers (infer_request_reader.h) instead of in `request`.
absl::StatusOr<std::vector<runtime::NamedTensor>> DecodeInputs(
    const inference::ModelInferRequest& request,
    const SharedMemoryRegistry* shared_memory = nullptr, const RawInputs* raw = nullptr);

// The output names listed in `request.outputs`, in order (empty: all outputs).
std::vector<std::string> RequestedOutputs(const inference::ModelInferRequest& request);

// Appends each of `outputs` to `response` (name, datatype, shape, and its bytes
// in raw_output_contents at the same index). An output the request asked for
// in a shared-memory region (its "shared_memory_region" and
// "shared_memory_byte_size", at least the output's size, and
// "shared_memory_offset") is written there instead: its raw_output_contents
// entry stays empty and the response output carries the region's parameters,
// as Triton answers. Fails (InvalidArgument) when the region is unknown or too
// small; nothing is half-written into the response then.
// With `raw_outputs`, the bytes are not copied into raw_output_contents:
// the output tensors themselves go into raw_outputs->entries (nullopt for an
// output written to shared memory), for a front that sends them from there
// (server/core/raw_outputs.h), and raw_output_contents stays empty.
absl::Status EncodeOutputs(const std::vector<runtime::NamedTensor>& outputs,
                           const inference::ModelInferRequest& request,
                           const SharedMemoryRegistry* shared_memory,
                           inference::ModelInferResponse* response,
                           RawOutputs* raw_outputs = nullptr);
inline void EncodeOutputs(const std::vector<runtime::NamedTensor>& outputs,
                          inference::ModelInferResponse* response) {
  (void)EncodeOutputs(outputs, inference::ModelInferRequest(), nullptr, response);
}

}  // namespace kiln::server
