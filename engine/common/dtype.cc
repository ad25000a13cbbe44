#include "engine/common/dtype.h"

namespace kiln {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string name;
  size_t size;
};

const DTypeInfo kDTypes[] = {
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

const std::string& DTypeName(DType dtype) { return Info(dtype).name; }

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype != DType::kUnknown && info.name == name) return info.dtype;
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
