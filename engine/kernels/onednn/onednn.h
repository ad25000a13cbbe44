// Shared pieces of the oneDNN provider (private to engine/kernels/onednn/):
// the CPU engine, a stream per thread, the thread budget, and what every
// provider kernel needs to check about its operands.
//
// Why oneDNN: it is the library libtorch's own CPU convolutions use, ships in
// Debian (libdnnl 2.6), JIT-compiles for the CPU it runs on (AVX-512 here,
// which this Debian's OpenBLAS does not detect on Zen 4), and fuses
// per-channel affine and clamp epilogues as post-ops. Its kernels run in
// channels-last (NHWC) layout; the compiler keeps chains of them there
// (engine/runtime/layout.h).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "engine/common/tensor.h"
#include "engine/kernels/conv_epilogue.h"
#include "engine/kernels/kernel.h"

namespace kiln::kernels::onednn {

// The process's CPU engine (created once, thread-safe to share).
const dnnl::engine& Engine();
// The calling thread's stream (in-order, synchronous on this engine).
dnnl::stream& Stream();

// oneDNN threads come from OpenMP: its primitives size their parallel regions
// (and, at creation, their blocking) by the calling thread's OpenMP maximum,
// which kernels::UseThreads sets to the request's budget.
using kernels::UseThreads;

inline dnnl::memory::dims ToDims(const Dims& d) { return dnnl::memory::dims(d.begin(), d.end()); }

// A 4-D [N, C, H, W] descriptor in `layout` (kPlain: nchw, kNHWC: nhwc).
dnnl::memory::desc ImageDesc(const Dims& dims, ir::Layout layout,
                             dnnl::memory::data_type type = dnnl::memory::data_type::f32);

// The data type of a GEMM-class primitive's operands (source and weights) at
// the plan's precision: f32, or bf16 under Precision::kBf16 (results and
// accumulation stay f32).
inline dnnl::memory::data_type OperandType(Precision precision) {
  return precision == Precision::kBf16 ? dnnl::memory::data_type::bf16
                                       : dnnl::memory::data_type::f32;
}

// What a weight is made of before it is reordered, when it is not the
// constant as it is: `make` computes the bytes to reorder (a convolution's
// weights with its batch norm folded in) from the constant and `variant` (the
// batch norm's scale), which tells the results apart; `name` says what `make`
// computes, for the packed-weight store's key (empty: the result is not
// stored).
struct WeightTransform {
  std::string name;
  absl::string_view variant;
  std::function<std::vector<float>()> make;
};

// Constant weights `data` (laid out as `given`) reordered into `packed`, once
// per (data, variant, given, packed) while any plan holds the result: plans of
// one model for other signatures (batch 1 and batch 8) share the copy whenever
// oneDNN picks the same blocked format for them, instead of each holding its
// own. `transform.make` runs only when there is no live copy. With a `store`,
// a weight that lies in a named mapped file (a cache file: engine/common/
// mapped_file.h) is packed once for every process: the store keeps the packed
// bytes under where the source lies, the transform and both formats, and a
// restart or a second replica maps them instead of reordering; other weights,
// or no store, are packed in memory as before. A mapped constant's pages are
// given back once reordered.
std::shared_ptr<const dnnl::memory> PrepackedWeights(const void* data,
                                                     const dnnl::memory::desc& given,
                                                     const dnnl::memory::desc& packed,
                                                     const WeightTransform& transform = {},
                                                     PackedWeightStore* store = nullptr);

// How many weights PrepackedWeights has reordered in this process (for tests:
// a plan whose packed weights all came from the store adds none).
uint64_t WeightReorderCount();

// A primitive with its arguments fixed at Prepare: which arguments, their
// descriptors, and the bytes of the constant ones (weights, a bias). A call
// sets the other arguments' data handles on memory objects kept between calls
// and runs the primitive through oneDNN's C interface: making a dnnl::memory
// per argument and the argument map on every call cost about 1 us per
// primitive, against 0.4 us for oneDNN's own dispatch (docs/performance.md).
// Concurrent runs of one plan each take a set of memory objects of their own.
class PrimitiveCall {
 public:
  struct Arg {
    int id;                      // DNNL_ARG_*
    dnnl::memory::desc desc;
    const void* fixed = nullptr;  // constant bytes, set once; null: given per call
  };

  PrimitiveCall();
  PrimitiveCall(dnnl::primitive primitive, std::vector<Arg> args);
  // A reorder from `from` to `to`.
  static PrimitiveCall Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
  PrimitiveCall(PrimitiveCall&&) noexcept;
  PrimitiveCall& operator=(PrimitiveCall&&) noexcept;
  ~PrimitiveCall();

  // Runs on `stream` with `data`: the bytes of each argument that is not
  // fixed, in the order of `args`. Throws dnnl::error as oneDNN's C++
  // interface does.
  void Execute(dnnl::stream& stream, std::initializer_list<const void*> data) const;
  explicit operator bool() const { return static_cast<bool>(primitive_); }

 private:
  struct Slots;  // one set of memory objects and the argument array over them
  std::unique_ptr<Slots> Take() const;
  void Give(std::unique_ptr<Slots> slots) const;

  dnnl::primitive primitive_;
  std::vector<Arg> args_;
  size_t variable_ = 0;  // args without fixed bytes
  struct FreeList;
  std::unique_ptr<FreeList> free_;
};

// Workspace regions, 64-byte aligned, in order of Add.
class WorkspaceLayout {
 public:
  size_t Add(size_t bytes) {
    const size_t offset = total_;
    total_ += (bytes + 63) / 64 * 64;
    return offset;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

// The native kernel's Prepare for the same node on the logical (plain)
// operands: its checks and its output dims, which the oneDNN kernel keeps.
absl::StatusOr<Dims> NativeOutputDims(const PrepareContext& ctx);

// Finishes a provider Prepare: one FP32 output of `dims` in NHWC.
void SetNhwcOutput(PrepareContext& ctx, const Dims& dims, std::shared_ptr<void> state,
                   size_t workspace_bytes);

// Appends the epilogue's clamp (a Relu/Clip) and activation as eltwise
// post-ops, in the order Kiln's own kernels apply them.
void AppendClampAndActivation(const ConvEpilogue& e, dnnl::post_ops& ops);

inline void* At(void* workspace, size_t offset) { return static_cast<char*>(workspace) + offset; }

}  // namespace kiln::kernels::onednn
