// BLAS for the kernels (private to engine/kernels/): the routines of each
// element type for kernels templated on it, and a single-precision GEMM for the
// families other than matmul.cc and conv.cc (attention, recurrent, einsum), so
// that the BLAS calls and their edge cases stay in one place. Never call it
// inside an OpenMP region: the GEMMs start parallel regions of their own.
#pragma once

#include <cblas.h>

#include <cstdint>

namespace kiln::kernels {

// The BLAS routines of one element type, for kernels templated on it.
template <typename T>
struct Blas;
// FP32 GEMM runs on oneDNN's sgemm (gemm.cc): it JIT-compiles for the CPU it
// finds (AVX-512 on Zen 4, where this Debian's OpenBLAS falls back to its
// AVX2 kernels) and runs on the calling thread's OpenMP budget, the pool
// Kiln's own loops use, instead of OpenBLAS's second pool.
template <>
struct Blas<float> {
  static void gemm(CBLAS_ORDER order, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int64_t m,
                   int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float beta, float* c, int64_t ldc);
  static constexpr auto gemv = cblas_sgemv;
};
// FP64 GEMM on OpenBLAS, one call per block of rows, in parallel on the same
// OpenMP budget (gemm.cc): OpenBLAS itself runs single-threaded, so its own
// pthread pool never spins against the OpenMP team (kernels::UseThreads).
template <>
struct Blas<double> {
  static void gemm(CBLAS_ORDER order, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int64_t m,
                   int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                   const double* b, int64_t ldb, double beta, double* c, int64_t ldc);
  static constexpr auto gemv = cblas_dgemv;
};

// C[M, N] = alpha * op(A) * op(B) + beta * C in T (float or double), row-major;
// the arguments are those of Sgemm below. Handles M, N or K of 0 (OpenBLAS
// rejects a zero leading dim).
template <typename T>
void Xgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
           int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    // The product is empty: C = beta * C.
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    }
    return;
  }
  Blas<T>::gemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C[M, N] = alpha * op(A) * op(B) + beta * C, row-major; op(A) is A ([M, K],
// leading dim lda) or, with trans_a, the transpose of A stored [K, M]; the
// same for B ([K, N] or [N, K]). Handles M, N or K of 0 (OpenBLAS rejects a
// zero leading dim) and single rows or columns (sgemv).
void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace kiln::kernels
