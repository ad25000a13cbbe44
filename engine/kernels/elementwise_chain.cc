// ElementwiseChain (elementwise_chain.h): the steps' own kernels, prepared on
// nodes of their own, run either tile by tile (every operand float32 over
// the output's shape, or a single element) or one after another over whole
// tensors in the workspace.
#include "engine/kernels/elementwise_chain.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {

bool IsChainableOp(ir::OpKind kind) {
  using K = ir::OpKind;
  switch (kind) {
    case K::kAdd: case K::kSub: case K::kMul: case K::kDiv: case K::kMaximum: case K::kMinimum:
    case K::kPow: case K::kRelu: case K::kClip: case K::kSigmoid: case K::kTanh: case K::kGelu:
    case K::kSilu: case K::kHardSigmoid: case K::kHardSwish: case K::kNeg: case K::kAbs:
    case K::kSqrt: case K::kRsqrt: case K::kExp: case K::kLog: case K::kErf:
    case K::kReciprocal: case K::kLeakyRelu: case K::kElu: case K::kMish: case K::kSoftplus:
      return true;
    default:
      return false;
  }
}

namespace {
constexpr char kOpsAttr[] = "ops";
constexpr char kOperandsAttr[] = "operands";
}  // namespace

void EncodeChain(const std::vector<ChainStep>& steps, ir::Attributes& attrs) {
  std::vector<std::string> ops;
  std::vector<int64_t> operands;
  for (size_t k = 0; k < steps.size(); ++k) {
    ops.push_back(ir::OpName(steps[k].kind));
    operands.push_back(static_cast<int64_t>(steps[k].operands.size()));
    operands.insert(operands.end(), steps[k].operands.begin(), steps[k].operands.end());
    for (const auto& [name, value] : steps[k].attrs.map()) {
      attrs.Set(absl::StrCat(k, ".", name), value);
    }
  }
  attrs.SetString(kOpsAttr, absl::StrJoin(ops, ","));
  attrs.SetInts(kOperandsAttr, std::move(operands));
}

absl::StatusOr<std::vector<ChainStep>> DecodeChain(const ir::Node& node) {
  const int num_inputs = static_cast<int>(node.inputs.size());
  std::vector<ChainStep> steps;
  for (absl::string_view name : absl::StrSplit(node.attrs.GetString(kOpsAttr), ',')) {
    const std::optional<ir::OpKind> kind = ir::OpKindFromName(std::string_view(name.data(), name.size()));
    if (!kind || !IsChainableOp(*kind)) {
      return InvalidArg(node, "'", name, "' is not an op an elementwise chain holds");
    }
    steps.push_back(ChainStep{*kind, {}, {}});
  }
  if (steps.empty() || steps.size() > kMaxChainSteps) {
    return InvalidArg(node, "an elementwise chain has 1 to ", kMaxChainSteps, " steps");
  }
  const std::vector<int64_t> operands = node.attrs.GetInts(kOperandsAttr);
  size_t at = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (at >= operands.size() || operands[at] < 1 || operands[at] > 3 ||
        at + 1 + static_cast<size_t>(operands[at]) > operands.size()) {
      return InvalidArg(node, "step ", k, " of the chain has no operands");
    }
    const int64_t n = operands[at++];
    for (int64_t i = 0; i < n; ++i, ++at) {
      const int64_t id = operands[at];
      if (id < 0 || id >= num_inputs + static_cast<int64_t>(k)) {
        return InvalidArg(node, "step ", k, " of the chain reads operand ", id,
                          ", neither an input nor an earlier step");
      }
      steps[k].operands.push_back(static_cast<int>(id));
    }
  }
  if (at != operands.size()) return InvalidArg(node, "the chain's operands attribute is too long");
  for (const auto& [name, value] : node.attrs.map()) {
    const size_t dot = name.find('.');
    size_t k = 0;
    if (dot == std::string::npos || !absl::SimpleAtoi(name.substr(0, dot), &k)) continue;
    if (k >= steps.size()) return InvalidArg(node, "attribute ", name, " names no step");
    steps[k].attrs.Set(name.substr(dot + 1), value);
  }
  return steps;
}

namespace {

// Elements per tile: every step's tile of a thread stays in the core's
// second-level cache (16 steps x 32 KB), and a tile is long enough that
// calling each step's kernel on it costs little next to its work.
constexpr int64_t kTile = 8192;

// One step prepared for some operand types.
struct PreparedStep {
  const KernelDef* kernel = nullptr;
  std::shared_ptr<void> state;
  size_t workspace = 0;
  TensorInfo out;
};

struct StepPlan {
  ir::Node node;  // the step as a node of its own (inputs 0..n-1)
  std::vector<int> operands;
  PreparedStep whole;     // over whole tensors
  PreparedStep tiled[2];  // over a full tile and over the last, shorter one
  size_t offset = 0;      // whole: its result's place in the workspace (not the last step's)
};

struct ChainPlan {
  int num_inputs = 0;
  std::vector<StepPlan> steps;
  size_t step_workspace = 0;  // whole: where the steps' own workspace starts
  bool tiled = false;
  int64_t elements = 0;  // tiled: the output's
};

absl::StatusOr<PreparedStep> PrepareStep(const PrepareContext& ctx, const ir::Node& node,
                                         const std::vector<TensorInfo>& inputs, int threads) {
  PrepareContext sub{node};
  sub.inputs = inputs;
  sub.num_threads = threads;
  sub.precision = ctx.precision;
  ASSIGN_OR_RETURN(const KernelDef* kernel, PrepareKernel(sub));
  if (sub.dynamic_outputs || sub.outputs.size() != 1 || kernel->aliases_input0) {
    return Unimplemented(ctx.node, "the ", ir::OpName(node.kind),
                         " step of the chain has no static kernel");
  }
  PreparedStep p{kernel, std::move(sub.state), sub.workspace_bytes, sub.outputs[0]};
  p.out.constant = nullptr;
  p.out.scalar = false;
  return p;
}

// The tile forms of every step, when the chain can run tile by tile: every
// operand and result float32 with the output's dims or a single element, and
// each step's kernel the one its whole-tensor form has, needing no workspace.
absl::StatusOr<bool> PrepareTiles(const PrepareContext& ctx, ChainPlan& plan,
                                  const std::vector<TensorInfo>& whole) {
  const Dims& out = plan.steps.back().whole.out.dims;
  const int64_t n = NumElements(out);
  if (n < kTile) return false;  // one pass over a small tensor gains nothing
  auto tileable = [&](const TensorInfo& t) {
    return t.present && (NumElements(t.dims) == 1 || (t.dtype == DType::kF32 && t.dims == out));
  };
  for (int i = 0; i < plan.num_inputs; ++i) {
    if (!tileable(whole[i])) return false;
  }
  for (const StepPlan& s : plan.steps) {
    if (s.whole.out.dtype != DType::kF32 || s.whole.out.dims != out) return false;
  }
  for (int form = 0; form < 2; ++form) {
    const int64_t length = form == 0 ? kTile : n % kTile;
    if (length == 0) continue;
    std::vector<TensorInfo> infos;
    for (int i = 0; i < plan.num_inputs; ++i) {
      TensorInfo t = whole[i];
      if (NumElements(t.dims) != 1 || t.dims == out) {
        t.dims = {length};
        t.constant = nullptr;
      }
      infos.push_back(t);
    }
    for (StepPlan& s : plan.steps) {
      std::vector<TensorInfo> in;
      for (int id : s.operands) in.push_back(infos[id]);
      ASSIGN_OR_RETURN(PreparedStep p, PrepareStep(ctx, s.node, in, 1));
      if (p.kernel != s.whole.kernel || p.workspace != 0 || p.out.dtype != DType::kF32 ||
          NumElements(p.out.dims) != length) {
        return false;
      }
      infos.push_back(p.out);
      s.tiled[form] = std::move(p);
    }
  }
  plan.elements = n;
  return true;
}

absl::Status PrepareChain(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, kMaxChainInputs));
  ASSIGN_OR_RETURN(std::vector<ChainStep> steps, DecodeChain(ctx.node));
  auto plan = std::make_shared<ChainPlan>();
  plan->num_inputs = static_cast<int>(ctx.inputs.size());
  std::vector<TensorInfo> infos = ctx.inputs;
  for (const TensorInfo& t : infos) {
    if (!t.present) return InvalidArg(ctx.node, "an elementwise chain's inputs are all given");
  }
  size_t offset = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    StepPlan& s = plan->steps.emplace_back();
    s.node.kind = steps[k].kind;
    s.node.attrs = std::move(steps[k].attrs);
    s.node.source_op = ctx.node.source_op;
    s.node.outputs = {0};
    s.operands = steps[k].operands;
    std::vector<TensorInfo> in;
    for (int id : s.operands) {
      s.node.inputs.push_back(static_cast<ir::ValueId>(in.size()));
      in.push_back(infos[id]);
    }
    ASSIGN_OR_RETURN(s.whole, PrepareStep(ctx, s.node, in, ctx.num_threads));
    infos.push_back(s.whole.out);
    if (k + 1 < steps.size()) {
      s.offset = offset;
      offset += (NumElements(s.whole.out.dims) * DTypeSize(s.whole.out.dtype) + 63) / 64 * 64;
    }
  }
  ASSIGN_OR_RETURN(plan->tiled, PrepareTiles(ctx, *plan, ctx.inputs));
  if (!plan->tiled) {
    plan->step_workspace = offset;
    size_t shared = 0;
    for (const StepPlan& s : plan->steps) shared = std::max(shared, s.whole.workspace);
    ctx.workspace_bytes = offset + shared;
  }
  ctx.outputs = {plan->steps.back().whole.out};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

// Runs `step` (prepared as `p`) on `inputs` into `out`.
absl::Status EvalStep(const StepPlan& step, const PreparedStep& p,
                      std::vector<const Tensor*> inputs, Tensor* out, void* workspace,
                      int threads) {
  EvalContext sub{step.node};
  sub.inputs = std::move(inputs);
  sub.outputs = {out};
  sub.workspace = workspace;
  sub.state = p.state.get();
  sub.num_threads = threads;
  return p.kernel->eval(sub);
}

absl::Status EvalWhole(const ChainPlan& plan, EvalContext& ctx) {
  char* ws = static_cast<char*>(ctx.workspace);
  std::vector<Tensor> results;
  results.reserve(plan.steps.size());
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const StepPlan& s = plan.steps[k];
    std::vector<const Tensor*> in;
    for (int id : s.operands) {
      in.push_back(id < plan.num_inputs ? ctx.inputs[id] : &results[id - plan.num_inputs]);
    }
    const bool last = k + 1 == plan.steps.size();
    results.push_back(last ? Tensor()
                           : Tensor::Wrap(s.whole.out.dtype, s.whole.out.dims, ws + s.offset));
    RETURN_IF_ERROR(EvalStep(s, s.whole, std::move(in), last ? ctx.outputs[0] : &results.back(),
                             ws + plan.step_workspace, ctx.num_threads));
  }
  return absl::OkStatus();
}

absl::Status EvalTiled(const ChainPlan& plan, EvalContext& ctx) {
  const int64_t n = plan.elements;
  const int64_t tiles = (n + kTile - 1) / kTile;
  const size_t num_steps = plan.steps.size();
  const int64_t cost = n * static_cast<int64_t>(num_steps) * 4;
  std::vector<absl::Status> failed(std::max(ctx.num_threads, 1));
  ParallelFor(tiles, ctx.num_threads, cost, [&](int64_t begin, int64_t end) {
    // This thread's tiles of every step but the last (which writes the output).
    std::vector<float> buffer(num_steps * kTile);
    std::vector<Tensor> views(plan.num_inputs + num_steps);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = t * kTile, length = std::min(kTile, n - first);
      const int form = length == kTile ? 0 : 1;
      for (int i = 0; i < plan.num_inputs; ++i) {
        const Tensor& x = *ctx.inputs[i];
        views[i] = x.num_elements() == 1
                       ? Tensor::Wrap(x.dtype(), x.dims(), const_cast<void*>(x.raw_data()))
                       : Tensor::Wrap(DType::kF32, {length},
                                      const_cast<float*>(x.data<float>()) + first);
      }
      for (size_t k = 0; k < num_steps; ++k) {
        const StepPlan& s = plan.steps[k];
        const PreparedStep& p = s.tiled[form];
        float* out = k + 1 == num_steps ? ctx.outputs[0]->data<float>() + first
                                        : buffer.data() + k * kTile;
        Tensor& view = views[plan.num_inputs + k];
        view = Tensor::Wrap(DType::kF32, p.out.dims, out);
        std::vector<const Tensor*> in;
        for (int id : s.operands) in.push_back(&views[id]);
        absl::Status status = EvalStep(s, p, std::move(in), &view, nullptr, 1);
        if (!status.ok()) {
          failed[omp_get_thread_num() % failed.size()] = std::move(status);
          return;
        }
      }
    }
  });
  for (absl::Status& s : failed) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

absl::Status EvalChain(EvalContext& ctx) {
  const ChainPlan& plan = StateAs<ChainPlan>(ctx);
  return plan.tiled ? EvalTiled(plan, ctx) : EvalWhole(plan, ctx);
}

}  // namespace

absl::Span<const KernelDef> ElementwiseChainKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kElementwiseChain, DType::kUnknown, PrepareChain, EvalChain},
  };
  return kKernels;
}

}  // namespace kiln::kernels
