// The sweep test's case type (kernel_sweep_test.cc), shared with the case
// generators of the op-coverage kernels (sweep_cases_coverage.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "engine/common/tensor.h"
#include "engine/ir/graph.h"

namespace kiln::kernels::testing {

// One random invocation: inputs (Absent() for a missing optional input),
// attributes, and which inputs are graph constants.
struct SweepCase {
  std::vector<Tensor> inputs;
  ir::Attributes attrs;
  std::vector<int> constant_inputs;
};

using SweepRng = std::mt19937;
// The seed of op `op`'s cases, from its name (FNV-1a): adding an op kind
// leaves every other op's cases as they were.
inline uint32_t SweepSeed(ir::OpKind op) {
  uint32_t h = 2166136261u;
  for (char c : ir::OpName(op)) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h;
}
// Makes case `i` (every 6th case is "big", to take the kernels' parallel paths).
using SweepGenerator = std::function<SweepCase(SweepRng&, int)>;

// Adds (or, for kernels that grew new forms, wraps) the generators of the
// op-coverage kernels.
void AddCoverageSweepCases(std::map<ir::OpKind, SweepGenerator>& generators);
// The generators of the detection kernels (sweep_cases_vision.cc).
void AddVisionSweepCases(std::map<ir::OpKind, SweepGenerator>& generators);

// Every op's case generator (kernel_sweep_test.cc); the dtype support matrix
// (dtype_support_test.cc) reuses them with the float inputs converted.
const std::map<ir::OpKind, SweepGenerator>& SweepGenerators();

}  // namespace kiln::kernels::testing
