#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/passes/pass.h"

namespace kiln::passes {
namespace {

// The one ordered list of passes.
std::vector<std::unique_ptr<Pass>> MakePipeline() {
  std::vector<std::unique_ptr<Pass>> passes;
  // Lists with known elements (List[Tensor] inputs, expanded per request):
  // their uses become static, so the plan covers what follows them.
  passes.push_back(MakeResolveListsPass());
  // Identities first: they hide producer/consumer pairs from later pattern passes.
  passes.push_back(MakeEliminateIdentityPass());
  // Softmax -> the masking of core ATen's _safe_softmax into one Softmax.
  passes.push_back(MakeFuseSafeSoftmaxPass());
  // MatMul -> scale -> mask -> Softmax -> MatMul (and the transpositions
  // around it) into one ScaledDotProductAttention.
  passes.push_back(MakeFuseAttentionPass());
  // Conv -> BatchNorm -> Relu/Clip into the convolution's epilogue.
  passes.push_back(MakeFuseConvEpiloguePass());
  // Last: clean up whatever earlier rewrites left unused.
  passes.push_back(MakeDeadCodeEliminationPass());
  return passes;
}

}  // namespace

absl::Status RunPipeline(ir::Graph& graph, const PipelineOptions& options) {
  for (const auto& pass : MakePipeline()) {
    if (std::find(options.disabled.begin(), options.disabled.end(), pass->name()) !=
        options.disabled.end()) {
      continue;
    }
    ASSIGN_OR_RETURN(bool changed, pass->Run(graph));
    if (changed && options.verify_each) {
      absl::Status s = ir::VerifyGraph(graph);
      if (!s.ok()) {
        return absl::InternalError(
            absl::StrCat("pass ", pass->name(), " produced an invalid graph: ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> PipelinePassNames() {
  std::vector<std::string> names;
  for (const auto& pass : MakePipeline()) names.emplace_back(pass->name());
  return names;
}

}  // namespace kiln::passes
