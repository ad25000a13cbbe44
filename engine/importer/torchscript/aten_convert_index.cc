// Converters for shape and indexing ops with constant arguments: permute and
// transpose, squeeze/unsqueeze, expand, repeat, stack, split/chunk/unbind (one
// node per piece, gathered into a tensor list), slicing, indexing with
// tensors, roll, flip, pad, tril/triu, pixel_shuffle and embedding.
//
// Sizes that depend on the input's shape (a transpose's permutation, chunk
// sizes) are resolved by the kernels in Prepare, so these converters never
// need the input's rank; expand's size may also be an int list computed at
// run time (vit_b_16's class token), which its kernel reads in Prepare.
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/torchscript/aten_op_table.h"

namespace kiln::importer {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

std::string Kind(const TorchNode& node) { return node.kind().toUnqualString(); }

// How many pieces a list-returning op must produce: the outputs of the
// prim::ListUnpack nodes that consume it, or nullopt when the list is used
// otherwise (returned, indexed, looped over): its length then depends on the
// input's shape.
std::optional<int64_t> UnpackedLength(const TorchNode& node) {
  int64_t n = -1;
  for (const torch::jit::Use& use : node.output()->uses()) {
    if (use.user->kind() != c10::prim::ListUnpack) return std::nullopt;
    const int64_t k = static_cast<int64_t>(use.user->outputs().size());
    if (n >= 0 && n != k) return std::nullopt;
    n = k;
  }
  if (n < 0) return std::nullopt;
  return n;
}

}  // namespace

// permute(self, dims), transpose(self, dim0, dim1), t(self), movedim(self, src, dst),
// numpy_T / mT-style swaps.
ConvertResult ConvertPermute(const TorchNode& node, ImportContext& ctx) {
  const std::string kind = Kind(node);
  if (kind == "t" || kind == "t_") {
    // t() of a constant (addmm's weight in older traces) is folded at import.
    if (std::optional<at::Tensor> c = ctx.ConstTensor(node, 0); c && c->dim() <= 2) {
      ASSIGN_OR_RETURN(ir::ValueId id,
                       ctx.AddTensorConstant(c->t().contiguous(), node.output()->debugName()));
      return One(id);
    }
  }
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ir::Attributes attrs;
  if (kind == "permute") {
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.ConstInts(node, 1));
    attrs.SetInts("perm", std::move(perm));
  } else if (kind == "t" || kind == "t_") {
    attrs.SetInt("dim0", 0);
    attrs.SetInt("dim1", 1);
    attrs.SetBool("identity_below_rank2", true);
  } else if (kind == "movedim" || kind == "moveaxis") {
    ASSIGN_OR_RETURN(std::vector<int64_t> source, ctx.ConstInts(node, 1));
    ASSIGN_OR_RETURN(std::vector<int64_t> destination, ctx.ConstInts(node, 2));
    attrs.SetInts("source", std::move(source));
    attrs.SetInts("destination", std::move(destination));
  } else {  // transpose, swapaxes, swapdims
    ASSIGN_OR_RETURN(int64_t d0, ctx.ConstInt(node, 1));
    ASSIGN_OR_RETURN(int64_t d1, ctx.ConstInt(node, 2));
    attrs.SetInt("dim0", d0);
    attrs.SetInt("dim1", d1);
  }
  return One(ctx.Emit(node, OpKind::kPermute, {x}, std::move(attrs)));
}

// expand(self, size, implicit), expand_as(self, other), broadcast_to(self, size).
ConvertResult ConvertExpand(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  if (Kind(node) == "expand_as") {
    ASSIGN_OR_RETURN(ir::ValueId like, ctx.Input(node, 1));
    ir::Attributes attrs;
    attrs.SetBool("like", true);
    return One(ctx.Emit(node, OpKind::kExpand, {x, like}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(IntsArg size, ctx.IntsInput(node, 1));
  if (!size.values.has_value()) return One(ctx.Emit(node, OpKind::kExpand, {x, size.value}));
  ir::Attributes attrs;
  attrs.SetInts("shape", *std::move(size.values));
  return One(ctx.Emit(node, OpKind::kExpand, {x}, std::move(attrs)));
}

// repeat(self, repeats) -> Tile.
ConvertResult ConvertRepeat(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ctx.ConstInts(node, 1));
  ir::Attributes attrs;
  attrs.SetInts("repeats", std::move(repeats));
  return One(ctx.Emit(node, OpKind::kTile, {x}, std::move(attrs)));
}

// stack(tensors, dim) = cat of each tensor unsqueezed at dim.
ConvertResult ConvertStack(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId list, ctx.AnyValue(node.inputs()[0], ctx.Where(node)));
  if (ctx.KindOf(list) == ir::ValueKind::kTensorList && ctx.ListElements(list) == nullptr) {
    // A list built at run time: one Concat that takes the list whole and
    // inserts the new axis (attr stack).
    int64_t dim = 0;
    if (node.inputs().size() > 1) {
      ASSIGN_OR_RETURN(dim, ctx.ConstInt(node, 1));
    }
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    attrs.SetInt("stack", 1);
    return One(ctx.Emit(node, OpKind::kConcat, {list}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> inputs, ctx.TensorListInput(node, 0));
  if (inputs.empty()) return ctx.InvalidArgument(node, "stacks an empty list");
  int64_t dim = 0;
  if (node.inputs().size() > 1) {
    ASSIGN_OR_RETURN(dim, ctx.ConstInt(node, 1));
  }
  std::vector<ir::ValueId> parts;
  for (size_t k = 0; k < inputs.size(); ++k) {
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    parts.push_back(ctx.Emit(node, OpKind::kUnsqueeze, {inputs[k]}, std::move(attrs),
                             absl::StrCat(".", k)));
  }
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(ctx.Emit(node, OpKind::kConcat, std::move(parts), std::move(attrs)));
}

// split(self, split_size | split_sizes, dim), split_with_sizes, chunk(self,
// chunks, dim), unbind(self, dim): one Slice, Chunk or Select per piece, as a
// tensor list. The piece count comes from the split sizes, or the
// prim::ListUnpack reading the list; otherwise only the input's shape tells
// it, and the list is one SplitList (its pieces made when the run has the
// input: a list returned whole, indexed or looped over).
ConvertResult ConvertSplit(const TorchNode& node, ImportContext& ctx) {
  const std::string kind = Kind(node);
  const bool unbind = kind.rfind("unbind", 0) == 0;
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  const size_t dim_i = unbind ? 1 : 2;
  int64_t dim = 0;
  if (node.inputs().size() > dim_i) {
    ASSIGN_OR_RETURN(dim, ctx.ConstInt(node, dim_i));
  }
  std::vector<int64_t> sizes;
  int64_t split_size = 0, chunks = 0;
  bool by_sizes = false;
  if (unbind) {
    // Select per piece.
  } else if (kind.find("chunk") != std::string::npos) {
    ASSIGN_OR_RETURN(chunks, ctx.ConstInt(node, 1));
  } else {
    std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[1]);
    if (c && c->isInt()) {
      split_size = c->toInt();
    } else {
      ASSIGN_OR_RETURN(sizes, ctx.ConstInts(node, 1));
      by_sizes = true;
    }
  }
  const std::optional<int64_t> unpacked = UnpackedLength(node);
  if (by_sizes && unpacked.has_value() && static_cast<int64_t>(sizes.size()) != *unpacked) {
    return ctx.InvalidArgument(node, absl::StrCat("split into ", sizes.size(),
                                                  " sizes but unpacked into ", *unpacked));
  }
  if (!by_sizes && !unpacked.has_value()) {
    if (!unbind && chunks <= 0 && split_size <= 0) {
      return ctx.Unimplemented(node, absl::StrCat("split size ", split_size));
    }
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    if (chunks > 0) attrs.SetInt("chunks", chunks);
    if (split_size > 0) attrs.SetInt("split_size", split_size);
    return One(ctx.EmitValue(node, OpKind::kSplitList, ir::ValueKind::kTensorList, {x},
                             std::move(attrs)));
  }
  const int64_t pieces = by_sizes ? static_cast<int64_t>(sizes.size()) : *unpacked;
  std::vector<ir::ValueId> parts;
  int64_t start = 0;
  for (int64_t k = 0; k < pieces; ++k) {
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    OpKind op = OpKind::kSlice;
    if (unbind) {
      op = OpKind::kSelect;
      attrs.SetInt("index", k);
    } else if (chunks > 0) {
      op = OpKind::kChunk;
      attrs.SetInt("chunks", chunks);
      attrs.SetInt("index", k);
    } else if (by_sizes) {
      attrs.SetInt("start", start);
      attrs.SetInt("length", sizes[k]);
      start += sizes[k];
    } else {
      attrs.SetInt("start", k * split_size);
      attrs.SetInt("end", (k + 1) * split_size);
    }
    parts.push_back(ctx.Emit(node, op, {x}, std::move(attrs), absl::StrCat(".", k)));
  }
  return One(ctx.MakeTensorList(node, std::move(parts)));
}

// unflatten(self, dim, sizes).
ConvertResult ConvertUnflatten(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ctx.ConstInts(node, 2));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  attrs.SetInts("sizes", std::move(sizes));
  return One(ctx.Emit(node, OpKind::kUnflatten, {x}, std::move(attrs)));
}

// view_as / reshape_as(self, other).
ConvertResult ConvertViewAs(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId like, ctx.Input(node, 1));
  return One(ctx.Emit(node, OpKind::kReshapeLike, {x, like}));
}

// slice(self, dim=0, start=None, end=None, step=1); narrow(self, dim, start, length).
ConvertResult ConvertSlice(const TorchNode& node, ImportContext& ctx) {
  if (const auto list = node.inputs()[0]->type()->cast<c10::ListType>();
      list != nullptr && Kind(node) == "slice") {
    // slice.t(list, start, end, step) on an int/float/bool list (x.size()[2:]):
    // the list's 1-D tensor sliced along axis 0, still a list.
    ASSIGN_OR_RETURN(ir::ValueId l, ctx.AnyValue(node.inputs()[0], ctx.Where(node)));
    const ir::ValueKind kind = ctx.KindOf(l);
    if (!ir::IsScalarListKind(kind)) return ctx.Unimplemented(node, "slicing a list of tensors");
    ir::Attributes attrs;
    attrs.SetInt("axis", 0);
    std::vector<ir::ValueId> inputs = {l, ir::kNoValue, ir::kNoValue};
    for (size_t k = 1; k <= 2; ++k) {
      if (node.inputs().size() <= k || ctx.IsNone(node, k)) continue;
      if (ctx.ConstantOf(node.inputs()[k]).has_value()) {
        ASSIGN_OR_RETURN(int64_t bound, ctx.ConstInt(node, k));
        attrs.SetInt(k == 1 ? "start" : "end", bound);
      } else {
        ASSIGN_OR_RETURN(inputs[k], ctx.ScalarInput(node, k));
      }
    }
    if (node.inputs().size() > 3) {
      ASSIGN_OR_RETURN(int64_t step, ctx.ConstInt(node, 3));
      attrs.SetInt("step", step);
    }
    while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
    return One(ctx.EmitValue(node, OpKind::kSlice, kind, std::move(inputs), std::move(attrs)));
  }
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ir::Attributes attrs;
  int64_t dim = 0;
  if (node.inputs().size() > 1) {
    ASSIGN_OR_RETURN(dim, ctx.ConstInt(node, 1));
  }
  attrs.SetInt("axis", dim);
  if (Kind(node) == "narrow") {
    ASSIGN_OR_RETURN(int64_t start, ctx.ConstInt(node, 2));
    ASSIGN_OR_RETURN(int64_t length, ctx.ConstInt(node, 3));
    attrs.SetInt("start", start);
    attrs.SetInt("length", length);
    return One(ctx.Emit(node, OpKind::kSlice, {x}, std::move(attrs)));
  }
  // Bounds may be computed from a shape at run time (x[:, :H] after padding).
  std::vector<ir::ValueId> inputs = {x, ir::kNoValue, ir::kNoValue};
  for (size_t k = 2; k <= 3; ++k) {
    if (node.inputs().size() <= k || ctx.IsNone(node, k)) continue;
    if (ctx.ConstantOf(node.inputs()[k]).has_value()) {
      ASSIGN_OR_RETURN(int64_t bound, ctx.ConstInt(node, k));
      attrs.SetInt(k == 2 ? "start" : "end", bound);
    } else {
      ASSIGN_OR_RETURN(inputs[k - 1], ctx.ScalarInput(node, k));
    }
  }
  if (node.inputs().size() > 4) {
    ASSIGN_OR_RETURN(int64_t step, ctx.ConstInt(node, 4));
    attrs.SetInt("step", step);
  }
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  return One(ctx.Emit(node, OpKind::kSlice, std::move(inputs), std::move(attrs)));
}

// index_select(self, dim, index); gather(self, dim, index, sparse_grad=False).
ConvertResult ConvertIndexSelect(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 1));
  ASSIGN_OR_RETURN(ir::ValueId index, ctx.Input(node, 2));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  const OpKind op = Kind(node) == "gather" ? OpKind::kGather : OpKind::kIndexSelect;
  return One(ctx.Emit(node, op, {x, index}, std::move(attrs)));
}

// index(self, indices: Tensor?[]): a single index tensor is IndexSelect along
// its dim; several make an Index node (None entries stay absent).
ConvertResult ConvertIndex(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  const torch::jit::Value* list = node.inputs()[1];
  const torch::jit::Node* producer = list->node();
  if (producer->kind() != c10::prim::ListConstruct) {
    return ctx.Unimplemented(node, "the index list is not a literal list");
  }
  std::vector<ir::ValueId> indices;
  int present = 0, at = -1;
  for (size_t k = 0; k < producer->inputs().size(); ++k) {
    const torch::jit::Value* v = producer->inputs()[k];
    std::optional<c10::IValue> c = ctx.ConstantOf(v);
    if (c && c->isNone()) {
      indices.push_back(ir::kNoValue);
      continue;
    }
    // x[mask] selects a data-dependent number of elements: left to the
    // fallback. Masks are recognised here by what makes them (the kernel
    // also refuses BOOL indices, but only when the model is compiled).
    static const auto* const kMaskMakers = new std::set<std::string>{
        "aten::gt", "aten::lt", "aten::ge", "aten::le", "aten::eq", "aten::ne",
        "aten::logical_and", "aten::logical_or", "aten::logical_xor", "aten::logical_not",
        "aten::__and__", "aten::__or__", "aten::__xor__", "aten::bitwise_not", "aten::isnan"};
    if (kMaskMakers->count(v->node()->kind().toQualString()) > 0 ||
        (c && c->isTensor() && c->toTensor().scalar_type() == c10::kBool)) {
      return ctx.Unimplemented(node, "indexing with a boolean mask");
    }
    ASSIGN_OR_RETURN(ir::ValueId id, ctx.ValueFor(v, ctx.Where(node)));
    indices.push_back(id);
    ++present;
    at = static_cast<int>(k);
  }
  if (present == 1) {
    ir::Attributes attrs;
    attrs.SetInt("axis", at);
    return One(ctx.Emit(node, OpKind::kIndexSelect, {x, indices[at]}, std::move(attrs)));
  }
  std::vector<ir::ValueId> inputs = {x};
  inputs.insert(inputs.end(), indices.begin(), indices.end());
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  return One(ctx.Emit(node, OpKind::kIndex, std::move(inputs)));
}

// slice_scatter(self, src, dim=0, start=None, end=None, step=1) and
// select_scatter(self, src, dim, index).
ConvertResult ConvertSliceScatter(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId self, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(ir::ValueId src, ctx.Input(node, 1));
  ir::Attributes attrs;
  ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(node, 2));
  attrs.SetInt("axis", dim);
  if (Kind(node) == "select_scatter") {
    ASSIGN_OR_RETURN(int64_t index, ctx.ConstInt(node, 3));
    attrs.SetInt("index", index);
  } else {
    if (node.inputs().size() > 3 && !ctx.IsNone(node, 3)) {
      ASSIGN_OR_RETURN(int64_t start, ctx.ConstInt(node, 3));
      attrs.SetInt("start", start);
    }
    if (node.inputs().size() > 4 && !ctx.IsNone(node, 4)) {
      ASSIGN_OR_RETURN(int64_t end, ctx.ConstInt(node, 4));
      attrs.SetInt("end", end);
    }
    if (node.inputs().size() > 5) {
      ASSIGN_OR_RETURN(int64_t step, ctx.ConstInt(node, 5));
      attrs.SetInt("step", step);
    }
  }
  return One(ctx.Emit(node, OpKind::kSliceScatter, {self, src}, std::move(attrs)));
}

namespace {

// The SliceScatter attributes that write back through `view`, a slice,
// narrow or select of another tensor; nullopt when `view` is not one.
absl::StatusOr<std::optional<ir::Attributes>> ViewAttrs(const torch::jit::Node& view,
                                                         ImportContext& ctx) {
  const std::string kind = view.kind().toQualString();
  ir::Attributes attrs;
  if (kind == "aten::slice") {
    int64_t dim = 0;
    if (view.inputs().size() > 1) {
      ASSIGN_OR_RETURN(dim, ctx.ConstInt(view, 1));
    }
    attrs.SetInt("axis", dim);
    if (view.inputs().size() > 2 && !ctx.IsNone(view, 2)) {
      ASSIGN_OR_RETURN(int64_t start, ctx.ConstInt(view, 2));
      attrs.SetInt("start", start);
    }
    if (view.inputs().size() > 3 && !ctx.IsNone(view, 3)) {
      ASSIGN_OR_RETURN(int64_t end, ctx.ConstInt(view, 3));
      attrs.SetInt("end", end);
    }
    if (view.inputs().size() > 4) {
      ASSIGN_OR_RETURN(int64_t step, ctx.ConstInt(view, 4));
      attrs.SetInt("step", step);
    }
  } else if (kind == "aten::narrow") {
    ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(view, 1));
    ASSIGN_OR_RETURN(int64_t start, ctx.ConstInt(view, 2));
    ASSIGN_OR_RETURN(int64_t length, ctx.ConstInt(view, 3));
    if (start < 0) return ctx.Unimplemented(view, "narrow with a negative start, written through");
    attrs.SetInt("axis", dim);
    attrs.SetInt("start", start);
    attrs.SetInt("end", start + length);
  } else if (kind == "aten::select") {
    ASSIGN_OR_RETURN(int64_t dim, ctx.ConstInt(view, 1));
    ASSIGN_OR_RETURN(int64_t index, ctx.ConstInt(view, 2));
    attrs.SetInt("axis", dim);
    attrs.SetInt("index", index);
  } else {
    return std::optional<ir::Attributes>();
  }
  return std::optional<ir::Attributes>(std::move(attrs));
}

// Ops whose result shares memory with their first input, so that writing
// into the result writes into the input.
bool IsOtherView(const std::string& kind) {
  return kind == "aten::view" || kind == "aten::reshape" || kind == "aten::permute" ||
         kind == "aten::transpose" || kind == "aten::expand" || kind == "aten::unsqueeze" ||
         kind == "aten::squeeze" || kind == "aten::flatten" || kind == "aten::t" ||
         kind == "aten::diagonal" || kind == "aten::as_strided" || kind == "aten::unfold";
}

}  // namespace

// fill_(self, value) and copy_(self, src[, non_blocking]): PyTorch writes into
// self's memory, and self may be a view (x[:, 1:3] = v traces as a slice and a
// copy_; swin_t builds its attention mask with fill_ on slices). Kiln's IR is
// pure, so the new value of self is computed, then written back up the chain
// of slices/selects with SliceScatter, and every tensor on the chain, up to
// the base that owns the memory, is rebound to its new value.
ConvertResult ConvertInplaceWrite(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId self, ctx.Input(node, 0));
  ir::ValueId updated;
  if (Kind(node) == "fill_") {
    std::optional<c10::IValue> c = ctx.ConstantOf(node.inputs()[1]);
    if (c && (c->isInt() || c->isDouble() || c->isBool() ||
              (c->isTensor() && c->toTensor().dim() == 0))) {
      ASSIGN_OR_RETURN(double value, ctx.ConstDouble(node, 1));
      ir::Attributes attrs;
      attrs.SetFloat("value", value);
      updated = ctx.Emit(node, OpKind::kFill, {self}, std::move(attrs));
    } else {
      ASSIGN_OR_RETURN(ir::ValueId value, ctx.IsScalarLike(node, 1) ? ctx.ScalarInput(node, 1)
                                                                     : ctx.Input(node, 1));
      ir::Attributes like;
      like.SetBool("like", true);
      ir::ValueId spread = ctx.Emit(node, OpKind::kExpand, {value, self}, std::move(like), ".value");
      updated = ctx.Emit(node, OpKind::kCast, {spread, self});
    }
  } else {  // copy_: broadcast src to self's shape, in self's dtype
    ASSIGN_OR_RETURN(ir::ValueId src, ctx.Input(node, 1));
    ir::Attributes like;
    like.SetBool("like", true);
    ir::ValueId spread = ctx.Emit(node, OpKind::kExpand, {src, self}, std::move(like), ".src");
    updated = ctx.Emit(node, OpKind::kCast, {spread, self});
  }
  // Write back through the views, innermost first.
  const torch::jit::Value* v = node.inputs()[0];
  ir::ValueId new_v = updated;
  while (true) {
    const torch::jit::Node* producer = v->node();
    const std::string producer_kind = producer->kind().toQualString();
    if (producer_kind == "aten::contiguous" || producer_kind == "aten::detach" ||
        producer_kind == "aten::alias") {
      // The same memory under another name: the parent takes the new value as is.
      if (v != node.inputs()[0]) {
        ctx.Bind(v, new_v);
        ctx.MarkMutated(v);
      }
      v = producer->inputs()[0];
      continue;
    }
    ASSIGN_OR_RETURN(std::optional<ir::Attributes> attrs, ViewAttrs(*producer, ctx));
    if (!attrs.has_value()) {
      if (IsOtherView(producer->kind().toQualString())) {
        return ctx.Unimplemented(node, absl::StrCat("writes through a ",
                                                    producer->kind().toQualString(),
                                                    " view, which Kiln cannot express"));
      }
      break;
    }
    const torch::jit::Value* parent = producer->inputs()[0];
    ASSIGN_OR_RETURN(ir::ValueId parent_id, ctx.ValueFor(parent, ctx.Where(node)));
    ir::ValueId new_parent =
        ctx.Emit(node, OpKind::kSliceScatter, {parent_id, new_v}, *std::move(attrs), ".base");
    if (v != node.inputs()[0]) {
      ctx.Bind(v, new_v);
      ctx.MarkMutated(v);
    }
    v = parent;
    new_v = new_parent;
  }
  if (v != node.inputs()[0]) {
    ctx.Bind(v, new_v);
    ctx.MarkMutated(v);
  }
  return One(updated);
}

// roll(self, shifts, dims=[]).
ConvertResult ConvertRoll(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> shifts, ctx.ConstInts(node, 1));
  std::vector<int64_t> dims;
  if (node.inputs().size() > 2) {
    ASSIGN_OR_RETURN(dims, ctx.ConstInts(node, 2));
  }
  ir::Attributes attrs;
  attrs.SetInts("shifts", std::move(shifts));
  attrs.SetInts("axes", std::move(dims));
  return One(ctx.Emit(node, OpKind::kRoll, {x}, std::move(attrs)));
}

// flip(self, dims), fliplr (dim 1), flipud (dim 0).
ConvertResult ConvertFlip(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  std::vector<int64_t> dims;
  const std::string kind = Kind(node);
  if (kind == "fliplr") {
    dims = {1};
  } else if (kind == "flipud") {
    dims = {0};
  } else {
    ASSIGN_OR_RETURN(dims, ctx.ConstInts(node, 1));
  }
  ir::Attributes attrs;
  attrs.SetInts("axes", std::move(dims));
  return One(ctx.Emit(node, OpKind::kFlip, {x}, std::move(attrs)));
}

// pad(self, pad, mode="constant", value=None), constant_pad_nd(self, pad, value=0),
// reflection_padNd / replication_padNd(self, padding).
ConvertResult ConvertPad(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  // Pad amounts may be computed from the input's shape (swin_t pads to whole windows).
  ASSIGN_OR_RETURN(IntsArg pads, ctx.IntsInput(node, 1));
  const std::string kind = Kind(node);
  std::string mode = "constant";
  double value = 0.0;
  if (kind == "pad") {
    if (node.inputs().size() > 2) {
      ASSIGN_OR_RETURN(mode, ctx.ConstString(node, 2));
    }
    if (node.inputs().size() > 3 && !ctx.IsNone(node, 3)) {
      ASSIGN_OR_RETURN(value, ctx.ConstDouble(node, 3));
    }
  } else if (kind == "constant_pad_nd") {
    if (node.inputs().size() > 2) {
      ASSIGN_OR_RETURN(value, ctx.ConstDouble(node, 2));
    }
  } else {
    mode = kind.rfind("reflection", 0) == 0 ? "reflect" : "replicate";
  }
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular") {
    return ctx.InvalidArgument(node, absl::StrCat("unknown padding mode '", mode, "'"));
  }
  ir::Attributes attrs;
  attrs.SetString("mode", mode);
  attrs.SetFloat("value", value);
  if (!pads.values.has_value()) return One(ctx.Emit(node, OpKind::kPad, {x, pads.value}, std::move(attrs)));
  attrs.SetInts("pads", *std::move(pads.values));
  return One(ctx.Emit(node, OpKind::kPad, {x}, std::move(attrs)));
}

// tril / triu(self, diagonal=0).
ConvertResult ConvertTriangle(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  int64_t diagonal = 0;
  if (node.inputs().size() > 1) {
    ASSIGN_OR_RETURN(diagonal, ctx.ConstInt(node, 1));
  }
  ir::Attributes attrs;
  attrs.SetInt("diagonal", diagonal);
  const OpKind op = Kind(node).rfind("tril", 0) == 0 ? OpKind::kTril : OpKind::kTriu;
  return One(ctx.Emit(node, op, {x}, std::move(attrs)));
}

// pixel_shuffle(self, upscale_factor) / pixel_unshuffle(self, downscale_factor).
ConvertResult ConvertPixelShuffle(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(ir::ValueId x, ctx.Input(node, 0));
  ASSIGN_OR_RETURN(int64_t factor, ctx.ConstInt(node, 1));
  ir::Attributes attrs;
  attrs.SetInt("factor", factor);
  attrs.SetBool("inverse", Kind(node) == "pixel_unshuffle");
  return One(ctx.Emit(node, OpKind::kPixelShuffle, {x}, std::move(attrs)));
}

}  // namespace kiln::importer
