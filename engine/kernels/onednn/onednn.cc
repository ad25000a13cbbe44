#include "engine/kernels/onednn/onednn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "engine/common/mapped_file.h"

#include "engine/kernels/onednn/onednn_kernels.h"

namespace kiln::kernels::onednn {

namespace {

struct PrepackedEntry {
  const void* data;
  const void* variant;
  dnnl::memory::desc given, packed;
  std::weak_ptr<const dnnl::memory> memory;
};

}  // namespace

std::shared_ptr<const dnnl::memory> PrepackedWeights(
    const void* data, const dnnl::memory::desc& given, const dnnl::memory::desc& packed,
    const void* variant, const std::function<std::vector<float>()>& transform) {
  static std::mutex mu;
  static auto* entries = new std::vector<PrepackedEntry>();
  std::lock_guard<std::mutex> lock(mu);
  // Entries whose plans are all gone leave; a live one for these bytes is shared.
  entries->erase(std::remove_if(entries->begin(), entries->end(),
                                [](const PrepackedEntry& e) { return e.memory.expired(); }),
                 entries->end());
  for (const PrepackedEntry& e : *entries) {
    if (e.data == data && e.variant == variant && e.given == given && e.packed == packed) {
      if (auto live = e.memory.lock()) return live;
    }
  }
  auto memory = std::make_shared<dnnl::memory>(packed, Engine());
  std::vector<float> transformed;
  if (transform) transformed = transform();
  dnnl::memory source(given, Engine(),
                      const_cast<void*>(transform ? static_cast<const void*>(transformed.data())
                                                  : data));
  dnnl::reorder(source, *memory).execute(Stream(), source, *memory);
  Stream().wait();
  ReleaseResidentPages(data, given.get_size());
  entries->push_back({data, variant, given, packed, memory});
  return memory;
}

const dnnl::engine& Engine() {
  static const auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& Stream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

dnnl::memory::desc ImageDesc(const Dims& dims, ir::Layout layout, dnnl::memory::data_type type) {
  return dnnl::memory::desc(ToDims(dims), type,
                            layout == ir::Layout::kNHWC ? dnnl::memory::format_tag::nhwc
                                                        : dnnl::memory::format_tag::nchw);
}

absl::StatusOr<Dims> NativeOutputDims(const PrepareContext& ctx) {
  PrepareContext native = ctx;
  for (TensorInfo& in : native.inputs) in.layout = ir::Layout::kPlain;
  native.allow_layouts = false;
  const KernelDef* kernel = FindKernel(ctx.node.kind, DType::kF32);
  if (kernel == nullptr) return absl::NotFoundError("no native kernel");
  absl::Status s = kernel->prepare(native);
  if (!s.ok()) return s;
  return native.outputs.at(0).dims;
}

void AppendClampAndActivation(const ConvEpilogue& e, dnnl::post_ops& ops) {
  if (e.clamp) {
    if (e.lo == 0.0 && e.hi == std::numeric_limits<double>::infinity()) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    } else {
      const float fmax = std::numeric_limits<float>::max();
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip,
                         std::isinf(e.lo) ? -fmax : static_cast<float>(e.lo),
                         std::isinf(e.hi) ? fmax : static_cast<float>(e.hi));
    }
  }
  switch (e.act) {
    case Activation::kNone: break;
    case Activation::kGeluErf: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0, 0); break;
    case Activation::kGeluTanh: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0, 0); break;
    case Activation::kSilu: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0); break;
    case Activation::kSigmoid: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0, 0); break;
    case Activation::kTanh: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0, 0); break;
    case Activation::kHardSwish: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0, 0); break;
  }
}

void SetNhwcOutput(PrepareContext& ctx, const Dims& dims, std::shared_ptr<void> state,
                   size_t workspace_bytes) {
  ctx.outputs = {TensorInfo{DType::kF32, dims}};
  ctx.outputs[0].layout = ir::Layout::kNHWC;
  ctx.state = std::move(state);
  ctx.workspace_bytes = workspace_bytes;
}

}  // namespace kiln::kernels::onednn

namespace kiln::kernels {

absl::Span<const KernelDef> ProviderKernels() {
  static const auto* all = [] {
    auto* v = new std::vector<KernelDef>{onednn::ConvKernel(), onednn::LinearKernel(),
                                         onednn::MatMulKernel()};
    for (const KernelDef& k : onednn::PoolKernels()) v->push_back(k);
    for (const KernelDef& k : onednn::NormKernels()) v->push_back(k);
    return v;
  }();
  return *all;
}

}  // namespace kiln::kernels
