#include "engine/passes/input_contract.h"

namespace kiln::passes {
namespace {

// Ops whose kernels compute in floating point only: an input feeding one must be float.
bool IsFloatOnly(ir::OpKind kind) {
  switch (kind) {
    case ir::OpKind::kConv:
    case ir::OpKind::kLinear:
    case ir::OpKind::kMatMul:
    case ir::OpKind::kSigmoid:
    case ir::OpKind::kTanh:
    case ir::OpKind::kGelu:
    case ir::OpKind::kSilu:
    case ir::OpKind::kHardSigmoid:
    case ir::OpKind::kHardSwish:
    case ir::OpKind::kMaxPool:
    case ir::OpKind::kAvgPool:
    case ir::OpKind::kAdaptiveAvgPool:
    case ir::OpKind::kBatchNorm:
    case ir::OpKind::kLayerNorm:
    case ir::OpKind::kSoftmax:
    case ir::OpKind::kLogSoftmax:
    case ir::OpKind::kMean:
      return true;
    default:
      return false;
  }
}

// Refines `type` from one use of the input as operand 0 of `node`.
void RefineFromUse(const ir::Graph& graph, const ir::Node& node, ir::TensorType& type) {
  if (type.dtype == DType::kUnknown && IsFloatOnly(node.kind)) {
    // A constant weight tells which float type; otherwise PyTorch's default.
    const Tensor* w = node.inputs.size() > 1 ? graph.ConstantValue(node.inputs[1]) : nullptr;
    type.dtype = w != nullptr && IsFloatingPoint(w->dtype()) ? w->dtype() : DType::kF32;
  }
  if (type.dims) return;
  const Tensor* w = node.inputs.size() > 1 ? graph.ConstantValue(node.inputs[1]) : nullptr;
  if (w == nullptr) return;
  if (node.kind == ir::OpKind::kConv && w->rank() >= 3) {
    Dims dims(w->rank(), -1);
    dims[1] = w->dim(1) * node.attrs.GetInt("groups", 1);
    type.dims = dims;
  } else if (node.kind == ir::OpKind::kLinear && w->rank() == 2) {
    // A traced Linear model was traced on a matrix; a batch of vectors is the contract.
    type.dims = Dims{-1, w->dim(1)};
  }
}

}  // namespace

std::vector<ir::TensorType> InferInputContract(const ir::Graph& graph) {
  std::vector<ir::TensorType> types;
  for (ir::ValueId in : graph.inputs()) {
    ir::TensorType type = graph.value(in).type;
    for (const ir::Node& node : graph.nodes()) {
      if (!node.inputs.empty() && node.inputs[0] == in) RefineFromUse(graph, node, type);
    }
    types.push_back(std::move(type));
  }
  return types;
}

}  // namespace kiln::passes
