// Dtype helpers shared by the kernel families that handle more than float32
// (private to engine/kernels/): C types per dtype, element reads and writes
// through double, row-major strides, and the "weak scalar" rule for 0-dim
// constant operands.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/element.h"
#include "engine/common/half.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {

// Row-major strides (in elements) of `dims`.
inline std::vector<int64_t> RowMajorStrides(const Dims& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// Dtypes the typed kernels can read as C types (LoadAsDouble also widens
// FP16 and BF16; convert.h converts between all ten).
inline bool IsPlainDType(DType dtype) {
  return dtype == DType::kBool || IsIntegral(dtype) || dtype == DType::kF32 ||
         dtype == DType::kF64;
}

// Element `i` of an integer buffer (bool, uint8 ... int64) as int64, exactly.
inline int64_t LoadAsInt64(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBool: return static_cast<const bool*>(data)[i] ? 1 : 0;
    case DType::kUInt8: return static_cast<const uint8_t*>(data)[i];
    case DType::kInt8: return static_cast<const int8_t*>(data)[i];
    case DType::kInt16: return static_cast<const int16_t*>(data)[i];
    case DType::kInt32: return static_cast<const int32_t*>(data)[i];
    case DType::kInt64: return static_cast<const int64_t*>(data)[i];
    default: return static_cast<int64_t>(LoadAsDouble(data, dtype, i));
  }
}

// A 0-dim constant operand whose dtype differs from the tensor it meets (the
// importer types Python scalars before it knows the other operand's dtype):
// PyTorch lets such a scalar take the tensor's dtype when both are integral or
// both floating point, and an integral scalar take a floating tensor's dtype.
// Returns the scalar converted to `want`, or Unimplemented when PyTorch would
// promote the tensor instead (a fractional scalar with an integer tensor).
inline absl::StatusOr<Tensor> WeakScalarAs(const ir::Node& node, const Tensor& scalar, DType want) {
  Tensor out = Tensor::Zeros(want, {});
  const double v = LoadAsDouble(scalar.raw_data(), scalar.dtype(), 0);
  if (want == DType::kF32) {
    *out.data<float>() = static_cast<float>(v);
  } else if (want == DType::kF64) {
    *out.data<double>() = v;
  } else if (want == DType::kF16 || want == DType::kBF16) {
    const float f = static_cast<float>(v);
    *out.data<uint16_t>() = want == DType::kF16 ? FloatToHalf(f) : FloatToBF16(f);
  } else if (IsIntegral(want) || want == DType::kBool) {
    if (IsFloatingPoint(scalar.dtype()) && v != std::floor(v)) {
      return Unimplemented(node, "a ", DTypeName(want), " tensor combined with the fractional scalar ",
                           v, " (PyTorch would promote the result to float)");
    }
    const int64_t iv = IsFloatingPoint(scalar.dtype()) ? static_cast<int64_t>(v)
                                                        : LoadAsInt64(scalar.raw_data(), scalar.dtype(), 0);
    switch (want) {
      case DType::kBool: *out.data<bool>() = iv != 0; break;
      case DType::kUInt8: *out.data<uint8_t>() = static_cast<uint8_t>(iv); break;
      case DType::kInt8: *out.data<int8_t>() = static_cast<int8_t>(iv); break;
      case DType::kInt16: *out.data<int16_t>() = static_cast<int16_t>(iv); break;
      case DType::kInt32: *out.data<int32_t>() = static_cast<int32_t>(iv); break;
      default: *out.data<int64_t>() = iv; break;
    }
  } else {
    return Unimplemented(node, "scalar operand of dtype ", DTypeName(scalar.dtype()), " with a ",
                         DTypeName(want), " tensor");
  }
  return out;
}


// True when input `i` is a 0-dim constant (a scalar operand).
inline bool IsScalarConstant(const PrepareContext& ctx, size_t i) {
  return ctx.inputs[i].constant != nullptr && ctx.inputs[i].dims.empty();
}

// The int list attribute `name`, or input `i` when present: an int list
// computed at run time (from aten::size), which the executor knows in Prepare
// as a constant 1-D INT64 tensor.
inline absl::StatusOr<std::vector<int64_t>> IntsAttrOrInput(const PrepareContext& ctx,
                                                            const char* name, size_t i) {
  if (!HasInput(ctx, i)) return ctx.node.attrs.GetInts(name);
  const Tensor* value = ctx.inputs[i].constant;
  if (value == nullptr || value->dtype() != DType::kInt64 || value->rank() != 1) {
    return InvalidArg(ctx.node, "input ", i, " (", name, ") must be a known int list");
  }
  return std::vector<int64_t>(value->data<int64_t>(), value->data<int64_t>() + value->num_elements());
}

// The int attribute `name`, or input `i` when present: an int computed at run
// time (from aten::size), which the executor knows in Prepare as a constant.
inline absl::StatusOr<int64_t> IntAttrOrInput(const PrepareContext& ctx, const char* name, size_t i,
                                              int64_t def) {
  if (!HasInput(ctx, i)) return ctx.node.attrs.GetInt(name, def);
  const Tensor* value = ctx.inputs[i].constant;
  if (value == nullptr || !IsIntegral(value->dtype()) || value->num_elements() != 1) {
    return InvalidArg(ctx.node, "input ", i, " (", name, ") must be a known int");
  }
  return LoadAsInt64(value->raw_data(), value->dtype(), 0);
}

// Reads a float attribute that may be stored as an int (constant folding keeps ints).
inline float FloatAttr(const ir::Node& node, const char* name, double def) {
  return static_cast<float>(node.attrs.GetFloat(name, def));
}

}  // namespace kiln::kernels
