// The libtorch half of the verified import for a torch.export archive: the
// ExportedProgram evaluated node by node through libtorch 1.13's operator
// registry (each aten node's operator found by name and overload, its named
// arguments matched to libtorch's schema, those the program leaves out at the
// schema's defaults; torch.cond and while_loop by their subgraphs; symbolic
// ints computed). In-place ops and views behave as PyTorch's own, so the
// reference shares nothing with Kiln's translation but the weights read from
// the archive. A node libtorch 1.13 cannot run (an operator newer than it)
// makes the result `rejected` with that node named: verification is then
// skipped, saying why. Also the helpers torch_reference.cc shares with it.
#pragma once

#include <ATen/ATen.h>

#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/tensor.h"
#include "engine/verify/verify.h"

namespace kiln::fallback {

absl::StatusOr<verify::ReferenceResult> RunExportReference(std::string_view bytes,
                                                           const verify::ReferenceRequest& request);

// ---- shared with torch_reference.cc (defined there)

// A copy of a Kiln tensor as an at::Tensor (libtorch's in-place ops must not
// reach the caller's buffers), and of an at::Tensor as a Kiln tensor.
absl::StatusOr<at::Tensor> ToTorch(const Tensor& t);
absl::StatusOr<Tensor> FromTorch(const at::Tensor& value);
// One result flattened: a tensor gives one, a list its elements, an
// int/float/bool a 0-dim tensor, anything else none.
absl::StatusOr<std::vector<Tensor>> Flatten(const c10::IValue& v);
// Whether libtorch failed for want of memory (the worker's address-space limit).
bool OutOfMemory(const std::exception& e);
// A libtorch exception's message: its first line, without the backtrace.
std::string FirstLine(const std::exception& e);

}  // namespace kiln::fallback
