// The kernel interface: every op kind has, per input dtype, a Prepare (run once
// per compile: checks arity, dtypes and ranks, computes output types and
// workspace, may precompute state such as packed weights) and an Eval (run per
// request: no allocation, no re-validation). Families live one per file, each
// exporting a table; registry.cc is the only list of families.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/common/dtype.h"
#include "engine/common/precision.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"
#include "engine/kernels/packed_weight_store.h"

namespace kiln::kernels {

// What Prepare knows about one input or output: concrete dtype and dims, and,
// for inputs, the constant tensor when the value is a graph constant.
struct TensorInfo {
  DType dtype = DType::kUnknown;
  Dims dims;
  const Tensor* constant = nullptr;
  bool present = true;  // false for an absent optional input
  // A Python number (an int/float/bool value, ir::IsScalarKind), which type
  // promotion ranks below tensors (engine/common/type_promotion.h).
  bool scalar = false;
  // The memory layout (dims stay logical). Non-plain only for kernels that
  // declare `takes_layouts`; their Prepare sets it on the outputs too.
  ir::Layout layout = ir::Layout::kPlain;
};

struct PrepareContext {
  const ir::Node& node;
  std::vector<TensorInfo> inputs;   // one per node input
  // Filled by Prepare, one per node output. Prepare may set an output's
  // `constant` when the operand types alone fix its value (aten::size); the
  // tensor must live as long as `state`, and the executor folds the node.
  std::vector<TensorInfo> outputs;
  size_t workspace_bytes = 0;       // scratch needed by Eval
  std::shared_ptr<void> state;      // kernel-private, read by Eval
  int num_threads = 1;
  // Set by Prepare when only Eval can know the outputs' dims (the libtorch
  // fallback): Eval then gets empty output tensors and assigns them.
  bool dynamic_outputs = false;
  // Set by the compiler for a node of the static plan whose operands are not
  // all constants: a kernel that takes layouts may then give its outputs a
  // non-plain layout. Elsewhere (folding, the dynamic path) outputs are plain.
  bool allow_layouts = false;
  // The plan's precision (engine/common/precision.h): a kernel that offers
  // bfloat16 operands uses them under Precision::kBf16; every other kernel
  // ignores it.
  Precision precision = Precision::kFp32;
  // Where prepacked constant weights are kept across processes
  // (packed_weight_store.h); null: packed in memory only.
  PackedWeightStore* packed_weights = nullptr;
};

// What a run lends to kernels that work outside the process: the server's
// libtorch fallback hands each Fallback node to the model's sandboxed worker
// process (server/torch/fallback_worker.h), which it finds here. The engine
// only carries it (runtime::RunOptions::services); the server derives it.
class KernelServices {
 public:
  virtual ~KernelServices() = default;
};

struct EvalContext {
  const ir::Node& node;
  std::vector<const Tensor*> inputs;  // nullptr for an absent optional input
  std::vector<Tensor*> outputs;       // preallocated with the prepared dims
  void* workspace = nullptr;          // workspace_bytes, 64-byte aligned
  const void* state = nullptr;
  int num_threads = 1;
  // Set on the dynamic path (where Fallback nodes run), null elsewhere: the
  // run's check (OK to go on, else DeadlineExceeded or Cancelled), for a
  // kernel that waits on another process, and the run's services.
  const std::function<absl::Status()>* check = nullptr;
  KernelServices* services = nullptr;
};

using PrepareFn = absl::Status (*)(PrepareContext&);
using EvalFn = absl::Status (*)(EvalContext&);
// Whether a provider's kernel takes this use of its op (dtype, ranks,
// attributes); checked before its Prepare. nullptr: every use.
using SupportsFn = bool (*)(const PrepareContext&);

// Who implements a kernel. Selection (PrepareKernel) tries the accelerated
// providers' kernels whose `supports` holds first, then Kiln's own.
enum class Provider : uint8_t { kNative, kOneDnn };

struct KernelDef {
  ir::OpKind op;
  DType dtype;  // dtype of input 0; kUnknown matches any dtype
  PrepareFn prepare;
  EvalFn eval;
  // When true the output is a view of input 0 (same bytes, new dims): the
  // executor aliases the buffers and never calls eval.
  bool aliases_input0 = false;
  // Output 0 may be written into the buffer of this input (same byte size)
  // where the plan has no later use of it (an accumulating kernel: a
  // convolution's fused residual); the kernel takes either. -1: never.
  int output0_may_reuse_input = -1;
  Provider provider = Provider::kNative;
  SupportsFn supports = nullptr;
  // Prepare accepts inputs in any layout (TensorInfo::layout) and says which
  // layout each output has. Other kernels only ever see plain tensors.
  bool takes_layouts = false;
  // For profiles and logs: "onednn.conv"; empty for native kernels, which go
  // by their op's name.
  const char* name = "";
};

// Family tables (one per file).
absl::Span<const KernelDef> ElementwiseKernels();
absl::Span<const KernelDef> ActivationKernels();
absl::Span<const KernelDef> MatMulKernels();
absl::Span<const KernelDef> ConvKernels();
absl::Span<const KernelDef> PoolKernels();
absl::Span<const KernelDef> NormKernels();
absl::Span<const KernelDef> ShapeKernels();
absl::Span<const KernelDef> ReduceKernels();
// Op coverage families (issue 3).
absl::Span<const KernelDef> UnaryKernels();       // unary.cc: elementwise math
absl::Span<const KernelDef> MovementKernels();    // movement.cc: permute, slice, pad, ...
absl::Span<const KernelDef> IndexingKernels();    // gather.cc: index_select, gather, index
absl::Span<const KernelDef> CastKernels();        // cast.cc: casts and fills
absl::Span<const KernelDef> ResizeKernels();      // resize.cc: interpolation
absl::Span<const KernelDef> SortKernels();        // sort.cc: topk, sort
absl::Span<const KernelDef> AttentionKernels();   // attention.cc: multi-head attention
absl::Span<const KernelDef> ElementwiseChainKernels();  // elementwise_chain.cc: fused elementwise runs
absl::Span<const KernelDef> RecurrentKernels();   // recurrent.cc: LSTM, GRU, RNN
absl::Span<const KernelDef> LayoutKernels();     // layout.cc: Reorder
absl::Span<const KernelDef> VisionKernels();     // vision.cc: nms, roi_align
absl::Span<const KernelDef> ScalarKernels();  // scalar_ops.cc: metadata, int/float/bool math, scalar lists

// Every kernel of every family.
const std::vector<KernelDef>& AllKernels();

// The kernels of accelerated providers (engine/kernels/onednn/), tried before
// the families for the uses they support. Empty in a build without them.
absl::Span<const KernelDef> ProviderKernels();

// The kernel for `op` whose dtype is `dtype` (or kUnknown); nullptr when none.
// Installed kernels are searched after the families.
const KernelDef* FindKernel(ir::OpKind op, DType dtype);

// Finds and prepares the kernel for `ctx.node` and its operand types (fills
// ctx.outputs, workspace_bytes, state). A provider kernel that supports the
// use comes first. An input in a non-plain layout is only given to a kernel
// that takes layouts; FailedPrecondition when there is none (the compiler
// then reorders the input to plain). An FP16/BF16 operand the op's own
// kernel does not take runs through its FP32 kernel, widened and rounded back
// as PyTorch computes the storage types on CPU (widen.cc); an FP32 node marked
// to accumulate in float64 runs its FP64 kernel the same way. NotFound when
// the op has no kernel for the operand dtype; otherwise Prepare's own error.
absl::StatusOr<const KernelDef*> PrepareKernel(PrepareContext& ctx);

// The node attribute asking a float32 GEMM op (Conv, ConvTranspose, MatMul,
// Linear, Einsum) to accumulate in double, and its one value: set by
// passes::AccumulateInFloat64, read by conv.cc and widen.cc.
inline constexpr char kAccumulateAttr[] = "accumulate";
inline constexpr char kAccumulateFloat64[] = "float64";

// Whether AccumulateInFloat64 marks the op (the ops above).
bool AccumulatesInFloat64(ir::OpKind op);

// Adds a kernel from outside the families: the libtorch fallback
// (engine/fallback) installs its kernel this way, so builds without libtorch
// still link and run the native ops. Install at startup, before compiling.
void InstallKernel(const KernelDef& kernel);

// Ops on values other than tensors (scalar_ops.cc), and ops the executor runs
// itself (control flow, None, tensor lists) or through an installed kernel
// (Fallback). The float sweep and the "every op has a float kernel" rule do
// not apply to them.
bool IsNonTensorOp(ir::OpKind op);

// The thread budget of the calling thread: the OpenMP pool that Kiln's loops
// (ParallelFor), the oneDNN primitives and the FP32 GEMMs share, so they never
// oversubscribe the cores. The executor sets it from its compile options
// before compiling and before each run.
void UseThreads(int num_threads);

// Message prefix for kernel errors: "node (Conv, aten::_convolution): ".
std::string NodeContext(const ir::Node& node);

}  // namespace kiln::kernels
