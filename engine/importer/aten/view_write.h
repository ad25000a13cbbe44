// Writes through views. PyTorch's in-place ops (fill_, copy_, add_, relu_)
// write into the memory of their first argument, which may be a view of
// another tensor: swin_t builds its attention mask with fill_ on slices of a
// zeros tensor, and x[:, 0] += 1 is a select, an add_ and a copy_ back into it.
// Kiln's IR is pure, so a front translates such a write in three steps:
//   1. the in-place op's functional row computes the written tensor's new
//      value, and the written tensor is rebound to it;
//   2. the chain of views that produced the written tensor is walked up,
//      and each view's input is rebound to the value the write leaves in it
//      (WriteThroughView, one step of the walk);
//   3. the other views of every tensor the write changed, taken before it
//      and read after it, are taken again from the new values: they share
//      the memory the write changed.
// Steps 1 and 3 belong to the fronts (they know their values' names and
// uses); this file holds what they share.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "engine/importer/aten/aten_call.h"
#include "engine/importer/aten/convert_context.h"
#include "engine/ir/graph.h"

namespace kiln::importer {

// Whether `op` ("aten::slice", no overload) may return a tensor that shares
// the memory of its argument "self", so that a write into its result is a
// write into self. (split, chunk and unbind return lists of views; they are
// not counted here: see the fronts.)
bool IsViewOp(std::string_view op);

// One step up the chain of step 2: `view` is the call of a view op (IsViewOp)
// whose result now holds `written`; the result is what its argument "self"
// holds after the write:
//   slice, narrow, select            a SliceScatter of `written` into self
//   view, _unsafe_view, view_as,     `written` reshaped back to self's shape
//   unsqueeze, squeeze, unflatten
//   permute, transpose, t,           `written` under the inverse permutation
//   movedim, swapaxes
//   alias, detach                    `written` itself
//   reshape, flatten, contiguous     as view (or alias), when `self_is_view` is
//                                    false: a tensor an op computed is
//                                    contiguous, and these return a view of
//                                    a contiguous tensor; of a view they may
//                                    copy, which Kiln cannot tell, so
//                                    Unimplemented
// Unimplemented for the views Kiln cannot write through (expand, as_strided,
// diagonal, unfold) and for slice bounds known only at run time.
absl::StatusOr<ir::ValueId> WriteThroughView(AtenCall& view, bool self_is_view,
                                             ir::ValueId written, ConvertContext& cx);

// Ops whose result is a list of views of "self" (split, split_with_sizes,
// chunk, unbind, and their kin): a write into one piece reaches self.
bool IsPieceViewOp(std::string_view op);

// Step 2 for a piece: `split` is the call of such an op (IsPieceViewOp) whose
// result number `piece` now holds `written`; returns what "self" holds after
// the write: the op's pieces of self taken again, `written` in place of that
// one, concatenated along dim (stacked, for unbind). Unimplemented when Kiln
// does not translate the op or cannot tell how many pieces there are: refused,
// never silently left unwritten.
absl::StatusOr<ir::ValueId> WriteThroughPiece(AtenCall& split, int64_t piece, ir::ValueId written,
                                              ConvertContext& cx);

}  // namespace kiln::importer
