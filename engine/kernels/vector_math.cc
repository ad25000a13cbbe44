// Built with AVX-512 (this file only); entered only when HasVectorMath().
#include "engine/kernels/vector_math.h"

#include <immintrin.h>

#include <cmath>

// glibc's AVX-512 vector math entry points (x86-64 vector function ABI).
extern "C" __m512 _ZGVeN16v_expf(__m512);
extern "C" __m512 _ZGVeN16v_tanhf(__m512);
extern "C" __m512 _ZGVeN16v_erff(__m512);
extern "C" __m512 _ZGVeN16v_expm1f(__m512);
extern "C" __m512 _ZGVeN16v_log1pf(__m512);
extern "C" __m512 _ZGVeN16v_logf(__m512);

namespace kiln::kernels {
namespace {

// Applies f to 16 floats at a time; the last, shorter block masked.
template <typename F>
inline void Map(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

inline __m512 Set(float v) { return _mm512_set1_ps(v); }

}  // namespace

bool HasVectorMath() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return has;
}

void VectorExp(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) { return _ZGVeN16v_expf(v); });
}

void VectorExpm1(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) { return _ZGVeN16v_expm1f(v); });
}

void VectorLog(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) { return _ZGVeN16v_logf(v); });
}

void VectorLog1p(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) { return _ZGVeN16v_log1pf(v); });
}

void VectorErf(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) { return _ZGVeN16v_erff(v); });
}

void VectorSigmoid(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) {
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), v));
    return _mm512_div_ps(Set(1.0f), _mm512_add_ps(Set(1.0f), e));
  });
}

void VectorSilu(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) {
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), v));
    return _mm512_div_ps(v, _mm512_add_ps(Set(1.0f), e));
  });
}

void VectorTanh(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) { return _ZGVeN16v_tanhf(v); });
}

void VectorGeluErf(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) {
    const __m512 e = _ZGVeN16v_erff(_mm512_mul_ps(v, Set(static_cast<float>(M_SQRT1_2))));
    return _mm512_mul_ps(_mm512_mul_ps(v, Set(0.5f)), _mm512_add_ps(Set(1.0f), e));
  });
}

void VectorGeluTanh(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) {
    const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(Set(0.044715f), v), v), v);
    const __m512 inner =
        _mm512_mul_ps(Set(static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5)), _mm512_add_ps(v, cube));
    const __m512 t = _ZGVeN16v_tanhf(inner);
    return _mm512_mul_ps(_mm512_mul_ps(Set(0.5f), v), _mm512_add_ps(Set(1.0f), t));
  });
}

// x * tanh(log1p(exp(x))).
void VectorMish(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) {
    return _mm512_mul_ps(v, _ZGVeN16v_tanhf(_ZGVeN16v_log1pf(_ZGVeN16v_expf(v))));
  });
}

// min(x, 0) - log1p(exp(-|x|)); min with x second keeps a NaN x, as std::min(x, 0).
void VectorLogSigmoid(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](__m512 v) {
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(v)));
    return _mm512_sub_ps(_mm512_min_ps(_mm512_setzero_ps(), v), _ZGVeN16v_log1pf(e));
  });
}

// x * beta > threshold ? x : log1p(exp(x * beta)) / beta (NaN takes the second form).
void VectorSoftplus(const float* x, float* y, int64_t n, float beta, float threshold) {
  Map(x, y, n, [beta, threshold](__m512 v) {
    const __m512 xb = _mm512_mul_ps(v, Set(beta));
    const __m512 soft = _mm512_div_ps(_ZGVeN16v_log1pf(_ZGVeN16v_expf(xb)), Set(beta));
    const __mmask16 big = _mm512_cmp_ps_mask(xb, Set(threshold), _CMP_GT_OQ);
    return _mm512_mask_blend_ps(big, soft, v);
  });
}

// x <= 0 ? expm1(x * c) * a : x * b (NaN takes the second form).
void VectorElu(const float* x, float* y, int64_t n, float a, float b, float c) {
  Map(x, y, n, [a, b, c](__m512 v) {
    const __m512 neg = _mm512_mul_ps(_ZGVeN16v_expm1f(_mm512_mul_ps(v, Set(c))), Set(a));
    const __mmask16 le = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LE_OQ);
    return _mm512_mask_blend_ps(le, _mm512_mul_ps(v, Set(b)), neg);
  });
}

}  // namespace kiln::kernels
