// The dtype an input must have is read off its uses, strongest first:
//   1. a float-only op whose constant weight is floating: the weight's dtype
//      (a float64 model's Linear makes its input FP64);
//   2. an operand that only takes one dtype: indices of IndexSelect (what
//      nn.Embedding imports to) and Gather are INT64, the condition of Where
//      (what masked_fill imports to) is BOOL;
//   3. a float-only op without such a weight: FP32, PyTorch's default.
// Nothing else fixes the dtype: the input stays open and each request's dtype
// is compiled for, so an integer input is never silently cast to float.
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

// The dtype one operand position of `kind` requires, if only one is valid.
DType OperandDType(ir::OpKind kind, size_t operand) {
  if ((kind == ir::OpKind::kIndexSelect || kind == ir::OpKind::kGather) && operand == 1) {
    return DType::kInt64;
  }
  if (kind == ir::OpKind::kWhere && operand == 0) return DType::kBool;
  return DType::kUnknown;
}

// Refines `type` from the use of the input as operand `operand` of `node`.
// `rank` is the strength of the dtype found so far (see the file comment).
void RefineFromUse(const ir::Graph& graph, const ir::Node& node, size_t operand,
                   ir::TensorType& type, int& rank) {
  const Tensor* w = node.inputs.size() > 1 ? graph.ConstantValue(node.inputs[1]) : nullptr;
  if (operand == 0 && IsFloatOnly(node.kind)) {
    if (w != nullptr && IsFloatingPoint(w->dtype()) && rank > 1) {
      type.dtype = w->dtype();
      rank = 1;
    } else if (rank > 3) {
      type.dtype = DType::kF32;
      rank = 3;
    }
  }
  if (const DType required = OperandDType(node.kind, operand);
      required != DType::kUnknown && rank > 2) {
    type.dtype = required;
    rank = 2;
  }
  if (type.dims || operand != 0 || w == nullptr) return;
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
    // The model's own type (a scripted annotation) is final.
    int rank = type.dtype != DType::kUnknown ? 0 : 4;
    for (const ir::Node& node : graph.nodes()) {
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        if (node.inputs[k] == in) RefineFromUse(graph, node, k, type, rank);
      }
    }
    types.push_back(std::move(type));
  }
  return types;
}

bool IsIndexOnlyInput(const ir::Graph& graph, ir::ValueId input) {
  bool used = false;
  for (const ir::Node& node : graph.nodes()) {
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.inputs[k] != input) continue;
      const bool index = (node.kind == ir::OpKind::kIndexSelect ||
                          node.kind == ir::OpKind::kGather) && k == 1;
      if (!index && node.kind != ir::OpKind::kSize) return false;
      used = used || index;
    }
  }
  for (ir::ValueId out : graph.outputs()) {
    if (out == input) return false;
  }
  return used;
}

}  // namespace kiln::passes
