#include "engine/kernels/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <omp.h>

#include <algorithm>
#include <utility>

namespace kiln::kernels {

void Blas<float>::gemm(CBLAS_ORDER order, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b,
                       int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                       const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const char ta = trans_a == CblasNoTrans ? 'N' : 'T';
  const char tb = trans_b == CblasNoTrans ? 'N' : 'T';
  if (order == CblasColMajor) {
    // Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T.
    dnnl_sgemm(tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
    return;
  }
  dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Blas<double>::gemm(CBLAS_ORDER order, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b,
                        int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                        int64_t lda, const double* b, int64_t ldb, double beta, double* c,
                        int64_t ldc) {
  if (order == CblasColMajor) {
    Blas<double>::gemm(CblasRowMajor, trans_b, trans_a, n, m, k, alpha, b, ldb, a, lda, beta, c,
                       ldc);
    return;
  }
  // Rows of C (and of op(A)) split over the team; small products stay on this thread.
  const int64_t threads =
      std::min<int64_t>(omp_get_max_threads(), std::max<int64_t>(1, m * n * k / (1 << 18)));
  const int64_t rows = (m + threads - 1) / std::max<int64_t>(threads, 1);
#pragma omp parallel for num_threads(static_cast<int>(threads)) schedule(static) if (threads > 1)
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t first = t * rows, count = std::min(m, first + rows) - first;
    if (count <= 0) continue;
    const double* at = trans_a == CblasNoTrans ? a + first * lda : a + first;
    cblas_dgemm(CblasRowMajor, trans_a, trans_b, count, n, k, alpha, at, lda, b, ldb, beta,
                c + first * ldc, ldc);
  }
}

}  // namespace kiln::kernels
