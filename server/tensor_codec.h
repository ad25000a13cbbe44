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

namespace kiln::server {

// Decodes every input of `request` into a freshly allocated tensor (64-byte
// aligned, so kernels never see protobuf's buffers). Fails with
// InvalidArgument naming the input, expected versus got, for an unknown
// datatype, a negative dim, a byte or element count that does not match the
// shape, data in the wrong typed field, a value out of range of the datatype,
// FP16/BF16 in typed contents, or raw and typed contents mixed.
absl::StatusOr<std::vector<runtime::NamedTensor>> DecodeInputs(
    const inference::ModelInferRequest& request);

// The output names listed in `request.outputs`, in order (empty: all outputs).
std::vector<std::string> RequestedOutputs(const inference::ModelInferRequest& request);

// Appends each of `outputs` to `response` (name, datatype, shape, and its bytes
// in raw_output_contents at the same index).
void EncodeOutputs(const std::vector<runtime::NamedTensor>& outputs,
                   inference::ModelInferResponse* response);

}  // namespace kiln::server
