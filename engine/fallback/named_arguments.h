// Finding a libtorch operator and matching the arguments a torch.export node
// names to its schema: shared by the Fallback kernel (a .pt2's Fallback node
// names its arguments) and the verified import's reference for a .pt2
// (export_reference.cc), which calls every node's operator so.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/jit/runtime/operator.h>

#include "absl/status/statusor.h"

namespace kiln::fallback {

// libtorch's operator `name`.`overload` ("aten::add", "Tensor"; "" for the
// base one), or Unimplemented naming it.
absl::StatusOr<std::shared_ptr<torch::jit::Operator>> FindOperator(const std::string& name,
                                                                   const std::string& overload);

// For each argument of `schema`, in order, the index in `names` of the
// argument given by that name, or -1 for one left out (the serializer drops
// those at their defaults), which takes the schema's default. Unimplemented
// when the schema needs an argument `names` lacks, or has none by a name it gives.
absl::StatusOr<std::vector<int>> MatchNamedArguments(const c10::FunctionSchema& schema,
                                                     const std::vector<std::string>& names);

}  // namespace kiln::fallback
