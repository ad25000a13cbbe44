#include "engine/common/dtype.h"

#include <vector>

namespace kiln {
namespace {

// constexpr, so the table is usable from other files' static initialisers.
struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kUnknown, "UNKNOWN", 0}, {DType::kBool, "BOOL", 1},
    {DType::kUInt8, "UINT8", 1},     {DType::kInt8, "INT8", 1},
    {DType::kInt16, "INT16", 2},     {DType::kInt32, "INT32", 4},
    {DType::kInt64, "INT64", 8},     {DType::kF16, "FP16", 2},
    {DType::kBF16, "BF16", 2},       {DType::kF32, "FP32", 4},
    {DType::kF64, "FP64", 8},
};

const DTypeInfo& Info(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)];
}

}  // namespace

size_t DTypeSize(DType dtype) { return Info(dtype).size; }

const std::string& DTypeName(DType dtype) {
  // Built on first use (not at static-initialisation time) for the same reason.
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const DTypeInfo& info : kDTypes) v->emplace_back(info.name);
    return v;
  }();
  return (*names)[static_cast<size_t>(dtype)];
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype != DType::kUnknown && name == info.name) return info.dtype;
  }
  return std::nullopt;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF16 || dtype == DType::kBF16 || dtype == DType::kF32 ||
         dtype == DType::kF64;
}

bool IsIntegral(DType dtype) {
  return dtype == DType::kUInt8 || dtype == DType::kInt8 || dtype == DType::kInt16 ||
         dtype == DType::kInt32 || dtype == DType::kInt64;
}

}  // namespace kiln
