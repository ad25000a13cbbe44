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
//   IndexPut     self[indices] = values (index_put, accumulate: +=): Index's
//                indices, or one boolean mask, whose positions Eval finds.
//   Scatter      torch.scatter / scatter_add / scatter_reduce: self copied,
//                then out[..., index[p], ...] (at `axis`) takes src[p] for each
//                position p of index, in order, replaced or reduced (sum, prod,
//                mean, amax, amin; include_self=false: a position's old value
//                takes no part). Indices must be in [0, size), as PyTorch checks.
//   NonZero      the indices of x's non-zero elements, [n, rank] INT64 in
//                row-major order (torch.nonzero); n is known only when it runs
//                (PrepareContext::dynamic_outputs), so the nodes that read it
//                run as dynamic steps. With a second input and attr axis it is
//                the boolean mask of x[mask] (the importer turns a mask index
//                into NonZero's columns, PyTorch's own definition), and checks
//                the mask's dims against the dims it indexes as PyTorch does.
//   IndexMask    x[mask] and x[:, mask] (one boolean mask, the other indices
//                None): x.shape[:axis] + [n] + x.shape[axis + mask rank:], the
//                elements where the mask is true in row-major order; n is known
//                only when it runs. Each selected position copies one
//                contiguous block of the trailing dims.
// The index kernels take integer indices only; a boolean mask reaches them as
// NonZero's columns (or, for IndexPut, whose output has self's shape whatever
// the mask holds, as the mask itself).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
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

absl::Status PrepareIndexMask(PrepareContext& ctx);
absl::Status EvalIndexMask(EvalContext& ctx);

// x[index] from aten::index (attr bool_index_is_mask): a BOOL or UINT8 index
// is a mask, as PyTorch reads it there (index_select and embedding refuse one).
bool MaskIndex(const ir::Node& node, DType index) {
  return (index == DType::kBool || index == DType::kUInt8) &&
         node.attrs.GetBool("bool_index_is_mask", false);
}

absl::Status PrepareIndexSelect(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  if (MaskIndex(ctx.node, ctx.inputs[1].dtype)) return PrepareIndexMask(ctx);
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
  if (MaskIndex(ctx.node, ctx.inputs[1]->dtype())) return EvalIndexMask(ctx);
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

// The plan of x[indices] for the index tensors at inputs base, base + 1, ...
// (one per leading dim of input 0; absent: take all), and its output dims.
absl::Status BuildIndexPlan(const PrepareContext& ctx, size_t base, IndexPlan* p, Dims* out_dims) {
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t slots = static_cast<int64_t>(ctx.inputs.size()) - static_cast<int64_t>(base);
  if (slots > rank) {
    return InvalidArg(ctx.node, "too many indices (", slots, ") for a ", rank, "-D input");
  }
  p->elem = DTypeSize(ctx.inputs[0].dtype);
  const std::vector<int64_t> strides = RowMajorStrides(x);
  std::vector<const Dims*> shapes;
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < slots; ++d) {
    if (!HasInput(ctx, d + base)) continue;
    RETURN_IF_ERROR(CheckIndexDType(ctx, d + base));
    shapes.push_back(&ctx.inputs[d + base].dims);
    if (first < 0) first = d;
    last = d;
  }
  if (shapes.empty()) {
    return InvalidArg(ctx.node, "expected at least one index tensor");
  }
  ASSIGN_OR_RETURN(p->b_dims, BroadcastDims(ctx.node, shapes));
  const int64_t b_size = NumElements(p->b_dims);
  bool adjacent = true;
  for (int64_t d = first; d <= last; ++d) adjacent = adjacent && HasInput(ctx, d + base);
  for (int64_t d = first; d <= last; ++d) {
    if (!HasInput(ctx, d + base)) continue;
    IndexPlan::Indexed ix;
    ix.input = static_cast<size_t>(d) + base;
    ix.dim = d;
    ix.n = x[d];
    ix.stride = strides[d];
    // Broadcast strides of this index tensor over B, right-aligned.
    const Dims& id = ctx.inputs[d + base].dims;
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
      if (d >= slots || !HasInput(ctx, d + base)) add_input_dim(d);
    }
  }
  if (p->loops.size() > static_cast<size_t>(kMaxIndexRank) ||
      p->b_dims.size() > static_cast<size_t>(kMaxIndexRank)) {
    return Unimplemented(ctx.node, "more than ", kMaxIndexRank, " output dims");
  }
  *out_dims = std::move(out);
  return absl::OkStatus();
}

absl::Status PrepareIndex(PrepareContext& ctx) {
  if (ctx.inputs.empty()) return InvalidArg(ctx.node, "expected at least 1 input");
  RETURN_IF_ERROR(CheckDataDType(ctx));
  auto p = std::make_shared<IndexPlan>();
  Dims out;
  RETURN_IF_ERROR(BuildIndexPlan(ctx, 1, p.get(), &out));
  ctx.workspace_bytes = static_cast<size_t>(NumElements(p->b_dims)) * sizeof(int64_t);
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// The input offset of every element of B, into b_offsets.
absl::Status ResolveIndexOffsets(const EvalContext& ctx, const IndexPlan& p, int64_t* b_offsets) {
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
  return absl::OkStatus();
}

// Calls fn(j, offset) for every element j of x[indices], row-major, with the
// offset in x it reads.
template <typename Fn>
void ForEachIndexed(const IndexPlan& p, const int64_t* b_offsets, Fn fn) {
  int64_t total = 1;
  for (const IndexPlan::LoopDim& l : p.loops) total *= l.size;
  const int rank = static_cast<int>(p.loops.size());
  int64_t idx[kMaxIndexRank] = {};
  for (int64_t j = 0; j < total; ++j) {
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d) {
      offset += p.loops[d].is_b ? b_offsets[idx[d]] : idx[d] * p.loops[d].stride;
    }
    fn(j, offset);
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < p.loops[d].size) break;
      idx[d] = 0;
    }
  }
}

absl::Status EvalIndex(EvalContext& ctx) {
  const IndexPlan& p = StateAs<IndexPlan>(ctx);
  int64_t* b_offsets = static_cast<int64_t*>(ctx.workspace);
  RETURN_IF_ERROR(ResolveIndexOffsets(ctx, p, b_offsets));
  const char* src = static_cast<const char*>(ctx.inputs[0]->raw_data());
  char* dst = static_cast<char*>(ctx.outputs[0]->raw_data());
  ForEachIndexed(p, b_offsets, [&](int64_t j, int64_t offset) {
    std::memcpy(dst + j * p.elem, src + offset * p.elem, p.elem);
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Scatter

enum class ScatterReduce { kNone, kSum, kProd, kMean, kAmax, kAmin };

struct ScatterPlan {
  Dims index;                       // the loop: index's dims
  std::vector<int64_t> out_strides;
  std::vector<int64_t> src_strides;  // all 0 for a 0-D src
  int64_t axis = 0, n = 0, out_elems = 0;
  ScatterReduce reduce = ScatterReduce::kNone;
  bool include_self = true;
  bool counts = false;  // the workspace holds a count per output element
};

absl::StatusOr<ScatterReduce> ParseScatterReduce(const ir::Node& node) {
  const std::string r = node.attrs.GetString("reduce", "none");
  if (r == "none") return ScatterReduce::kNone;
  if (r == "sum") return ScatterReduce::kSum;
  if (r == "prod") return ScatterReduce::kProd;
  if (r == "mean") return ScatterReduce::kMean;
  if (r == "amax") return ScatterReduce::kAmax;
  if (r == "amin") return ScatterReduce::kAmin;
  return InvalidArg(node, "unknown reduce \"", r, "\"");
}

absl::Status PrepareScatter(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 3, 3));
  RETURN_IF_ERROR(CheckIndexDType(ctx, 1));
  const DType t = ctx.inputs[0].dtype;
  if (ctx.inputs[2].dtype != t) {
    return InvalidArg(ctx.node, "src has dtype ", DTypeName(ctx.inputs[2].dtype), ", self ",
                      DTypeName(t));
  }
  const Dims& x = ctx.inputs[0].dims;
  const Dims& idx = ctx.inputs[1].dims;
  const Dims& src = ctx.inputs[2].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank > kMaxIndexRank) return Unimplemented(ctx.node, "more than ", kMaxIndexRank, " dims");
  const bool scalar_src = src.empty() && rank > 0;
  if (static_cast<int64_t>(idx.size()) != rank && !(rank == 0 && idx.size() <= 1)) {
    return InvalidArg(ctx.node, "index ", DimsToString(idx), " must have the rank of self ",
                      DimsToString(x));
  }
  if (!scalar_src && src.size() != idx.size()) {
    return InvalidArg(ctx.node, "src ", DimsToString(src), " must have the rank of index ",
                      DimsToString(idx));
  }
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0),
                                               std::max<int64_t>(rank, 1)));
  for (size_t d = 0; d < idx.size() && rank > 0; ++d) {
    if ((static_cast<int64_t>(d) != axis && idx[d] > x[d]) || (!scalar_src && idx[d] > src[d])) {
      return InvalidArg(ctx.node, "index ", DimsToString(idx), " is larger than self ",
                        DimsToString(x), " or src ", DimsToString(src), " in dim ", d);
    }
  }
  auto p = std::make_shared<ScatterPlan>();
  ASSIGN_OR_RETURN(p->reduce, ParseScatterReduce(ctx.node));
  if (t == DType::kBool && p->reduce != ScatterReduce::kNone) {
    return Unimplemented(ctx.node, "reducing into a BOOL tensor");
  }
  p->include_self = ctx.node.attrs.GetBool("include_self", true);
  p->index = idx;
  p->axis = axis;
  p->n = rank == 0 ? 1 : x[axis];
  p->out_strides = rank == 0 ? std::vector<int64_t>{0} : RowMajorStrides(x);
  p->src_strides = scalar_src ? std::vector<int64_t>(idx.size(), 0) : RowMajorStrides(src);
  if (p->src_strides.empty()) p->src_strides = {0};
  p->out_elems = NumElements(x);
  // The mean's counts, or which positions a scatter reached (include_self=false).
  p->counts = p->reduce == ScatterReduce::kMean || !p->include_self;
  if (p->counts) {
    ctx.workspace_bytes = static_cast<size_t>(p->out_elems) * sizeof(int64_t);
  }
  ctx.outputs = {TensorInfo{t, x}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

template <typename T>
T ScatterCombine(ScatterReduce r, T old, T v) {
  switch (r) {
    case ScatterReduce::kNone: return v;
    case ScatterReduce::kSum:
    case ScatterReduce::kMean: return static_cast<T>(old + v);
    case ScatterReduce::kProd: return static_cast<T>(old * v);
    case ScatterReduce::kAmax:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(old) || std::isnan(v)) return std::numeric_limits<T>::quiet_NaN();
      }
      return old > v ? old : v;
    case ScatterReduce::kAmin:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(old) || std::isnan(v)) return std::numeric_limits<T>::quiet_NaN();
      }
      return old < v ? old : v;
  }
  return v;
}

template <typename T>
absl::Status EvalScatter(EvalContext& ctx) {
  const ScatterPlan& p = StateAs<ScatterPlan>(ctx);
  const Tensor& index = *ctx.inputs[1];
  const int64_t total = index.num_elements();
  for (int64_t j = 0; j < total; ++j) {
    const int64_t i = index.dtype() == DType::kInt64 ? index.data<int64_t>()[j]
                                                     : index.data<int32_t>()[j];
    if (i < 0 || i >= p.n) return OutOfRange(ctx, index, j, p.n);
  }
  const T* self = ctx.inputs[0]->data<T>();
  const T* src = ctx.inputs[2]->data<T>();
  T* out = ctx.outputs[0]->data<T>();
  if (p.out_elems > 0) std::memcpy(out, self, p.out_elems * sizeof(T));
  // count[o]: the values reduced into o so far, self's own included (so 0:
  // none yet, with include_self=false).
  int64_t* count = p.counts ? static_cast<int64_t*>(ctx.workspace) : nullptr;
  if (count != nullptr) std::fill_n(count, p.out_elems, p.include_self ? 1 : 0);
  const int64_t rank = static_cast<int64_t>(p.index.size());
  int64_t pos[kMaxIndexRank] = {};
  for (int64_t j = 0; j < total; ++j) {
    int64_t o = 0, s = 0;
    for (int64_t d = 0; d < rank; ++d) {
      o += (d == p.axis ? ReadIndex(index, j, p.n) : pos[d]) * p.out_strides[d];
      s += pos[d] * p.src_strides[d];
    }
    const T v = src[s];
    if (count != nullptr && count[o] == 0) {
      out[o] = v;  // the first to reach o, its old value left out
    } else {
      out[o] = ScatterCombine(p.reduce, out[o], v);
    }
    if (count != nullptr) ++count[o];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < p.index[d]) break;
      pos[d] = 0;
    }
  }
  if (p.reduce == ScatterReduce::kMean) {
    for (int64_t o = 0; o < p.out_elems; ++o) {
      if (count[o] > 1) {
        if constexpr (std::is_floating_point_v<T>) {
          out[o] = out[o] / static_cast<T>(count[o]);
        } else {  // integer mean: floor division, as PyTorch's div_ with rounding "floor"
          const T c = static_cast<T>(count[o]);
          T q = static_cast<T>(out[o] / c);
          if ((out[o] % c != 0) && ((out[o] < 0) != (c < 0))) q = static_cast<T>(q - 1);
          out[o] = q;
        }
      }
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- IndexPut

// self[indices] = values (or += with accumulate): self, values, then one
// optional index per leading dim of self, as Index takes them. Integer
// indices use Index's plan; one boolean mask (over the dims it starts at)
// selects a number of elements only the run knows, so its positions are
// found in Eval. values broadcast to the shape self[indices] has.
struct IndexPutPlan {
  IndexPlan index;              // integer indices
  Dims x;                       // self's dims
  Dims values;                  // values' dims
  bool accumulate = false;
  bool mask = false;            // one boolean mask at input 2 + mask_dim
  int64_t mask_dim = 0, mask_rank = 0;
  // Integer indices: per element of self[indices] (row-major), its offset in
  // values, broadcast (a mask's count, and so these, only Eval knows).
  std::vector<int64_t> value_offsets;
};

// The offset into values of each element of r (row-major), values broadcast.
absl::StatusOr<std::vector<int64_t>> BroadcastOffsets(const ir::Node& node, const Dims& values,
                                                      const Dims& r) {
  if (values.size() > r.size() || r.size() > static_cast<size_t>(kMaxIndexRank)) {
    return InvalidArg(node, "values ", DimsToString(values), " do not broadcast to ",
                      DimsToString(r));
  }
  std::vector<int64_t> strides(r.size(), 0);
  const std::vector<int64_t> vs = RowMajorStrides(values);
  for (size_t k = 0; k < values.size(); ++k) {
    const size_t d = r.size() - values.size() + k;
    if (values[k] != 1 && values[k] != r[d]) {
      return InvalidArg(node, "values ", DimsToString(values), " do not broadcast to ",
                        DimsToString(r));
    }
    strides[d] = values[k] == 1 ? 0 : vs[k];
  }
  std::vector<int64_t> out(static_cast<size_t>(NumElements(r)));
  int64_t idx[kMaxIndexRank] = {};
  const int64_t rank = static_cast<int64_t>(r.size());
  for (size_t j = 0; j < out.size(); ++j) {
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d) o += idx[d] * strides[d];
    out[j] = o;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < r[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

absl::Status PrepareIndexPut(PrepareContext& ctx) {
  if (ctx.inputs.size() < 3) return InvalidArg(ctx.node, "expected self, values and an index");
  RETURN_IF_ERROR(CheckDataDType(ctx));
  const DType t = ctx.inputs[0].dtype;
  if (ctx.inputs[1].dtype != t) {
    return InvalidArg(ctx.node, "values have dtype ", DTypeName(ctx.inputs[1].dtype), ", self ",
                      DTypeName(t));
  }
  auto p = std::make_shared<IndexPutPlan>();
  p->x = ctx.inputs[0].dims;
  p->values = ctx.inputs[1].dims;
  p->accumulate = ctx.node.attrs.GetBool("accumulate", false);
  if (p->accumulate && t == DType::kBool) {
    return Unimplemented(ctx.node, "accumulating into a BOOL tensor");
  }
  int present = 0;
  for (size_t i = 2; i < ctx.inputs.size(); ++i) {
    if (!HasInput(ctx, i)) continue;
    ++present;
    const DType it = ctx.inputs[i].dtype;
    if (it == DType::kBool || it == DType::kUInt8) {
      p->mask = true;
      p->mask_dim = static_cast<int64_t>(i) - 2;
      p->mask_rank = static_cast<int64_t>(ctx.inputs[i].dims.size());
    }
  }
  Dims r;
  if (p->mask) {
    if (present != 1) {
      return Unimplemented(ctx.node, "a boolean mask beside other indices");
    }
    const Dims& m = ctx.inputs[2 + p->mask_dim].dims;
    if (p->mask_dim + p->mask_rank > static_cast<int64_t>(p->x.size()) ||
        !std::equal(m.begin(), m.end(), p->x.begin() + p->mask_dim)) {
      return InvalidArg(ctx.node, "mask ", DimsToString(m), " does not match self ",
                        DimsToString(p->x), " at dim ", p->mask_dim);
    }
    if (p->values.size() > p->x.size() - p->mask_rank + 1) {
      return InvalidArg(ctx.node, "values ", DimsToString(p->values), " have too many dims");
    }
  } else {
    RETURN_IF_ERROR(BuildIndexPlan(ctx, 2, &p->index, &r));
    ASSIGN_OR_RETURN(p->value_offsets, BroadcastOffsets(ctx.node, p->values, r));
    ctx.workspace_bytes = static_cast<size_t>(NumElements(p->index.b_dims)) * sizeof(int64_t);
  }
  ctx.outputs = {TensorInfo{t, p->x}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

template <typename T>
absl::Status EvalIndexPut(EvalContext& ctx) {
  const IndexPutPlan& p = StateAs<IndexPutPlan>(ctx);
  const T* self = ctx.inputs[0]->data<T>();
  const T* values = ctx.inputs[1]->data<T>();
  T* out = ctx.outputs[0]->data<T>();
  const int64_t n = NumElements(p.x);
  if (n > 0) std::memcpy(out, self, n * sizeof(T));
  auto put = [&](int64_t target, int64_t v) {
    if (p.accumulate) {
      out[target] = static_cast<T>(out[target] + values[v]);
    } else {
      out[target] = values[v];
    }
  };
  if (!p.mask) {
    int64_t* b_offsets = static_cast<int64_t*>(ctx.workspace);
    RETURN_IF_ERROR(ResolveIndexOffsets(ctx, p.index, b_offsets));
    ForEachIndexed(p.index, b_offsets,
                   [&](int64_t j, int64_t offset) { put(offset, p.value_offsets[j]); });
    return absl::OkStatus();
  }
  // One mask over dims [mask_dim, mask_dim + mask_rank): the selected
  // positions in order, then self[indices] is lead x count x rest.
  const Tensor& mask = *ctx.inputs[2 + p.mask_dim];
  const int64_t lead = NumElements(Dims(p.x.begin(), p.x.begin() + p.mask_dim));
  const int64_t span = mask.num_elements();
  const int64_t rest = NumElements(Dims(p.x.begin() + p.mask_dim + p.mask_rank, p.x.end()));
  std::vector<int64_t> chosen;
  for (int64_t m = 0; m < span; ++m) {
    const bool on = mask.dtype() == DType::kBool ? mask.data<bool>()[m] : mask.data<uint8_t>()[m] != 0;
    if (on) chosen.push_back(m);
  }
  Dims r(p.x.begin(), p.x.begin() + p.mask_dim);
  r.push_back(static_cast<int64_t>(chosen.size()));
  r.insert(r.end(), p.x.begin() + p.mask_dim + p.mask_rank, p.x.end());
  ASSIGN_OR_RETURN(std::vector<int64_t> v, BroadcastOffsets(ctx.node, p.values, r));
  int64_t j = 0;
  for (int64_t l = 0; l < lead; ++l) {
    for (int64_t m : chosen) {
      for (int64_t k = 0; k < rest; ++k) put((l * span + m) * rest + k, v[j++]);
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- NonZero

// The mask of x[..., mask] at dim attr axis: its dims must be the ones it
// indexes (PyTorch's message when not).
absl::Status CheckMaskDims(const ir::Node& node, const Dims& mask, const Dims& x) {
  const int64_t axis = node.attrs.GetInt("axis", 0);
  const int64_t r = static_cast<int64_t>(mask.size());
  if (axis < 0 || axis + r > static_cast<int64_t>(x.size())) {
    return InvalidArg(node, "too many indices for tensor of dimension ", x.size());
  }
  for (int64_t d = 0; d < r; ++d) {
    if (mask[d] != x[axis + d]) {
      return InvalidArg(node, "The shape of the mask ", DimsToString(mask), " at index ", d,
                        " does not match the shape of the indexed tensor ", DimsToString(x),
                        " at index ", axis + d);
    }
  }
  return absl::OkStatus();
}

absl::Status PrepareNonZero(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 2));
  if (HasInput(ctx, 1)) {
    RETURN_IF_ERROR(CheckMaskDims(ctx.node, ctx.inputs[0].dims, ctx.inputs[1].dims));
  }
  // Only Eval knows how many elements are non-zero.
  ctx.dynamic_outputs = true;
  ctx.outputs = {TensorInfo{DType::kInt64, {}}};
  return absl::OkStatus();
}

template <typename T>
void NonZeroFlags(const Tensor& x, std::vector<uint8_t>& flags) {
  const T* v = x.data<T>();
  for (int64_t i = 0; i < x.num_elements(); ++i) flags[i] = v[i] != T(0);
}

absl::Status EvalNonZero(EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const int64_t n = x.num_elements(), rank = x.rank();
  std::vector<uint8_t> flags(static_cast<size_t>(n));
  // Non-zero as PyTorch tests it: NaN is non-zero, -0.0 is zero.
  switch (x.dtype()) {
    case DType::kF32: NonZeroFlags<float>(x, flags); break;
    case DType::kF64: NonZeroFlags<double>(x, flags); break;
    case DType::kInt64: NonZeroFlags<int64_t>(x, flags); break;
    case DType::kInt32: NonZeroFlags<int32_t>(x, flags); break;
    case DType::kInt16: NonZeroFlags<int16_t>(x, flags); break;
    case DType::kInt8: NonZeroFlags<int8_t>(x, flags); break;
    case DType::kUInt8: NonZeroFlags<uint8_t>(x, flags); break;
    case DType::kBool: NonZeroFlags<bool>(x, flags); break;
    case DType::kF16:
    case DType::kBF16: {
      // Zero is +0 or -0: every bit but the sign clear.
      const uint16_t* v = x.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) flags[i] = (v[i] & 0x7fff) != 0;
      break;
    }
    default:
      return InvalidArg(ctx.node, "no NonZero for ", DTypeName(x.dtype()));
  }
  int64_t count = 0;
  for (uint8_t f : flags) count += f;
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DType::kInt64, {count, rank}, "nonzero indices"));
  int64_t* o = out.data<int64_t>();
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (flags[i]) o = std::copy(index.begin(), index.end(), o);
    for (int64_t d = rank - 1; d >= 0; --d) {  // the odometer over x's dims
      if (++index[d] < x.dims()[d]) break;
      index[d] = 0;
    }
  }
  *ctx.outputs[0] = std::move(out);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- IndexMask

absl::Status PrepareIndexMask(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  const Dims& x = ctx.inputs[0].dims;
  const Dims& mask = ctx.inputs[1].dims;
  const DType mt = ctx.inputs[1].dtype;
  if (mt != DType::kBool && mt != DType::kUInt8) {
    return InvalidArg(ctx.node, "the mask must be BOOL or UINT8, got ", DTypeName(mt));
  }
  RETURN_IF_ERROR(CheckMaskDims(ctx.node, mask, x));
  ctx.dynamic_outputs = true;
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, {}}};
  return absl::OkStatus();
}

absl::Status EvalIndexMask(EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& mask = *ctx.inputs[1];
  const int64_t axis = ctx.node.attrs.GetInt("axis", 0);
  const int64_t r = mask.rank();
  const Dims& xd = x.dims();
  const int64_t outer = NumElements(Dims(xd.begin(), xd.begin() + axis));
  const int64_t span = mask.num_elements();
  const int64_t inner = NumElements(Dims(xd.begin() + axis + r, xd.end()));
  const uint8_t* m = static_cast<const uint8_t*>(mask.raw_data());  // BOOL and UINT8: one byte
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < span; ++i) {
    if (m[i] != 0) picked.push_back(i);
  }
  Dims out(xd.begin(), xd.begin() + axis);
  out.push_back(static_cast<int64_t>(picked.size()));
  out.insert(out.end(), xd.begin() + axis + r, xd.end());
  ASSIGN_OR_RETURN(Tensor y, Tensor::Allocate(x.dtype(), out, "masked index"));
  const size_t block = static_cast<size_t>(inner) * DTypeSize(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.raw_data());
  uint8_t* dst = static_cast<uint8_t*>(y.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i : picked) {
      std::memcpy(dst, src + (o * span + i) * block, block);
      dst += block;
    }
  }
  *ctx.outputs[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> IndexingKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kIndexSelect, DType::kUnknown, PrepareIndexSelect, EvalIndexSelect},
      {ir::OpKind::kGather, DType::kUnknown, PrepareGather, EvalGatherIndex},
      {ir::OpKind::kIndex, DType::kUnknown, PrepareIndex, EvalIndex},
      {ir::OpKind::kNonZero, DType::kUnknown, PrepareNonZero, EvalNonZero},
      {ir::OpKind::kIndexMask, DType::kUnknown, PrepareIndexMask, EvalIndexMask},
      {ir::OpKind::kIndexPut, DType::kF32, PrepareIndexPut, EvalIndexPut<float>},
      {ir::OpKind::kIndexPut, DType::kF64, PrepareIndexPut, EvalIndexPut<double>},
      {ir::OpKind::kIndexPut, DType::kInt64, PrepareIndexPut, EvalIndexPut<int64_t>},
      {ir::OpKind::kIndexPut, DType::kInt32, PrepareIndexPut, EvalIndexPut<int32_t>},
      {ir::OpKind::kIndexPut, DType::kInt16, PrepareIndexPut, EvalIndexPut<int16_t>},
      {ir::OpKind::kIndexPut, DType::kInt8, PrepareIndexPut, EvalIndexPut<int8_t>},
      {ir::OpKind::kIndexPut, DType::kUInt8, PrepareIndexPut, EvalIndexPut<uint8_t>},
      {ir::OpKind::kIndexPut, DType::kBool, PrepareIndexPut, EvalIndexPut<bool>},
      {ir::OpKind::kScatter, DType::kF32, PrepareScatter, EvalScatter<float>},
      {ir::OpKind::kScatter, DType::kF64, PrepareScatter, EvalScatter<double>},
      {ir::OpKind::kScatter, DType::kInt64, PrepareScatter, EvalScatter<int64_t>},
      {ir::OpKind::kScatter, DType::kInt32, PrepareScatter, EvalScatter<int32_t>},
      {ir::OpKind::kScatter, DType::kInt16, PrepareScatter, EvalScatter<int16_t>},
      {ir::OpKind::kScatter, DType::kInt8, PrepareScatter, EvalScatter<int8_t>},
      {ir::OpKind::kScatter, DType::kUInt8, PrepareScatter, EvalScatter<uint8_t>},
      {ir::OpKind::kScatter, DType::kBool, PrepareScatter, EvalScatter<bool>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
