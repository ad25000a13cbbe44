// Helpers shared by the kernel family files (private to engine/kernels/):
// error messages that name the node, operand checks for Prepare, attribute
// readers, and the OpenMP ParallelFor that every family uses for big loops.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/common/dtype.h"
#include "engine/common/tensor.h"
#include "engine/kernels/kernel.h"

namespace kiln::kernels {

// InvalidArgument prefixed with the node's context:
// "node (Conv, aten::_convolution): expected 4-D input, got [3, 224]".
template <typename... Args>
absl::Status InvalidArg(const ir::Node& node, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(NodeContext(node), args...));
}

template <typename... Args>
absl::Status Unimplemented(const ir::Node& node, const Args&... args) {
  return absl::UnimplementedError(absl::StrCat(NodeContext(node), args...));
}

// Checks that the node has between `min` and `max` inputs and that the first
// `min` of them (the required ones) are present.
inline absl::Status CheckInputCount(const PrepareContext& ctx, size_t min, size_t max) {
  const size_t n = ctx.inputs.size();
  if (n < min || n > max) {
    return InvalidArg(ctx.node, "expected ",
                      min == max ? absl::StrCat(min) : absl::StrCat(min, "..", max),
                      " inputs, got ", n);
  }
  for (size_t i = 0; i < min; ++i) {
    if (!ctx.inputs[i].present) return InvalidArg(ctx.node, "required input ", i, " is absent");
  }
  return absl::OkStatus();
}

// True when optional input `i` exists and is present.
inline bool HasInput(const PrepareContext& ctx, size_t i) {
  return i < ctx.inputs.size() && ctx.inputs[i].present;
}

inline absl::Status CheckDType(const PrepareContext& ctx, size_t i, DType want) {
  if (ctx.inputs[i].dtype != want) {
    return InvalidArg(ctx.node, "input ", i, " has dtype ", DTypeName(ctx.inputs[i].dtype),
                      ", expected ", DTypeName(want));
  }
  return absl::OkStatus();
}

// Maps a possibly negative axis into [0, rank); InvalidArgument when out of range.
inline absl::StatusOr<int64_t> NormalizeAxis(const ir::Node& node, int64_t axis, int64_t rank,
                                             const char* what = "axis") {
  const int64_t r = std::max<int64_t>(rank, 1);  // PyTorch accepts 0 and -1 for a scalar
  if (axis < -r || axis >= r) {
    return InvalidArg(node, what, " ", axis, " is out of range for a ", rank, "-D input");
  }
  return axis < 0 ? axis + r : axis;
}

// Reads an int-list attribute that has one value per spatial dim, accepting a
// single value for all of them (PyTorch's `kernel_size=3`) or `def` when absent
// or empty.
inline absl::StatusOr<std::vector<int64_t>> SpatialAttr(const ir::Node& node, const char* name,
                                                        size_t spatial, int64_t def) {
  std::vector<int64_t> v = node.attrs.GetInts(name);
  if (v.empty()) return std::vector<int64_t>(spatial, def);
  if (v.size() == 1 && spatial > 1) v.assign(spatial, v[0]);
  if (v.size() != spatial) {
    return InvalidArg(node, "attribute '", name, "' has ", v.size(), " values, expected ", spatial);
  }
  return v;
}

// Work (roughly element operations) below which a loop stays on the calling
// thread: waking an OpenMP team costs a few microseconds, about the time one
// core needs for ~30k simple float operations.
inline constexpr int64_t kMinParallelWork = 32 * 1024;

// Calls fn(begin, end) on contiguous chunks covering [0, n): one chunk per
// thread when `work` is large enough, else fn(0, n) on the calling thread.
// Chunks (rather than single indices) let callers set up running offsets once
// per chunk instead of dividing per element. Never call cblas inside fn:
// OpenBLAS runs its own thread pool.
template <typename Fn>
void ParallelFor(int64_t n, int num_threads, int64_t work, Fn&& fn) {
  const int64_t threads = std::min<int64_t>(std::max(num_threads, 1), n);
  if (threads <= 1 || work < kMinParallelWork) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(static_cast <int>(threads))
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

// Sum of n floats: eight float lanes (which GCC vectorises) over blocks of 512
// elements, the block sums added in double. A single running float sum loses
// about n * 2^-24 relative; this stays near float rounding of a 64-element sum
// like PyTorch's cascade sum, at vector speed.
inline double AccurateSum(const float* x, int64_t n) {
  constexpr int64_t kBlock = 512;
  double total = 0.0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    const float* p = x + start;
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
      for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
    }
    float tail = 0.0f;
    for (; i < len; ++i) tail += p[i];
    total += static_cast<double>(((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                                 ((acc[4] + acc[5]) + (acc[6] + acc[7]))) +
             tail;
  }
  return total;
}

// Typed views of the state a kernel's Prepare stored in the context.
template <typename T>
const T& StateAs(const EvalContext& ctx) {
  return *static_cast<const T*>(ctx.state);
}

}  // namespace kiln::kernels
