#include "engine/runtime/observer.h"

#include "absl/strings/str_cat.h"
#include "engine/runtime/executable_internal.h"

namespace kiln::runtime {

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kKernel: return "static";
    case StepKind::kDynamicKernel: return "dynamic";
    case StepKind::kIf: return "if";
    case StepKind::kLoop: return "loop";
    case StepKind::kBuiltin: return "builtin";
    case StepKind::kForward: return "forward";
  }
  return "?";
}

StepKind StepInfo::Kind() const {
  using K = Executable::Step::Kind;
  switch (static_cast<const Executable::Step*>(step)->kind) {
    case K::kKernel: return StepKind::kKernel;
    case K::kDynamicKernel: return StepKind::kDynamicKernel;
    case K::kIf: return StepKind::kIf;
    case K::kLoop: return StepKind::kLoop;
    case K::kBuiltin: return StepKind::kBuiltin;
    case K::kForward: return StepKind::kForward;
  }
  return StepKind::kBuiltin;
}

std::string StepInfo::KernelName() const {
  const auto* s = static_cast<const Executable::Step*>(step);
  const kernels::KernelDef* kernel = s->kernel;
  if (s->kind == Executable::Step::Kind::kDynamicKernel) {
    kernel = static_cast<const Executable::Arena*>(arena)->dynamic_kernel;
  }
  if (kernel == nullptr) return "";
  if (kernel->name != nullptr && kernel->name[0] != '\0') return kernel->name;
  return ir::OpName(kernel->op);
}

std::vector<std::string> StepInfo::OutputTypes() const {
  const auto* a = static_cast<const Executable::Arena*>(arena);
  std::vector<std::string> types;
  for (ir::ValueId v : Node().outputs) {
    const Executable::Slot& slot = executable->slots_[v];
    using SK = Executable::Slot::Kind;
    if (slot.kind == SK::kArena || slot.kind == SK::kInput || slot.kind == SK::kConstant) {
      // Planned: the compiled graph's type says dims and layout.
      const ir::TensorType& type = graph->value(v).type;
      types.push_back(type.IsComplete() ? type.ToString()
                                        : ir::TensorType{slot.dtype, slot.dims}.ToString());
      continue;
    }
    const RtValue& value = a->values[v];
    if (value.none || slot.kind == SK::kNone) {
      types.push_back("None");
    } else if (value.list != nullptr) {
      types.push_back(absl::StrCat("list[", value.list->size(), "]"));
    } else if (value.tensor.dtype() == DType::kUnknown) {
      types.push_back(graph->value(v).type.ToString());
    } else {
      types.push_back(ir::TensorType{value.tensor.dtype(), value.tensor.dims()}.ToString());
    }
  }
  return types;
}

}  // namespace kiln::runtime
