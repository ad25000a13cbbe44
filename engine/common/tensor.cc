#include "engine/common/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/common/huge_pages.h"
#include "engine/common/status_macros.h"
#include "engine/common/tensor_buffer.h"

namespace kiln {

int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

absl::StatusOr<size_t> CheckedByteSize(DType dtype, const Dims& dims, const std::string& what) {
  int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shape ", DimsToString(dims), " has a negative dim"));
    }
  }
  // A zero dim anywhere makes an empty tensor, whatever the others: [2^62, 0]
  // is 0 bytes, not an overflow (found by the request decoder's fuzzer).
  for (int64_t d : dims) {
    if (d == 0) return size_t{0};
  }
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", DimsToString(dims), " of ",
                                                     DTypeName(dtype),
                                                     " is too large (its size overflows)"));
    }
  }
  return static_cast<size_t>(bytes);
}

std::string DimsToString(const Dims& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

std::string BytesToString(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.1f GiB", bytes / double(1ull << 30));
  if (bytes >= (1ull << 20)) return absl::StrFormat("%.1f MiB", bytes / double(1ull << 20));
  return absl::StrCat(bytes, " bytes");
}

absl::Status MemoryBudget::Reserve(uint64_t bytes, const std::string& what) {
  uint64_t used = used_.load();
  do {
    if (bytes > limit_ || used > limit_ - bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, " needs ", BytesToString(bytes), " with ", BytesToString(used),
          " already held, more than the per-request memory limit of ", BytesToString(limit_),
          " (", limit_name_, ")"));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes));
  return absl::OkStatus();
}

Tensor Tensor::Zeros(DType dtype, Dims dims) {
  absl::StatusOr<Tensor> t = Allocate(dtype, std::move(dims), "tensor");
  ENGINE_CHECK(t.ok());
  return *std::move(t);
}

absl::StatusOr<Tensor> Tensor::Allocate(DType dtype, Dims dims, const std::string& what,
                                        const std::shared_ptr<MemoryBudget>& budget) {
  ASSIGN_OR_RETURN(const size_t size, CheckedByteSize(dtype, dims, what));
  const size_t bytes = TensorBufferBytes(size);
  if (budget != nullptr) RETURN_IF_ERROR(budget->Reserve(bytes, what));
  absl::StatusOr<void*> buffer = AllocateTensorBuffer(bytes, dtype, dims, what);
  if (!buffer.ok()) {
    if (budget != nullptr) budget->Release(bytes);
    return buffer.status();
  }
  void* p = *buffer;
  std::memset(p, 0, bytes);
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  if (budget != nullptr) {
    t.storage_ = std::shared_ptr<void>(p, [budget, bytes](void* q) {
      std::free(q);
      budget->Release(bytes);
    });
  } else {
    t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  t.data_ = p;
  return t;
}

size_t TensorBufferBytes(size_t size) { return size == 0 ? 64 : (size + 63) / 64 * 64; }

absl::StatusOr<void*> AllocateTensorBuffer(size_t bytes, DType dtype, const Dims& dims,
                                           const std::string& what) {
  void* p = AllocateBuffer(bytes, 64);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": cannot allocate ",
                                                     BytesToString(bytes), " for ",
                                                     DTypeName(dtype), DimsToString(dims)));
  }
  return p;
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

absl::StatusOr<Tensor> Tensor::TryClone(const std::string& what,
                                        const std::shared_ptr<MemoryBudget>& budget) const {
  ASSIGN_OR_RETURN(Tensor t, Allocate(dtype_, dims_, what, budget));
  if (byte_size() > 0) std::memcpy(t.data_, data_, byte_size());
  return t;
}

}  // namespace kiln
