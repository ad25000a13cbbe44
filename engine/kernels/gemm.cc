#include "engine/kernels/gemm.h"

#include <oneapi/dnnl/dnnl.h>

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

}  // namespace kiln::kernels
