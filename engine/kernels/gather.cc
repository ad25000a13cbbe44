// Indexing with index tensors, for any data dtype (indices INT64 or INT32;
// negative indices count from the end; an index out of range fails the
// request, as PyTorch raises):
//
//   IndexSelect  x, index, attr axis: x.shape[:axis] + index.shape +
//                x.shape[axis+1:] (index_select, embedding, and x[idx] with a
//                single index tensor). Each index copies one contiguous block.
//   Gather       torch.gather: out[..., i, ...] = x[..., index[..., i, ...], ...].
//   Index        numpy advanced indexing (aten::index): one optional index
//                tensor per leading dim; the present ones broadcast to a shape
//                B, which replaces the indexed dims where they are adjacent and
//                leads the output otherwise. Eval resolves B's input offsets
//                into the workspace, then copies with an odometer over the
//                output.
// Boolean mask indices select a data-dependent number of elements, which a
// plan with fixed shapes cannot express; they are rejected in Prepare.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {
namespace {

absl::Status CheckIndexDType(const PrepareContext& ctx, size_t i) {
  const DType t = ctx.inputs[i].dtype;
  if (t == DType::kBool || t == DType::kUInt8) {
    return Unimplemented(ctx.node, "boolean mask indices (input ", i,
                         ") select a data-dependent number of elements");
  }
  if (t != DType::kInt64 && t != DType::kInt32) {
    return InvalidArg(ctx.node, "input ", i, " (indices) has dtype ", DTypeName(t),
                      ", expected INT64 or INT32");
  }
  return absl::OkStatus();
}

absl::Status CheckDataDType(const PrepareContext& ctx) {
  const size_t elem = DTypeSize(ctx.inputs[0].dtype);
  if (elem == 0 || elem > 8) {
    return InvalidArg(ctx.node, "input dtype ", DTypeName(ctx.inputs[0].dtype), " is not supported");
  }
  return absl::OkStatus();
}

// Index `k` of an INT64/INT32 index tensor, wrapped into [0, n); -1 when out of range.
inline int64_t ReadIndex(const Tensor& index, int64_t k, int64_t n) {
  int64_t i = index.dtype() == DType::kInt64 ? index.data<int64_t>()[k] : index.data<int32_t>()[k];
  if (i < 0) i += n;
  return (i < 0 || i >= n) ? -1 : i;
}

absl::Status OutOfRange(const EvalContext& ctx, const Tensor& index, int64_t k, int64_t n) {
  const int64_t i = index.dtype() == DType::kInt64 ? index.data<int64_t>()[k]
                                                    : index.data<int32_t>()[k];
  return InvalidArg(ctx.node, "index ", i, " is out of bounds for dim of size ", n);
}

// Rank limit of Gather's and Index's loops (odometers on the stack).
constexpr int kMaxIndexRank = 16;

// ---------------------------------------------------------------- IndexSelect

struct IndexSelectPlan {
  int64_t outer = 1, n = 0, inner = 1;
  size_t elem = 4;
};

absl::Status PrepareIndexSelect(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  RETURN_IF_ERROR(CheckDataDType(ctx));
  RETURN_IF_ERROR(CheckIndexDType(ctx, 1));
  const Dims& x = ctx.inputs[0].dims;
  const Dims& idx = ctx.inputs[1].dims;
  if (x.empty()) return InvalidArg(ctx.node, "cannot index a 0-D tensor");
  const int64_t rank = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0), rank));
  auto p = std::make_shared<IndexSelectPlan>();
  p->outer = NumElements(Dims(x.begin(), x.begin() + axis));
  p->n = x[axis];
  p->inner = NumElements(Dims(x.begin() + axis + 1, x.end()));
  p->elem = DTypeSize(ctx.inputs[0].dtype);
  Dims out(x.begin(), x.begin() + axis);
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

absl::Status EvalIndexSelect(EvalContext& ctx) {
  const IndexSelectPlan& p = StateAs<IndexSelectPlan>(ctx);
  const Tensor& index = *ctx.inputs[1];
  const int64_t k = index.num_elements();
  for (int64_t j = 0; j < k; ++j) {
    if (ReadIndex(index, j, p.n) < 0) return OutOfRange(ctx, index, j, p.n);
  }
  const char* src = static_cast<const char*>(ctx.inputs[0]->raw_data());
  char* dst = static_cast<char*>(ctx.outputs[0]->raw_data());
  const int64_t block = p.inner * static_cast<int64_t>(p.elem);
  ParallelFor(p.outer * k, ctx.num_threads, p.outer * k * p.inner, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / k, j = t % k;
      const int64_t i = ReadIndex(index, j, p.n);
      std::memcpy(dst + t * block, src + (o * p.n + i) * block, block);
    }
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Gather

struct GatherIndexPlan {
  Dims out;                    // = index dims
  std::vector<int64_t> x_strides;
  int64_t axis = 0, n = 0;
  size_t elem = 4;
};

absl::Status PrepareGather(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  RETURN_IF_ERROR(CheckDataDType(ctx));
  RETURN_IF_ERROR(CheckIndexDType(ctx, 1));
  const Dims& x = ctx.inputs[0].dims;
  const Dims& idx = ctx.inputs[1].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (static_cast<int64_t>(idx.size()) != rank && !(rank == 0 && idx.size() <= 1)) {
    return InvalidArg(ctx.node, "index ", DimsToString(idx), " must have the rank of input ",
                      DimsToString(x));
  }
  if (rank > kMaxIndexRank) return Unimplemented(ctx.node, "more than ", kMaxIndexRank, " dims");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0), rank));
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis && idx[d] > x[d]) {
      return InvalidArg(ctx.node, "index ", DimsToString(idx), " is larger than input ",
                        DimsToString(x), " in dim ", d);
    }
  }
  auto p = std::make_shared<GatherIndexPlan>();
  p->out = idx;
  p->x_strides = RowMajorStrides(x);
  p->axis = axis;
  p->n = rank == 0 ? 1 : x[axis];
  p->elem = DTypeSize(ctx.inputs[0].dtype);
  if (rank == 0) p->x_strides = {0};
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, idx}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

absl::Status EvalGatherIndex(EvalContext& ctx) {
  const GatherIndexPlan& p = StateAs<GatherIndexPlan>(ctx);
  const Tensor& index = *ctx.inputs[1];
  const int64_t total = index.num_elements();
  for (int64_t j = 0; j < total; ++j) {
    if (ReadIndex(index, j, p.n) < 0) return OutOfRange(ctx, index, j, p.n);
  }
  const char* src = static_cast<const char*>(ctx.inputs[0]->raw_data());
  char* dst = static_cast<char*>(ctx.outputs[0]->raw_data());
  const int64_t rank = static_cast<int64_t>(p.out.size());
  int64_t idx[kMaxIndexRank] = {};
  for (int64_t j = 0; j < total; ++j) {
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d) {
      offset += (d == p.axis ? ReadIndex(index, j, p.n) : idx[d]) * p.x_strides[d];
    }
    std::memcpy(dst + j * p.elem, src + offset * p.elem, p.elem);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < p.out[d]) break;
      idx[d] = 0;
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Index

struct IndexPlan {
  // Output loop dims, outermost first; the one with `is_b` walks B (its
  // offsets come from the workspace), the others are affine input dims.
  struct LoopDim {
    int64_t size = 1, stride = 0;
    bool is_b = false;
  };
  std::vector<LoopDim> loops;
  Dims b_dims;
  // Per indexed input dim: its input index, size, stride and the index
  // tensor's broadcast strides over B.
  struct Indexed {
    size_t input = 0;
    int64_t dim = 0, n = 0, stride = 0;
    std::vector<int64_t> b_strides;
  };
  std::vector<Indexed> indexed;
  size_t elem = 4;
};

absl::Status PrepareIndex(PrepareContext& ctx) {
  if (ctx.inputs.empty()) return InvalidArg(ctx.node, "expected at least 1 input");
  RETURN_IF_ERROR(CheckDataDType(ctx));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t slots = static_cast<int64_t>(ctx.inputs.size()) - 1;
  if (slots > rank) {
    return InvalidArg(ctx.node, "too many indices (", slots, ") for a ", rank, "-D input");
  }
  auto p = std::make_shared<IndexPlan>();
  p->elem = DTypeSize(ctx.inputs[0].dtype);
  const std::vector<int64_t> strides = RowMajorStrides(x);
  std::vector<const Dims*> shapes;
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < slots; ++d) {
    if (!HasInput(ctx, d + 1)) continue;
    RETURN_IF_ERROR(CheckIndexDType(ctx, d + 1));
    shapes.push_back(&ctx.inputs[d + 1].dims);
    if (first < 0) first = d;
    last = d;
  }
  if (shapes.empty()) {
    return InvalidArg(ctx.node, "expected at least one index tensor");
  }
  ASSIGN_OR_RETURN(p->b_dims, BroadcastDims(ctx.node, shapes));
  const int64_t b_size = NumElements(p->b_dims);
  bool adjacent = true;
  for (int64_t d = first; d <= last; ++d) adjacent = adjacent && HasInput(ctx, d + 1);
  for (int64_t d = first; d <= last; ++d) {
    if (!HasInput(ctx, d + 1)) continue;
    IndexPlan::Indexed ix;
    ix.input = static_cast<size_t>(d + 1);
    ix.dim = d;
    ix.n = x[d];
    ix.stride = strides[d];
    // Broadcast strides of this index tensor over B, right-aligned.
    const Dims& id = ctx.inputs[d + 1].dims;
    const std::vector<int64_t> is = RowMajorStrides(id);
    ix.b_strides.assign(p->b_dims.size(), 0);
    for (size_t k = 0; k < id.size(); ++k) {
      const size_t bd = p->b_dims.size() - id.size() + k;
      ix.b_strides[bd] = id[k] == 1 ? 0 : is[k];
    }
    p->indexed.push_back(std::move(ix));
  }
  Dims out;
  auto add_input_dim = [&](int64_t d) {
    p->loops.push_back({x[d], strides[d], false});
    out.push_back(x[d]);
  };
  auto add_b = [&] {
    p->loops.push_back({b_size, 0, true});
    out.insert(out.end(), p->b_dims.begin(), p->b_dims.end());
  };
  if (adjacent) {
    for (int64_t d = 0; d < first; ++d) add_input_dim(d);
    add_b();
    for (int64_t d = last + 1; d < rank; ++d) add_input_dim(d);
  } else {
    add_b();
    for (int64_t d = 0; d < rank; ++d) {
      if (d >= slots || !HasInput(ctx, d + 1)) add_input_dim(d);
    }
  }
  if (p->loops.size() > static_cast<size_t>(kMaxIndexRank) ||
      p->b_dims.size() > static_cast<size_t>(kMaxIndexRank)) {
    return Unimplemented(ctx.node, "more than ", kMaxIndexRank, " output dims");
  }
  ctx.workspace_bytes = static_cast<size_t>(b_size) * sizeof(int64_t);
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

absl::Status EvalIndex(EvalContext& ctx) {
  const IndexPlan& p = StateAs<IndexPlan>(ctx);
  // Input offset of every element of B.
  int64_t* b_offsets = static_cast<int64_t*>(ctx.workspace);
  const int64_t b_size = NumElements(p.b_dims);
  const int64_t b_rank = static_cast<int64_t>(p.b_dims.size());
  {
    int64_t bi[kMaxIndexRank] = {};
    for (int64_t j = 0; j < b_size; ++j) {
      int64_t offset = 0;
      for (const IndexPlan::Indexed& ix : p.indexed) {
        int64_t k = 0;
        for (int64_t d = 0; d < b_rank; ++d) k += bi[d] * ix.b_strides[d];
        const Tensor& index = *ctx.inputs[ix.input];
        const int64_t i = ReadIndex(index, k, ix.n);
        if (i < 0) return OutOfRange(ctx, index, k, ix.n);
        offset += i * ix.stride;
      }
      b_offsets[j] = offset;
      for (int64_t d = b_rank - 1; d >= 0; --d) {
        if (++bi[d] < p.b_dims[d]) break;
        bi[d] = 0;
      }
    }
  }
  const char* src = static_cast<const char*>(ctx.inputs[0]->raw_data());
  char* dst = static_cast<char*>(ctx.outputs[0]->raw_data());
  const int64_t total = ctx.outputs[0]->num_elements();
  const int rank = static_cast<int>(p.loops.size());
  int64_t idx[kMaxIndexRank] = {};
  for (int64_t j = 0; j < total; ++j) {
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d) {
      offset += p.loops[d].is_b ? b_offsets[idx[d]] : idx[d] * p.loops[d].stride;
    }
    std::memcpy(dst + j * p.elem, src + offset * p.elem, p.elem);
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < p.loops[d].size) break;
      idx[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> IndexingKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kIndexSelect, DType::kUnknown, PrepareIndexSelect, EvalIndexSelect},
      {ir::OpKind::kGather, DType::kUnknown, PrepareGather, EvalGatherIndex},
      {ir::OpKind::kIndex, DType::kUnknown, PrepareIndex, EvalIndex},
  };
  return kKernels;
}

}  // namespace kiln::kernels
