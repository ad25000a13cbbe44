#include "engine/kernels/reference/ref_util.h"

#include <algorithm>
#include <cstring>

namespace kiln::kernels::reference {

std::vector<int64_t> StridesOf(const Dims& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

int64_t OffsetOf(const Index& idx, const Dims& dims) {
  const std::vector<int64_t> s = StridesOf(dims);
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * s[i];
  return off;
}

void ForEach(const Dims& dims, const std::function<void(const Index&)>& fn) {
  if (NumElements(dims) == 0) return;
  Index idx(dims.size(), 0);
  while (true) {
    fn(idx);
    int64_t d = static_cast<int64_t>(dims.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

int64_t Axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + std::max<int64_t>(rank, 1) : axis; }

double Values::at(const Index& idx) const { return v[OffsetOf(idx, dims)]; }

Values Read(const Tensor& t) {
  Values out;
  out.dims = t.dims();
  const int64_t n = t.num_elements();
  out.v.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::kBool: out.v[i] = t.data<bool>()[i] ? 1 : 0; break;
      case DType::kUInt8: out.v[i] = t.data<uint8_t>()[i]; break;
      case DType::kInt8: out.v[i] = t.data<int8_t>()[i]; break;
      case DType::kInt16: out.v[i] = t.data<int16_t>()[i]; break;
      case DType::kInt32: out.v[i] = t.data<int32_t>()[i]; break;
      case DType::kInt64: out.v[i] = static_cast<double>(t.data<int64_t>()[i]); break;
      case DType::kF32: out.v[i] = t.data<float>()[i]; break;
      case DType::kF64: out.v[i] = t.data<double>()[i]; break;
      default: out.v[i] = 0; break;
    }
  }
  return out;
}

Tensor Write(DType dtype, const Dims& dims, const std::vector<double>& v) {
  Tensor t = Tensor::Zeros(dtype, dims);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double x = v[i];
    switch (dtype) {
      case DType::kBool: t.data<bool>()[i] = x != 0; break;
      case DType::kUInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(static_cast<int64_t>(x)); break;
      case DType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int64_t>(x)); break;
      case DType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(static_cast<int64_t>(x)); break;
      case DType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(static_cast<int64_t>(x)); break;
      case DType::kInt64: t.data<int64_t>()[i] = static_cast<int64_t>(x); break;
      case DType::kF32: t.data<float>()[i] = static_cast<float>(x); break;
      case DType::kF64: t.data<double>()[i] = x; break;
      default: break;
    }
  }
  return t;
}

MaybeOutputs CoverageReference(const ir::Node& node, const std::vector<const Tensor*>& in) {
  for (auto fn : {ElementwiseReference, ShapeReference, ReduceReference, NnReference,
                  VisionReference}) {
    MaybeOutputs r = fn(node, in);
    if (r) return r;
  }
  return std::nullopt;
}

}  // namespace kiln::kernels::reference
