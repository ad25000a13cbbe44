// Internal to engine/runtime: the executable's plan and per-run state, shared
// by executable.cc (compiling, the static path) and dynamic_steps.cc (what
// runs on the dynamic path: per-run preparation, If, Loop, tensor lists).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/runtime/arena_pool.h"
#include "engine/runtime/executable.h"

namespace kiln::runtime {

// Values at run time. Scalars and scalar lists are tensors (ir::ValueKind).
struct RtValue {
  Tensor tensor;
  std::shared_ptr<const std::vector<Tensor>> list;  // tensor lists
  bool none = false;
};

struct Executable::Prepared {
  const kernels::KernelDef* kernel = nullptr;
  std::vector<kernels::TensorInfo> outputs;
  size_t workspace_bytes = 0;
  std::shared_ptr<void> state;
  bool dynamic_outputs = false;
};

// Per dynamic step: preparations keyed by operand types (and scalar values).
struct Executable::PrepareCache {
  static constexpr size_t kMaxEntries = 64;
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Executable::Prepared>> entries;
};

struct Executable::Step {
  enum class Kind {
    kKernel,         // prepared at compile time, buffers planned
    kDynamicKernel,  // prepared per run (cached), outputs allocated per run
    kIf,
    kLoop,
    kBuiltin,        // None, IsNone, Raise, tensor-list ops
    kForward,        // output `node`'s i-th value := `forwards[i]` (an inlined If)
  };
  Kind kind = Kind::kKernel;
  ir::NodeId node = ir::kNoNode;
  const kernels::KernelDef* kernel = nullptr;
  std::shared_ptr<void> state;
  std::shared_ptr<PrepareCache> cache;
  std::vector<Program> blocks;
  std::vector<std::pair<ir::ValueId, ir::ValueId>> forwards;  // (to, from)
};

struct Executable::Program {
  std::vector<Step> steps;
};

struct Executable::Slot {
  enum class Kind { kUnused, kInput, kConstant, kArena, kDynamic, kNone } kind = Kind::kUnused;
  int input_index = -1;              // kInput
  const Tensor* constant = nullptr;  // kConstant (owned by graph_ or folded_)
  size_t offset = 0;                 // kArena: byte offset of the root buffer
  DType dtype = DType::kUnknown;
  Dims dims;                              // logical
  ir::Layout layout = ir::Layout::kPlain;  // how the buffer holds them
};

// Per-run state: every value, the arena's bytes while a run holds them (a
// block of the process's ArenaPool), and scratch for dynamic steps.
struct Executable::Arena {
  ArenaPool::Block block;
  const uint8_t* bound = nullptr;  // the block the arena values point into
  std::vector<RtValue> values;
  Tensor dynamic_workspace;
  const RunOptions* run = nullptr;  // the current run's bounds
  // The kernel of the last dynamic step run, for observers (StepInfo::KernelName).
  const kernels::KernelDef* dynamic_kernel = nullptr;
};

namespace internal {

inline constexpr size_t kAlign = 64;
inline size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// "node 3 (Fill, aten::zeros)".
inline std::string NodeName(const ir::Graph& g, ir::NodeId n) {
  const ir::Node& node = g.node(n);
  return absl::StrCat("node ", n, " (", ir::OpName(node.kind),
                      node.source_op.empty() ? "" : ", ", node.source_op, ")");
}

// "node 3 (Fill, aten::zeros): ", to start a message.
inline std::string Where(const ir::Graph& g, ir::NodeId n) { return NodeName(g, n) + ": "; }

// RunOptions::Check, saying which node the run was at.
inline absl::Status CheckRun(const ir::Graph& g, const RunOptions& run, ir::NodeId n) {
  absl::Status s = run.Check();
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(s.message(), " (at ", NodeName(g, n), ")"));
}

inline absl::Status AtNode(ir::NodeId n, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("node ", n, ": ", s.message()));
}

// Ops the executor runs itself when their list operand (or result) is a
// tensor list.
inline bool IsTensorListOp(const ir::Graph& g, const ir::Node& node) {
  switch (node.kind) {
    case ir::OpKind::kListConstruct:
      return g.value(node.outputs[0]).kind == ir::ValueKind::kTensorList;
    case ir::OpKind::kListUnpack:
    case ir::OpKind::kListGetItem:
    case ir::OpKind::kListLen:
    case ir::OpKind::kListAppend:
      return g.value(node.inputs[0]).kind == ir::ValueKind::kTensorList;
    case ir::OpKind::kSplitList:
      return true;
    default:
      return false;
  }
}

inline bool IsScalarValue(const ir::Value& v) {
  return ir::IsScalarKind(v.kind) || ir::IsScalarListKind(v.kind);
}

// Truth of a branch or loop condition: a one-element tensor of any dtype.
inline absl::StatusOr<bool> Truth(const RtValue& v) {
  if (v.none) return false;
  const Tensor& t = v.tensor;
  if (t.num_elements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("a condition must have one element, got ",
                                                   DimsToString(t.dims())));
  }
  switch (t.dtype()) {
    case DType::kBool: return *t.data<bool>();
    case DType::kUInt8: return *t.data<uint8_t>() != 0;
    case DType::kInt8: return *t.data<int8_t>() != 0;
    case DType::kInt16: return *t.data<int16_t>() != 0;
    case DType::kInt32: return *t.data<int32_t>() != 0;
    case DType::kInt64: return *t.data<int64_t>() != 0;
    case DType::kF32: return *t.data<float>() != 0;
    case DType::kF64: return *t.data<double>() != 0;
    case DType::kF16:
    case DType::kBF16: return (*t.data<uint16_t>() & 0x7fff) != 0;
    case DType::kUnknown: break;
  }
  return absl::InvalidArgumentError("a condition has an unknown dtype");
}

inline absl::StatusOr<int64_t> IntOf(const RtValue& v, const char* what) {
  const Tensor& t = v.tensor;
  if (v.none || t.num_elements() != 1 || IsFloatingPoint(t.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be an int"));
  }
  switch (t.dtype()) {
    case DType::kInt64: return *t.data<int64_t>();
    case DType::kInt32: return *t.data<int32_t>();
    case DType::kInt16: return *t.data<int16_t>();
    case DType::kInt8: return *t.data<int8_t>();
    case DType::kUInt8: return *t.data<uint8_t>();
    case DType::kBool: return *t.data<bool>() ? 1 : 0;
    default: return absl::InvalidArgumentError(absl::StrCat(what, " must be an int"));
  }
}

inline Tensor IntTensor(int64_t v) {
  Tensor t = Tensor::Zeros(DType::kInt64, {});
  *t.data<int64_t>() = v;
  return t;
}

inline Tensor BoolTensor(bool v) {
  Tensor t = Tensor::Zeros(DType::kBool, {});
  *t.data<bool>() = v;
  return t;
}


// Cache key of a preparation: per operand its presence, dtype, dims and,
// for int/float/bool operands, the value (Prepare may read it).
std::string InfoKey(const std::vector<kernels::TensorInfo>& infos);

}  // namespace internal
}  // namespace kiln::runtime
