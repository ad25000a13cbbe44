// Shape ops, for any dtype: Identity, Reshape and Flatten are views (the
// executor aliases the output to input 0 and never calls Eval, see
// KernelDef::aliases_input0); their Eval still copies when given separate
// buffers, so they also work unaliased. Concat copies whole contiguous blocks
// with memcpy, so it is dtype-agnostic too; inputs of several dtypes are
// promoted as torch.cat and torch.stack do (each converted while copied).
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/common/type_promotion.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

// ---------------------------------------------------------------- views

absl::Status PrepareIdentity(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

// PyTorch view semantics: one -1 is inferred, 0 is a literal empty dim.
// The shape is attribute `shape`, or input 1 (an int list computed at run
// time, e.g. from aten::size), whose value the executor supplies as a constant.
absl::Status PrepareReshape(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 2));
  Dims shape;
  if (HasInput(ctx, 1)) {
    const Tensor* value = ctx.inputs[1].constant;
    if (value == nullptr || value->dtype() != DType::kInt64 || value->rank() != 1) {
      return InvalidArg(ctx.node, "input 1 (shape) must be a known int list");
    }
    shape.assign(value->data<int64_t>(), value->data<int64_t>() + value->num_elements());
  } else {
    if (!ctx.node.attrs.Has("shape")) return InvalidArg(ctx.node, "missing attribute 'shape'");
    shape = ctx.node.attrs.GetInts("shape");
  }
  const int64_t total = NumElements(ctx.inputs[0].dims);
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) return InvalidArg(ctx.node, "only one dimension can be inferred");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return InvalidArg(ctx.node, "invalid shape dimension ", shape[i]);
    } else {
      known *= shape[i];
    }
  }
  auto bad = [&] {
    return InvalidArg(ctx.node, "shape '[", absl::StrJoin(shape, ", "),
                      "]' is invalid for input of size ", total);
  };
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return bad();
    shape[infer] = total / known;
  } else if (known != total) {
    return bad();
  }
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, shape}};
  return absl::OkStatus();
}

absl::Status PrepareFlatten(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(int64_t start, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("start_dim", 0),
                                                rank, "start_dim"));
  ASSIGN_OR_RETURN(int64_t end,
                   NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("end_dim", -1), rank, "end_dim"));
  if (start > end) {
    return InvalidArg(ctx.node, "start_dim ", start, " comes after end_dim ", end);
  }
  Dims out;
  if (rank == 0) {
    out = {1};  // flattening a scalar gives a 1-element vector, as in PyTorch
  } else {
    out.assign(x.begin(), x.begin() + start);
    out.push_back(NumElements(Dims(x.begin() + start, x.begin() + end + 1)));
    out.insert(out.end(), x.begin() + end + 1, x.end());
  }
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, out}};
  return absl::OkStatus();
}

absl::Status EvalView(EvalContext& ctx) {
  const Tensor& in = *ctx.inputs[0];
  Tensor& out = *ctx.outputs[0];
  if (out.raw_data() != in.raw_data() && in.byte_size() > 0) {
    std::memcpy(out.raw_data(), in.raw_data(), in.byte_size());
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Concat

struct ConcatPlan {
  int64_t outer = 0;                 // product of the dims before the axis
  std::vector<int64_t> block_elems;  // per input: elements per outer index (0 for skipped)
  std::vector<DType> in_dtype;       // per input
  int64_t out_block_elems = 0;
  DType out_dtype = DType::kUnknown;
};

absl::Status PrepareConcat(PrepareContext& ctx) {
  if (ctx.inputs.empty()) return InvalidArg(ctx.node, "expected at least 1 input");
  // The result dtype: the inputs' promoted together, as tensors (torch.cat).
  DType dtype = ctx.inputs[0].dtype;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.inputs[i].present) return InvalidArg(ctx.node, "input ", i, " is absent");
    if (DTypeSize(ctx.inputs[i].dtype) == 0) {
      return InvalidArg(ctx.node, "input ", i, " dtype is unknown");
    }
    dtype = PromoteTypes(dtype, ctx.inputs[i].dtype);
  }
  if (DTypeSize(dtype) == 0) return InvalidArg(ctx.node, "the inputs' dtypes do not promote");
  std::vector<Dims> dims;
  for (const TensorInfo& in : ctx.inputs) dims.push_back(in.dims);
  if (ctx.node.attrs.GetInt("stack", 0) != 0) {
    // torch.stack of a list known only at run time: the same bytes as a
    // concat of the inputs, each seen with a size-1 dim inserted at the axis.
    const int64_t rank = static_cast<int64_t>(dims[0].size());
    ASSIGN_OR_RETURN(int64_t axis,
                     NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0), rank + 1));
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] != ctx.inputs[0].dims) {
        return InvalidArg(ctx.node, "stack expects equal shapes, got ",
                          DimsToString(ctx.inputs[0].dims), " and ", DimsToString(dims[i]),
                          " (input ", i, ")");
      }
      dims[i].insert(dims[i].begin() + axis, 1);
    }
  }
  // Like torch.cat, skip legacy empty 1-D tensors ([0]) among inputs of another rank.
  const Dims* ref = nullptr;
  for (const Dims& d : dims) {
    if (!(d.size() == 1 && d[0] == 0)) {
      ref = &d;
      break;
    }
  }
  if (ref == nullptr) ref = &dims[0];  // all inputs are [0]
  const int64_t rank = static_cast<int64_t>(ref->size());
  if (rank == 0) return InvalidArg(ctx.node, "zero-dimensional tensors cannot be concatenated");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0), rank));
  Dims out = *ref;
  out[axis] = 0;
  auto plan = std::make_shared<ConcatPlan>();
  plan->out_dtype = dtype;
  const int64_t inner = NumElements(Dims(ref->begin() + axis + 1, ref->end()));
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Dims& d = dims[i];
    plan->in_dtype.push_back(ctx.inputs[i].dtype);
    if (d.size() == 1 && d[0] == 0 && rank != 1) {
      plan->block_elems.push_back(0);
      continue;
    }
    bool match = static_cast<int64_t>(d.size()) == rank;
    for (int64_t k = 0; match && k < rank; ++k) match = k == axis || d[k] == (*ref)[k];
    if (!match) {
      return InvalidArg(ctx.node, "input ", i, " ", DimsToString(d), " does not match ",
                        DimsToString(*ref), " outside axis ", axis);
    }
    out[axis] += d[axis];
    plan->block_elems.push_back(d[axis] * inner);
  }
  plan->outer = NumElements(Dims(ref->begin(), ref->begin() + axis));
  plan->out_block_elems = out[axis] * inner;
  ctx.outputs = {TensorInfo{dtype, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

absl::Status EvalConcat(EvalContext& ctx) {
  const ConcatPlan& p = StateAs<ConcatPlan>(ctx);
  char* out = static_cast<char*>(ctx.outputs[0]->raw_data());
  const int64_t out_elem = static_cast<int64_t>(DTypeSize(p.out_dtype));
  int64_t offset = 0;  // elements into each outer block of the output
  for (size_t i = 0; i < p.block_elems.size(); ++i) {
    const int64_t n = p.block_elems[i];
    if (n == 0) continue;
    const char* in = static_cast<const char*>(ctx.inputs[i]->raw_data());
    const int64_t in_elem = static_cast<int64_t>(DTypeSize(p.in_dtype[i]));
    for (int64_t o = 0; o < p.outer; ++o) {
      char* dst = out + (o * p.out_block_elems + offset) * out_elem;
      const char* src = in + o * n * in_elem;
      if (p.in_dtype[i] == p.out_dtype) {
        std::memcpy(dst, src, n * out_elem);
      } else {
        ConvertElements(src, p.in_dtype[i], dst, p.out_dtype, n);
      }
    }
    offset += n;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- more views (op coverage)

// squeeze(): drops every size-1 dim; squeeze(dim): drops `axes` that have size 1.
absl::Status PrepareSqueeze(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<bool> drop(rank, false);
  if (!ctx.node.attrs.Has("axes")) {
    for (int64_t i = 0; i < rank; ++i) drop[i] = x[i] == 1;
  } else {
    for (int64_t a : ctx.node.attrs.GetInts("axes")) {
      ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, a, rank));
      if (rank > 0) drop[axis] = x[axis] == 1;  // a dim that is not 1 stays, as in PyTorch
    }
  }
  Dims out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!drop[i]) out.push_back(x[i]);
  }
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, out}};
  return absl::OkStatus();
}

// unsqueeze(dim): dim counts in the output's rank (-1 appends).
absl::Status PrepareUnsqueeze(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  Dims out = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(out.size()) + 1;
  const int64_t a = ctx.node.attrs.GetInt("axis", 0);
  if (a < -rank || a >= rank) {
    return InvalidArg(ctx.node, "axis ", a, " is out of range for a ", rank, "-D output");
  }
  out.insert(out.begin() + (a < 0 ? a + rank : a), 1);
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, out}};
  return absl::OkStatus();
}

// unflatten(dim, sizes): dim `axis` becomes `sizes` (one -1 inferred).
absl::Status PrepareUnflatten(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 1));
  const Dims& x = ctx.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx.node, ctx.node.attrs.GetInt("axis", 0), rank));
  Dims sizes = ctx.node.attrs.GetInts("sizes");
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return InvalidArg(ctx.node, "invalid sizes [", absl::StrJoin(sizes, ", "), "]");
    } else {
      known *= sizes[i];
    }
  }
  const int64_t n = rank == 0 ? 1 : x[axis];
  if (infer >= 0 && known > 0 && n % known == 0) sizes[infer] = n / known;
  if (NumElements(sizes) != n || sizes.empty()) {
    return InvalidArg(ctx.node, "sizes [", absl::StrJoin(ctx.node.attrs.GetInts("sizes"), ", "),
                      "] do not multiply to dim ", axis, " of size ", n);
  }
  Dims out(x.begin(), x.begin() + axis);
  out.insert(out.end(), sizes.begin(), sizes.end());
  if (rank > 0) out.insert(out.end(), x.begin() + axis + 1, x.end());
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, out}};
  return absl::OkStatus();
}

// view_as(other): the dims of input 1, same element count.
absl::Status PrepareReshapeLike(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  const Dims& want = ctx.inputs[1].dims;
  if (NumElements(want) != NumElements(ctx.inputs[0].dims)) {
    return InvalidArg(ctx.node, "cannot view ", DimsToString(ctx.inputs[0].dims), " as ",
                      DimsToString(want));
  }
  ctx.outputs = {TensorInfo{ctx.inputs[0].dtype, want}};
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> ShapeKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kIdentity, DType::kUnknown, PrepareIdentity, EvalView,
       /*aliases_input0=*/true},
      {ir::OpKind::kReshape, DType::kUnknown, PrepareReshape, EvalView, /*aliases_input0=*/true},
      {ir::OpKind::kFlatten, DType::kUnknown, PrepareFlatten, EvalView, /*aliases_input0=*/true},
      {ir::OpKind::kConcat, DType::kUnknown, PrepareConcat, EvalConcat},
      {ir::OpKind::kSqueeze, DType::kUnknown, PrepareSqueeze, EvalView, /*aliases_input0=*/true},
      {ir::OpKind::kUnsqueeze, DType::kUnknown, PrepareUnsqueeze, EvalView,
       /*aliases_input0=*/true},
      {ir::OpKind::kUnflatten, DType::kUnknown, PrepareUnflatten, EvalView,
       /*aliases_input0=*/true},
      {ir::OpKind::kReshapeLike, DType::kUnknown, PrepareReshapeLike, EvalView,
       /*aliases_input0=*/true},
  };
  return kKernels;
}

}  // namespace kiln::kernels
