// The table gather behind Kiln's data-movement kernels (private to
// engine/kernels/): every output dim d reads input index table_d[i] (or an
// affine start + i * step) at input stride stride_d, and a negative table
// entry stands for a padding value. Permute, Expand, Tile, Slice, Select,
// Chunk, Flip, Roll, Pad and PixelShuffle are all such gathers; reductions and
// Einsum use MakePermutePlan to bring their operands into a convenient layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/common/tensor.h"

namespace kiln::kernels {

struct GatherDim {
  int64_t size = 1;
  int64_t stride = 0;            // input elements per step of the input index
  bool affine = true;            // input index = start + i * step
  int64_t start = 0, step = 1;
  std::vector<int64_t> table;    // when !affine: input index per output index, < 0 for padding
};

struct GatherPlan {
  size_t elem_size = 4;
  int64_t base = 0;              // input element offset of output element 0
  std::vector<GatherDim> dims;   // outermost first; output is dense in this order
  uint64_t pad_bits = 0;         // the padding value's bytes (elem_size of them)
};

// Drops size-1 dims and merges adjacent affine dims that step contiguously,
// so that the innermost loop is as long as possible. Call once in Prepare.
void SimplifyGatherPlan(GatherPlan& plan);

// Calls f(W{}) with W the unsigned integer type of `elem_size` bytes (1, 2, 4;
// anything else is 8): movement copies elements as bit patterns, so one
// instantiation per size serves every dtype of that size.
template <typename F>
void DispatchByElemSize(size_t elem_size, F&& f) {
  switch (elem_size) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    default:
      f(uint64_t{});
      break;
  }
}

// Copies the gathered elements from `src` into the dense `dst`.
void RunGather(const GatherPlan& plan, const void* src, void* dst, int num_threads);

// The inverse of RunGather for affine plans: writes the dense `src` into the
// elements of `dst` the plan addresses.
void RunScatter(const GatherPlan& plan, const void* src, void* dst, int num_threads);

// Plan that writes `dims` permuted by `perm` (output dim k = input dim perm[k]) densely.
GatherPlan MakePermutePlan(const Dims& dims, const std::vector<int64_t>& perm, size_t elem_size);

}  // namespace kiln::kernels
