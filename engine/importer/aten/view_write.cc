#include "engine/importer/aten/view_write.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer {
namespace {

using ir::OpKind;

// The views whose result is reshaped back (one element of the result is one
// element of self, in the same order).
bool IsReshapeView(std::string_view op) {
  return op == "aten::view" || op == "aten::_unsafe_view" || op == "aten::view_as" ||
         op == "aten::unsqueeze" || op == "aten::squeeze" || op == "aten::unflatten";
}

bool IsPermuteView(std::string_view op) {
  return op == "aten::permute" || op == "aten::transpose" || op == "aten::t" ||
         op == "aten::movedim" || op == "aten::moveaxis" || op == "aten::swapaxes" ||
         op == "aten::swapdims";
}

// The SliceScatter attributes that put a slice, narrow or select back.
absl::StatusOr<ir::Attributes> ScatterAttrs(AtenCall& view) {
  const std::string_view op = view.op();
  ir::Attributes attrs;
  ASSIGN_OR_RETURN(int64_t dim, view.Int("dim", 0));
  attrs.SetInt("axis", dim);
  auto bound = [&](const char* name) -> absl::StatusOr<int64_t> {
    absl::StatusOr<int64_t> v = view.Int(name);
    if (!v.ok() && view.Has(name)) {
      return view.Unimplemented(absl::StrCat(
          "is written through, and its ", name, " is known only at run time"));
    }
    return v;
  };
  if (op == "aten::select") {
    ASSIGN_OR_RETURN(int64_t index, bound("index"));
    attrs.SetInt("index", index);
  } else if (op == "aten::narrow") {
    ASSIGN_OR_RETURN(int64_t start, bound("start"));
    ASSIGN_OR_RETURN(int64_t length, bound("length"));
    if (start < 0) return view.Unimplemented("is written through with a negative start");
    attrs.SetInt("start", start);
    attrs.SetInt("end", start + length);
  } else {
    for (const char* name : {"start", "end"}) {
      if (!view.Has(name)) continue;
      ASSIGN_OR_RETURN(int64_t b, bound(name));
      attrs.SetInt(name, b);
    }
    int64_t step = 1;
    if (view.Has("step")) {
      ASSIGN_OR_RETURN(step, bound("step"));
    }
    attrs.SetInt("step", step);
  }
  return attrs;
}

}  // namespace

bool IsViewOp(std::string_view op) {
  static const std::set<std::string_view>* const kViews = new std::set<std::string_view>{
      "aten::view",      "aten::_unsafe_view", "aten::view_as",   "aten::alias",
      "aten::detach",    "aten::select",       "aten::slice",     "aten::narrow",
      "aten::expand",    "aten::expand_as",    "aten::transpose", "aten::t",
      "aten::permute",   "aten::movedim",      "aten::moveaxis",  "aten::swapaxes",
      "aten::swapdims",  "aten::unsqueeze",    "aten::squeeze",   "aten::as_strided",
      "aten::reshape",   "aten::flatten",      "aten::unflatten", "aten::diagonal",
      "aten::unfold",    "aten::contiguous",   "aten::view_as_real", "aten::view_as_complex",
      "aten::real",      "aten::imag"};
  return kViews->count(op) > 0;
}

absl::StatusOr<ir::ValueId> WriteThroughView(AtenCall& view, bool self_is_view,
                                             ir::ValueId written, ConvertContext& cx) {
  const std::string_view op = view.op();
  ASSIGN_OR_RETURN(ir::ValueId self, view.Tensor("self"));
  if (op == "aten::alias" || op == "aten::detach" ||
      (op == "aten::contiguous" && !self_is_view)) {
    return written;
  }
  if (op == "aten::slice" || op == "aten::narrow" || op == "aten::select") {
    ASSIGN_OR_RETURN(ir::Attributes attrs, ScatterAttrs(view));
    return cx.Emit(view, OpKind::kSliceScatter, {self, written}, std::move(attrs), ".base");
  }
  if (IsReshapeView(op) ||
      ((op == "aten::reshape" || op == "aten::flatten") && !self_is_view)) {
    return cx.Emit(view, OpKind::kReshapeLike, {written, self}, {}, ".base");
  }
  if (IsPermuteView(op)) {
    ASSIGN_OR_RETURN(ir::Attributes attrs, aten::PermuteAttrs(view, /*inverse=*/true));
    return cx.Emit(view, OpKind::kPermute, {written}, std::move(attrs), ".base");
  }
  if (op == "aten::reshape" || op == "aten::flatten" || op == "aten::contiguous") {
    return view.Unimplemented(
        "is written through; of a view it may return a copy or a view, which Kiln cannot tell");
  }
  return view.Unimplemented("is written through, which Kiln cannot express");
}

bool IsPieceViewOp(std::string_view op) {
  static const std::set<std::string_view>* const kPieces = new std::set<std::string_view>{
      "aten::split",        "aten::split_with_sizes", "aten::unsafe_split",
      "aten::unsafe_split_with_sizes", "aten::chunk", "aten::unsafe_chunk",
      "aten::unbind",       "aten::tensor_split",     "aten::hsplit",
      "aten::vsplit",       "aten::dsplit"};
  return kPieces->count(op) > 0;
}

absl::StatusOr<ir::ValueId> WriteThroughPiece(AtenCall& split, int64_t piece, ir::ValueId written,
                                              ConvertContext& cx) {
  const std::string_view op = split.op();
  // The pieces cover self along dim, in order: self after the write is the
  // pieces of its current value joined again, `written` in place of piece
  // number `piece`. (No offsets needed, so sizes known only at run time do.)
  AtenConverter convert = FindAtenConverter(op);
  if (convert == nullptr) {
    return split.Unimplemented("is written through one of its pieces, which Kiln cannot express");
  }
  ASSIGN_OR_RETURN(int64_t dim, split.Int("dim", 0));
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> out, convert(split, cx));
  std::vector<ir::ValueId> pieces = out;
  if (out.size() == 1) {
    const std::vector<ir::ValueId>* elements = cx.ListElements(out[0]);
    if (elements == nullptr) {
      return split.Unimplemented(
          "is written through one of its pieces, and how many there are is known only at run time");
    }
    pieces = *elements;
  }
  if (piece < 0 || piece >= static_cast<int64_t>(pieces.size())) {
    return split.InvalidArgument(absl::StrCat("has no piece ", piece, " to write through"));
  }
  pieces[piece] = written;
  if (op == "aten::unbind") {  // the pieces lost dim: put it back
    for (size_t k = 0; k < pieces.size(); ++k) {
      ir::Attributes attrs;
      attrs.SetInt("axis", dim);
      pieces[k] = cx.Emit(split, OpKind::kUnsqueeze, {pieces[k]}, std::move(attrs),
                          absl::StrCat(".piece", k));
    }
  }
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return cx.Emit(split, OpKind::kConcat, std::move(pieces), std::move(attrs), ".base");
}

}  // namespace kiln::importer
