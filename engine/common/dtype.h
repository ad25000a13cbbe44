// Kiln's element types. PyTorch scalar types are converted to these once, in the
// importer; protocol datatype strings ("FP32", "INT64", ...) once, in the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  kUnknown = 0,
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kF16,
  kBF16,
  kF32,
  kF64,
};

// Bytes per element; 0 for kUnknown.
size_t DTypeSize(DType dtype);

// The Open Inference Protocol datatype string ("FP32", "INT64", "BOOL", ...).
// A std::string reference because Debian's abseil has its own string_view,
// which absl::StrCat does not take from std::string_view.
const std::string& DTypeName(DType dtype);

// Parses an Open Inference Protocol datatype string; nullopt if Kiln has no such dtype.
std::optional<DType> DTypeFromName(std::string_view name);

bool IsFloatingPoint(DType dtype);
bool IsIntegral(DType dtype);  // bool excluded

}  // namespace kiln
