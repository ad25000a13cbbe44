// A contract states only what the model itself fixes; everything else stays
// open and is compiled per request signature (when in doubt, accept and
// compile: a signature no native kernel takes runs through the libtorch
// fallback, or fails with the op's own dtype error).
//
// The dtype an input must have is read off its uses, strongest first:
//   1. an op that needs its input to match its constant floating weight
//      (conv, linear, matmul by a constant, batch/layer norm): the weight's
//      dtype (a float64 model's Linear makes its input FP64);
//   2. an operand that only takes one dtype: indices of an embedding
//      (IndexSelect made from aten::embedding) and of Gather are INT64, the
//      condition of Where (what masked_fill imports to) is BOOL.
// Nothing else fixes the dtype: a softmax, matmul or reduction of the inputs
// themselves takes float64, float16 and integer inputs as PyTorch does, and
// x[i] takes integer indices and bool masks alike.
//
// Ranks: a convolution's weight fixes its input's rank and channels. A
// Linear's weight fixes only the last dim: its input takes any leading dims
// (TakesAnyLeadingDims), as attention and transformer layers used batch- or
// sequence-first need.
#include "engine/passes/input_contract.h"

namespace kiln::passes {
namespace {

// Ops whose input 0 must have the dtype of their weight (input 1) in
// PyTorch: "mat1 and mat2 must have the same dtype", "expected scalar type
// Double but found Float".
bool InputMatchesWeight(ir::OpKind kind) {
  switch (kind) {
    case ir::OpKind::kConv:
    case ir::OpKind::kLinear:
    case ir::OpKind::kMatMul:
    case ir::OpKind::kBatchNorm:
    case ir::OpKind::kLayerNorm:
      return true;
    default:
      return false;
  }
}

// x[i] (aten::index) imports to IndexSelect too, and takes a bool mask as
// well as integer indices; only an embedding's and a gather's indices are INT64.
bool TakesOnlyInt64Indices(const ir::Node& node) {
  if (node.kind == ir::OpKind::kGather) return true;
  return node.kind == ir::OpKind::kIndexSelect &&
         node.source_op.rfind("aten::index", 0) != 0;
}

// The dtype one operand position of `node` requires, if only one is valid.
DType OperandDType(const ir::Node& node, size_t operand) {
  if (operand == 1 && TakesOnlyInt64Indices(node)) return DType::kInt64;
  if (node.kind == ir::OpKind::kWhere && operand == 0) return DType::kBool;
  return DType::kUnknown;
}

// Refines `type` from the use of the input as operand `operand` of `node`.
// `rank` is the strength of the dtype found so far (see the file comment).
void RefineFromUse(const ir::Graph& graph, const ir::Node& node, size_t operand,
                   ir::TensorType& type, int& rank, bool& any_leading) {
  const Tensor* w = node.inputs.size() > 1 ? graph.ConstantValue(node.inputs[1]) : nullptr;
  if (operand == 0 && InputMatchesWeight(node.kind) && w != nullptr &&
      IsFloatingPoint(w->dtype()) && rank > 1) {
    type.dtype = w->dtype();
    rank = 1;
  }
  if (const DType required = OperandDType(node, operand);
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
    // [-1, in_features] as shown; any leading dims are taken.
    type.dims = Dims{-1, w->dim(1)};
    any_leading = true;
  }
}

struct Inferred {
  ir::TensorType type;
  bool any_leading = false;
};

Inferred InferOne(const ir::Graph& graph, ir::ValueId in) {
  Inferred out{graph.value(in).type, false};
  // The model's own type (a scripted annotation) is final.
  int rank = out.type.dtype != DType::kUnknown ? 0 : 4;
  for (const ir::Node& node : graph.nodes()) {
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.inputs[k] == in) RefineFromUse(graph, node, k, out.type, rank, out.any_leading);
    }
  }
  return out;
}

}  // namespace

std::vector<ir::TensorType> InferInputContract(const ir::Graph& graph) {
  std::vector<ir::TensorType> types;
  for (ir::ValueId in : graph.inputs()) types.push_back(InferOne(graph, in).type);
  return types;
}

bool TakesAnyLeadingDims(const ir::Graph& graph, ir::ValueId input) {
  return InferOne(graph, input).any_leading;
}

bool IsIndexOnlyInput(const ir::Graph& graph, ir::ValueId input) {
  bool used = false;
  for (const ir::Node& node : graph.nodes()) {
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.inputs[k] != input) continue;
      const bool index = TakesOnlyInt64Indices(node) && k == 1;
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
