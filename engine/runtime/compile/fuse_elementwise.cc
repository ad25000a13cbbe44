// Elementwise fusion in Executable::Compiler (compile/compiler.h): an
// elementwise op right after another, reading its result as that result's
// only use, joins it in one ElementwiseChain node (kernels/elementwise_chain.h)
// that makes one pass over memory instead of one per op.
//
// It runs here rather than as a graph pass because it needs what only the
// typed phase knows: both ops prepared (so the chain's steps are uses their
// kernels take; an op a kernel refuses goes to the libtorch fallback alone,
// never inside a chain), float32 results of one shape and layout (where the
// chain runs tile by tile; elsewhere it would only move the same passes over
// memory into one kernel). Only with the passes (a plan read back from the
// cache holds its chains already); "fuse_elementwise" in
// CompileOptions::disabled_passes turns it off.
#include <algorithm>
#include <utility>

#include "engine/common/status_macros.h"
#include "engine/kernels/elementwise_chain.h"
#include "engine/runtime/compile/compiler.h"

namespace kiln::runtime {

namespace {
constexpr char kPassName[] = "fuse_elementwise";
}  // namespace

// A step's operand as the chain is built: a chain input or a step's result.
struct ChainOperand {
  bool step = false;
  int index = 0;
};

absl::StatusOr<bool> Executable::Compiler::FuseIntoChain(ir::NodeId id, Program& program) {
  const CompileOptions& options = exe_->options_;
  if (!options.run_passes || program.steps.size() < 2 ||
      std::find(options.disabled_passes.begin(), options.disabled_passes.end(), kPassName) !=
          options.disabled_passes.end()) {
    return false;
  }
  const Step& last = program.steps.back();
  const Step& before = program.steps[program.steps.size() - 2];
  if (last.kind != Step::Kind::kKernel || last.node != id ||
      before.kind != Step::Kind::kKernel) {
    return false;
  }
  const ir::NodeId producer_id = before.node;
  const ir::Node& node = g_.node(id);
  const ir::Node& producer = g_.node(producer_id);
  if (!kernels::IsChainableOp(node.kind) ||
      (!kernels::IsChainableOp(producer.kind) &&
       producer.kind != ir::OpKind::kElementwiseChain) ||
      node.outputs.size() != 1 || producer.outputs.size() != 1) {
    return false;
  }
  const ir::ValueId y = producer.outputs[0], out = node.outputs[0];
  if (uses_[y] != 1 || std::find(node.inputs.begin(), node.inputs.end(), y) == node.inputs.end() ||
      slots_[y].kind != Slot::Kind::kArena || slots_[out].kind != Slot::Kind::kArena ||
      slots_[y].dtype != DType::kF32 || slots_[out].dtype != DType::kF32 ||
      slots_[y].dims != slots_[out].dims || slots_[y].layout != slots_[out].layout) {
    return false;
  }

  // The chain's inputs and steps: the producer's (its own steps when it is a
  // chain already), then this node reading the producer's result.
  std::vector<ir::ValueId> inputs = producer.inputs;
  std::vector<std::pair<kernels::ChainStep, std::vector<ChainOperand>>> steps;
  if (producer.kind == ir::OpKind::kElementwiseChain) {
    ASSIGN_OR_RETURN(std::vector<kernels::ChainStep> decoded, kernels::DecodeChain(producer));
    const int n = static_cast<int>(producer.inputs.size());
    for (kernels::ChainStep& s : decoded) {
      std::vector<ChainOperand> refs;
      for (int o : s.operands) refs.push_back(o < n ? ChainOperand{false, o} : ChainOperand{true, o - n});
      steps.emplace_back(std::move(s), std::move(refs));
    }
  } else {
    std::vector<ChainOperand> refs;
    for (int i = 0; i < static_cast<int>(producer.inputs.size()); ++i) refs.push_back({false, i});
    steps.emplace_back(kernels::ChainStep{producer.kind, {}, producer.attrs}, std::move(refs));
  }
  std::vector<ChainOperand> refs;
  for (ir::ValueId v : node.inputs) {
    if (v == y) {
      refs.push_back({true, static_cast<int>(steps.size()) - 1});
      continue;
    }
    auto at = std::find(inputs.begin(), inputs.end(), v);
    if (at == inputs.end()) at = inputs.insert(inputs.end(), v);
    refs.push_back({false, static_cast<int>(at - inputs.begin())});
  }
  steps.emplace_back(kernels::ChainStep{node.kind, {}, node.attrs}, std::move(refs));
  if (inputs.size() > kernels::kMaxChainInputs || steps.size() > kernels::kMaxChainSteps ||
      std::find(inputs.begin(), inputs.end(), ir::kNoValue) != inputs.end()) {
    return false;
  }
  std::vector<kernels::ChainStep> encoded;
  for (auto& [step, operands] : steps) {
    step.operands.clear();  // a decoded step's, numbered for the producer's inputs
    for (const ChainOperand& r : operands) {
      step.operands.push_back(r.step ? static_cast<int>(inputs.size()) + r.index : r.index);
    }
    encoded.push_back(std::move(step));
  }

  // The producer becomes the chain, compiled in place of both steps; its
  // result is this node's from now on.
  const ir::Node saved = producer;
  ir::Node& chain = g_.mutable_node(producer_id);
  chain.kind = ir::OpKind::kElementwiseChain;
  chain.inputs = std::move(inputs);
  chain.attrs = ir::Attributes();
  kernels::EncodeChain(encoded, chain.attrs);
  program.steps.pop_back();
  program.steps.pop_back();
  slots_[y] = Slot{};
  slots_[out] = Slot{};
  absl::Status compiled = CompileKernelNode(producer_id, program, /*static_ok=*/true);
  if (!compiled.ok()) {
    // Not expected (the chain prepares the kernels both steps had): put the
    // two steps back as they were.
    g_.mutable_node(producer_id) = saved;
    slots_[y] = Slot{};
    slots_[out] = Slot{};
    no_chain_ = true;
    absl::Status again = CompileKernelNode(producer_id, program, true);
    if (again.ok()) again = CompileKernelNode(id, program, true);
    no_chain_ = false;
    RETURN_IF_ERROR(again);
    return true;
  }
  uses_[y] = uses_[out];
  uses_[out] = 0;
  g_.ReplaceAllUses(out, y);
  // This node's work is the chain's now; its result, which nothing reads,
  // becomes a None (the compiled graph keeps its ids for the cache, and a
  // None reads nothing that later moves). The chain reads values made after
  // the producer's place in the block: it moves to this node's place.
  ir::Node& done = g_.mutable_node(id);
  done.kind = ir::OpKind::kNone;
  done.inputs.clear();
  done.attrs = ir::Attributes();
  std::vector<ir::NodeId>& nodes = g_.mutable_block(cursor_.block).nodes;
  const auto p = std::find(nodes.begin(), nodes.end(), producer_id);
  if (p != nodes.end() && cursor_.index < nodes.size() && nodes[cursor_.index] == id &&
      p < nodes.begin() + static_cast<std::ptrdiff_t>(cursor_.index)) {
    nodes.erase(p);
    nodes[cursor_.index - 1] = producer_id;
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(cursor_.index), id);
  }
  return true;
}

}  // namespace kiln::runtime
