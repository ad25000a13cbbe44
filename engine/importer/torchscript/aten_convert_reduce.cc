// Converters for reductions (sum, prod, amax/amin, max/min in their three
// overloads, argmax/argmin, std/var, the norms, logsumexp, all/any), the
// cumulative ops, and sorting (topk, sort, argsort, kthvalue).
//
// Reductions take attr axes (empty: every dim) and keepdim; a dtype argument
// casts the input first (and an integer result back to it), as libtorch does. max.dim / min.dim
// become a ReduceMax/Min and an ArgMax/Min over the same axis: both pick the
// first extreme (or the first NaN), so values and indices agree.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/aten_op_table.h"

namespace kiln::importer {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

std::string Overload(const TorchNode& node) {
  const c10::FunctionSchema* schema = node.maybeSchema();
  return schema == nullptr ? std::string() : schema->overload_name();
}

// The index of the argument called `name` in the node's schema, or -1.
int ArgIndex(const TorchNode& node, const char* name) {
  const c10::FunctionSchema* schema = node.maybeSchema();
  if (schema == nullptr) return -1;
  for (size_t i = 0; i < schema->arguments().size(); ++i) {
    if (schema->arguments()[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

// The dtype= argument, absent when None.
absl::StatusOr<std::optional<DType>> DTypeArg(const TorchNode& node, ImportContext& ctx) {
  const int i = ArgIndex(node, "dtype");
  if (i < 0 || ctx.IsNone(node, i)) return std::optional<DType>();
  ASSIGN_OR_RETURN(int64_t v, ctx.ConstInt(node, i));
  ASSIGN_OR_RETURN(DType d, DTypeFromTorch(static_cast<c10::ScalarType>(v)));
  return std::optional<DType>(d);
}

ir::ValueId CastTo(const TorchNode& node, ImportContext& ctx, ir::ValueId x, DType d,
                   const char* suffix) {
  ir::Attributes attrs;
  attrs.SetString("dtype", DTypeName(d));
  return ctx.Emit(node, OpKind::kCast, {x}, std::move(attrs), suffix);
}

// `op` on x with dtype=: libtorch casts self to dtype first and answers in
// dtype (sum(int32, dtype=int32) is INT32, where Kiln's integer sums are INT64).
ConvertResult EmitWithDType(OpKind op, const TorchNode& node, ImportContext& ctx, ir::ValueId x,
                            ir::Attributes attrs) {
  ASSIGN_OR_RETURN(std::optional<DType> dtype, DTypeArg(node, ctx));
  if (!dtype) return One(ctx.Emit(node, op, {x}, std::move(attrs)));
  x = CastTo(node, ctx, x, *dtype, ".dtype");
  if (!IsIntegral(*dtype) && *dtype != DType::kBool) {
    return One(ctx.Emit(node, op, {x}, std::move(attrs)));
  }
  ir::ValueId y = ctx.Emit(node, op, {x}, std::move(attrs), ".wide");
  return One(CastTo(node, ctx, y, *dtype, ""));
}

// Reads dim (int, int list or None) at `dim_i` and keepdim at `keep_i` (either may be -1).
absl::StatusOr<ir::Attributes> AxesAttrs(const TorchNode& node, ImportContext& ctx, int dim_i,
                                         int keep_i) {
  ir::Attributes attrs;
  std::vector<int64_t> axes;
  if (dim_i >= 0 && !ctx.IsNone(node, dim_i)) {
    ASSIGN_OR_RETURN(axes, ctx.ConstInts(node, dim_i));
  }
  bool keepdim = false;
  if (keep_i >= 0 && static_cast<size_t>(keep_i) < node.inputs().size()) {
    ASSIGN_OR_RETURN(keepdim, ctx.ConstBool(node, keep_i));
  }
  attrs.SetInts("axes", axes);
  attrs.SetBool("keepdim", keepdim);
  return attrs;
}

}  // namespace

// sum / prod / amax / amin / logsumexp / all / any in their overloads:
// (self[, dtype]) over everything, or (self, dim, keepdim[, dtype]).
ConvertResult ConvertReduce(ir::OpKind op, const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::Attributes attrs,
                   AxesAttrs(node, ctx, ArgIndex(node, "dim"), ArgIndex(node, "keepdim")));
  if (op == OpKind::kProd && ArgIndex(node, "dim") >= 0 && attrs.GetInts("axes").size() > 1) {
    return ctx.InvalidArgument(node, "prod takes one dim");
  }
  return EmitWithDType(op, node, ctx, x, std::move(attrs));
}

// max / min: (self) -> the extreme of everything; (self, other) -> elementwise;
// (self, dim, keepdim) -> (values, indices).
ConvertResult ConvertMaxMin(const TorchNode& node, ImportContext& ctx) {
  const bool max = std::string(node.kind().toUnqualString()) == "max";
  if (node.inputs().size() == 2 && node.outputs().size() == 1) {
    return ConvertBinaryOp(max ? OpKind::kMaximum : OpKind::kMinimum, node, ctx);
  }
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  if (node.inputs().size() == 1) {
    return One(ctx.Emit(node, max ? OpKind::kReduceMax : OpKind::kReduceMin, {x}));
  }
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
  bool keepdim = false;
  if (node.inputs().size() > 2) {
    ASSIGN_OR_RETURN(keepdim, ctx.ConstBool(node, 2));
  }
  ir::Attributes values;
  values.SetInts("axes", {dim});
  values.SetBool("keepdim", keepdim);
  ir::Attributes indices;
  indices.SetInt("axis", dim);
  indices.SetBool("keepdim", keepdim);
  ir::ValueId v = ctx.Emit(node, max ? OpKind::kReduceMax : OpKind::kReduceMin, {x},
                           std::move(values));
  ir::ValueId i = ctx.Emit(node, max ? OpKind::kArgMax : OpKind::kArgMin, {x}, std::move(indices),
                           ".indices");
  return std::vector<ir::ValueId>{v, i};
}

// argmax / argmin(self, dim=None, keepdim=False).
ConvertResult ConvertArgMaxMin(ir::OpKind op, const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ir::Attributes attrs;
  if (node.inputs().size() > 1 && !ctx.IsNone(node, 1)) {
    ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
    attrs.SetInt("axis", dim);
  }
  if (node.inputs().size() > 2) {
    ASSIGN_OR_RETURN(bool keepdim, ctx.ConstBool(node, 2));
    attrs.SetBool("keepdim", keepdim);
  }
  return One(ctx.Emit(node, op, {x}, std::move(attrs)));
}

// std / var: (self, unbiased=True), (self, dim, unbiased, keepdim) or
// (self, dim, *, correction, keepdim).
ConvertResult ConvertVarStd(ir::OpKind op, const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::Attributes attrs,
                   AxesAttrs(node, ctx, ArgIndex(node, "dim"), ArgIndex(node, "keepdim")));
  double correction = 1.0;
  const int unbiased = ArgIndex(node, "unbiased");
  const int corr = ArgIndex(node, "correction");
  if (unbiased >= 0 && static_cast<size_t>(unbiased) < node.inputs().size()) {
    ASSIGN_OR_RETURN(bool u, ctx.ConstBool(node, unbiased));
    correction = u ? 1.0 : 0.0;
  } else if (corr >= 0 && !ctx.IsNone(node, corr)) {
    ASSIGN_OR_RETURN(correction, ctx.ConstDouble(node, corr));
  }
  attrs.SetFloat("correction", correction);
  return One(ctx.Emit(node, op, {x}, std::move(attrs)));
}

// norm(self, p=2[, dim, keepdim]), frobenius_norm(self[, dim, keepdim]),
// linalg_vector_norm(self, ord=2, dim=None, keepdim=False, dtype=None).
ConvertResult ConvertNorm(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::Attributes attrs,
                   AxesAttrs(node, ctx, ArgIndex(node, "dim"), ArgIndex(node, "keepdim")));
  double p = 2.0;
  const std::string kind = node.kind().toUnqualString();
  const int p_i = kind == "linalg_vector_norm" ? ArgIndex(node, "ord") : ArgIndex(node, "p");
  if (kind != "frobenius_norm" && p_i >= 0 && !ctx.IsNone(node, p_i)) {
    ASSIGN_OR_RETURN(p, ctx.ConstDouble(node, p_i));
  }
  attrs.SetFloat("p", p);
  return EmitWithDType(OpKind::kNorm, node, ctx, x, std::move(attrs));
}

// cumsum / cumprod(self, dim, *, dtype=None).
ConvertResult ConvertCumulative(ir::OpKind op, const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return EmitWithDType(op, node, ctx, x, std::move(attrs));
}

// topk(self, k, dim=-1, largest=True, sorted=True) -> (values, indices).
ConvertResult ConvertTopK(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t k, ctx.ConstInt(node, 1));
  ir::Attributes attrs;
  attrs.SetInt("k", k);
  if (node.inputs().size() > 2) {
    ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 2));
    attrs.SetInt("axis", dim);
  }
  if (node.inputs().size() > 3) {
    ASSIGN_OR_RETURN(bool largest, ctx.ConstBool(node, 3));
    attrs.SetBool("largest", largest);
  }
  ir::NodeId n = ctx.graph().AddNode(OpKind::kTopK, {x}, std::move(attrs),
                                     node.kind().toQualString(),
                                     {node.outputs()[0]->debugName(), node.outputs()[1]->debugName()});
  return ctx.graph().node(n).outputs;
}

// sort(self, dim=-1, descending=False) and sort.stable(self, *, stable, dim,
// descending) -> (values, indices); argsort takes the indices. Kiln's sort is
// always stable, which is one of the orders an unstable sort may return.
ConvertResult ConvertSort(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ir::Attributes attrs;
  const int dim_i = ArgIndex(node, "dim");
  const int desc_i = ArgIndex(node, "descending");
  if (dim_i >= 0 && static_cast<size_t>(dim_i) < node.inputs().size()) {
    ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, dim_i));
    attrs.SetInt("axis", dim);
  }
  if (desc_i >= 0 && static_cast<size_t>(desc_i) < node.inputs().size()) {
    ASSIGN_OR_RETURN(bool descending, ctx.ConstBool(node, desc_i));
    attrs.SetBool("descending", descending);
  }
  const std::string base = node.outputs()[0]->debugName();
  ir::NodeId n = ctx.graph().AddNode(OpKind::kSort, {x}, std::move(attrs),
                                     node.kind().toQualString(), {base + ".values", base});
  const std::vector<ir::ValueId>& outs = ctx.graph().node(n).outputs;
  if (std::string(node.kind().toUnqualString()) == "argsort") return One(outs[1]);
  return outs;
}

// kthvalue(self, k, dim=-1, keepdim=False) -> (values, indices): the k-th
// smallest, from a TopK of the k smallest.
ConvertResult ConvertKthvalue(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t k, ctx.ConstInt(node, 1));
  int64_t dim = -1;
  bool keepdim = false;
  if (node.inputs().size() > 2) {
    ASSIGN_OR_RETURN(dim, ctx.ConstInt(node, 2));
  }
  if (node.inputs().size() > 3) {
    ASSIGN_OR_RETURN(keepdim, ctx.ConstBool(node, 3));
  }
  if (k < 1) return ctx.InvalidArgument(node, absl::StrCat("k must be positive, got ", k));
  ir::Attributes attrs;
  attrs.SetInt("k", k);
  attrs.SetInt("axis", dim);
  attrs.SetBool("largest", false);
  const std::string base = node.outputs()[0]->debugName();
  ir::NodeId n = ctx.graph().AddNode(OpKind::kTopK, {x}, std::move(attrs),
                                     node.kind().toQualString(), {base + ".smallest", base + ".at"});
  std::vector<ir::ValueId> result;
  for (ir::ValueId v : std::vector<ir::ValueId>(ctx.graph().node(n).outputs)) {
    ir::Attributes pick;
    pick.SetInt("axis", dim);
    if (keepdim) {
      pick.SetInt("start", k - 1);
      pick.SetInt("end", k);
      result.push_back(ctx.Emit(node, OpKind::kSlice, {v}, std::move(pick),
                                result.empty() ? "" : ".indices"));
    } else {
      pick.SetInt("index", k - 1);
      result.push_back(ctx.Emit(node, OpKind::kSelect, {v}, std::move(pick),
                                result.empty() ? "" : ".indices"));
    }
  }
  return result;
}

}  // namespace kiln::importer
