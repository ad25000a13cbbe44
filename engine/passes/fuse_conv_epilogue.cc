// Fuses what follows a convolution or a linear layer into its epilogue:
//
//   Conv -> BatchNorm (inference, constant statistics)   y = y * scale + shift
//   Conv|Linear [-> BatchNorm] -> Relu / Clip (relu6, hardtanh)  y = min(max(y, lo), hi)
//   Conv|Linear [-> ...] -> Gelu / Silu / Sigmoid / Tanh / HardSwish   y = act(y)
//
// A reshape between the layer and its clamp or activation (Reshape, Flatten,
// Squeeze, Unsqueeze, Unflatten: core ATen writes linear as addmm on 2-D rows
// and views the result back before the GELU) does not stop the fusion: an
// elementwise op commutes with a view, so the epilogue applies it and the
// reshape's output takes the activation's uses.
//
// The node gets the attributes post_scale and post_shift (per output channel,
// in the convolution's dtype), post_min / post_max and post_act (the
// activation's name, kernels/activation.h); the kernel applies them to each
// output block right after its GEMM, while it is still in cache, instead of
// more passes over the output (oneDNN: as post-ops).
//
// Numerics are those of the unfused ops, not of folding the batch norm into
// the weights: scale and shift are computed exactly as the BatchNorm kernel
// (and PyTorch's batch_norm_cpu) computes them, in the dtype of the
// statistics, and applied to the convolution's rounded output. Folding
// instead changes results by about 1e-4 of the output's range in deep
// residual nets (libtorch's own frozen resnet101 against the unfrozen one),
// which is why the importer asks libtorch's freeze not to fold.
//
// A link is fused only when the producer's output has that one consumer and
// is not a graph output, so a graph that exposes intermediate values (the
// verified import's bisection does) keeps every op.
#include <cmath>
#include <limits>
#include <vector>

#include "engine/ir/fallback_twin.h"
#include "engine/kernels/activation.h"
#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::OpKind;
using ir::ValueId;

// The Conv (or, with `linear_too`, Linear) that produces `v` alone for this
// consumer, or kNoNode.
NodeId SoleConvProducer(const Graph& graph, const std::vector<int>& uses, ValueId v,
                        const Node& consumer, bool linear_too = false) {
  const NodeId p = graph.value(v).producer;
  if (p == ir::kNoNode || uses[v] != 1) return ir::kNoNode;
  const Node& conv = graph.node(p);
  const bool kind_ok =
      conv.kind == OpKind::kConv || (linear_too && conv.kind == OpKind::kLinear);
  if (!kind_ok || conv.block != consumer.block) return ir::kNoNode;
  // Only float32 and float64 convolutions and linears have the epilogue; the
  // dtype is the weights' (the kernels require input and weights to agree).
  const Tensor* w = graph.ConstantValue(conv.inputs[1]);
  if (w == nullptr || (w->dtype() != DType::kF32 && w->dtype() != DType::kF64)) {
    return ir::kNoNode;
  }
  return p;
}

// The input of the reshape that produces `v` alone for its consumer (see the
// top), else `v` itself.
ValueId ThroughReshape(const Graph& graph, const std::vector<int>& uses, ValueId v,
                       const Node& consumer) {
  const NodeId p = graph.value(v).producer;
  if (p == ir::kNoNode || uses[v] != 1) return v;
  const Node& n = graph.node(p);
  switch (n.kind) {
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kUnflatten:
      return n.block == consumer.block ? n.inputs[0] : v;
    default:
      return v;
  }
}

template <typename T>
void BatchNormTerms(const Tensor& weight, const Tensor& bias, const Tensor& mean,
                    const Tensor& var, double eps_attr, Tensor* scale, Tensor* shift) {
  // As EvalBatchNorm<T>: eps rounded to T, invstd, then scale and shift.
  const T eps = static_cast<T>(eps_attr);
  for (int64_t c = 0; c < weight.num_elements(); ++c) {
    const T invstd = T(1) / std::sqrt(var.data<T>()[c] + eps);
    scale->data<T>()[c] = invstd * weight.data<T>()[c];
    shift->data<T>()[c] = bias.data<T>()[c] - mean.data<T>()[c] * scale->data<T>()[c];
  }
}

// Conv -> BatchNorm. Returns whether it fused.
bool FuseBatchNorm(Graph& graph, const std::vector<int>& uses, NodeId bn_id) {
  const Node& bn = graph.node(bn_id);
  const NodeId conv_id = SoleConvProducer(graph, uses, bn.inputs[0], bn);
  if (conv_id == ir::kNoNode) return false;
  Node& conv = graph.mutable_node(conv_id);
  if (conv.attrs.Has("post_scale") || conv.attrs.Has("post_min") || conv.attrs.Has("post_act")) {
    return false;
  }
  const Tensor* w = graph.ConstantValue(conv.inputs[1]);
  const Tensor* stats[4];
  for (int i = 0; i < 4; ++i) {
    stats[i] = graph.ConstantValue(bn.inputs[i + 1]);
    if (stats[i] == nullptr || stats[i]->dtype() != w->dtype() || stats[i]->rank() != 1 ||
        stats[i]->num_elements() != w->dims()[0]) {
      return false;
    }
  }
  Tensor scale = Tensor::Zeros(w->dtype(), stats[0]->dims());
  Tensor shift = Tensor::Zeros(w->dtype(), stats[0]->dims());
  const double eps = bn.attrs.GetFloat("eps", 1e-5);
  if (w->dtype() == DType::kF32) {
    BatchNormTerms<float>(*stats[0], *stats[1], *stats[2], *stats[3], eps, &scale, &shift);
  } else {
    BatchNormTerms<double>(*stats[0], *stats[1], *stats[2], *stats[3], eps, &scale, &shift);
  }
  conv.attrs.SetTensor("post_scale", std::move(scale));
  conv.attrs.SetTensor("post_shift", std::move(shift));
  graph.ReplaceAllUses(bn.outputs[0], conv.outputs[0]);
  return true;
}

// Conv [-> BatchNorm] -> Relu or Clip. Returns whether it fused.
bool FuseClip(Graph& graph, const std::vector<int>& uses, NodeId act_id) {
  const Node& act = graph.node(act_id);
  const ValueId y = ThroughReshape(graph, uses, act.inputs[0], act);
  const NodeId conv_id = SoleConvProducer(graph, uses, y, act, /*linear_too=*/true);
  if (conv_id == ir::kNoNode) return false;
  Node& conv = graph.mutable_node(conv_id);
  // The clamp comes before the activation in the epilogue's order.
  if (conv.attrs.Has("post_min") || conv.attrs.Has("post_act")) return false;
  const std::optional<std::pair<double, double>> bounds = ClampBounds(act);
  if (!bounds) return false;
  conv.attrs.SetFloat("post_min", bounds->first);
  conv.attrs.SetFloat("post_max", bounds->second);
  graph.ReplaceAllUses(act.outputs[0], act.inputs[0]);
  return true;
}

// Conv|Linear [-> ...] -> Gelu, Silu, Sigmoid, Tanh or HardSwish. Returns whether it fused.
bool FuseActivation(Graph& graph, const std::vector<int>& uses, NodeId act_id) {
  const Node& act = graph.node(act_id);
  const std::string_view name = kernels::ActivationAttrFor(act);
  if (name.empty()) return false;
  const ValueId y = ThroughReshape(graph, uses, act.inputs[0], act);
  const NodeId producer = SoleConvProducer(graph, uses, y, act, /*linear_too=*/true);
  if (producer == ir::kNoNode) return false;
  Node& p = graph.mutable_node(producer);
  if (p.attrs.Has("post_act")) return false;
  p.attrs.SetString("post_act", std::string(name));
  graph.ReplaceAllUses(act.outputs[0], act.inputs[0]);
  return true;
}

class FuseConvEpiloguePass : public Pass {
 public:
  std::string name() const override { return "fuse_conv_epilogue"; }

  absl::StatusOr<bool> Run(Graph& graph) const override {
    bool changed = false;
    // In node order a BatchNorm comes before the activation that follows it,
    // so Conv -> BatchNorm -> Relu fuses both in one sweep. Fused consumers
    // stay in the graph, unused, until Compacted() drops them; rewiring hands
    // the consumer's uses to the convolution's output, whose one use was the
    // consumer.
    std::vector<int> uses = CountUses(graph);
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      const Node& node = graph.node(static_cast<NodeId>(n));
      const bool activation = !kernels::ActivationAttrFor(node).empty();
      if (node.kind != OpKind::kBatchNorm && node.kind != OpKind::kRelu &&
          node.kind != OpKind::kClip && !activation) {
        continue;
      }
      const ValueId in = node.inputs[0], out = node.outputs[0];
      const NodeId id = static_cast<NodeId>(n);
      const bool fused = node.kind == OpKind::kBatchNorm ? FuseBatchNorm(graph, uses, id)
                         : activation                    ? FuseActivation(graph, uses, id)
                                                         : FuseClip(graph, uses, id);
      if (fused) uses[in] = uses[out];
      changed |= fused;
    }
    if (changed) graph = graph.Compacted();
    return changed;
  }
};

}  // namespace

std::optional<std::pair<double, double>> ClampBounds(const ir::Node& node) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (node.kind == OpKind::kRelu) return std::make_pair(0.0, kInf);
  if (node.kind != OpKind::kClip) return std::nullopt;
  const double lo = node.attrs.GetFloat("min", -kInf), hi = node.attrs.GetFloat("max", kInf);
  if (std::isnan(lo) || std::isnan(hi)) return std::nullopt;
  return std::make_pair(lo, hi);
}

std::unique_ptr<Pass> MakeFuseConvEpiloguePass() {
  return std::make_unique<FuseConvEpiloguePass>();
}

bool OnlyAttrs(const ir::Node& node, std::initializer_list<const char*> allowed) {
  for (const auto& [name, value] : node.attrs.map()) {
    if (ir::IsFallbackTwinAttr(name)) continue;
    bool ok = false;
    for (const char* a : allowed) ok = ok || name == a;
    if (!ok) return false;
  }
  return true;
}

std::vector<int> CountUses(const ir::Graph& graph) {
  std::vector<int> uses(graph.values().size(), 0);
  for (const ir::Node& node : graph.nodes()) {
    for (ir::ValueId v : node.inputs) {
      if (v != ir::kNoValue) ++uses[v];
    }
  }
  for (const ir::Block& block : graph.blocks()) {
    for (ir::ValueId v : block.results) ++uses[v];
  }
  for (ir::ValueId v : graph.outputs()) uses[v] += 2;  // never fused away
  return uses;
}

}  // namespace kiln::passes
