#include "engine/kernels/bf16_rate.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "engine/kernels/kernel.h"
#include "engine/kernels/onednn/onednn.h"

namespace kiln::kernels {
namespace {

using onednn::Engine;
using onednn::Stream;

// An m x k x n matmul with `type` operands (float32 results), ready to run.
class Matmul {
 public:
  Matmul(dnnl::memory::data_type type, int m, int k, int n) : flop_(2.0 * m * k * n) {
    using dnnl::memory;
    const memory::desc src({m, k}, type, memory::format_tag::ab);
    const memory::desc weights_any({k, n}, type, memory::format_tag::any);
    const memory::desc dst({m, n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights_any, dst), Engine());
    a_ = memory(src, Engine());
    b_ = memory(pd.weights_desc(), Engine());
    c_ = memory(dst, Engine());
    // Ones (bfloat16 0x3f80 in both halves of a word, or float32 1.0f): no
    // denormals, whatever the weights' blocked layout.
    const uint32_t one = type == memory::data_type::bf16 ? 0x3f803f80u : 0x3f800000u;
    for (memory* mem : {&a_, &b_}) {
      auto* words = static_cast<uint32_t*>(mem->get_data_handle());
      std::fill(words, words + mem->get_desc().get_size() / sizeof(uint32_t), one);
    }
    matmul_ = dnnl::matmul(pd);
  }
  // GFLOP/s of one call.
  double Run() {
    const auto start = std::chrono::steady_clock::now();
    matmul_.execute(Stream(), {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}});
    Stream().wait();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s > 0 ? flop_ / s / 1e9 : 0;
  }

 private:
  double flop_;
  dnnl::memory a_, b_, c_;
  dnnl::matmul matmul_;
};

}  // namespace

const Bf16Rate& MeasuredBf16Rate(int threads) {
  static Bf16Rate rate;
  static std::once_flag once;
  std::call_once(once, [threads] {
    UseThreads(std::max(1, threads));
    try {
      Matmul f32(dnnl::memory::data_type::f32, 256, 1024, 1024);
      Matmul bf16(dnnl::memory::data_type::bf16, 256, 1024, 1024);
      f32.Run();  // warm-up, untimed
      bf16.Run();
      // Interleaved, the best of five each: a burst of other work on the CPUs
      // slows both, not one.
      for (int i = 0; i < 5; ++i) {
        rate.f32_gflops = std::max(rate.f32_gflops, f32.Run());
        rate.bf16_gflops = std::max(rate.bf16_gflops, bf16.Run());
      }
    } catch (const dnnl::error& e) {
      rate = Bf16Rate{0, 0, e.what()};  // no bfloat16 matmul on this CPU
    }
  });
  return rate;
}

}  // namespace kiln::kernels
