#include <omp.h>

#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "engine/kernels/kernel.h"

extern "C" void openblas_set_num_threads(int);

namespace kiln::kernels {

const std::vector<KernelDef>& AllKernels() {
  static const auto* all = [] {
    auto* v = new std::vector<KernelDef>();
    // The one list of kernel families.
    for (auto family : {ElementwiseKernels(), ActivationKernels(), MatMulKernels(), ConvKernels(),
                        PoolKernels(), NormKernels(), ShapeKernels(), ReduceKernels(),
                        ScalarKernels(), UnaryKernels(), MovementKernels(), IndexingKernels(),
                        CastKernels(), ResizeKernels(), SortKernels(), AttentionKernels(),
                        RecurrentKernels(), LayoutKernels(), VisionKernels(),
                        ElementwiseChainKernels()}) {
      v->insert(v->end(), family.begin(), family.end());
    }
    return v;
  }();
  return *all;
}

namespace {

// Kernels added by InstallKernel. A deque keeps the addresses FindKernel
// returned valid while more are installed.
std::mutex& InstalledMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::deque<KernelDef>& Installed() {
  static auto* kernels = new std::deque<KernelDef>();
  return *kernels;
}

}  // namespace

const KernelDef* FindKernel(ir::OpKind op, DType dtype) {
  const KernelDef* any = nullptr;
  for (const KernelDef& k : AllKernels()) {
    if (k.op != op) continue;
    if (k.dtype == dtype) return &k;
    if (k.dtype == DType::kUnknown) any = &k;
  }
  if (any != nullptr) return any;
  std::lock_guard<std::mutex> lock(InstalledMutex());
  for (const KernelDef& k : Installed()) {
    if (k.op == op && (k.dtype == dtype || k.dtype == DType::kUnknown)) return &k;
  }
  return nullptr;
}

void InstallKernel(const KernelDef& kernel) {
  std::lock_guard<std::mutex> lock(InstalledMutex());
  for (KernelDef& k : Installed()) {
    if (k.op == kernel.op && k.dtype == kernel.dtype) {
      k = kernel;  // reinstalling replaces
      return;
    }
  }
  Installed().push_back(kernel);
}

bool IsNonTensorOp(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kIf:
    case ir::OpKind::kLoop:
    case ir::OpKind::kRaise:
    case ir::OpKind::kNone:
    case ir::OpKind::kIsNone:
    case ir::OpKind::kSize:
    case ir::OpKind::kRank:
    case ir::OpKind::kNumel:
    case ir::OpKind::kScalarBinary:
    case ir::OpKind::kScalarUnary:
    case ir::OpKind::kToScalar:
    case ir::OpKind::kListConstruct:
    case ir::OpKind::kListUnpack:
    case ir::OpKind::kListGetItem:
    case ir::OpKind::kListLen:
    case ir::OpKind::kListAppend:
    case ir::OpKind::kSplitList:
    case ir::OpKind::kFallback:
      return true;
    default:
      return false;
  }
}

void UseThreads(int num_threads) {
  // OpenBLAS (FP64 GEMM, matrix-vector products) runs on the calling thread
  // only: a second pool of its own would spin against the OpenMP team.
  static const bool single_threaded_blas = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded_blas;
  const int n = num_threads < 1 ? 1 : num_threads;
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

std::string NodeContext(const ir::Node& node) {
  if (node.source_op.empty()) return absl::StrCat("node (", ir::OpName(node.kind), "): ");
  return absl::StrCat("node (", ir::OpName(node.kind), ", ", node.source_op, "): ");
}

}  // namespace kiln::kernels
