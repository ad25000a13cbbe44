#include "engine/common/tensor.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"

namespace kiln {

int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string DimsToString(const Dims& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

Tensor Tensor::Zeros(DType dtype, Dims dims) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  // Round up so aligned_alloc's size is a multiple of the alignment, and never 0.
  size_t bytes = (t.byte_size() + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  ENGINE_CHECK(p != nullptr);
  std::memset(p, 0, bytes);
  t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::Wrap(DType dtype, Dims dims, void* data, std::shared_ptr<void> keep_alive) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.data_ = data;
  t.storage_ = std::move(keep_alive);
  return t;
}

Tensor Tensor::Reshaped(Dims dims) const {
  ENGINE_CHECK(NumElements(dims) == num_elements());
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = Zeros(dtype_, dims_);
  if (byte_size() > 0) std::memcpy(t.data_, data_, byte_size());
  return t;
}

}  // namespace kiln
