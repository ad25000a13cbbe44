#include "server/torch/fallback_kernel.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cache/graph_serializer.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "kiln/v1/graph.pb.h"
#include "server/torch/fallback_worker.h"
#include "server/torch/torch_backend.h"

namespace kiln::server {
namespace {

std::atomic<int> g_threads{1};
std::atomic<uint64_t> g_next_op_id{1};

// One preparation of a Fallback node.
struct FallbackOp {
  uint64_t id = 0;  // the worker prepares the op once per id
  v1::Node node;    // cache::NodeToProto's form, sent to the worker once
  // In process: libtorch's preparations, by operand count (a tensor list
  // built at run time changes it).
  std::mutex mu;
  std::map<size_t, std::shared_ptr<void>> local;
};

absl::Status Prepare(kernels::PrepareContext& ctx) {
  auto op = std::make_shared<FallbackOp>();
  op->id = g_next_op_id.fetch_add(1);
  if (absl::Status s = cache::NodeToProto(ctx.node, &op->node); !s.ok()) {
    return Annotate(s, kernels::NodeContext(ctx.node));
  }
  // Only libtorch knows the results' dims: Eval sets them.
  ctx.dynamic_outputs = true;
  for (kernels::TensorInfo& out : ctx.outputs) out = kernels::TensorInfo{};
  ctx.state = std::move(op);
  return absl::OkStatus();
}

// libtorch's own kernel, in this process.
absl::Status EvalInProcess(FallbackOp& op, kernels::EvalContext& ctx) {
  ASSIGN_OR_RETURN(kernels::KernelDef libtorch, torch::LibtorchFallbackKernel(g_threads.load()));
  std::shared_ptr<void> state;
  {
    std::lock_guard<std::mutex> lock(op.mu);
    auto it = op.local.find(ctx.inputs.size());
    if (it != op.local.end()) {
      state = it->second;
    } else {
      kernels::PrepareContext prepare{ctx.node, {}, {}, 0, nullptr, ctx.num_threads};
      for (const Tensor* t : ctx.inputs) {
        prepare.inputs.push_back(t == nullptr
                                     ? kernels::TensorInfo{DType::kUnknown, {}, nullptr, false}
                                     : kernels::TensorInfo{t->dtype(), t->dims(), nullptr, true});
      }
      prepare.outputs.resize(ctx.outputs.size());
      RETURN_IF_ERROR(libtorch.prepare(prepare));
      state = prepare.state;
      op.local.emplace(ctx.inputs.size(), state);
    }
  }
  kernels::EvalContext eval{ctx.node, ctx.inputs, ctx.outputs, ctx.workspace, state.get(),
                            ctx.num_threads};
  return libtorch.eval(eval);
}

absl::Status Eval(kernels::EvalContext& ctx) {
  auto& op = *static_cast<FallbackOp*>(const_cast<void*>(ctx.state));
  if (auto* worker = dynamic_cast<FallbackWorker*>(ctx.services)) {
    // Its messages name the op (libtorch's own errors come back prefixed with
    // the node, as in process).
    return worker->Run(op.id, op.node, ctx);
  }
  return EvalInProcess(op, ctx);
}

}  // namespace

void InstallServerFallbackKernel(int num_threads) {
  static std::once_flag once;
  if (num_threads > 0) g_threads.store(num_threads);
  std::call_once(once, [] {
    kernels::InstallKernel(
        kernels::KernelDef{ir::OpKind::kFallback, DType::kUnknown, Prepare, Eval});
  });
}

}  // namespace kiln::server
