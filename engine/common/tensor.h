// A dense, row-major tensor: dtype, shape and a (possibly shared) byte buffer.
// Used for graph constants, request inputs and outputs, and planned buffers.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/dtype.h"

namespace kiln {

using Dims = std::vector<int64_t>;

// Number of elements of `dims` (1 for a scalar). Saturates at INT64_MAX when
// the product overflows; CheckedByteSize tells such shapes apart.
int64_t NumElements(const Dims& dims);

// Bytes of a `dtype` tensor of `dims`: InvalidArgument naming `what` for a
// negative dim or a count whose bytes overflow 63 bits.
absl::StatusOr<size_t> CheckedByteSize(DType dtype, const Dims& dims, const std::string& what);

// "1.5 GiB", "12 MiB", "300 bytes": sizes in messages.
std::string BytesToString(uint64_t bytes);

// Bytes one request may allocate, counted as tensors are allocated and
// released (Tensor::Allocate). Shared by every tensor it counts, which keep
// it alive. `limit_name` says in messages where the limit comes from
// ("--max-request-memory-mb").
class MemoryBudget {
 public:
  MemoryBudget(uint64_t limit, std::string limit_name)
      : limit_(limit), limit_name_(std::move(limit_name)) {}

  // Counts `bytes` for `what`, or ResourceExhausted naming it when they do
  // not fit next to what is held.
  absl::Status Reserve(uint64_t bytes, const std::string& what);
  void Release(uint64_t bytes) { used_.fetch_sub(bytes); }

  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(); }
  const std::string& limit_name() const { return limit_name_; }

 private:
  const uint64_t limit_;
  const std::string limit_name_;
  std::atomic<uint64_t> used_{0};
};

// "[1, 3, 224, 224]".
std::string DimsToString(const Dims& dims);

class Tensor {
 public:
  Tensor() = default;

  // Allocates a zero-filled tensor (64-byte aligned). Aborts when the memory
  // cannot be had: only for sizes Kiln itself bounds (scalars, compile-time
  // constants), never for one a request or a model computes; use Allocate.
  static Tensor Zeros(DType dtype, Dims dims);

  // Zeros that fails instead: InvalidArgument for a shape whose size
  // overflows, ResourceExhausted when `budget` (may be null) has no room or
  // the allocation fails. Messages name `what` (a tensor or node).
  static absl::StatusOr<Tensor> Allocate(DType dtype, Dims dims, const std::string& what,
                                         const std::shared_ptr<MemoryBudget>& budget = nullptr);

  // Wraps memory owned elsewhere; `keep_alive` (may be null) is held as long as the tensor.
  static Tensor Wrap(DType dtype, Dims dims, void* data,
                     std::shared_ptr<void> keep_alive = nullptr);

  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t dim(int64_t i) const { return dims_[i]; }
  int64_t num_elements() const { return NumElements(dims_); }
  size_t byte_size() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype_); }
  bool defined() const { return data_ != nullptr || num_elements() == 0; }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  template <typename T>
  T* data() { return static_cast<T*>(data_); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(data_); }

  // Same storage, new shape with the same element count.
  Tensor Reshaped(Dims dims) const;

  // Deep copy into fresh storage.
  Tensor Clone() const;
  // Same, allocated as Allocate does.
  absl::StatusOr<Tensor> TryClone(const std::string& what,
                                  const std::shared_ptr<MemoryBudget>& budget = nullptr) const;

 private:
  DType dtype_ = DType::kUnknown;
  Dims dims_;
  void* data_ = nullptr;
  std::shared_ptr<void> storage_;
};

}  // namespace kiln
