// The buffers tensors own: 64-byte aligned, sized to a multiple of 64
// (aligned_alloc's rule) and never 0 bytes. Tensor::Allocate takes its
// buffers here, and so does the server's pool of request input buffers
// (server/core/input_buffer_pool.h), which keeps them for reuse.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "engine/common/dtype.h"
#include "engine/common/tensor.h"

namespace kiln {

// The bytes a buffer for `size` bytes of data takes.
size_t TensorBufferBytes(size_t size);

// An uninitialized buffer of `bytes` (a TensorBufferBytes), which std::free
// releases; ResourceExhausted naming `what`, `dtype` and `dims` when the
// memory is not there.
absl::StatusOr<void*> AllocateTensorBuffer(size_t bytes, DType dtype, const Dims& dims,
                                           const std::string& what);

}  // namespace kiln
