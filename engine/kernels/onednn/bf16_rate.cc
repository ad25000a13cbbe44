#include "engine/kernels/bf16_rate.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "engine/kernels/kernel.h"
#include "engine/kernels/onednn/onednn.h"

namespace kiln::kernels {
namespace {

using onednn::Engine;
using onednn::Stream;

// The best GFLOP/s of `calls` runs of an m x k x n matmul with `type` operands.
double MatmulRate(dnnl::memory::data_type type, int m, int k, int n, int calls) {
  using dnnl::memory;
  const memory::desc src({m, k}, type, memory::format_tag::ab);
  const memory::desc weights_any({k, n}, type, memory::format_tag::any);
  const memory::desc dst({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights_any, dst), Engine());
  memory a(src, Engine()), b(pd.weights_desc(), Engine()), c(dst, Engine());
  // Ones (bfloat16 0x3f80 in both halves of a word, or float32 1.0f): no
  // denormals, whatever the weights' blocked layout.
  const uint32_t one = type == memory::data_type::bf16 ? 0x3f803f80u : 0x3f800000u;
  for (memory* mem : {&a, &b}) {
    auto* words = static_cast<uint32_t*>(mem->get_data_handle());
    std::fill(words, words + mem->get_desc().get_size() / sizeof(uint32_t), one);
  }
  const dnnl::matmul matmul(pd);
  double best_s = 0;
  for (int i = 0; i <= calls; ++i) {  // the first call warms up, untimed
    const auto start = std::chrono::steady_clock::now();
    matmul.execute(Stream(), {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    Stream().wait();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i > 0 && (best_s == 0 || s < best_s)) best_s = s;
  }
  return best_s > 0 ? 2.0 * m * k * n / best_s / 1e9 : 0;
}

}  // namespace

const Bf16Rate& MeasuredBf16Rate(int threads) {
  static Bf16Rate rate;
  static std::once_flag once;
  std::call_once(once, [threads] {
    UseThreads(std::max(1, threads));
    try {
      rate.f32_gflops = MatmulRate(dnnl::memory::data_type::f32, 256, 1024, 1024, 5);
      rate.bf16_gflops = MatmulRate(dnnl::memory::data_type::bf16, 256, 1024, 1024, 5);
    } catch (const dnnl::error& e) {
      rate = Bf16Rate{0, 0, e.what()};  // no bfloat16 matmul on this CPU
    }
  });
  return rate;
}

}  // namespace kiln::kernels
