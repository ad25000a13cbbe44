// Float32 transcendental activations over contiguous arrays with glibc's
// AVX-512 vector math (libmvec, a few ulp; NaN and +-inf as scalar libm),
// for CPUs that have AVX-512. The formulas are activation.cc's, term by term.
#pragma once

#include <cstdint>

namespace kiln::kernels {

// Whether this CPU runs the Vector* functions below (AVX-512 F and DQ).
bool HasVectorMath();

// y[i] = f(x[i]) for n elements (x and y may be the same array).
void VectorExp(const float* x, float* y, int64_t n);
void VectorExpm1(const float* x, float* y, int64_t n);
void VectorLog(const float* x, float* y, int64_t n);
void VectorLog1p(const float* x, float* y, int64_t n);
void VectorErf(const float* x, float* y, int64_t n);
void VectorSigmoid(const float* x, float* y, int64_t n);
void VectorSilu(const float* x, float* y, int64_t n);
void VectorTanh(const float* x, float* y, int64_t n);
void VectorGeluErf(const float* x, float* y, int64_t n);
void VectorGeluTanh(const float* x, float* y, int64_t n);
void VectorMish(const float* x, float* y, int64_t n);
void VectorLogSigmoid(const float* x, float* y, int64_t n);
// Softplus with beta and threshold; Elu with a = alpha * scale, b = scale, c = input_scale.
void VectorSoftplus(const float* x, float* y, int64_t n, float beta, float threshold);
void VectorElu(const float* x, float* y, int64_t n, float a, float b, float c);

}  // namespace kiln::kernels
