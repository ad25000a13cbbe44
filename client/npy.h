// Reads and writes NumPy .npy files (format versions 1.0, 2.0 and 3.0) for every
// Kiln dtype NumPy has: '<f4' '<f8' '<f2' '<i8' '<i4' '<i2' '|i1' '|u1' '|b1'.
// Arrays must be C-ordered and little-endian; BF16 has no NumPy dtype (see
// SerializeNpy).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/common/tensor.h"

namespace kiln::client {

// Parses the bytes of a .npy file. InvalidArgument saying what is wrong for a
// bad magic or header, an unsupported or big-endian dtype, Fortran order, or a
// data size that does not match the shape.
absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes);

// Reads and parses `path`; NotFound when it cannot be opened.
absl::StatusOr<Tensor> ReadNpy(const std::string& path);

// Serializes `tensor` (version 1.0, or 2.0 when the header needs it). NumPy
// has no bfloat16: a BF16 tensor is written as '<f4', widened exactly (every
// bfloat16 value is a float32). BF16 inputs cannot come from .npy files; send
// FP32 to a model that casts, or raw bytes through the protocol.
absl::StatusOr<std::string> SerializeNpy(const Tensor& tensor);

// Serializes `tensor` into `path`; Internal on I/O errors.
absl::Status WriteNpy(const std::string& path, const Tensor& tensor);

// The NumPy descr ("<f4") for `dtype`, or InvalidArgument.
absl::StatusOr<std::string> NpyDescr(DType dtype);

}  // namespace kiln::client
