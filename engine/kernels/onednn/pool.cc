// 2-D FP32 pooling on oneDNN for NHWC inputs (what the oneDNN convolution
// writes): MaxPool, AvgPool and AdaptiveAvgPool whose windows are regular
// (input size a multiple of the output size, e.g. the global average before a
// classifier). Output in NHWC. Shapes and errors are the native kernel's (its
// Prepare runs first); uses whose semantics oneDNN does not share run
// natively on the plain tensor: a ceil_mode average window that overhangs the
// padding (PyTorch clips its divisor there), divisor_override.
#include <memory>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/onednn/onednn.h"
#include "engine/kernels/onednn/onednn_kernels.h"

namespace kiln::kernels::onednn {
namespace {

using dnnl::memory;

struct PoolState {
  PrimitiveCall pool;  // source, destination, scratchpad
  memory::desc src, dst, scratch;
};

bool SupportsPool(const PrepareContext& ctx) {
  if (!ctx.allow_layouts || ctx.inputs.empty()) return false;
  const TensorInfo& x = ctx.inputs[0];
  return x.dtype == DType::kF32 && x.layout == ir::Layout::kNHWC && x.dims.size() == 4;
}

absl::Status PreparePool(PrepareContext& ctx) {
  ASSIGN_OR_RETURN(const Dims out, NativeOutputDims(ctx));
  const ir::Node& node = ctx.node;
  const Dims& x = ctx.inputs[0].dims;
  if (out.size() != 4) return Unimplemented(node, "not a 2-D pool");
  std::vector<int64_t> kernel(2), stride(2), padding(2, 0), dilation(2, 1);
  dnnl::algorithm algo = dnnl::algorithm::pooling_max;
  if (node.kind == ir::OpKind::kAdaptiveAvgPool) {
    for (int i = 0; i < 2; ++i) {
      if (out[2 + i] < 1 || x[2 + i] % out[2 + i] != 0) return Unimplemented(node, "irregular");
      kernel[i] = stride[i] = x[2 + i] / out[2 + i];
    }
    algo = dnnl::algorithm::pooling_avg_exclude_padding;
  } else {
    kernel = node.attrs.GetInts("kernel");
    if (kernel.size() != 2) return Unimplemented(node, "not a 2-D pool");
    stride = kernel;
    if (!node.attrs.GetInts("stride").empty()) {
      ASSIGN_OR_RETURN(stride, SpatialAttr(node, "stride", 2, 1));
    }
    ASSIGN_OR_RETURN(padding, SpatialAttr(node, "padding", 2, 0));
    if (node.kind == ir::OpKind::kMaxPool) {
      ASSIGN_OR_RETURN(dilation, SpatialAttr(node, "dilation", 2, 1));
    } else {
      if (node.attrs.GetInt("divisor_override", 0) != 0) return Unimplemented(node, "divisor");
      algo = node.attrs.GetBool("count_include_pad", true)
                 ? dnnl::algorithm::pooling_avg_include_padding
                 : dnnl::algorithm::pooling_avg_exclude_padding;
    }
  }
  memory::dims pad_l(2), pad_r(2), dil(2);
  for (int i = 0; i < 2; ++i) {
    dil[i] = dilation[i] - 1;
    pad_l[i] = padding[i];
    pad_r[i] = (out[2 + i] - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - x[2 + i] -
               padding[i];
    if (pad_r[i] < 0) return Unimplemented(node, "negative right padding");
    // An average window past the right padding: PyTorch's divisor stops at
    // the padding, oneDNN's does not.
    if (algo != dnnl::algorithm::pooling_max && pad_r[i] > padding[i]) {
      return Unimplemented(node, "ceil_mode window overhang");
    }
  }
  auto s = std::make_shared<PoolState>();
  s->src = ImageDesc(x, ir::Layout::kNHWC);
  s->dst = ImageDesc(out, ir::Layout::kNHWC);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  UseThreads(ctx.num_threads);
  try {
    dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algo, s->src, s->dst,
                                        ToDims(stride), ToDims(kernel), dil, pad_l, pad_r);
    dnnl::pooling_v2_forward::primitive_desc pd(desc, attr, Engine());
    s->scratch = pd.scratchpad_desc();
    s->pool = PrimitiveCall(dnnl::pooling_v2_forward(pd), {{DNNL_ARG_SRC, s->src},
                                                          {DNNL_ARG_DST, s->dst},
                                                          {DNNL_ARG_SCRATCHPAD, s->scratch}});
  } catch (const dnnl::error& e) {
    return Unimplemented(node, "oneDNN has no pooling for this shape: ", e.what());
  }
  const size_t scratch = s->scratch.get_size();
  SetNhwcOutput(ctx, out, std::move(s), scratch);
  return absl::OkStatus();
}

absl::Status EvalPool(EvalContext& ctx) {
  const auto& s = *static_cast<const PoolState*>(ctx.state);
  UseThreads(ctx.num_threads);
  s.pool.Execute(Stream(), {ctx.inputs[0]->raw_data(), ctx.outputs[0]->raw_data(), ctx.workspace});
  Stream().wait();
  return absl::OkStatus();
}

KernelDef PoolKernel(ir::OpKind op, const char* name) {
  KernelDef k{op, DType::kF32, PreparePool, EvalPool};
  k.provider = Provider::kOneDnn;
  k.supports = SupportsPool;
  k.takes_layouts = true;
  k.name = name;
  return k;
}

}  // namespace

std::vector<KernelDef> PoolKernels() {
  return {PoolKernel(ir::OpKind::kMaxPool, "onednn.max_pool"),
          PoolKernel(ir::OpKind::kAvgPool, "onednn.avg_pool"),
          PoolKernel(ir::OpKind::kAdaptiveAvgPool, "onednn.adaptive_avg_pool")};
}

}  // namespace kiln::kernels::onednn
