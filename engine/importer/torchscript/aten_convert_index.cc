// In-place writes through views, TorchScript's own form (torch.export
// graphs are functional): fill_ and copy_.
#include <limits>
#include <optional>
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

}  // namespace

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

}  // namespace kiln::importer
