// Whether bfloat16 operands make this CPU's GEMMs faster, measured.
//
// Why: `"precision": "bf16"` is an opt-in for speed, and whether it gives any
// depends on the CPU, not on its flags. On an AMD EPYC (Zen 5) oneDNN's
// bfloat16 GEMMs ran about twice float32's rate and bf16 plans about twice as
// fast; on an Intel Xeon (family 6 model 207) that also reports AVX-512 BF16,
// oneDNN's bfloat16 GEMM ran at 0.62x float32's rate (and bfloat16 has no
// Winograd), so bf16 plans ran 1.2-1.7x slower than float32 ones, with
// bfloat16's rounding on top (docs/performance.md). A flag cannot tell the two
// apart; a short measurement can.
#pragma once

#include <string>

namespace kiln::kernels {

struct Bf16Rate {
  double bf16_gflops = 0;  // a GEMM with bfloat16 operands, float32 accumulation
  double f32_gflops = 0;   // the same GEMM in float32
  std::string error;       // why it could not be measured (then both are 0)
  // bf16's rate over float32's; 0 when not measured.
  double speedup() const { return f32_gflops > 0 ? bf16_gflops / f32_gflops : 0; }
};

// oneDNN's rate for a 256 x 1024 x 1024 matmul at `threads` threads with
// bfloat16 operands and with float32 ones (the best of five calls each,
// interleaved), measured on the first call in the process and returned as it
// was since. About 0.1 s, once.
const Bf16Rate& MeasuredBf16Rate(int threads);

// How much faster than float32 the bfloat16 GEMM must run for a `"precision":
// "bf16"` model to use it (below it, the model runs float32 and says why).
inline constexpr double kBf16MinSpeedup = 1.15;

}  // namespace kiln::kernels
