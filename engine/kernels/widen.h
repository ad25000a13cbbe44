// FP16 and BF16 through an FP32 kernel (private to engine/kernels/): the
// wrapper converts FP16/BF16 inputs to FP32 (constants once in Prepare,
// run-time inputs into the workspace in Eval), runs the FP32 kernel's Prepare
// and Eval unchanged, and rounds its FP32 outputs back to the input's storage
// type. That is how PyTorch computes most float16/bfloat16 ops on CPU (float
// accumulation, one rounding at the end), so a family gains the storage types
// with one table row each:
//
//   KILN_WIDENED(ir::OpKind::kMatMul, DType::kBF16, PrepareMatMul, EvalMatMul<float>),
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace widen_internal {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

inline size_t Align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

inline bool IsHalf(DType d) { return d == DType::kF16 || d == DType::kBF16; }

struct WidenState {
  std::shared_ptr<void> inner;      // the FP32 kernel's state
  std::vector<Tensor> constants;    // per input: an FP16/BF16 constant widened to FP32
  std::vector<size_t> in_offset;    // per input: workspace bytes of its FP32 copy, or kNone
  std::vector<size_t> out_offset;   // per output: workspace bytes of the FP32 result, or kNone
  size_t inner_workspace = 0;       // where the FP32 kernel's own workspace starts
};

}  // namespace widen_internal

template <PrepareFn kPrepare>
absl::Status PrepareWidened(PrepareContext& ctx) {
  using namespace widen_internal;  // NOLINT: private helpers of this header
  auto st = std::make_shared<WidenState>();
  PrepareContext inner{ctx.node, ctx.inputs, {}, 0, nullptr, ctx.num_threads};
  inner.outputs.resize(ctx.outputs.size());
  const size_t n = ctx.inputs.size();
  st->constants.resize(n);  // sized once: inner.inputs point into it
  st->in_offset.assign(n, kNone);
  DType half = DType::kUnknown;
  size_t ws = 0;
  for (size_t i = 0; i < n; ++i) {
    TensorInfo& in = inner.inputs[i];
    if (!in.present || !IsHalf(in.dtype)) continue;
    if (half == DType::kUnknown) half = in.dtype;
    if (in.constant != nullptr) {
      Tensor c = Tensor::Zeros(DType::kF32, in.dims);
      ConvertElements(in.constant->raw_data(), in.dtype, c.raw_data(), DType::kF32,
                      c.num_elements());
      st->constants[i] = std::move(c);
      in.constant = &st->constants[i];
    } else {
      st->in_offset[i] = ws;
      ws += Align64(NumElements(in.dims) * sizeof(float));
    }
    in.dtype = DType::kF32;
  }
  RETURN_IF_ERROR(kPrepare(inner));
  if (inner.dynamic_outputs) {
    return Unimplemented(ctx.node, DTypeName(half), " operands with run-time output shapes");
  }
  ctx.outputs = inner.outputs;
  st->out_offset.assign(ctx.outputs.size(), kNone);
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    if (ctx.outputs[o].dtype != DType::kF32 || half == DType::kUnknown) continue;
    ctx.outputs[o].dtype = half;
    ctx.outputs[o].constant = nullptr;
    st->out_offset[o] = ws;
    ws += Align64(NumElements(ctx.outputs[o].dims) * sizeof(float));
  }
  st->inner_workspace = ws;
  ctx.workspace_bytes = ws + inner.workspace_bytes;
  st->inner = std::move(inner.state);
  ctx.state = std::move(st);
  return absl::OkStatus();
}

template <EvalFn kEval>
absl::Status EvalWidened(EvalContext& ctx) {
  using namespace widen_internal;  // NOLINT: private helpers of this header
  const WidenState& st = StateAs<WidenState>(ctx);
  char* ws = static_cast<char*>(ctx.workspace);
  const size_t n = ctx.inputs.size();
  std::vector<Tensor> wrapped(n + ctx.outputs.size());
  std::vector<const Tensor*> ins(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const Tensor* in = ctx.inputs[i];
    if (in == nullptr) continue;
    if (st.constants[i].defined() && st.constants[i].dtype() != DType::kUnknown) {
      ins[i] = &st.constants[i];
    } else if (st.in_offset[i] != kNone) {
      ConvertElements(in->raw_data(), in->dtype(), ws + st.in_offset[i], DType::kF32,
                      in->num_elements());
      wrapped[i] = Tensor::Wrap(DType::kF32, in->dims(), ws + st.in_offset[i]);
      ins[i] = &wrapped[i];
    } else {
      ins[i] = in;
    }
  }
  std::vector<Tensor*> outs(ctx.outputs.size());
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    if (st.out_offset[o] == kNone) {
      outs[o] = ctx.outputs[o];
    } else {
      wrapped[n + o] = Tensor::Wrap(DType::kF32, ctx.outputs[o]->dims(), ws + st.out_offset[o]);
      outs[o] = &wrapped[n + o];
    }
  }
  EvalContext inner{ctx.node, std::move(ins), std::move(outs), ws + st.inner_workspace,
                    st.inner.get(), ctx.num_threads};
  RETURN_IF_ERROR(kEval(inner));
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    if (st.out_offset[o] == kNone) continue;
    Tensor& out = *ctx.outputs[o];
    ConvertElements(ws + st.out_offset[o], DType::kF32, out.raw_data(), out.dtype(),
                    out.num_elements());
  }
  return absl::OkStatus();
}

// A table row running `eval`/`prepare` (an FP32 kernel) for FP16 or BF16 input.
#define KILN_WIDENED(op, dtype, prepare, eval) \
  KernelDef { op, dtype, PrepareWidened<prepare>, EvalWidened<eval> }

}  // namespace kiln::kernels
