// The arithmetic a compiled plan may use for its big float32 ops (convolutions
// and linear layers): float32 throughout (the default, PyTorch's numbers), or,
// opted into per model, bfloat16 operands with float32 accumulation and
// float32 results ("precision": "bf16" in the load config), about twice the
// rate on CPUs with AVX-512 BF16, at bfloat16's 8-bit mantissa on each
// operand. Part of the plan's cache key.
#pragma once

#include <optional>
#include <string_view>

namespace kiln {

// kFp32Direct is float32 without Winograd's convolution algorithm (which the
// default uses for 3x3 stride-1 convolutions: engine/kernels/onednn/conv.cc),
// for whoever wants the direct algorithm's summation order.
enum class Precision { kFp32, kBf16, kFp32Direct };

constexpr const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp32Direct: return "fp32_direct";
    default: return "fp32";
  }
}

inline std::optional<Precision> ParsePrecision(std::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp32_direct") return Precision::kFp32Direct;
  return std::nullopt;
}

}  // namespace kiln
