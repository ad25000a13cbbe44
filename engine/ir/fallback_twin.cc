#include "engine/ir/fallback_twin.h"

#include <string>
#include <variant>

namespace kiln::ir {
namespace {

constexpr char kInputs[] = "fallback.inputs";
constexpr char kNativeAttrs[] = "fallback.native_attrs";
constexpr char kNativeShape[] = "fallback.native_node";  // kind, number of inputs

void Set(Attributes& attrs, const std::string& name, const AttrValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) attrs.SetBool(name, v);
        if constexpr (std::is_same_v<T, int64_t>) attrs.SetInt(name, v);
        if constexpr (std::is_same_v<T, double>) attrs.SetFloat(name, v);
        if constexpr (std::is_same_v<T, std::string>) attrs.SetString(name, v);
        if constexpr (std::is_same_v<T, std::vector<int64_t>>) attrs.SetInts(name, v);
        if constexpr (std::is_same_v<T, std::vector<double>>) attrs.SetFloats(name, v);
        if constexpr (std::is_same_v<T, Tensor>) attrs.SetTensor(name, v);
      },
      value);
}

}  // namespace

bool IsFallbackTwinAttr(const std::string& name) {
  return name.rfind(kFallbackTwinPrefix, 0) == 0;
}

void AddFallbackTwin(Node& native, const Attributes& fallback_attrs,
                     const std::vector<int64_t>& input_positions) {
  int64_t own = 0;
  for (const auto& [name, value] : native.attrs.map()) own += IsFallbackTwinAttr(name) ? 0 : 1;
  for (const auto& [name, value] : fallback_attrs.map()) {
    Set(native.attrs, kFallbackTwinPrefix + name, value);
  }
  native.attrs.SetInts(kInputs, input_positions);
  native.attrs.SetInt(kNativeAttrs, own);
  native.attrs.SetInts(kNativeShape, {static_cast<int64_t>(native.kind),
                                      static_cast<int64_t>(native.inputs.size())});
}

bool SwapInFallbackTwin(Node& node) {
  if (!node.attrs.Has(kInputs) || node.kind == OpKind::kFallback) return false;
  Attributes fallback;
  int64_t own = 0;
  for (const auto& [name, value] : node.attrs.map()) {
    if (!IsFallbackTwinAttr(name)) {
      ++own;
    } else if (name != kInputs && name != kNativeAttrs && name != kNativeShape) {
      Set(fallback, name.substr(sizeof(kFallbackTwinPrefix) - 1), value);
    }
  }
  const std::vector<int64_t> shape{static_cast<int64_t>(node.kind),
                                   static_cast<int64_t>(node.inputs.size())};
  if (own != node.attrs.GetInt(kNativeAttrs, -1) || node.attrs.GetInts(kNativeShape) != shape) {
    return false;
  }
  std::vector<ValueId> inputs;
  for (int64_t k : node.attrs.GetInts(kInputs)) {
    if (k == -1) {  // an absent element of a list argument
      inputs.push_back(kNoValue);
      continue;
    }
    if (k < 0 || static_cast<size_t>(k) >= node.inputs.size()) return false;
    inputs.push_back(node.inputs[k]);
  }
  node.kind = OpKind::kFallback;
  node.attrs = std::move(fallback);
  node.inputs = std::move(inputs);
  return true;
}

int SwapInEveryFallbackTwin(Graph& graph) {
  int swapped = 0;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    swapped += SwapInFallbackTwin(graph.mutable_node(static_cast<NodeId>(n))) ? 1 : 0;
  }
  return swapped;
}

}  // namespace kiln::ir
