// Single-precision GEMM for the kernel families other than matmul.cc and
// conv.cc (attention, recurrent, einsum), so that the cblas calls and their
// edge cases stay in one place (private to engine/kernels/). Never call it
// inside an OpenMP region: OpenBLAS runs its own thread pool.
#pragma once

#include <cstdint>

namespace kiln::kernels {

// C[M, N] = alpha * op(A) * op(B) + beta * C, row-major; op(A) is A ([M, K],
// leading dim lda) or, with trans_a, the transpose of A stored [K, M]; the
// same for B ([K, N] or [N, K]). Handles M, N or K of 0 (OpenBLAS rejects a
// zero leading dim) and single rows or columns (sgemv).
void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace kiln::kernels
