// Sample inputs made up from a shape: what the verified import runs a model on
// and what a model_warmup "random_data" input holds.
#pragma once

#include <memory>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "engine/common/tensor.h"

namespace kiln::verify {

// A sample tensor of `dtype` and `dims`: floats N(0, 1), integers in [0, 4),
// bools at random. Counts against `memory` (may be null): a shape too large
// is refused naming `what` before anything is allocated.
absl::StatusOr<Tensor> SampleTensor(DType dtype, const Dims& dims, std::mt19937_64& rng,
                                    const std::string& what,
                                    const std::shared_ptr<MemoryBudget>& memory);

}  // namespace kiln::verify
