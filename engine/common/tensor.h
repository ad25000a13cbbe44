// A dense, row-major tensor: dtype, shape and a (possibly shared) byte buffer.
// Used for graph constants, request inputs and outputs, and planned buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/dtype.h"

namespace kiln {

using Dims = std::vector<int64_t>;

// Number of elements of `dims` (1 for a scalar).
int64_t NumElements(const Dims& dims);

// "[1, 3, 224, 224]".
std::string DimsToString(const Dims& dims);

class Tensor {
 public:
  Tensor() = default;

  // Allocates a zero-filled tensor (64-byte aligned).
  static Tensor Zeros(DType dtype, Dims dims);

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

 private:
  DType dtype_ = DType::kUnknown;
  Dims dims_;
  void* data_ = nullptr;
  std::shared_ptr<void> storage_;
};

}  // namespace kiln
