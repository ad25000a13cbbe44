#include "tests/engine/kernels/single_op_graph.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/reference/reference.h"

namespace kiln::kernels::testing {

Tensor F32(Dims dims, std::vector<float> values) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  ENGINE_CHECK(static_cast<int64_t>(values.size()) == t.num_elements());
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

Tensor RandomF32(Dims dims, std::mt19937& rng, float lo, float hi) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor ConvertedTensor(const Tensor& t, DType to) {
  if (!t.defined() || t.dtype() != DType::kF32) return t;
  Tensor out = Tensor::Zeros(to, t.dims());
  ConvertElements(t.raw_data(), t.dtype(), out.raw_data(), to, t.num_elements());
  return out;
}

std::vector<float> Values(const Tensor& t) {
  ENGINE_CHECK(t.dtype() == DType::kF32);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

SingleOpGraph::SingleOpGraph(ir::OpKind op, std::vector<Tensor> inputs, ir::Attributes attrs,
                             std::vector<int> constant_inputs)
    : inputs_(std::move(inputs)), constant_inputs_(std::move(constant_inputs)) {
  std::vector<ir::ValueId> ids;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Tensor& t = inputs_[i];
    if (!t.defined()) {
      ids.push_back(ir::kNoValue);
    } else if (std::count(constant_inputs_.begin(), constant_inputs_.end(), static_cast<int>(i))) {
      ids.push_back(graph_.AddConstant(t, absl::StrCat("c", i)));
    } else {
      ids.push_back(graph_.AddInput(absl::StrCat("x", i), ir::TensorType{t.dtype(), t.dims()}));
    }
  }
  node_id_ = graph_.AddNode(op, std::move(ids), std::move(attrs), "test", {"y"});
  graph_.AddOutput(graph_.node(node_id_).outputs[0], "y");
}

PrepareContext SingleOpGraph::MakePrepareContext(int num_threads) const {
  PrepareContext ctx{node()};
  const ir::Node& n = node();
  for (size_t i = 0; i < inputs_.size(); ++i) {
    TensorInfo info;
    if (n.inputs[i] == ir::kNoValue) {
      info.present = false;
    } else {
      info.dtype = inputs_[i].dtype();
      info.dims = inputs_[i].dims();
      info.constant = graph_.ConstantValue(n.inputs[i]);
    }
    ctx.inputs.push_back(info);
  }
  ctx.num_threads = num_threads;
  return ctx;
}

// The kernel as the executor picks and prepares it (kernels::PrepareKernel:
// FP16/BF16 operands an op's own kernel refuses run widened).
absl::StatusOr<const KernelDef*> SingleOpGraph::PrepareInto(PrepareContext& ctx) const {
  ctx.outputs.resize(node().outputs.size());
  absl::StatusOr<const KernelDef*> kernel = PrepareKernel(ctx);
  if (absl::IsNotFound(kernel.status())) {
    return absl::UnimplementedError(
        absl::StrCat("no kernel for ", ir::OpName(node().kind), ": ", kernel.status().message()));
  }
  return kernel;
}

absl::Status SingleOpGraph::Prepare(int num_threads) const {
  PrepareContext ctx = MakePrepareContext(num_threads);
  return PrepareInto(ctx).status();
}

absl::StatusOr<size_t> SingleOpGraph::WorkspaceBytes() const {
  PrepareContext ctx = MakePrepareContext(1);
  RETURN_IF_ERROR(PrepareInto(ctx).status());
  return ctx.workspace_bytes;
}

absl::StatusOr<std::vector<Tensor>> SingleOpGraph::Run(int num_threads, bool eval_aliases) const {
  PrepareContext pctx = MakePrepareContext(num_threads);
  ASSIGN_OR_RETURN(const KernelDef* kernel, PrepareInto(pctx));
  if (pctx.outputs.size() != node().outputs.size()) {
    return absl::InternalError("Prepare filled the wrong number of outputs");
  }

  std::vector<Tensor> outputs;
  if (kernel->aliases_input0 && !eval_aliases) {
    if (NumElements(pctx.outputs[0].dims) != inputs_[0].num_elements()) {
      return absl::InternalError("aliasing kernel changed the element count");
    }
    outputs.push_back(inputs_[0].Reshaped(pctx.outputs[0].dims));
    return outputs;
  }
  for (const TensorInfo& info : pctx.outputs) {
    Tensor t = Tensor::Zeros(info.dtype, info.dims);
    if (info.dtype == DType::kF32) {
      std::fill(t.data<float>(), t.data<float>() + t.num_elements(),
                std::numeric_limits<float>::quiet_NaN());
    } else if (t.byte_size() > 0) {
      std::memset(t.raw_data(), 0xAB, t.byte_size());
    }
    outputs.push_back(std::move(t));
  }
  // 0xFF bytes read as NaN floats and doubles: scratch the kernel did not write poisons results.
  const size_t ws_bytes = (pctx.workspace_bytes + 63) / 64 * 64;
  std::unique_ptr<void, decltype(&std::free)> workspace(
      ws_bytes > 0 ? std::aligned_alloc(64, ws_bytes) : nullptr, &std::free);
  if (ws_bytes > 0) std::memset(workspace.get(), 0xFF, ws_bytes);

  EvalContext ectx{node()};
  for (const Tensor& t : inputs_) ectx.inputs.push_back(t.defined() ? &t : nullptr);
  for (Tensor& t : outputs) ectx.outputs.push_back(&t);
  ectx.workspace = workspace.get();
  ectx.state = pctx.state.get();
  ectx.num_threads = num_threads;
  RETURN_IF_ERROR(kernel->eval(ectx));
  return outputs;
}

absl::StatusOr<std::vector<Tensor>> SingleOpGraph::RunReference() const {
  std::vector<const Tensor*> ins;
  for (const Tensor& t : inputs_) ins.push_back(t.defined() ? &t : nullptr);
  return reference::RunReference(node(), ins);
}

absl::Status CheckFloat64Accumulation(ir::OpKind op, const std::vector<Tensor>& inputs,
                                      const ir::Attributes& attrs,
                                      const std::vector<int>& constant_inputs) {
  ir::Attributes wide = attrs;
  wide.SetString(kAccumulateAttr, kAccumulateFloat64);
  ASSIGN_OR_RETURN(std::vector<Tensor> got,
                   SingleOpGraph(op, inputs, wide, constant_inputs).Run(2));
  std::vector<Tensor> doubles;
  for (const Tensor& t : inputs) doubles.push_back(ConvertedTensor(t, DType::kF64));
  ASSIGN_OR_RETURN(std::vector<Tensor> want,
                   SingleOpGraph(op, doubles, attrs, constant_inputs).Run(2));
  if (got.size() != want.size()) return absl::InternalError("output counts differ");
  for (size_t o = 0; o < got.size(); ++o) {
    if (got[o].dtype() != DType::kF32 || got[o].dims() != want[o].dims()) {
      return absl::InternalError(absl::StrCat("output ", o, " is ", DTypeName(got[o].dtype()),
                                              DimsToString(got[o].dims()), ", expected FP32",
                                              DimsToString(want[o].dims())));
    }
    for (int64_t i = 0; i < got[o].num_elements(); ++i) {
      const float rounded = static_cast<float>(want[o].data<double>()[i]);
      if (got[o].data<float>()[i] != rounded) {
        return absl::InternalError(absl::StrCat("output ", o, " element ", i, ": ",
                                                got[o].data<float>()[i],
                                                ", the float64 result "
                                                "rounded is ",
                                                rounded));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::kernels::testing
