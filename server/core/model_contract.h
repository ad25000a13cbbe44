// The contract a loaded model offers, as the server reports it: in the
// ModelMetadata properties (per tensor, what the protocol's TensorMetadata
// cannot say) and as JSON in the load answer.
//
// Properties, per input and output (<kind> is "input" or "output"):
//   <kind>.<name>.datatype  "fixed (declared)", "fixed (implied)", "fixed
//                           (model)", "fixed (argument)", "fixed", or "open"
//                           (any datatype; the metadata's datatype is "ANY")
//   <kind>.<name>.shape     "fixed", "dynamic dims 0, 2", "any rank", or
//                           "any leading dims, then [16]" (a Linear's input:
//                           the metadata shows [-1, 16])
//   <kind>.<name>.alias     Triton's positional name, "INPUT__0"/"OUTPUT__0"
//   <kind>.<name>.path      where the tensor sits in forward()'s arguments or
//                           result: "x", "pair[1]", "result['logits']",
//                           "result[1][0]"
//   <kind>.<name>.optional  "true" for an Optional[Tensor] input (else absent)
//   <kind>.<name>.dim_ranges  bounds of dynamic dims a .pt2 declares, a request
//                           outside them refused: "dim 0: [1, 64] (s77); dim 1: >= 2 (s78)"
// and, once a request's signature had a node its kernel refused (run through
// libtorch for that signature instead):
//   fallback_ops.per_signature  "aten::linear (1 signature), ..."
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/runtime/model.h"

namespace kiln::server {

// The datatype string the metadata shows for `spec`: "FP32", or "ANY" when open.
std::string ContractDatatype(const runtime::TensorSpec& spec);

// Adds the per-tensor properties above for every input and output of `model`.
void AddContractProperties(const runtime::Model& model,
                           std::map<std::string, std::string>& properties);

// The contract as one line of JSON (ASCII only):
//   {"model": NAME, "version": V, "dry_run": B,
//    "inputs": [{"name", "datatype", "shape", "datatype_fixed", "dtype_source",
//                "dynamic_dims", "dim_ranges", "any_leading_dims", "alias", "path",
//                "optional"}],
//    "outputs": [... same keys ...],
//    "fallback_ops": ["aten::i0"], "verify": "passed ..."}
// "shape" is null for an input of any rank.
std::string ContractJson(const runtime::Model& model, const std::string& name, int64_t version,
                         bool dry_run);

}  // namespace kiln::server
