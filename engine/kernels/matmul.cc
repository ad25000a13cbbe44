// MatMul (torch.matmul semantics for every rank combination) and Linear
// (x[..., K] * W[N, K]^T + b[N]), both on OpenBLAS.
//
// MatMul: Prepare reduces the operands to a list of (A, B, C) offsets for
// [M, K] x [K, N] products, following torch.matmul: a 1-D left operand is a
// row [1, K] and a 1-D right operand a column [K, 1] (the unit dim is dropped
// from the output), and batch dims broadcast. When B has no real batch dims
// (the common x[B, S, K] @ W[K, N]), the batches of A are folded into M for a
// single GEMM. Linear flattens x to [M, K] and runs one GEMM with W
// transposed, the bias pre-filled into the output and beta = 1.
//
// Products with a single row or column go to sgemv: OpenBLAS 0.3.21 has no
// gemm-to-gemv forwarding, and packing a whole matrix for one row is what
// makes batch-1 Linear slow otherwise. No small-size threshold is applied:
// OpenBLAS's own small-matrix path is fast enough for the shapes models use.
//
// This file and conv.cc are the only callers of cblas; neither calls it
// inside an OpenMP region, since OpenBLAS runs its own thread pool.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

// C[M, N] = A[M, K] * op(B) + beta * C, all row-major and dense. op(B) is B
// ([K, N]) or, with `b_transposed`, the transpose of B stored as [N, K].
void Gemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool b_transposed,
          float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // OpenBLAS rejects lda = 0; the product is empty, so C = beta * C.
    if (beta == 0.0f) std::fill(c, c + m * n, 0.0f);
    return;
  }
  if (m == 1) {
    // c[N] = op(B)^T a: with B stored [K, N] that is B^T a, with B stored [N, K] it is B a.
    if (b_transposed) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, b, k, a, 1, beta, c, 1);
    } else {
      cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, b, n, a, 1, beta, c, 1);
    }
    return;
  }
  if (n == 1) {
    // c[M] = A b, where b is the single column of op(B): contiguous either way.
    cblas_sgemv(CblasRowMajor, CblasNoTrans, m, k, 1.0f, a, k, b, 1, beta, c, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
              a, k, b, b_transposed ? k : n, beta, c, n);
}

// ---------------------------------------------------------------- MatMul

struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  // One entry per product, in elements; the output offset of product i is i * m * n.
  std::vector<int64_t> a_offsets;
  std::vector<int64_t> b_offsets;
};

// Row-major strides of `batch` dims inside an operand whose matrix part has
// `matrix_elems` elements, 0 for size-1 (broadcast) dims, right-aligned to
// `out_batch`.
std::vector<int64_t> BatchStrides(const Dims& batch, int64_t matrix_elems, size_t out_rank) {
  std::vector<int64_t> strides(out_rank, 0);
  int64_t stride = matrix_elems;
  for (size_t k = 0; k < batch.size(); ++k) {
    const size_t j = batch.size() - 1 - k;
    strides[out_rank - 1 - k] = batch[j] == 1 ? 0 : stride;
    stride *= batch[j];
  }
  return strides;
}

absl::Status PrepareMatMul(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  RETURN_IF_ERROR(CheckDType(ctx, 1, DType::kF32));
  const Dims& a = ctx.inputs[0].dims;
  const Dims& b = ctx.inputs[1].dims;
  if (a.empty() || b.empty()) {
    return InvalidArg(ctx.node, "both operands need at least 1 dim, got ", DimsToString(a), " and ",
                      DimsToString(b));
  }
  // Matrix views: a 1-D left operand is [1, K], a 1-D right operand [K, 1].
  const int64_t m = a.size() == 1 ? 1 : a[a.size() - 2];
  const int64_t k = a.back();
  const int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  const int64_t n = b.size() == 1 ? 1 : b.back();
  if (k != kb) {
    return InvalidArg(ctx.node, "inner dims do not match: ", DimsToString(a), " @ ",
                      DimsToString(b));
  }
  const Dims a_batch(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  const Dims b_batch(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  const size_t r = std::max(a_batch.size(), b_batch.size());
  Dims batch(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < a_batch.size() ? a_batch[a_batch.size() - 1 - i] : 1;
    const int64_t db = i < b_batch.size() ? b_batch[b_batch.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return InvalidArg(ctx.node, "batch dims do not broadcast: ", DimsToString(a), " @ ",
                        DimsToString(b));
    }
    batch[r - 1 - i] = da == 1 ? db : da;
  }
  Dims out = batch;
  if (a.size() > 1) out.push_back(m);
  if (b.size() > 1) out.push_back(n);

  auto plan = std::make_shared<MatMulPlan>();
  plan->m = m;
  plan->n = n;
  plan->k = k;
  const int64_t num_batches = NumElements(batch);
  if (NumElements(b_batch) == 1 && num_batches > 0) {
    // Every product uses the same B and A's batches are contiguous: one GEMM
    // with the batches stacked into M (the output layout is the same).
    plan->m = m * num_batches;
    plan->a_offsets = {0};
    plan->b_offsets = {0};
  } else {
    const std::vector<int64_t> as = BatchStrides(a_batch, m * k, r);
    const std::vector<int64_t> bs = BatchStrides(b_batch, k * n, r);
    std::vector<int64_t> idx(r, 0);
    for (int64_t i = 0; i < num_batches; ++i) {
      int64_t ao = 0, bo = 0;
      for (size_t d = 0; d < r; ++d) {
        ao += idx[d] * as[d];
        bo += idx[d] * bs[d];
      }
      plan->a_offsets.push_back(ao);
      plan->b_offsets.push_back(bo);
      for (size_t d = r; d-- > 0;) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
  }
  ctx.outputs = {TensorInfo{DType::kF32, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status EvalMatMul(EvalContext& ctx) {
  const MatMulPlan& p = StateAs<MatMulPlan>(ctx);
  const float* a = ctx.inputs[0]->data<float>();
  const float* b = ctx.inputs[1]->data<float>();
  float* c = ctx.outputs[0]->data<float>();
  for (size_t i = 0; i < p.a_offsets.size(); ++i) {
    Gemm(p.m, p.n, p.k, a + p.a_offsets[i], b + p.b_offsets[i], /*b_transposed=*/false,
         /*beta=*/0.0f, c + static_cast<int64_t>(i) * p.m * p.n);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Linear

struct LinearPlan {
  int64_t m = 0, n = 0, k = 0;
  bool has_bias = false;
};

absl::Status PrepareLinear(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 3));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  RETURN_IF_ERROR(CheckDType(ctx, 1, DType::kF32));
  const Dims& x = ctx.inputs[0].dims;
  const Dims& w = ctx.inputs[1].dims;
  if (x.empty()) return InvalidArg(ctx.node, "expected input with at least 1 dim, got []");
  if (w.size() != 2) {
    return InvalidArg(ctx.node, "expected 2-D weight, got ", DimsToString(w));
  }
  if (x.back() != w[1]) {
    return InvalidArg(ctx.node, "input ", DimsToString(x), " does not match weight ",
                      DimsToString(w));
  }
  auto plan = std::make_shared<LinearPlan>();
  plan->n = w[0];
  plan->k = w[1];
  plan->m = NumElements(Dims(x.begin(), x.end() - 1));
  if (HasInput(ctx, 2)) {
    RETURN_IF_ERROR(CheckDType(ctx, 2, DType::kF32));
    const Dims& b = ctx.inputs[2].dims;
    if (b.size() != 1 || b[0] != plan->n) {
      return InvalidArg(ctx.node, "expected bias [", plan->n, "], got ", DimsToString(b));
    }
    plan->has_bias = true;
  }
  Dims out = x;
  out.back() = plan->n;
  ctx.outputs = {TensorInfo{DType::kF32, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status EvalLinear(EvalContext& ctx) {
  const LinearPlan& p = StateAs<LinearPlan>(ctx);
  const float* x = ctx.inputs[0]->data<float>();
  const float* w = ctx.inputs[1]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  if (p.has_bias) {
    // Bias goes in first and the GEMM accumulates onto it (beta = 1): one pass
    // over the output instead of a separate bias pass after the product.
    const float* bias = ctx.inputs[2]->data<float>();
    for (int64_t i = 0; i < p.m; ++i) std::memcpy(y + i * p.n, bias, p.n * sizeof(float));
  }
  Gemm(p.m, p.n, p.k, x, w, /*b_transposed=*/true, p.has_bias ? 1.0f : 0.0f, y);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> MatMulKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kMatMul, DType::kF32, PrepareMatMul, EvalMatMul},
      {ir::OpKind::kLinear, DType::kF32, PrepareLinear, EvalLinear},
  };
  return kKernels;
}

}  // namespace kiln::kernels
