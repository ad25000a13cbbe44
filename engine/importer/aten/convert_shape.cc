// Converters for shape and indexing aten ops with constant arguments
// (flatten, view/reshape, cat, permute/transpose/movedim, (un)squeeze, expand,
// split/chunk/unbind, unflatten, repeat, roll, flip, pad, tril/triu,
// pixel_shuffle, select, slice/narrow, index_select/gather, the scatters),
// casts, the *_like fills, arange, and torch.export's sym_size.
//
// A shape made of sizes known only at run time (a dynamic batch: sym_size
// results in export, aten::size in TorchScript) becomes an int[] input of the
// node, which its kernel reads in Prepare and the executor folds when the
// input shapes fix it.
#include <algorithm>
#include <utility>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer::aten {
namespace {

using ir::OpKind;

std::vector<ir::ValueId> One(ir::ValueId id) { return {id}; }

}  // namespace

// flatten(self, start_dim=0, end_dim=-1).
ConvertResult ConvertFlatten(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t start_dim, call.Int("start_dim", 0));
  ASSIGN_OR_RETURN(int64_t end_dim, call.Int("end_dim", -1));
  ir::Attributes attrs;
  attrs.SetInt("start_dim", start_dim);
  attrs.SetInt("end_dim", end_dim);
  return One(cx.Emit(call, OpKind::kFlatten, {x}, std::move(attrs)));
}

// view(self, size) / reshape(self, shape) / _unsafe_view(self, size).
ConvertResult ConvertReshape(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(IntsArg arg, call.IntsOrValue(call.Has("shape") ? "shape" : "size"));
  if (!arg.values.has_value()) return One(cx.Emit(call, OpKind::kReshape, {x, arg.value}));
  std::vector<int64_t> shape = *std::move(arg.values);
  int inferred = 0;
  for (int64_t d : shape) {
    if (d == -1) {
      ++inferred;
    } else if (d < 0) {
      return call.InvalidArgument(
          absl::StrCat("invalid size ", d, " in shape ", DimsToString(shape)));
    }
  }
  if (inferred > 1) {
    return call.InvalidArgument(
        absl::StrCat("shape ", DimsToString(shape), " has more than one -1"));
  }
  ir::Attributes attrs;
  attrs.SetInts("shape", std::move(shape));
  return One(cx.Emit(call, OpKind::kReshape, {x}, std::move(attrs)));
}

// cat(tensors, dim=0).
ConvertResult ConvertCat(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", 0));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  ASSIGN_OR_RETURN(std::optional<ir::ValueId> list, call.ListValue("tensors"));
  if (list.has_value() && cx.KindOf(*list) == ir::ValueKind::kTensorList &&
      cx.ListElements(*list) == nullptr) {
    // A list built at run time (appended to in a loop): Concat takes the list
    // whole and expands it when it runs.
    return One(cx.Emit(call, OpKind::kConcat, {*list}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> inputs, call.Tensors("tensors"));
  if (inputs.empty()) return call.InvalidArgument("concatenates an empty list");
  return One(cx.Emit(call, OpKind::kConcat, std::move(inputs), std::move(attrs)));
}

// stack(tensors, dim=0) = cat of each tensor unsqueezed at dim.
ConvertResult ConvertStack(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", 0));
  ASSIGN_OR_RETURN(std::optional<ir::ValueId> list, call.ListValue("tensors"));
  if (list.has_value() && cx.KindOf(*list) == ir::ValueKind::kTensorList &&
      cx.ListElements(*list) == nullptr) {
    // A list built at run time: one Concat that takes the list whole and
    // inserts the new axis (attr stack).
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    attrs.SetInt("stack", 1);
    return One(cx.Emit(call, OpKind::kConcat, {*list}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> inputs, call.Tensors("tensors"));
  if (inputs.empty()) return call.InvalidArgument("stacks an empty list");
  std::vector<ir::ValueId> parts;
  for (size_t k = 0; k < inputs.size(); ++k) {
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    parts.push_back(
        cx.Emit(call, OpKind::kUnsqueeze, {inputs[k]}, std::move(attrs), absl::StrCat(".", k)));
  }
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(cx.Emit(call, OpKind::kConcat, std::move(parts), std::move(attrs)));
}

// t(self): a constant (addmm's weight in older traces) is transposed at
// import; otherwise a Permute of dims 0 and 1 that leaves 0-D and 1-D inputs
// as they are.
ConvertResult ConvertT(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  if (const Tensor* c = cx.ConstValue(x); c != nullptr && c->rank() <= 2) {
    if (c->rank() < 2) return One(cx.AddConstant(c->Clone(), call.OutputName(0)));
    const int64_t rows = c->dim(0), cols = c->dim(1);
    const size_t size = DTypeSize(c->dtype());
    Tensor t = Tensor::Zeros(c->dtype(), {cols, rows});
    const char* from = static_cast<const char*>(c->raw_data());
    char* to = static_cast<char*>(t.raw_data());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        std::memcpy(to + (j * rows + i) * size, from + (i * cols + j) * size, size);
      }
    }
    return One(cx.AddConstant(std::move(t), call.OutputName(0)));
  }
  ir::Attributes attrs;
  attrs.SetInt("dim0", 0);
  attrs.SetInt("dim1", 1);
  attrs.SetBool("identity_below_rank2", true);
  return One(cx.Emit(call, OpKind::kPermute, {x}, std::move(attrs)));
}

namespace {

// The columns of NonZero(mask), as integer indices: what a boolean mask index
// means (PyTorch's own definition: mask.nonzero().unbind(1)). `x` is the
// indexed tensor and `axis` the dim the mask starts at, so NonZero checks the
// mask's dims against x's. Nullopt when the mask's rank is not known.
std::optional<std::vector<ir::ValueId>> MaskColumns(AtenCall& call, ConvertContext& cx,
                                                    ir::ValueId x, ir::ValueId mask,
                                                    int64_t axis) {
  const std::optional<Dims>& dims = cx.graph().value(mask).type.dims;
  if (!dims.has_value()) return std::nullopt;
  ir::Attributes attrs;
  attrs.SetInt("axis", axis);
  const ir::ValueId nz = cx.Emit(call, OpKind::kNonZero, {mask, x}, std::move(attrs), ".nonzero");
  return NonZeroColumns(call, cx, nz, dims->size());
}

}  // namespace

std::vector<ir::ValueId> NonZeroColumns(const AtenCall& call, ConvertContext& cx, ir::ValueId nz,
                                        size_t rank) {
  std::vector<ir::ValueId> columns;
  for (size_t d = 0; d < rank; ++d) {
    ir::Attributes pick;
    pick.SetInt("axis", 1);
    pick.SetInt("index", static_cast<int64_t>(d));
    columns.push_back(
        cx.Emit(call, OpKind::kSelect, {nz}, std::move(pick), absl::StrCat(".column", d)));
  }
  return columns;
}

// index.Tensor(self, indices: Tensor?[]): a single index tensor is an
// IndexSelect along its dim; several make an Index node (None entries stay
// absent). A boolean mask alone (x[mask], x[:, mask]) is an IndexMask; beside
// integer indices it becomes NonZero's columns, one integer index per dim it
// covers (a mask whose rank the import does not know is then left to the
// fallback). Either way the result's length is known only when it runs, so
// what reads it runs as dynamic steps.
ConvertResult ConvertIndex(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  std::vector<bool> masks;
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> given, call.OptionalTensors("indices", &masks));
  // x[mask], x[:, mask]: one mask and no other index, whatever its rank.
  int mask_at = -1, others = 0;
  for (size_t k = 0; k < given.size(); ++k) {
    if (given[k] == ir::kNoValue) continue;
    if (masks[k] && mask_at < 0) {
      mask_at = static_cast<int>(k);
    } else {
      ++others;
    }
  }
  if (mask_at >= 0 && others == 0) {
    ir::Attributes attrs;
    attrs.SetInt("axis", mask_at);
    return One(cx.Emit(call, OpKind::kIndexMask, {x, given[mask_at]}, std::move(attrs)));
  }
  std::vector<ir::ValueId> indices;
  int64_t dim = 0;  // the dim of x the next index starts at
  for (size_t k = 0; k < given.size(); ++k) {
    if (given[k] == ir::kNoValue || !masks[k]) {
      indices.push_back(given[k]);
      ++dim;
      continue;
    }
    std::optional<std::vector<ir::ValueId>> columns = MaskColumns(call, cx, x, given[k], dim);
    if (!columns.has_value()) return call.Unimplemented("a boolean mask of unknown rank");
    indices.insert(indices.end(), columns->begin(), columns->end());
    dim += static_cast<int64_t>(columns->size());
  }
  int present = 0, at = -1;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] == ir::kNoValue) continue;
    ++present;
    at = static_cast<int>(k);
  }
  if (present == 1) {
    ir::Attributes attrs;
    attrs.SetInt("axis", at);
    // A BOOL index the front could not tell is one (TorchScript archives carry
    // no types) is still a mask: the kernel reads it so.
    attrs.SetBool("bool_index_is_mask", true);
    return One(cx.Emit(call, OpKind::kIndexSelect, {x, indices[at]}, std::move(attrs)));
  }
  std::vector<ir::ValueId> inputs = {x};
  inputs.insert(inputs.end(), indices.begin(), indices.end());
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  return One(cx.Emit(call, OpKind::kIndex, std::move(inputs)));
}

// nonzero(self): NonZero.
ConvertResult ConvertNonZero(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  return One(cx.Emit(call, OpKind::kNonZero, {x}));
}

// index_put(self, indices, values, accumulate=False): self[indices] = values
// (+= with accumulate), what x[idx] = v and x[mask] = v write. values take
// self's dtype first, as the assignment converts them.
ConvertResult ConvertIndexPut(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId self, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::vector<ir::ValueId> indices, call.OptionalTensors("indices", nullptr));
  ASSIGN_OR_RETURN(ir::ValueId values, call.Tensor("values"));
  ASSIGN_OR_RETURN(bool accumulate, call.Bool("accumulate", false));
  std::vector<ir::ValueId> inputs = {self, cx.Emit(call, OpKind::kCast, {values, self}, {}, ".values")};
  inputs.insert(inputs.end(), indices.begin(), indices.end());
  while (inputs.size() > 2 && inputs.back() == ir::kNoValue) inputs.pop_back();
  if (inputs.size() == 2) return call.Unimplemented("index_put without an index tensor");
  ir::Attributes attrs;
  attrs.SetBool("accumulate", accumulate);
  return One(cx.Emit(call, OpKind::kIndexPut, std::move(inputs), std::move(attrs)));
}

// add.t(a, b) on int, float or bool lists (list concatenation, e.g. GroupNorm's
// batch-size check in scripted models): a Loop appends b's elements to a one
// by one, since b's length is known only at run time.
ConvertResult ConvertListConcat(AtenCall& call, ConvertContext& cx) {
  using ir::ValueKind;
  ASSIGN_OR_RETURN(std::optional<ir::ValueId> a_list, call.ListValue("a"));
  ASSIGN_OR_RETURN(std::optional<ir::ValueId> b_list, call.ListValue("b"));
  if (!a_list.has_value() || !b_list.has_value()) {
    return call.Unimplemented("concatenating values that are not lists");
  }
  const ir::ValueId a = *a_list, b = *b_list;
  const ValueKind kind = cx.KindOf(a);
  ValueKind element;
  switch (kind) {
    case ValueKind::kIntList: element = ValueKind::kInt; break;
    case ValueKind::kFloatList: element = ValueKind::kFloat; break;
    case ValueKind::kBoolList: element = ValueKind::kBool; break;
    default:
      return call.Unimplemented(absl::StrCat("concatenating a ", ir::ValueKindName(kind)));
  }
  // b may also be a slice of a list (slice.t runs the tensor Slice on the
  // list's 1-D tensor, which gives a tensor value with the same elements).
  if (cx.KindOf(b) != kind && cx.KindOf(b) != ValueKind::kTensor) {
    return call.Unimplemented(absl::StrCat("concatenating a ", ir::ValueKindName(kind), " and a ",
                                           ir::ValueKindName(cx.KindOf(b))));
  }
  ir::Graph& g = cx.graph();
  const ir::ValueId n = cx.EmitValue(call, OpKind::kListLen, ValueKind::kInt, {b});
  const ir::ValueId yes = cx.AddBool(true);  // outside the body, so visible in it
  const ir::BlockId outer = g.insertion_block();
  const ir::NodeId loop =
      g.AddNodeWithOutputs(OpKind::kLoop, {n, yes, a}, 1, {}, std::string(call.op()));
  const ir::ValueId result = g.node(loop).outputs[0];
  g.mutable_value(result).kind = kind;
  const ir::BlockId body = g.AddBlock(loop);
  const ir::ValueId i = g.AddBlockParam(body, "i", {}, ValueKind::kInt);
  const ir::ValueId acc = g.AddBlockParam(body, "acc", {}, kind);
  g.SetInsertionBlock(body);
  const ir::ValueId e = cx.EmitValue(call, OpKind::kListGetItem, element, {b, i});
  const ir::ValueId longer = cx.EmitValue(call, OpKind::kListAppend, kind, {acc, e});
  g.SetBlockResults(body, {yes, longer});
  g.SetInsertionBlock(outer);
  return One(result);
}

absl::StatusOr<ir::Attributes> PermuteAttrs(AtenCall& call, bool inverse) {
  const std::string_view op = OutOfPlaceOp(call.op());
  ir::Attributes attrs;
  if (op == "aten::permute") {
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, call.Ints("dims"));
    if (inverse) {
      const int64_t rank = static_cast<int64_t>(perm.size());
      std::vector<int64_t> back(perm.size(), -1);
      for (int64_t i = 0; i < rank; ++i) {
        const int64_t d = perm[i] < 0 ? perm[i] + rank : perm[i];
        if (d < 0 || d >= rank || back[d] != -1) {
          return call.InvalidArgument("dims is not a permutation");
        }
        back[d] = i;
      }
      perm = std::move(back);
    }
    attrs.SetInts("perm", std::move(perm));
  } else if (op == "aten::movedim" || op == "aten::moveaxis") {
    ASSIGN_OR_RETURN(std::vector<int64_t> source, call.Ints("source"));
    ASSIGN_OR_RETURN(std::vector<int64_t> destination, call.Ints("destination"));
    if (inverse) std::swap(source, destination);
    attrs.SetInts("source", std::move(source));
    attrs.SetInts("destination", std::move(destination));
  } else if (op == "aten::t") {
    attrs.SetInt("dim0", 0);
    attrs.SetInt("dim1", 1);
    attrs.SetBool("identity_below_rank2", true);
  } else {  // transpose, swapdims, swapaxes: their own inverse
    const bool axes = op == "aten::swapaxes";
    ASSIGN_OR_RETURN(int64_t d0, call.Int(axes ? "axis0" : "dim0"));
    ASSIGN_OR_RETURN(int64_t d1, call.Int(axes ? "axis1" : "dim1"));
    attrs.SetInt("dim0", d0);
    attrs.SetInt("dim1", d1);
  }
  return attrs;
}

// permute(self, dims), transpose / swapdims(self, dim0, dim1),
// swapaxes(self, axis0, axis1), movedim / moveaxis(self, source, destination).
ConvertResult ConvertPermute(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::Attributes attrs, PermuteAttrs(call, /*inverse=*/false));
  return One(cx.Emit(call, OpKind::kPermute, {x}, std::move(attrs)));
}

ConvertResult ConvertUnsqueeze(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(cx.Emit(call, OpKind::kUnsqueeze, {x}, std::move(attrs)));
}

// squeeze(self), squeeze.dim(self, dim), squeeze.dims(self, dim).
ConvertResult ConvertSqueeze(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ir::Attributes attrs;
  if (call.Has("dim")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, call.Ints("dim"));
    attrs.SetInts("axes", std::move(axes));
  }
  return One(cx.Emit(call, OpKind::kSqueeze, {x}, std::move(attrs)));
}

// expand(self, size, implicit=False).
ConvertResult ConvertExpand(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(IntsArg size, call.IntsOrValue("size"));
  if (!size.values.has_value()) return One(cx.Emit(call, OpKind::kExpand, {x, size.value}));
  ir::Attributes attrs;
  attrs.SetInts("shape", *std::move(size.values));
  return One(cx.Emit(call, OpKind::kExpand, {x}, std::move(attrs)));
}

// split.Tensor / unsafe_split.Tensor(self, split_size, dim=0),
// split_with_sizes / split.sizes(self, split_sizes, dim=0),
// chunk / unsafe_chunk(self, chunks, dim=0), unbind.int(self, dim=0): a tensor
// list. When the number of pieces is known (always in export; in TorchScript
// when the list is unpacked) each piece is its own Slice, Chunk or Select, so
// later ops read them without a run-time list; otherwise one SplitList.
ConvertResult ConvertSplit(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = OutOfPlaceOp(call.op());
  const bool unbind = op == "aten::unbind";
  const bool chunk = op == "aten::chunk" || op == "aten::unsafe_chunk";
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", 0));
  std::vector<int64_t> sizes;
  int64_t split_size = 0, chunks = 0;
  bool by_sizes = false;
  if (chunk) {
    ASSIGN_OR_RETURN(chunks, call.Int("chunks"));
    if (chunks <= 0) return call.InvalidArgument(absl::StrCat("chunks ", chunks));
  } else if (!unbind) {
    // split.Tensor takes one size, the other overloads a list ("split_sizes",
    // or "split_size" in TorchScript's split.sizes).
    const char* name = call.Has("split_sizes") ? "split_sizes" : "split_size";
    if (call.overload() == "Tensor") {
      std::optional<Number> n = call.ConstNumber(name);
      if (!n.has_value() || n->kind != Number::kInt) {
        return call.Unimplemented("a split size known only at run time");
      }
      split_size = n->i;
      if (split_size <= 0) return call.Unimplemented(absl::StrCat("split size ", split_size));
    } else {
      ASSIGN_OR_RETURN(sizes, call.Ints(name));
      by_sizes = true;
    }
  }
  const std::optional<size_t> listed = call.ListLength(0);
  if (by_sizes && listed.has_value() && sizes.size() != *listed) {
    return call.InvalidArgument(
        absl::StrCat("split into ", sizes.size(), " sizes but unpacked into ", *listed));
  }
  if (!by_sizes && !listed.has_value()) {
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    if (chunks > 0) attrs.SetInt("chunks", chunks);
    if (split_size > 0) attrs.SetInt("split_size", split_size);
    return One(cx.EmitValue(call, OpKind::kSplitList, ir::ValueKind::kTensorList, {x},
                            std::move(attrs)));
  }
  const int64_t pieces = by_sizes ? static_cast<int64_t>(sizes.size()) : *listed;
  std::vector<ir::ValueId> parts;
  int64_t start = 0;
  for (int64_t k = 0; k < pieces; ++k) {
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    OpKind piece = OpKind::kSlice;
    if (unbind) {
      piece = OpKind::kSelect;
      attrs.SetInt("index", k);
    } else if (chunks > 0) {
      piece = OpKind::kChunk;
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
    parts.push_back(cx.Emit(call, piece, {x}, std::move(attrs), absl::StrCat(".", k)));
  }
  return One(cx.MakeTensorList(call, std::move(parts)));
}

// unflatten.int(self, dim, sizes): one size may be -1.
ConvertResult ConvertUnflatten(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, call.Ints("sizes"));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  attrs.SetInts("sizes", std::move(sizes));
  return One(cx.Emit(call, OpKind::kUnflatten, {x}, std::move(attrs)));
}

// expand_as(self, other): the shape is other's, read when the model runs.
ConvertResult ConvertExpandAs(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId like, call.Tensor("other"));
  ir::Attributes attrs;
  attrs.SetBool("like", true);
  return One(cx.Emit(call, OpKind::kExpand, {x, like}, std::move(attrs)));
}

// view_as / reshape_as(self, other).
ConvertResult ConvertViewAs(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId like, call.Tensor("other"));
  return One(cx.Emit(call, OpKind::kReshapeLike, {x, like}));
}

// repeat(self, repeats) -> Tile.
ConvertResult ConvertRepeat(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, call.Ints("repeats"));
  ir::Attributes attrs;
  attrs.SetInts("repeats", std::move(repeats));
  return One(cx.Emit(call, OpKind::kTile, {x}, std::move(attrs)));
}

// tile(self, dims): repeat, with fewer dims than self's padded with 1s in front.
ConvertResult ConvertTile(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, call.Ints("dims"));
  ir::Attributes attrs;
  attrs.SetInts("repeats", std::move(dims));
  attrs.SetBool("pad_repeats", true);
  return One(cx.Emit(call, OpKind::kTile, {x}, std::move(attrs)));
}

// repeat_interleave(self, repeats, dim=None, *, output_size=None), repeats an
// int or a constant tensor: each element of self (flattened when dim is None)
// `repeats` times in a row, or repeats[i] times for element i (an IndexSelect
// of the constant positions).
ConvertResult ConvertRepeatInterleave(AtenCall& call, ConvertContext& cx) {
  if (!call.Has("self")) {
    return call.Unimplemented("repeat_interleave(repeats) (a size that depends on the data)");
  }
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  int64_t dim = 0;
  if (call.Has("dim")) {
    ASSIGN_OR_RETURN(dim, call.Int("dim"));
  } else {
    ir::Attributes flat;
    flat.SetInt("start_dim", 0);
    flat.SetInt("end_dim", -1);
    x = cx.Emit(call, OpKind::kFlatten, {x}, std::move(flat), ".flat");
  }
  std::vector<int64_t> counts;
  if (std::optional<Number> n = call.ConstNumber("repeats"); n.has_value() && n->IsIntegral()) {
    counts = {n->i};
  } else {
    ASSIGN_OR_RETURN(ir::ValueId r, call.Tensor("repeats"));
    const Tensor* t = cx.ConstValue(r);
    if (t == nullptr || t->dims().size() > 1 ||
        (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)) {
      return call.Unimplemented("repeats computed at run time (a size that depends on the data)");
    }
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      counts.push_back(t->dtype() == DType::kInt64 ? t->data<int64_t>()[i] : t->data<int32_t>()[i]);
    }
  }
  for (int64_t c : counts) {
    if (c < 0) return call.InvalidArgument(absl::StrCat("repeats may not be negative, got ", c));
  }
  if (counts.size() == 1) {
    ir::Attributes attrs;
    attrs.SetInt("repeats", counts[0]);
    attrs.SetInt("axis", dim);
    return One(cx.Emit(call, OpKind::kRepeatInterleave, {x}, std::move(attrs)));
  }
  // Per-element counts: the positions they make, selected along dim. (PyTorch
  // requires one count per element of that dim; a program that has more
  // elements raises there, so this selection never meets one.)
  std::vector<int64_t> positions;
  for (size_t i = 0; i < counts.size(); ++i) positions.insert(positions.end(), counts[i], i);
  Tensor index = Tensor::Zeros(DType::kInt64, Dims{static_cast<int64_t>(positions.size())});
  std::copy(positions.begin(), positions.end(), index.data<int64_t>());
  const ir::ValueId idx = cx.AddConstant(std::move(index), call.OutputName(0) + ".positions");
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  return One(cx.Emit(call, OpKind::kIndexSelect, {x, idx}, std::move(attrs)));
}

// scatter(self, dim, index, src | value[, reduce="add"|"multiply"]),
// scatter_add(self, dim, index, src), scatter_reduce(self, dim, index, src,
// reduce, *, include_self=True): a Scatter node; a value is a 0-D src in
// self's dtype.
ConvertResult ConvertScatter(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = OutOfPlaceOp(call.op());
  ASSIGN_OR_RETURN(ir::ValueId self, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ASSIGN_OR_RETURN(ir::ValueId index, call.Tensor("index"));
  ir::ValueId src = ir::kNoValue;
  if (call.Has("src")) {
    ASSIGN_OR_RETURN(src, call.Tensor("src"));
  } else {
    std::optional<Number> v = call.ConstNumber("value");
    if (!v.has_value()) return call.Unimplemented("a scatter value computed at run time");
    src = cx.Emit(call, OpKind::kCast, {cx.AddNumber(*v, call.OutputName(0) + ".value"), self}, {},
                  ".value");
  }
  std::string reduce = "none";
  bool include_self = true;
  if (op == "aten::scatter_add") {
    reduce = "sum";
  } else if (op == "aten::scatter_reduce") {
    ASSIGN_OR_RETURN(reduce, call.String("reduce"));
    ASSIGN_OR_RETURN(include_self, call.Bool("include_self", true));
    if (reduce != "sum" && reduce != "prod" && reduce != "mean" && reduce != "amax" &&
        reduce != "amin") {
      return call.InvalidArgument(absl::StrCat("unknown reduce \"", reduce, "\""));
    }
  } else if (call.Has("reduce")) {  // scatter's deprecated reduce="add" | "multiply"
    ASSIGN_OR_RETURN(std::string r, call.String("reduce"));
    if (r != "add" && r != "multiply") {
      return call.InvalidArgument(absl::StrCat("reduce must be \"add\" or \"multiply\", got \"", r, "\""));
    }
    reduce = r == "add" ? "sum" : "prod";
  }
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  attrs.SetString("reduce", reduce);
  attrs.SetBool("include_self", include_self);
  return One(cx.Emit(call, OpKind::kScatter, {self, index, src}, std::move(attrs)));
}

// roll(self, shifts, dims=[]).
ConvertResult ConvertRoll(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::vector<int64_t> shifts, call.Ints("shifts"));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, call.Ints("dims", std::vector<int64_t>{}));
  ir::Attributes attrs;
  attrs.SetInts("shifts", std::move(shifts));
  attrs.SetInts("axes", std::move(dims));
  return One(cx.Emit(call, OpKind::kRoll, {x}, std::move(attrs)));
}

// flip(self, dims), fliplr(self) (dim 1), flipud(self) (dim 0).
ConvertResult ConvertFlip(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = call.op();
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  std::vector<int64_t> dims;
  if (op == "aten::fliplr") {
    dims = {1};
  } else if (op == "aten::flipud") {
    dims = {0};
  } else {
    ASSIGN_OR_RETURN(dims, call.Ints("dims"));
  }
  ir::Attributes attrs;
  attrs.SetInts("axes", std::move(dims));
  return One(cx.Emit(call, OpKind::kFlip, {x}, std::move(attrs)));
}

// pad(self, pad, mode="constant", value=None), constant_pad_nd(self, pad, value=0),
// reflection_padNd / replication_padNd(self, padding). Pad amounts may be
// computed from the input's shape (swin_t pads to whole windows).
ConvertResult ConvertPad(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = call.op();
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(IntsArg pads, call.IntsOrValue(call.Has("padding") ? "padding" : "pad"));
  std::string mode = "constant";
  double value = 0.0;
  if (op == "aten::pad") {
    ASSIGN_OR_RETURN(mode, call.String("mode", "constant"));
    ASSIGN_OR_RETURN(value, call.Double("value", 0.0));
  } else if (op == "aten::constant_pad_nd") {
    ASSIGN_OR_RETURN(value, call.Double("value", 0.0));
  } else {
    mode = op.rfind("aten::reflection", 0) == 0 ? "reflect" : "replicate";
  }
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular") {
    return call.InvalidArgument(absl::StrCat("unknown padding mode '", mode, "'"));
  }
  ir::Attributes attrs;
  attrs.SetString("mode", mode);
  attrs.SetFloat("value", value);
  if (!pads.values.has_value()) {
    return One(cx.Emit(call, OpKind::kPad, {x, pads.value}, std::move(attrs)));
  }
  attrs.SetInts("pads", *std::move(pads.values));
  return One(cx.Emit(call, OpKind::kPad, {x}, std::move(attrs)));
}

// tril / triu(self, diagonal=0).
ConvertResult ConvertTriangle(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t diagonal, call.Int("diagonal", 0));
  ir::Attributes attrs;
  attrs.SetInt("diagonal", diagonal);
  const OpKind op = OutOfPlaceOp(call.op()) == "aten::tril" ? OpKind::kTril : OpKind::kTriu;
  return One(cx.Emit(call, op, {x}, std::move(attrs)));
}

// pixel_shuffle(self, upscale_factor) / pixel_unshuffle(self, downscale_factor).
ConvertResult ConvertPixelShuffle(AtenCall& call, ConvertContext& cx) {
  const bool inverse = call.op() == "aten::pixel_unshuffle";
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t factor, call.Int(inverse ? "downscale_factor" : "upscale_factor"));
  ir::Attributes attrs;
  attrs.SetInt("factor", factor);
  attrs.SetBool("inverse", inverse);
  return One(cx.Emit(call, OpKind::kPixelShuffle, {x}, std::move(attrs)));
}

// index_select(self, dim, index); gather(self, dim, index, sparse_grad=False).
ConvertResult ConvertIndexSelect(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ASSIGN_OR_RETURN(ir::ValueId index, call.Tensor("index"));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  const OpKind op = call.op() == "aten::gather" ? OpKind::kGather : OpKind::kIndexSelect;
  return One(cx.Emit(call, op, {x, index}, std::move(attrs)));
}

// slice_scatter(self, src, dim=0, start=None, end=None, step=1) and
// select_scatter(self, src, dim, index): self with the slice (or select)
// replaced by src, which is how torch.export writes x[:, 1:3] = v.
ConvertResult ConvertSliceScatter(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId self, call.Tensor("self"));
  ASSIGN_OR_RETURN(ir::ValueId src, call.Tensor("src"));
  ir::Attributes attrs;
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim", 0));
  attrs.SetInt("axis", dim);
  if (call.op() == "aten::select_scatter") {
    ASSIGN_OR_RETURN(int64_t index, call.Int("index"));
    attrs.SetInt("index", index);
  } else {
    for (const char* name : {"start", "end"}) {
      if (!call.Has(name)) continue;
      ASSIGN_OR_RETURN(int64_t bound, call.Int(name));
      attrs.SetInt(name, bound);
    }
    ASSIGN_OR_RETURN(int64_t step, call.Int("step", 1));
    attrs.SetInt("step", step);
  }
  return One(cx.Emit(call, OpKind::kSliceScatter, {self, src}, std::move(attrs)));
}

// select(self, dim, index).
ConvertResult ConvertSelect(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  if (!call.ConstNumber("index").has_value()) {
    // An index computed at run time: IndexSelect with the int as a 0-dim
    // index has select's shape, wraps negative indices, and fails the
    // request when out of range.
    ASSIGN_OR_RETURN(ir::ValueId index, call.ScalarValue("index"));
    ir::Attributes attrs;
    attrs.SetInt("axis", dim);
    return One(cx.Emit(call, OpKind::kIndexSelect, {x, index}, std::move(attrs)));
  }
  ASSIGN_OR_RETURN(int64_t index, call.Int("index"));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  attrs.SetInt("index", index);
  return One(cx.Emit(call, OpKind::kSelect, {x}, std::move(attrs)));
}

// slice.Tensor(self, dim=0, start=None, end=None, step=1); bounds may be
// computed at run time (x[:, :n] with n a size).
ConvertResult ConvertSlice(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(std::optional<ir::ValueId> list, call.ListValue("l"));
  const bool of_list = list.has_value();  // slice.t(l, start, end, step)
  if (of_list && !ir::IsScalarListKind(cx.KindOf(*list))) {
    return call.Unimplemented("slicing a list of tensors");
  }
  ir::ValueId x;
  int64_t dim = 0;
  if (of_list) {
    // An int, float or bool list (x.size()[2:]): the list's 1-D tensor sliced
    // along axis 0, still a list.
    x = *list;
  } else {
    ASSIGN_OR_RETURN(x, call.Tensor("self"));
    ASSIGN_OR_RETURN(dim, call.Int("dim", 0));
  }
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  // Bounds may be computed from a shape at run time (x[:, :H] after padding).
  std::vector<ir::ValueId> inputs = {x, ir::kNoValue, ir::kNoValue};
  const char* names[] = {"start", "end"};
  for (size_t k = 0; k < 2; ++k) {
    if (!call.Has(names[k])) continue;
    if (std::optional<Number> n = call.ConstNumber(names[k])) {
      // INT64_MAX ("to the end") is how export writes an open end.
      // (Read as an int: through a double it would overflow.)
      attrs.SetInt(names[k], n->kind == Number::kInt ? n->i : static_cast<int64_t>(n->ToDouble()));
    } else {
      ASSIGN_OR_RETURN(inputs[k + 1], call.ScalarValue(names[k]));
    }
  }
  ASSIGN_OR_RETURN(int64_t step, call.Int("step", 1));
  attrs.SetInt("step", step);
  while (inputs.size() > 1 && inputs.back() == ir::kNoValue) inputs.pop_back();
  if (of_list) {
    return One(cx.EmitValue(call, OpKind::kSlice, cx.KindOf(x), std::move(inputs),
                            std::move(attrs)));
  }
  return One(cx.Emit(call, OpKind::kSlice, std::move(inputs), std::move(attrs)));
}

// narrow(self, dim, start, length).
ConvertResult ConvertNarrow(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ASSIGN_OR_RETURN(int64_t start, call.Int("start"));
  ASSIGN_OR_RETURN(int64_t length, call.Int("length"));
  ir::Attributes attrs;
  attrs.SetInt("axis", dim);
  attrs.SetInt("start", start);
  attrs.SetInt("length", length);
  return One(cx.Emit(call, OpKind::kSlice, {x}, std::move(attrs)));
}

// _to_copy(self, *, dtype=None, ...), to.dtype(self, dtype, ...): a Cast, or
// the input itself when no dtype is given (device and layout moves are no-ops
// on a CPU-only runtime); to.other(self, other, ...) and type_as(self, other):
// a Cast to other's dtype.
ConvertResult ConvertToCopy(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  if (call.op() == "aten::type_as" || call.overload() == "other") {
    ASSIGN_OR_RETURN(ir::ValueId like, call.Tensor("other"));
    return One(cx.Emit(call, OpKind::kCast, {x, like}));
  }
  ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
  if (!dtype) return One(x);
  ir::Attributes attrs;
  attrs.SetString("dtype", DTypeName(*dtype));
  return One(cx.Emit(call, OpKind::kCast, {x}, std::move(attrs)));
}

// zeros_like / ones_like / full_like / empty_like(self[, fill_value], *, dtype=None).
ConvertResult ConvertFullLike(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId like, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
  double value = OutOfPlaceOp(call.op()) == "aten::ones_like" ? 1.0 : 0.0;
  if (call.op() == "aten::full_like") {
    ASSIGN_OR_RETURN(value, call.Double("fill_value"));
  }
  ir::Attributes attrs;
  attrs.SetFloat("value", value);
  if (dtype) attrs.SetString("dtype", DTypeName(*dtype));
  return One(cx.Emit(call, OpKind::kFill, {like}, std::move(attrs)));
}

// new_zeros / new_ones / new_empty(self, size, *, dtype=None, ...),
// new_full(self, size, fill_value, *, dtype=None, ...): self's dtype unless
// given, the given size (which may be computed at run time).
ConvertResult ConvertNewFull(AtenCall& call, ConvertContext& cx) {
  const std::string_view op = call.op();
  ASSIGN_OR_RETURN(ir::ValueId like, call.Tensor("self"));
  ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
  double value = op == "aten::new_ones" ? 1.0 : 0.0;
  if (op == "aten::new_full") {
    ASSIGN_OR_RETURN(value, call.Double("fill_value"));
  }
  ir::Attributes attrs;
  attrs.SetFloat("value", value);
  if (dtype) attrs.SetString("dtype", DTypeName(*dtype));
  ASSIGN_OR_RETURN(IntsArg size, call.IntsOrValue("size"));
  if (!size.values.has_value()) {
    return One(cx.Emit(call, OpKind::kFill, {like, size.value}, std::move(attrs)));
  }
  attrs.SetInts("shape", *std::move(size.values));
  return One(cx.Emit(call, OpKind::kFill, {like}, std::move(attrs)));
}

// arange(end), arange.start(start, end), arange.start_step(start, end, step),
// with dtype=None: int64 when every bound is an int, else float32 (PyTorch's
// default). Constant bounds make a constant; a bound known only at run time
// (arange(seq_len)) an Arange node.
ConvertResult ConvertArange(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(std::optional<DType> dtype, call.ScalarType("dtype"));
  const char* names[] = {"start", "end", "step"};
  bool constant = true;
  bool floating = false;
  double bounds[3] = {0.0, 0.0, 1.0};
  for (size_t k = 0; k < 3; ++k) {
    if (!call.Has(names[k])) continue;
    std::optional<Number> n = call.ConstNumber(names[k]);
    if (!n) {
      constant = false;
      continue;
    }
    bounds[k] = n->ToDouble();
    floating |= !n->IsIntegral();
  }
  if (!constant) {
    std::vector<ir::ValueId> args;
    for (size_t k = 0; k < 3; ++k) {
      if (!call.Has(names[k])) {
        args.push_back(cx.AddInt(k == 2 ? 1 : 0));
        continue;
      }
      ASSIGN_OR_RETURN(ir::ValueId a, call.ScalarValue(names[k]));
      floating |= cx.KindOf(a) == ir::ValueKind::kFloat;
      args.push_back(a);
    }
    ir::Attributes attrs;
    attrs.SetString("dtype", DTypeName(dtype.value_or(floating ? DType::kF32 : DType::kInt64)));
    return One(cx.Emit(call, OpKind::kArange, std::move(args), std::move(attrs)));
  }
  const double start = bounds[0], end = bounds[1], step = bounds[2];
  if (step == 0 || (end - start) / step > 1e9) {
    return call.InvalidArgument(absl::StrCat("arange(", start, ", ", end, ", ", step,
                                             ") is empty-stepped or too long"));
  }
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  const DType d = dtype.value_or(floating ? DType::kF32 : DType::kInt64);
  Tensor t = Tensor::Zeros(d, {n});
  for (int64_t i = 0; i < n; ++i) {
    Tensor element = Tensor::Zeros(d, {});
    FillTensor(element, start + static_cast<double>(i) * step);
    std::memcpy(static_cast<char*>(t.raw_data()) + i * DTypeSize(d), element.raw_data(),
                DTypeSize(d));
  }
  return One(cx.AddConstant(std::move(t), call.OutputName(0)));
}

// sym_size.int(self, dim): a size known only at run time, as an int value.
ConvertResult ConvertSymSize(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  ASSIGN_OR_RETURN(int64_t dim, call.Int("dim"));
  ir::Attributes attrs;
  attrs.SetInt("dim", dim);
  return One(cx.EmitValue(call, OpKind::kSize, ir::ValueKind::kInt, {x}, std::move(attrs)));
}

}  // namespace kiln::importer::aten
