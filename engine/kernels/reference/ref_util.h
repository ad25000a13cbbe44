// Helpers for the reference implementations of the op-coverage kernels
// (private to engine/kernels/reference/): every tensor is read into doubles
// (integers up to 2^53 exactly), computed on with plain multi-index loops, and
// written back in the output dtype.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"

namespace kiln::kernels::reference {

using Index = std::vector<int64_t>;
using Outputs = std::vector<Tensor>;

// A tensor's values as doubles, with its dims.
struct Values {
  Dims dims;
  std::vector<double> v;
  double at(const Index& idx) const;
};

Values Read(const Tensor& t);
// A tensor of `dtype` and `dims` holding `v` (converted like a C++ cast; bool: != 0).
Tensor Write(DType dtype, const Dims& dims, const std::vector<double>& v);

std::vector<int64_t> StridesOf(const Dims& dims);
int64_t OffsetOf(const Index& idx, const Dims& dims);
// Calls fn(index) for every multi-index of `dims` in row-major order.
void ForEach(const Dims& dims, const std::function<void(const Index&)>& fn);
// Maps a possibly negative axis into [0, rank).
int64_t Axis(int64_t axis, int64_t rank);

inline absl::Status RefError(const ir::Node& node, const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat("reference ", ir::OpName(node.kind), ": ", message));
}

// Family entry points: nullopt when the op is not theirs.
using MaybeOutputs = std::optional<absl::StatusOr<Outputs>>;
MaybeOutputs ElementwiseReference(const ir::Node& node, const std::vector<const Tensor*>& in);
MaybeOutputs ShapeReference(const ir::Node& node, const std::vector<const Tensor*>& in);
MaybeOutputs ReduceReference(const ir::Node& node, const std::vector<const Tensor*>& in);
MaybeOutputs NnReference(const ir::Node& node, const std::vector<const Tensor*>& in);
MaybeOutputs VisionReference(const ir::Node& node, const std::vector<const Tensor*>& in);

// All of the above, tried in turn.
MaybeOutputs CoverageReference(const ir::Node& node, const std::vector<const Tensor*>& in);

}  // namespace kiln::kernels::reference
