#include "absl/strings/str_cat.h"
#include "engine/kernels/kernel.h"

namespace kiln::kernels {

const std::vector<KernelDef>& AllKernels() {
  static const auto* all = [] {
    auto* v = new std::vector<KernelDef>();
    // The one list of kernel families.
    for (auto family : {ElementwiseKernels(), ActivationKernels(), MatMulKernels(), ConvKernels(),
                        PoolKernels(), NormKernels(), ShapeKernels(), ReduceKernels()}) {
      v->insert(v->end(), family.begin(), family.end());
    }
    return v;
  }();
  return *all;
}

const KernelDef* FindKernel(ir::OpKind op, DType dtype) {
  const KernelDef* any = nullptr;
  for (const KernelDef& k : AllKernels()) {
    if (k.op != op) continue;
    if (k.dtype == dtype) return &k;
    if (k.dtype == DType::kUnknown) any = &k;
  }
  return any;
}

std::string NodeContext(const ir::Node& node) {
  if (node.source_op.empty()) return absl::StrCat("node (", ir::OpName(node.kind), "): ");
  return absl::StrCat("node (", ir::OpName(node.kind), ", ", node.source_op, "): ");
}

}  // namespace kiln::kernels
