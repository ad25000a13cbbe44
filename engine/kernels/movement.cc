// Data movement for any dtype: Permute, Expand, Tile, Slice, Select, Chunk,
// Flip, Roll, Pad (constant, reflect, replicate, circular), PixelShuffle,
// SliceScatter (the base copied, then a slice overwritten), Tril and Triu.
//
// All but Tril/Triu are table gathers (movement.h): Prepare describes, for
// every output dim, which input index each output index reads and at which
// input stride, and simplifies that description once (size-1 dims dropped,
// contiguous dims merged). Eval walks the output rows with an odometer, in
// parallel, and copies each innermost row with memcpy when it is contiguous
// in the input, a strided loop when it is affine, or a table lookup otherwise
// (Roll, Tile, the reflected edges of Pad). Elements are copied as raw 1, 2, 4
// or 8 byte words, so every kernel here works for every dtype.
#include "engine/kernels/movement.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>

#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {

// ---------------------------------------------------------------- the gather engine

// Loop dims after simplification; Finish rejects plans with more.
constexpr size_t kMaxGatherRank = 32;

void SimplifyGatherPlan(GatherPlan& plan) {
  std::vector<GatherDim> kept;
  for (GatherDim& d : plan.dims) {
    if (d.size == 1) {
      // A size-1 dim contributes a fixed offset (or padding, kept as a table).
      const int64_t idx = d.affine ? d.start : d.table[0];
      if (idx >= 0) {
        plan.base += idx * d.stride;
        continue;
      }
    }
    if (!kept.empty() && kept.back().affine && d.affine &&
        kept.back().stride * kept.back().step == d.stride * d.step * d.size) {
      // The outer dim steps exactly one inner block: merge into the inner one.
      GatherDim& o = kept.back();
      const int64_t offset = o.start * o.stride + d.start * d.stride;
      d.size *= o.size;
      d.start = 0;
      d.stride *= d.step;
      d.step = 1;
      plan.base += offset;
      kept.back() = d;
      continue;
    }
    if (d.affine && d.start != 0) {
      plan.base += d.start * d.stride;
      d.start = 0;
    }
    kept.push_back(std::move(d));
  }
  plan.dims = std::move(kept);
}

namespace {

template <typename W>
void CopyRow(const GatherDim& d, const W* src, W* dst, W pad) {
  if (d.affine) {
    const int64_t s = d.stride * d.step;
    if (s == 1) {
      std::memcpy(dst, src, d.size * sizeof(W));
    } else if (s == 0) {
      std::fill(dst, dst + d.size, *src);
    } else {
      for (int64_t i = 0; i < d.size; ++i) dst[i] = src[i * s];
    }
    return;
  }
  const int64_t* t = d.table.data();
  for (int64_t i = 0; i < d.size; ++i) dst[i] = t[i] < 0 ? pad : src[t[i] * d.stride];
}

template <typename W>
void RunGatherTyped(const GatherPlan& plan, const W* src, W* dst, int num_threads) {
  W pad;
  std::memcpy(&pad, &plan.pad_bits, sizeof(W));
  if (plan.dims.empty()) {
    *dst = src[plan.base];
    return;
  }
  const int last = static_cast<int>(plan.dims.size()) - 1;
  const GatherDim& inner = plan.dims[last];
  int64_t rows = 1;
  for (int d = 0; d < last; ++d) rows *= plan.dims[d].size;
  if (rows * inner.size == 0) return;
  auto input_index = [](const GatherDim& d, int64_t i) {
    return d.affine ? d.start + i * d.step : d.table[i];
  };
  ParallelFor(rows, num_threads, rows * inner.size, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxGatherRank] = {};
    int64_t rest = begin;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = rest % plan.dims[d].size;
      rest /= plan.dims[d].size;
    }
    for (int64_t r = begin; r < end; ++r) {
      int64_t offset = plan.base;
      bool padded = false;
      for (int d = 0; d < last; ++d) {
        const int64_t in = input_index(plan.dims[d], idx[d]);
        if (in < 0 && !plan.dims[d].affine)
          padded = true;  // affine indices go negative when flipped
        offset += in * plan.dims[d].stride;
      }
      W* out = dst + r * inner.size;
      if (padded) {
        std::fill(out, out + inner.size, pad);
      } else {
        CopyRow<W>(inner, src + offset, out, pad);
      }
      for (int d = last - 1; d >= 0; --d) {
        if (++idx[d] < plan.dims[d].size) break;
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

void RunGather(const GatherPlan& plan, const void* src, void* dst, int num_threads) {
  DispatchByElemSize(plan.elem_size, [&](auto w) {
    using W = decltype(w);
    RunGatherTyped(plan, static_cast<const W*>(src), static_cast<W*>(dst), num_threads);
  });
}

namespace {

template <typename W>
void RunScatterTyped(const GatherPlan& plan, const W* src, W* dst, int num_threads) {
  if (plan.dims.empty()) {
    dst[plan.base] = *src;
    return;
  }
  const int last = static_cast<int>(plan.dims.size()) - 1;
  const GatherDim& inner = plan.dims[last];
  int64_t rows = 1;
  for (int d = 0; d < last; ++d) rows *= plan.dims[d].size;
  if (rows * inner.size == 0) return;
  const int64_t s = inner.stride * inner.step;
  ParallelFor(rows, num_threads, rows * inner.size, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxGatherRank] = {};
    int64_t rest = begin;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = rest % plan.dims[d].size;
      rest /= plan.dims[d].size;
    }
    for (int64_t r = begin; r < end; ++r) {
      int64_t offset = plan.base + inner.start * inner.stride;
      for (int d = 0; d < last; ++d) {
        const GatherDim& g = plan.dims[d];
        offset += (g.start + idx[d] * g.step) * g.stride;
      }
      const W* in = src + r * inner.size;
      W* out = dst + offset;
      if (s == 1) {
        std::memcpy(out, in, inner.size * sizeof(W));
      } else {
        for (int64_t i = 0; i < inner.size; ++i) out[i * s] = in[i];
      }
      for (int d = last - 1; d >= 0; --d) {
        if (++idx[d] < plan.dims[d].size) break;
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

void RunScatter(const GatherPlan& plan, const void* src, void* dst, int num_threads) {
  DispatchByElemSize(plan.elem_size, [&](auto w) {
    using W = decltype(w);
    RunScatterTyped(plan, static_cast<const W*>(src), static_cast<W*>(dst), num_threads);
  });
}

GatherPlan MakePermutePlan(const Dims& dims, const std::vector<int64_t>& perm, size_t elem_size) {
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  GatherPlan plan;
  plan.elem_size = elem_size;
  for (int64_t p : perm) plan.dims.push_back(GatherDim{dims[p], strides[p]});
  SimplifyGatherPlan(plan);
  return plan;
}

namespace {

// ---------------------------------------------------------------- shared Prepare parts

// Output dims of a plan (before simplification) as the node's output.
Dims PlanDims(const GatherPlan& plan) {
  Dims out;
  for (const GatherDim& d : plan.dims) out.push_back(d.size);
  return out;
}

// Identity plan over the input: one affine dim per input dim.
GatherPlan IdentityPlan(const PrepareContext& ctx) {
  const Dims& x = ctx.inputs[0].dims;
  const std::vector<int64_t> strides = RowMajorStrides(x);
  GatherPlan plan;
  plan.elem_size = DTypeSize(ctx.inputs[0].dtype);
  for (size_t i = 0; i < x.size(); ++i) plan.dims.push_back(GatherDim{x[i], strides[i]});
  return plan;
}

absl::Status CheckKnownDType(const PrepareContext& ctx) {
  if (DTypeSize(ctx.inputs[0].dtype) == 0 || DTypeSize(ctx.inputs[0].dtype) > 8) {
    return InvalidArg(ctx.node, "input dtype ", DTypeName(ctx.inputs[0].dtype),
                      " is not supported");
  }
  return absl::OkStatus();
}

// Simplifies `plan`, sets the output to `out_dims` and stores the plan.
absl::Status Finish(PrepareContext& ctx, GatherPlan plan, Dims out_dims) {
  SimplifyGatherPlan(plan);
  if (plan.dims.size() > kMaxGatherRank) {
    return Unimplemented(ctx.node, "needs more than ", kMaxGatherRank, " loop dims");
  }
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, std::move(out_dims)}};
  ctx.state = std::make_shared<GatherPlan>(std::move(plan));
  return absl::OkStatus();
}

absl::Status EvalGather(EvalContext& ctx) {
  if (ctx.outputs[0]->num_elements() == 0) return absl::OkStatus();
  RunGather(StateAs<GatherPlan>(ctx), ctx.inputs[0]->raw_data(), ctx.outputs[0]->raw_data(),
            ctx.num_threads);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Permute

absl::Status PreparePermute(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  const ir::Attributes& attrs = ctx.node.attrs;
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  if (attrs.Has("perm")) {
    std::vector<int64_t> given = attrs.GetInts("perm");
    if (static_cast<int64_t>(given.size()) != rank) {
      return InvalidArg(ctx.node, "perm [", absl::StrJoin(given, ", "), "] does not match the ",
                        rank, "-D input ", DimsToString(x));
    }
    std::vector<bool> seen(rank, false);
    for (int64_t k = 0; k < rank; ++k) {
      ASSIGN_OR_RETURN(perm[k], NormalizeAxis(ctx.node, given[k], rank, "perm entry"));
      if (seen[perm[k]]) return InvalidArg(ctx.node, "perm repeats dim ", perm[k]);
      seen[perm[k]] = true;
    }
  } else if (attrs.Has("dim0")) {
    // transpose(dim0, dim1); t() of a 0-D or 1-D tensor is the identity.
    if (!(attrs.GetBool("identity_below_rank2") && rank < 2)) {
      ASSIGN_OR_RETURN(int64_t d0, NormalizeAxis(ctx.node, attrs.GetInt("dim0"), rank, "dim0"));
      ASSIGN_OR_RETURN(int64_t d1, NormalizeAxis(ctx.node, attrs.GetInt("dim1"), rank, "dim1"));
      if (rank > 0) std::swap(perm[d0], perm[d1]);
    }
  } else if (attrs.Has("source")) {
    // movedim(source, destination): the moved dims land at their destinations,
    // the others keep their order in the remaining slots.
    const std::vector<int64_t> src = attrs.GetInts("source");
    const std::vector<int64_t> dst = attrs.GetInts("destination");
    if (src.size() != dst.size()) {
      return InvalidArg(ctx.node, "source and destination have different lengths");
    }
    std::vector<int64_t> order(rank, -1);
    std::vector<bool> moved(rank, false);
    for (size_t k = 0; k < src.size(); ++k) {
      ASSIGN_OR_RETURN(int64_t s, NormalizeAxis(ctx.node, src[k], rank, "source"));
      ASSIGN_OR_RETURN(int64_t d, NormalizeAxis(ctx.node, dst[k], rank, "destination"));
      if (moved[s] || order[d] >= 0) return InvalidArg(ctx.node, "repeated dim in movedim");
      order[d] = s;
      moved[s] = true;
    }
    int64_t next = 0;
    for (int64_t k = 0; k < rank; ++k) {
      if (order[k] >= 0) continue;
      while (moved[next]) ++next;
      order[k] = next++;
    }
    perm = order;
  } else {
    return InvalidArg(ctx.node, "missing attribute 'perm'");
  }
  const std::vector<int64_t> strides = RowMajorStrides(x);
  GatherPlan plan;
  plan.elem_size = DTypeSize(ctx.inputs[0].dtype);
  Dims out;
  for (int64_t p : perm) {
    plan.dims.push_back(GatherDim{x[p], strides[p]});
    out.push_back(x[p]);
  }
  return Finish(ctx, std::move(plan), out);
}

// ---------------------------------------------------------------- Expand, Tile

absl::Status PrepareExpand(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 2));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  const Dims& x = ctx.inputs[0].dims;
  Dims shape;
  if (HasInput(ctx, 1) && ctx.node.attrs.GetBool("like")) {
    shape = ctx.inputs[1].dims;  // expand_as
  } else if (HasInput(ctx, 1)) {
    // A shape computed at run time (an int list the executor knows at Prepare).
    const Tensor* value = ctx.inputs[1].constant;
    if (value == nullptr || value->dtype() != DType::kInt64 || value->rank() != 1) {
      return InvalidArg(ctx.node, "input 1 (shape) must be a known int list");
    }
    shape.assign(value->data<int64_t>(), value->data<int64_t>() + value->num_elements());
  } else if (ctx.node.attrs.Has("shape")) {
    shape = ctx.node.attrs.GetInts("shape");
  } else {
    return InvalidArg(ctx.node, "missing attribute 'shape'");
  }
  if (shape.size() < x.size()) {
    return InvalidArg(ctx.node, "cannot expand ", DimsToString(x), " to fewer dims ",
                      DimsToString(shape));
  }
  const size_t lead = shape.size() - x.size();
  const std::vector<int64_t> strides = RowMajorStrides(x);
  GatherPlan plan;
  plan.elem_size = DTypeSize(ctx.inputs[0].dtype);
  Dims out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) return InvalidArg(ctx.node, "new leading dim ", i, " cannot be -1");
      out[i] = shape[i];
      plan.dims.push_back(GatherDim{out[i], 0});
      continue;
    }
    const int64_t in = x[i - lead];
    if (shape[i] == -1 || shape[i] == in) {
      out[i] = in;
      plan.dims.push_back(GatherDim{in, strides[i - lead]});
    } else if (in == 1) {
      out[i] = shape[i];
      plan.dims.push_back(GatherDim{out[i], 0});
    } else {
      return InvalidArg(ctx.node, "cannot expand ", DimsToString(x), " to ", DimsToString(shape),
                        ": dim ", i, " is ", in, ", not 1");
    }
  }
  return Finish(ctx, std::move(plan), out);
}

absl::Status PrepareTile(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  Dims x = ctx.inputs[0].dims;
  std::vector<int64_t> repeats = ctx.node.attrs.GetInts("repeats");
  if (ctx.node.attrs.GetBool("pad_repeats") && repeats.size() < x.size()) {
    repeats.insert(repeats.begin(), x.size() - repeats.size(), 1);  // torch.tile
  }
  if (repeats.size() < x.size()) {
    return InvalidArg(ctx.node, "repeats has ", repeats.size(), " values, fewer than the ",
                      x.size(), " dims of the input");
  }
  x.insert(x.begin(), repeats.size() - x.size(), 1);
  const std::vector<int64_t> strides = RowMajorStrides(x);
  // out [r0 * d0, r1 * d1, ...] as the dense view [r0, d0, r1, d1, ...]: the
  // repeat dims read with stride 0.
  GatherPlan plan;
  plan.elem_size = DTypeSize(ctx.inputs[0].dtype);
  Dims out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (repeats[i] < 0) return InvalidArg(ctx.node, "negative repeat ", repeats[i]);
    plan.dims.push_back(GatherDim{repeats[i], 0});
    plan.dims.push_back(GatherDim{x[i], strides[i]});
    out.push_back(repeats[i] * x[i]);
  }
  return Finish(ctx, std::move(plan), out);
}

// repeat_interleave with one count: out[..., i * r + k, ...] = x[..., i, ...],
// the dense view [..., d, r, ...] whose repeat dim reads with stride 0.
absl::Status PrepareRepeatInterleave(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t repeats = ctx.node.attrs.GetInt("repeats", 1);
  if (repeats < 0) return InvalidArg(ctx.node, "negative repeats ", repeats);
  if (x.empty()) return InvalidArg(ctx.node, "cannot repeat the elements of a 0-D tensor along a dim");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0),
                                               static_cast<int64_t>(x.size())));
  const std::vector<int64_t> strides = RowMajorStrides(x);
  GatherPlan plan;
  plan.elem_size = DTypeSize(ctx.inputs[0].dtype);
  Dims out = x;
  for (size_t i = 0; i < x.size(); ++i) {
    plan.dims.push_back(GatherDim{x[i], strides[i]});
    if (static_cast<int64_t>(i) == axis) plan.dims.push_back(GatherDim{repeats, 0});
  }
  out[axis] = x[axis] * repeats;
  return Finish(ctx, std::move(plan), out);
}

// ---------------------------------------------------------------- Slice, Select, Chunk

absl::Status PrepareSlice(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 3));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  const ir::Attributes& attrs = ctx.node.attrs;
  GatherPlan plan = IdentityPlan(ctx);
  const int64_t rank = static_cast<int64_t>(plan.dims.size());
  if (rank == 0) return InvalidArg(ctx.node, "cannot slice a 0-D tensor");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, attrs.GetInt("axis", 0), rank));
  GatherDim& d = plan.dims[axis];
  const int64_t n = d.size;
  const int64_t step = attrs.GetInt("step", 1);
  if (step < 1) return InvalidArg(ctx.node, "slice step must be positive, got ", step);
  ASSIGN_OR_RETURN(int64_t start, IntAttrOrInput(ctx, "start", 1, 0));
  int64_t end;
  if (attrs.Has("length")) {
    // narrow(dim, start, length): start may count from the end, and the range must fit.
    const int64_t length = attrs.GetInt("length");
    if (start < -n || start > n) {
      return InvalidArg(ctx.node, "start ", start, " is out of range for dim of size ", n);
    }
    if (start < 0) start += n;
    if (length < 0 || start + length > n) {
      return InvalidArg(ctx.node, "start ", start, " + length ", length, " exceeds dim size ", n);
    }
    end = start + length;
  } else {
    // Python slicing: negative bounds count from the end, then clamp to [0, n].
    ASSIGN_OR_RETURN(end, IntAttrOrInput(ctx, "end", 2, std::numeric_limits<int64_t>::max()));
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, start, n);
  }
  d.start = start;
  d.step = step;
  d.size = (end - start + step - 1) / step;
  Dims out = PlanDims(plan);
  return Finish(ctx, std::move(plan), out);
}

absl::Status PrepareSelect(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  GatherPlan plan = IdentityPlan(ctx);
  const int64_t rank = static_cast<int64_t>(plan.dims.size());
  if (rank == 0) return InvalidArg(ctx.node, "select() cannot be applied to a 0-D tensor");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0), rank));
  const int64_t n = plan.dims[axis].size;
  int64_t index = ctx.node.attrs.GetInt("index", 0);
  if (index < -n || index >= n) {
    return InvalidArg(ctx.node, "index ", index, " is out of range for dim ", axis, " of size ", n);
  }
  if (index < 0) index += n;
  plan.base += index * plan.dims[axis].stride;
  plan.dims.erase(plan.dims.begin() + axis);
  Dims out = PlanDims(plan);
  return Finish(ctx, std::move(plan), out);
}

absl::Status PrepareChunk(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  GatherPlan plan = IdentityPlan(ctx);
  const int64_t rank = static_cast<int64_t>(plan.dims.size());
  if (rank == 0) return InvalidArg(ctx.node, "cannot chunk a 0-D tensor");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0), rank));
  const int64_t chunks = ctx.node.attrs.GetInt("chunks", 1);
  const int64_t index = ctx.node.attrs.GetInt("index", 0);
  if (chunks < 1) return InvalidArg(ctx.node, "chunks must be positive, got ", chunks);
  GatherDim& d = plan.dims[axis];
  const int64_t n = d.size;
  // torch.chunk: pieces of ceil(n / chunks), the last one shorter, fewer pieces if they run out.
  const int64_t size = std::max<int64_t>((n + chunks - 1) / chunks, 1);
  const int64_t pieces = n == 0 ? 1 : (n + size - 1) / size;
  if (index < 0 || index >= pieces) {
    return InvalidArg(ctx.node, "chunk ", index, " does not exist: dim ", axis, " of size ", n,
                      " splits into ", pieces, " chunks of ", size);
  }
  d.start = index * size;
  d.size = std::min(size, n - d.start);
  Dims out = PlanDims(plan);
  return Finish(ctx, std::move(plan), out);
}

// ---------------------------------------------------------------- SliceScatter

// The slice (or selected sub-tensor) of `dims` that attrs describe, as an
// affine plan over a dense tensor of `dims`; InvalidArgument when out of range.
absl::StatusOr<GatherPlan> SlicePlan(const PrepareContext& ctx, const Dims& dims, size_t elem) {
  const ir::Attributes& attrs = ctx.node.attrs;
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  GatherPlan plan;
  plan.elem_size = elem;
  for (size_t i = 0; i < dims.size(); ++i) plan.dims.push_back(GatherDim{dims[i], strides[i]});
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank == 0) return InvalidArg(ctx.node, "cannot slice a 0-D tensor");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, attrs.GetInt("axis", 0), rank));
  GatherDim& d = plan.dims[axis];
  const int64_t n = d.size;
  if (attrs.Has("index")) {
    int64_t index = attrs.GetInt("index");
    if (index < -n || index >= n) {
      return InvalidArg(ctx.node, "index ", index, " is out of range for dim of size ", n);
    }
    if (index < 0) index += n;
    plan.base += index * d.stride;
    plan.dims.erase(plan.dims.begin() + axis);
    return plan;
  }
  const int64_t step = attrs.GetInt("step", 1);
  if (step < 1) return InvalidArg(ctx.node, "slice step must be positive, got ", step);
  int64_t start = attrs.GetInt("start", 0);
  int64_t end = attrs.GetInt("end", std::numeric_limits<int64_t>::max());
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  d.start = start;
  d.step = step;
  d.size = (end - start + step - 1) / step;
  return plan;
}

struct ScatterPlan {
  GatherPlan plan;  // the slice of the output that src fills (not simplified: affine dims)
  size_t bytes = 0;
};

absl::Status PrepareSliceScatter(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  RETURN_IF_ERROR(CheckDType(ctx, 1, ctx.inputs[0].dtype));
  const Dims& base = ctx.inputs[0].dims;
  auto p = std::make_shared<ScatterPlan>();
  if (base.size() > kMaxGatherRank) return Unimplemented(ctx.node, "too many dims");
  ASSIGN_OR_RETURN(p->plan, SlicePlan(ctx, base, DTypeSize(ctx.inputs[0].dtype)));
  if (PlanDims(p->plan) != ctx.inputs[1].dims) {
    return InvalidArg(ctx.node, "src ", DimsToString(ctx.inputs[1].dims),
                      " does not match the slice ", DimsToString(PlanDims(p->plan)), " of ",
                      DimsToString(base));
  }
  p->bytes = static_cast<size_t>(NumElements(base)) * p->plan.elem_size;
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, base}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

absl::Status EvalSliceScatter(EvalContext& ctx) {
  const ScatterPlan& p = StateAs<ScatterPlan>(ctx);
  void* out = ctx.outputs[0]->raw_data();
  if (out != ctx.inputs[0]->raw_data() && p.bytes > 0) {
    std::memcpy(out, ctx.inputs[0]->raw_data(), p.bytes);
  }
  if (ctx.inputs[1]->num_elements() > 0) {
    RunScatter(p.plan, ctx.inputs[1]->raw_data(), out, ctx.num_threads);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Flip, Roll

absl::Status PrepareFlip(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  GatherPlan plan = IdentityPlan(ctx);
  const int64_t rank = static_cast<int64_t>(plan.dims.size());
  for (int64_t a : ctx.node.attrs.GetInts("axes")) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, a, rank));
    GatherDim& d = plan.dims[axis];
    if (d.step < 0) return InvalidArg(ctx.node, "axis ", a, " appears more than once");
    d.start = d.size - 1;
    d.step = -1;
  }
  Dims out = ctx.inputs[0].dims;
  return Finish(ctx, std::move(plan), out);
}

absl::Status PrepareRoll(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  const std::vector<int64_t> shifts = ctx.node.attrs.GetInts("shifts");
  std::vector<int64_t> axes = ctx.node.attrs.GetInts("axes");
  GatherPlan plan;
  if (axes.empty()) {
    // Roll of the flattened tensor: one dim of all elements.
    if (shifts.size() != 1) return InvalidArg(ctx.node, "expected one shift without axes");
    plan.elem_size = DTypeSize(ctx.inputs[0].dtype);
    plan.dims.push_back(GatherDim{NumElements(ctx.inputs[0].dims), 1});
    axes = {0};
  } else {
    plan = IdentityPlan(ctx);
    if (shifts.size() != axes.size()) {
      return InvalidArg(ctx.node, "shifts and axes have different lengths");
    }
  }
  const int64_t rank = static_cast<int64_t>(plan.dims.size());
  for (size_t k = 0; k < axes.size(); ++k) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, axes[k], rank));
    GatherDim& d = plan.dims[axis];
    if (d.size == 0) continue;
    const int64_t shift = ((shifts[k] % d.size) + d.size) % d.size;
    std::vector<int64_t> table = d.affine ? std::vector<int64_t>(d.size) : d.table;
    for (int64_t i = 0; i < d.size; ++i) {
      const int64_t src = (i - shift + d.size) % d.size;
      table[i] = d.affine ? src : d.table[src];
    }
    d.table = std::move(table);
    d.affine = false;
  }
  Dims out = ctx.inputs[0].dims;
  return Finish(ctx, std::move(plan), out);
}

// ---------------------------------------------------------------- Pad

absl::Status PreparePad(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 2));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  ASSIGN_OR_RETURN(const std::vector<int64_t> pads, IntsAttrOrInput(ctx, "pads", 1));
  const std::string mode = ctx.node.attrs.GetString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular") {
    return InvalidArg(ctx.node, "unknown padding mode '", mode, "'");
  }
  GatherPlan plan = IdentityPlan(ctx);
  const size_t rank = plan.dims.size();
  if (pads.size() % 2 != 0 || pads.size() / 2 > rank) {
    return InvalidArg(ctx.node, "pads [", absl::StrJoin(pads, ", "), "] do not fit the ", rank,
                      "-D input");
  }
  // Pad value in the input's dtype, converted as libtorch's fill_ converts it:
  // a fractional value truncated toward zero for an integer tensor (1.5 pads
  // an INT64 tensor with 1), any nonzero value true for a BOOL one.
  Tensor value = Tensor::Zeros(DType::kF64, {});
  double v = ctx.node.attrs.GetFloat("value", 0.0);
  if (ctx.inputs[0].dtype == DType::kBool) {
    v = v != 0.0 ? 1.0 : 0.0;
  } else if (IsIntegral(ctx.inputs[0].dtype) && std::isfinite(v)) {
    v = std::trunc(v);
  }
  *value.data<double>() = v;
  ASSIGN_OR_RETURN(Tensor pad, WeakScalarAs(ctx.node, value, ctx.inputs[0].dtype));
  std::memcpy(&plan.pad_bits, pad.raw_data(), plan.elem_size);
  Dims out = ctx.inputs[0].dims;
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    GatherDim& d = plan.dims[rank - 1 - k];
    const int64_t n = d.size, before = pads[2 * k], after = pads[2 * k + 1];
    const int64_t size = n + before + after;
    if (size < 0 || (mode != "constant" && (before < 0 || after < 0))) {
      return InvalidArg(ctx.node, "padding (", before, ", ", after, ") is invalid for dim of size ",
                        n);
    }
    if (mode == "reflect" && (before >= n || after >= n)) {
      return InvalidArg(ctx.node, "reflect padding (", before, ", ", after,
                        ") must be smaller than the dim size ", n);
    }
    if ((mode == "circular" && (before > n || after > n)) || (mode != "constant" && n == 0)) {
      return InvalidArg(ctx.node, mode, " padding (", before, ", ", after,
                        ") does not fit dim of size ", n);
    }
    std::vector<int64_t> table(size);
    for (int64_t o = 0; o < size; ++o) {
      int64_t i = o - before;
      if (mode == "constant") {
        if (i < 0 || i >= n) i = -1;
      } else if (mode == "reflect") {
        if (i < 0) i = -i;
        if (i >= n) i = 2 * (n - 1) - i;
      } else if (mode == "replicate") {
        i = std::clamp<int64_t>(i, 0, n - 1);
      } else {
        i = ((i % n) + n) % n;
      }
      table[o] = i;
    }
    d.size = size;
    d.affine = false;
    d.table = std::move(table);
    out[rank - 1 - k] = size;
  }
  return Finish(ctx, std::move(plan), out);
}

// ---------------------------------------------------------------- PixelShuffle

// pixel_shuffle: [.., C*r*r, H, W] -> [.., C, H*r, W*r], out[c, h*r+i, w*r+j] =
// in[c*r*r + i*r + j, h, w]; the inverse (pixel_unshuffle) goes back.
absl::Status PreparePixelShuffle(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t r = ctx.node.attrs.GetInt("factor", 1);
  const bool inverse = ctx.node.attrs.GetBool("inverse", false);
  if (x.size() < 3 || r < 1) {
    return InvalidArg(ctx.node,
                      "expected an input with at least 3 dims and a positive factor, got ",
                      DimsToString(x), " and ", r);
  }
  const size_t lead = x.size() - 3;
  const int64_t c = x[lead], h = x[lead + 1], w = x[lead + 2];
  const int64_t batch = NumElements(Dims(x.begin(), x.begin() + lead));
  GatherPlan plan;
  plan.elem_size = DTypeSize(ctx.inputs[0].dtype);
  Dims out(x.begin(), x.begin() + lead);
  if (!inverse) {
    if (c % (r * r) != 0) {
      return InvalidArg(ctx.node, "channels ", c, " are not divisible by factor^2 = ", r * r);
    }
    const int64_t oc = c / (r * r);
    // Output viewed as [batch, oc, h, r, w, r]; input strides of [batch, oc, r, r, h, w].
    plan.dims = {GatherDim{batch, c * h * w},
                 GatherDim{oc, r * r * h * w},
                 GatherDim{h, w},
                 GatherDim{r, r * h * w},
                 GatherDim{w, 1},
                 GatherDim{r, h * w}};
    out.insert(out.end(), {oc, h * r, w * r});
  } else {
    if (h % r != 0 || w % r != 0) {
      return InvalidArg(ctx.node, "spatial dims ", h, "x", w, " are not divisible by ", r);
    }
    const int64_t oh = h / r, ow = w / r;
    // Output viewed as [batch, c, r, r, oh, ow]; input strides of [batch, c, oh, r, ow, r].
    plan.dims = {GatherDim{batch, c * h * w}, GatherDim{c, h * w}, GatherDim{r, w}, GatherDim{r, 1},
                 GatherDim{oh, r * w},        GatherDim{ow, r}};
    out.insert(out.end(), {c * r * r, oh, ow});
  }
  return Finish(ctx, std::move(plan), out);
}

// ---------------------------------------------------------------- Tril, Triu

struct TrianglePlan {
  int64_t batch = 0, rows = 0, cols = 0, diagonal = 0;
  size_t elem = 4;
};

absl::Status PrepareTriangle(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  RETURN_IF_ERROR(CheckKnownDType(ctx));
  const Dims& x = ctx.inputs[0].dims;
  if (x.size() < 2) return InvalidArg(ctx.node, "expected at least 2 dims, got ", DimsToString(x));
  auto p = std::make_shared<TrianglePlan>();
  p->rows = x[x.size() - 2];
  p->cols = x[x.size() - 1];
  p->batch = NumElements(Dims(x.begin(), x.end() - 2));
  p->diagonal = ctx.node.attrs.GetInt("diagonal", 0);
  p->elem = DTypeSize(ctx.inputs[0].dtype);
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, x}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// Tril keeps j <= i + diagonal; Triu keeps j >= i + diagonal; the rest is zero.
template <bool kLower>
absl::Status EvalTriangle(EvalContext& ctx) {
  const TrianglePlan& p = StateAs<TrianglePlan>(ctx);
  const char* src = static_cast<const char*>(ctx.inputs[0]->raw_data());
  char* dst = static_cast<char*>(ctx.outputs[0]->raw_data());
  const int64_t row_bytes = p.cols * static_cast<int64_t>(p.elem);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t i = 0; i < p.rows; ++i) {
      const int64_t off = (b * p.rows + i) * row_bytes;
      // Kept columns [lo, hi).
      const int64_t lo = kLower ? 0 : std::clamp<int64_t>(i + p.diagonal, 0, p.cols);
      const int64_t hi = kLower ? std::clamp<int64_t>(i + p.diagonal + 1, 0, p.cols) : p.cols;
      std::memset(dst + off, 0, row_bytes);
      if (hi > lo) {
        std::memcpy(dst + off + lo * p.elem, src + off + lo * p.elem, (hi - lo) * p.elem);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> MovementKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kPermute, DType::kUnknown, PreparePermute, EvalGather},
      {ir::OpKind::kExpand, DType::kUnknown, PrepareExpand, EvalGather},
      {ir::OpKind::kTile, DType::kUnknown, PrepareTile, EvalGather},
      {ir::OpKind::kRepeatInterleave, DType::kUnknown, PrepareRepeatInterleave, EvalGather},
      {ir::OpKind::kSlice, DType::kUnknown, PrepareSlice, EvalGather},
      {ir::OpKind::kSelect, DType::kUnknown, PrepareSelect, EvalGather},
      {ir::OpKind::kChunk, DType::kUnknown, PrepareChunk, EvalGather},
      {ir::OpKind::kFlip, DType::kUnknown, PrepareFlip, EvalGather},
      {ir::OpKind::kRoll, DType::kUnknown, PrepareRoll, EvalGather},
      {ir::OpKind::kPad, DType::kUnknown, PreparePad, EvalGather},
      {ir::OpKind::kPixelShuffle, DType::kUnknown, PreparePixelShuffle, EvalGather},
      {ir::OpKind::kSliceScatter, DType::kUnknown, PrepareSliceScatter, EvalSliceScatter},
      {ir::OpKind::kTril, DType::kUnknown, PrepareTriangle, EvalTriangle</*kLower=*/true>},
      {ir::OpKind::kTriu, DType::kUnknown, PrepareTriangle, EvalTriangle</*kLower=*/false>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
