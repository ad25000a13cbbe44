// A fused activation (private to engine/kernels/): what the fuse_conv_epilogue
// pass leaves on a Conv or Linear node as the string attribute post_act when
// an activation op followed it, and the same formula as the activation's own
// kernel (activation.cc), applied to the producer's output block while it is
// in cache. oneDNN kernels run it as an eltwise post-op (onednn.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/ir/graph.h"

namespace kiln::kernels {

enum class Activation : uint8_t { kNone, kGeluErf, kGeluTanh, kSilu, kSigmoid, kTanh, kHardSwish };

// The post_act value of a fusable activation node ("gelu", "gelu_tanh",
// "silu", "sigmoid", "tanh", "hardswish"), or empty when `node` is none.
std::string_view ActivationAttrFor(const ir::Node& node);

// The node's post_act attribute (kNone without one); an unknown value is an error.
absl::StatusOr<Activation> ActivationFromAttrs(const ir::Node& node);

// y[i] = act(y[i]) for n elements, on the calling thread (T: float or double).
template <typename T>
void ApplyActivation(Activation act, T* y, int64_t n);

}  // namespace kiln::kernels
