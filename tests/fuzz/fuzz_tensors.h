// What the fuzz targets share: the datatype names they build requests with,
// and how they compare the tensors two ways of decoding gave.
#pragma once

#include <cstring>

#include "engine/common/tensor.h"

namespace kiln::fuzz {

// The Open Inference Protocol's datatype names, and one the decoder does not know.
inline constexpr const char* kDatatypes[] = {"BOOL",  "UINT8", "UINT16", "UINT32", "UINT64",
                                             "INT8",  "INT16", "INT32",  "INT64",  "FP16",
                                             "BF16",  "FP32",  "FP64",   "BYTES",  "FP8"};

// The same datatype, dims and bytes.
inline bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims() || a.byte_size() != b.byte_size()) {
    return false;
  }
  return a.byte_size() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

}  // namespace kiln::fuzz
