#include "engine/kernels/onednn/onednn.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/huge_pages.h"
#include "engine/common/mapped_file.h"
#include "engine/common/sha256.h"

#include "engine/kernels/onednn/onednn_kernels.h"

namespace kiln::kernels::onednn {

namespace {

struct PrepackedEntry {
  const void* data;
  const void* variant;
  dnnl::memory::desc given, packed;
  std::weak_ptr<const dnnl::memory> memory;
};

std::atomic<uint64_t> reorder_count{0};

// A memory descriptor as text, field by field (not its raw bytes: padding
// between fields is not guaranteed to be zero). False for a format kind
// whose description is not written out here: such weights are not stored.
bool DescText(const dnnl::memory::desc& desc, std::string* out) {
  const dnnl_memory_desc_t& d = desc.data;
  auto dims = [&](const dnnl_dims_t& v, int n) {
    absl::StrAppend(out, "[", absl::StrJoin(v, v + n, ","), "]");
  };
  absl::StrAppend(out, "t", static_cast<int>(d.data_type), "d");
  dims(d.dims, d.ndims);
  absl::StrAppend(out, "p");
  dims(d.padded_dims, d.ndims);
  absl::StrAppend(out, "o");
  dims(d.padded_offsets, d.ndims);
  absl::StrAppend(out, "+", d.offset0, "k", static_cast<int>(d.format_kind));
  switch (d.format_kind) {
    case dnnl_blocked: {
      const dnnl_blocking_desc_t& b = d.format_desc.blocking;
      absl::StrAppend(out, "s");
      dims(b.strides, d.ndims);
      absl::StrAppend(out, "b");
      dims(b.inner_blks, b.inner_nblks);
      absl::StrAppend(out, "i");
      dims(b.inner_idxs, b.inner_nblks);
      break;
    }
    case dnnl_format_kind_wino: {
      const dnnl_wino_desc_t& w = d.format_desc.wino_desc;
      absl::StrAppend(out, "w", static_cast<int>(w.wino_format), ",", w.r, ",", w.alpha, ",", w.ic,
                      ",", w.oc, ",", w.ic_block, ",", w.oc_block, ",", w.ic2_block, ",",
                      w.oc2_block, ",", w.adj_scale, ",", w.size);
      break;
    }
    default:
      return false;
  }
  absl::StrAppend(out, "x", d.extra.flags, ",", d.extra.compensation_mask, ",",
                  d.extra.scale_adjust, ",", d.extra.asymm_compensation_mask, "z",
                  desc.get_size());
  return true;
}

// The packed-weight store's key for these weights: where the source bytes
// lie (a named mapping's contents and offset: the same in every process that
// maps that file), what was made of them, both formats, and the CPU's ISA and
// oneDNN's version (which decide what a format's bytes are); nullopt when the
// weights cannot be stored (not in a named mapping, an unnamed transform, a
// format not described).
std::optional<std::string> StoreKey(const void* data, const dnnl::memory::desc& given,
                                    const dnnl::memory::desc& packed,
                                    const WeightTransform& transform) {
  if (transform.make && transform.name.empty()) return std::nullopt;
  std::optional<MappedLocation> source = LocateMapped(data, given.get_size());
  if (!source.has_value()) return std::nullopt;
  std::string key = absl::StrCat("onednn-weights;source=", source->contents, "@", source->offset,
                                 "+", given.get_size(), ";transform=");
  if (transform.make) {
    absl::StrAppend(&key, transform.name, "(", Sha256Hex(transform.variant), ")");
  } else {
    absl::StrAppend(&key, "none");
  }
  absl::StrAppend(&key, ";given=");
  if (!DescText(given, &key)) return std::nullopt;
  absl::StrAppend(&key, ";packed=");
  if (!DescText(packed, &key)) return std::nullopt;
  const dnnl_version_t* v = dnnl_version();
  absl::StrAppend(&key, ";isa=", static_cast<int>(dnnl::get_effective_cpu_isa()), ";onednn=",
                  v->major, ".", v->minor, ".", v->patch, "-", v->hash);
  return key;
}

}  // namespace

uint64_t WeightReorderCount() { return reorder_count.load(); }

namespace {
constexpr size_t kTrimAfterPackBytes = size_t{1} << 20;
}  // namespace

std::shared_ptr<const dnnl::memory> PrepackedWeights(const void* data,
                                                     const dnnl::memory::desc& given,
                                                     const dnnl::memory::desc& packed,
                                                     const WeightTransform& transform,
                                                     PackedWeightStore* store) {
  static std::mutex mu;
  static auto* entries = new std::vector<PrepackedEntry>();
  std::lock_guard<std::mutex> lock(mu);
  const void* variant = transform.make ? transform.variant.data() : nullptr;
  // Entries whose plans are all gone leave; a live one for these bytes is shared.
  entries->erase(std::remove_if(entries->begin(), entries->end(),
                                [](const PrepackedEntry& e) { return e.memory.expired(); }),
                 entries->end());
  for (const PrepackedEntry& e : *entries) {
    if (e.data == data && e.variant == variant && e.given == given && e.packed == packed) {
      if (auto live = e.memory.lock()) return live;
    }
  }
  auto pack = [&](void* target) {
    std::vector<float> transformed;
    if (transform.make) transformed = transform.make();
    dnnl::memory source(given, Engine(),
                        const_cast<void*>(transform.make
                                              ? static_cast<const void*>(transformed.data())
                                              : data));
    dnnl::memory packed_memory(packed, Engine(), target);
    dnnl::reorder(source, packed_memory).execute(Stream(), source, packed_memory);
    Stream().wait();
    reorder_count++;
  };
  std::shared_ptr<const dnnl::memory> memory;
  std::optional<std::string> key;
  if (store != nullptr) key = StoreKey(data, given, packed, transform);
  if (key.has_value()) {
    // oneDNN only reads a primitive's weights, so they may be read-only
    // (a mapped file's pages, shared with every process mapping it).
    std::shared_ptr<const void> bytes = store->GetOrPack(*key, packed.get_size(), pack);
    memory = std::shared_ptr<const dnnl::memory>(
        new dnnl::memory(packed, Engine(), const_cast<void*>(bytes.get())),
        [bytes](const dnnl::memory* m) { delete m; });
  } else {
    // Kiln's buffer rather than oneDNN's, for the huge pages (huge_pages.h);
    // without memory for it, oneDNN's allocation fails as it always did.
    std::shared_ptr<void> bytes(AllocateBuffer(std::max<size_t>(packed.get_size(), 1), 64),
                                std::free);
    if (bytes != nullptr) {
      pack(bytes.get());
      memory = std::shared_ptr<const dnnl::memory>(
          new dnnl::memory(packed, Engine(), bytes.get()),
          [bytes](const dnnl::memory* m) { delete m; });
    } else {
      auto owned = std::make_shared<dnnl::memory>(packed, Engine());
      pack(owned->get_data_handle());
      memory = std::move(owned);
    }
  }
  ReleaseResidentPages(data, given.get_size());
  // The temporaries of a large pack (the transform's copy, the reorder's)
  // go back to the system now, not at the compile's end: glibc keeps freed
  // blocks in the thread's arena, and how many it keeps depends on how many
  // arenas the process has, which it sizes from the calling thread's CPU
  // affinity. With the compute thread's team pinned (thread_binding.h), a
  // BERT-base encoder's first compile in kilnd kept ~220 MB so until the end
  // of the compile.
  if (packed.get_size() >= kTrimAfterPackBytes) malloc_trim(0);
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

struct PrimitiveCall::Slots {
  std::vector<dnnl_memory_t> memory;
  std::vector<dnnl_exec_arg_t> args;
  ~Slots() {
    for (dnnl_memory_t m : memory) dnnl_memory_destroy(m);
  }
};

struct PrimitiveCall::FreeList {
  std::mutex mu;
  std::vector<std::unique_ptr<Slots>> slots;
};

PrimitiveCall::PrimitiveCall(dnnl::primitive primitive, std::vector<Arg> args)
    : primitive_(std::move(primitive)), args_(std::move(args)), free_(new FreeList()) {
  for (const Arg& a : args_) variable_ += a.fixed == nullptr;
}

PrimitiveCall PrimitiveCall::Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  return PrimitiveCall(dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), from, Engine(), to)),
                       {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

PrimitiveCall::PrimitiveCall() = default;
PrimitiveCall::PrimitiveCall(PrimitiveCall&&) noexcept = default;
PrimitiveCall& PrimitiveCall::operator=(PrimitiveCall&&) noexcept = default;
PrimitiveCall::~PrimitiveCall() = default;

std::unique_ptr<PrimitiveCall::Slots> PrimitiveCall::Take() const {
  {
    std::lock_guard<std::mutex> lock(free_->mu);
    if (!free_->slots.empty()) {
      std::unique_ptr<Slots> s = std::move(free_->slots.back());
      free_->slots.pop_back();
      return s;
    }
  }
  auto s = std::make_unique<Slots>();
  s->memory.reserve(args_.size());
  for (const Arg& a : args_) {
    dnnl_memory_t m = nullptr;
    dnnl::error::wrap_c_api(
        dnnl_memory_create(&m, &a.desc.data, Engine().get(),
                           a.fixed != nullptr ? const_cast<void*>(a.fixed) : DNNL_MEMORY_NONE),
        "could not create a memory object");
    s->memory.push_back(m);
    s->args.push_back({a.id, m});
  }
  return s;
}

void PrimitiveCall::Give(std::unique_ptr<Slots> slots) const {
  std::lock_guard<std::mutex> lock(free_->mu);
  free_->slots.push_back(std::move(slots));
}

void PrimitiveCall::Execute(dnnl::stream& stream, std::initializer_list<const void*> data) const {
  if (!primitive_ || data.size() != variable_) {
    throw dnnl::error(dnnl_invalid_arguments, "a primitive call was given the wrong arguments");
  }
  std::unique_ptr<Slots> s = Take();
  dnnl_status_t status = dnnl_success;
  const void* const* next = data.begin();
  for (size_t i = 0; i < args_.size() && status == dnnl_success; ++i) {
    if (args_[i].fixed != nullptr) continue;
    status = dnnl_memory_set_data_handle(s->memory[i], const_cast<void*>(*next++));
  }
  if (status == dnnl_success) {
    status = dnnl_primitive_execute(primitive_.get(), stream.get(),
                                    static_cast<int>(s->args.size()), s->args.data());
  }
  Give(std::move(s));
  dnnl::error::wrap_c_api(status, "could not execute a primitive");
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
                                         onednn::MatMulKernel(), onednn::SdpaKernel()};
    for (const KernelDef& k : onednn::PoolKernels()) v->push_back(k);
    for (const KernelDef& k : onednn::NormKernels()) v->push_back(k);
    return v;
  }();
  return *all;
}

}  // namespace kiln::kernels
