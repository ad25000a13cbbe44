// The oneDNN provider's kernels, one function per file; onednn.cc lists them
// for kernels::ProviderKernels().
#pragma once

#include <vector>

#include "engine/kernels/kernel.h"

namespace kiln::kernels::onednn {

KernelDef ConvKernel();                // conv.cc
KernelDef LinearKernel();              // matmul.cc
KernelDef MatMulKernel();              // matmul.cc: batched, rank 3 and 4
KernelDef SdpaKernel();                // attention.cc: fused scaled dot-product attention
std::vector<KernelDef> NormKernels();  // norm.cc: softmax, log-softmax, layer norm
std::vector<KernelDef> PoolKernels();  // pool.cc

}  // namespace kiln::kernels::onednn
