"""Sweep cases of the other ops: reductions, scans and sorting; shape and indexing; creation
and casts; linear algebra; convolution, pooling, normalization, resampling, recurrent layers
and attention (sweep_lib.py says what each variant means)."""
from sweep_lib import ALL, BASE, FLOAT, INT, RANK, T, add, std_variants  # noqa: F401

F32_I64 = ["f32", "i64"]

# ---------------------------------------------------------------- reductions


def reduction(name, fn, dom="any", dtype_kw=True, whole=True, dims=True):
    op = f"aten::{name}"
    if whole:
        add(op, "all", f"{fn}(x0)", [T(BASE, dom)], ALL)
        add(op, "all", f"{fn}(x0)", [T(BASE, dom)], F32_I64, ("script",))
    add(op, "dim", f"{fn}(x0, 1)", [T(BASE, dom)], ALL)
    add(op, "dim_keep", f"{fn}(x0, -1, keepdim=True)", [T(BASE, dom)], F32_I64)
    if dims:  # several dims at once (libtorch 1.13 has no such overload for prod, all, any, argmax)
        add(op, "dims", f"{fn}(x0, (0, 2))", [T(BASE, dom)], F32_I64)
    add(op, "dim", f"{fn}(x0, 1)", [T(BASE, dom)], F32_I64, ("script",))
    for r in (0, 1, 2, 4, 5):
        add(op, f"rank{r}", f"{fn}(x0, -1)", [T(RANK[r], dom)])
    add(op, "empty", f"{fn}(x0, 0)", [T((0, 3), dom)])
    add(op, "empty_keep", f"{fn}(x0, 1)", [T((0, 3), dom)])
    add(op, "noncontig", f"{fn}(x0.transpose(0, 2), 1)", [T(BASE, dom)], F32_I64)
    if dtype_kw:
        add(op, "kw_dtype", f"{fn}(x0, 1, dtype=torch.float64)", [T(BASE, dom)], ["f32", "i32"])


reduction("sum", "torch.sum")
reduction("mean", "torch.mean")
reduction("prod", "torch.prod", "unit", dims=False)
reduction("amax", "torch.amax", dtype_kw=False, whole=False)
reduction("amin", "torch.amin", dtype_kw=False, whole=False)
add("aten::amax", "all", "torch.amax(x0)", [T(BASE)], ALL)
add("aten::amin", "all", "torch.amin(x0)", [T(BASE)], ["f32", "i64"])
reduction("logsumexp", "torch.logsumexp", dtype_kw=False, whole=False)
reduction("all", "torch.all", dtype_kw=False, dims=False)
reduction("any", "torch.any", dtype_kw=False, dims=False)
for name in ["argmax", "argmin"]:
    reduction(name, f"torch.{name}", "distinct", dtype_kw=False, dims=False)
for name in ["max", "min"]:
    op = f"aten::{name}"
    add(op, "all", f"torch.{name}(x0)", [T(BASE)], ALL)
    add(op, "dim", f"torch.{name}(x0, 1)", [T(BASE, "distinct")], ALL)
    add(op, "dim_keep", f"torch.{name}(x0, -1, keepdim=True)", [T(BASE, "distinct")], F32_I64)
    add(op, "dim", f"torch.{name}(x0, 1)", [T(BASE, "distinct")], F32_I64, ("script",))
    add(op, "values", f"torch.{name}(x0, 2)[0]", [T(BASE, "distinct")], ["f32"])
    for r in (0, 1, 5):
        add(op, f"rank{r}", f"torch.{name}(x0, -1)", [T(RANK[r], "distinct")])
    add(op, "empty", f"torch.{name}(x0)", [T((0, 3))])
    add(op, "noncontig", f"torch.{name}(x0.transpose(0, 2), 1)", [T(BASE, "distinct")])
for name in ["var", "std"]:
    op = f"aten::{name}"
    add(op, "all", f"torch.{name}(x0)", [T(BASE)], ALL)
    add(op, "dim", f"torch.{name}(x0, 1)", [T(BASE)], FLOAT)
    add(op, "kw_unbiased", f"torch.{name}(x0, -1, unbiased=False, keepdim=True)", [T(BASE)])
    add(op, "dims", f"torch.{name}(x0, (0, 2))", [T(BASE)])
    add(op, "rank1", f"torch.{name}(x0)", [T((5,))])
    add(op, "dim", f"torch.{name}(x0, 1)", [T(BASE)], ["f32"], ("script",))
    add(op, "single", f"torch.{name}(x0, 1)", [T((2, 1))])  # one sample: NaN in both
for name in ["var_mean", "std_mean"]:
    op = f"aten::{name}"
    add(op, "all", f"torch.{name}(x0)", [T(BASE)], FLOAT)
    add(op, "dim", f"torch.{name}(x0, 1)", [T(BASE)], ["f32", "f64"])
    add(op, "kw_unbiased", f"torch.{name}(x0, (0, 2), unbiased=False, keepdim=True)", [T(BASE)])
    add(op, "kw_correction", f"torch.{name}(x0, -1, correction=0)", [T(BASE)])
    add(op, "dim", f"torch.{name}(x0, 1)", [T(BASE)], ["f32"], ("script",))
for variant, expr, dtypes in [("p2", "torch.norm(x0, p=2, dim=1)", FLOAT + ["i64"]),
                              ("p1", "torch.norm(x0, p=1, dim=-1, keepdim=True)", ["f32"]),
                              ("inf", "torch.norm(x0, p=float('inf'), dim=0)", ["f32"]),
                              ("p3", "torch.norm(x0, p=3, dim=(1, 2))", ["f32"])]:
    add("aten::norm", variant, expr, [T(BASE)], dtypes)
add("aten::norm", "p2", "torch.norm(x0, p=2, dim=1)", [T(BASE)], ["f32"], ("script",))
add("aten::frobenius_norm", "all", "torch.norm(x0)", [T(BASE)], ["f32"])
add("aten::frobenius_norm", "dims", "torch.norm(x0, p='fro', dim=(0, 1))", [T(BASE)], FLOAT)
add("aten::frobenius_norm", "keep", "torch.frobenius_norm(x0, [1, 2], True)", [T(BASE)],
    ["f32"])
for variant, expr, dtypes in [("ord2", "torch.linalg.vector_norm(x0, 2, dim=1)", FLOAT + ["i64"]),
                              ("ord1", "torch.linalg.vector_norm(x0, 1, dim=(0, 2))", ["f32"]),
                              ("all", "torch.linalg.vector_norm(x0)", ["f32"]),
                              ("kw_dtype", "torch.linalg.vector_norm(x0, dim=-1, dtype=torch.float64)", ["f32"])]:
    add("aten::linalg_vector_norm", variant, expr, [T(BASE)], dtypes)
add("aten::linalg_vector_norm", "ord2", "torch.linalg.vector_norm(x0, 2, dim=1)", [T(BASE)],
    ["f32"], ("script",))
for name, dom in [("cumsum", "any"), ("cumprod", "unit")]:
    op = f"aten::{name}"
    add(op, "dim", f"torch.{name}(x0, 1)", [T(BASE, dom)], ALL)
    add(op, "dim", f"torch.{name}(x0, 1)", [T(BASE, dom)], F32_I64, ("script",))
    add(op, "kw_dtype", f"torch.{name}(x0, -1, dtype=torch.float64)", [T(BASE, dom)], ["f32", "i32"])
    for r in (0, 1, 5):
        add(op, f"rank{r}", f"torch.{name}(x0, 0)", [T(RANK[r], dom)])
    add(op, "empty", f"torch.{name}(x0, 0)", [T((0, 3), dom)])
    add(op, "noncontig", f"torch.{name}(x0.transpose(0, 2), 1)", [T(BASE, dom)])
    add(op, "inplace", f"x0.clone().{name}_(1)", [T(BASE, dom)], F32_I64, kind=f"aten::{name}_")
for variant, expr, dtypes in [("k2", "torch.topk(x0, 2)", ALL),
                              ("smallest", "torch.topk(x0, 3, dim=1, largest=False)", F32_I64),
                              ("unsorted_values", "torch.topk(x0, 4, sorted=True)[0]", ["f32"]),
                              ("rank1", "torch.topk(x0.flatten(), 5)", ["f32"])]:
    add("aten::topk", variant, expr, [T(BASE, "distinct")], dtypes)
add("aten::topk", "k2", "torch.topk(x0, 2)", [T(BASE, "distinct")], ["f32"], ("script",))
add("aten::topk", "empty", "torch.topk(x0, 0)", [T((2, 3))])
for variant, expr, dtypes in [("dim", "torch.sort(x0)", ALL),
                              ("desc", "torch.sort(x0, dim=1, descending=True)", F32_I64),
                              ("stable", "torch.sort(x0, stable=True, dim=0)", ["f32"]),
                              ("rank0", "torch.sort(x0.sum())", ["f32"])]:
    add("aten::sort", variant, expr, [T(BASE, "distinct")], dtypes)
add("aten::sort", "dim", "torch.sort(x0)", [T(BASE, "distinct")], ["f32"], ("script",))
add("aten::argsort", "dim", "torch.argsort(x0)", [T(BASE, "distinct")], ALL)
add("aten::argsort", "desc", "torch.argsort(x0, dim=0, descending=True)", [T(BASE, "distinct")],
    F32_I64)
add("aten::argsort", "dim", "torch.argsort(x0)", [T(BASE, "distinct")], ["f32"], ("script",))
add("aten::kthvalue", "k2", "torch.kthvalue(x0, 2)", [T(BASE, "distinct")], ALL)
add("aten::kthvalue", "dim_keep", "torch.kthvalue(x0, 1, 0, True)", [T(BASE, "distinct")], F32_I64)
add("aten::kthvalue", "k2", "torch.kthvalue(x0, 2)", [T(BASE, "distinct")], ["f32"], ("script",))

# ---------------------------------------------------------------- shape and indexing


def shape_op(name, rows, script=True):
    """rows: (variant, expr, input specs, dtypes). The first row runs scripted too."""
    for i, (variant, expr, inputs, dtypes) in enumerate(rows):
        add(f"aten::{name}", variant, expr, inputs, dtypes)
        if i == 0 and script:
            add(f"aten::{name}", variant, expr, inputs, F32_I64, ("script",))


X = [T(BASE)]
X5 = [T(RANK[5])]
F = ["f32"]
shape_op("flatten", [("all", "torch.flatten(x0)", X, ALL), ("range", "x0.flatten(1)", X5, F),
                     ("range2", "torch.flatten(x0, 1, -2)", X5, F),
                     ("rank0", "x0.flatten()", [T(())], F), ("empty", "x0.flatten(0, 1)", [T((0, 3, 2))], F),
                     ("noncontig", "x0.transpose(0, 2).flatten()", X, F)])
shape_op("view", [("dtypes", "x0.view(4, 6)", X, ALL), ("infer", "x0.view(-1, 2)", X5, F),
                  ("rank0", "x0.view(1, 1)", [T(())], F), ("to_rank0", "x0.view([])", [T((1,))], F),
                  ("empty", "x0.view(3, 0)", [T((0, 3))], F),
                  ("noncontig", "x0.transpose(0, 2).view(-1)", X, F)])
shape_op("reshape", [("dtypes", "x0.reshape(4, 6)", X, ALL), ("infer", "torch.reshape(x0, (-1, 3))", X5, F),
                     ("rank0", "x0.reshape(1)", [T(())], F), ("empty", "x0.reshape(-1, 0)", [T((0, 3))], F),
                     ("noncontig", "x0.transpose(0, 2).reshape(-1)", X, F)])
shape_op("_unsafe_view", [("dtypes", "torch.ops.aten._unsafe_view(x0, [6, 4])", X, ALL)], False)
shape_op("view_as", [("dtypes", "x0.view_as(x1)", [T(BASE), T((6, 4))], ALL)])
shape_op("reshape_as", [("dtypes", "x0.reshape_as(x1)", [T(BASE), T((4, 6))], ALL),
                        ("noncontig", "x0.transpose(0, 1).reshape_as(x1)", [T(BASE), T((24,))], F)])
shape_op("unflatten", [("dtypes", "x0.unflatten(2, (2, 2))", X, ALL),
                       ("infer", "torch.unflatten(x0, -1, (2, -1))", X, F)])
shape_op("cat", [("dtypes", "torch.cat([x0, x1], 1)", [T(BASE), T((2, 2, 4))], ALL),
                 ("mix", "torch.cat([x0, x1])", [T(BASE), T(BASE, dt="f64")], ["f32", "i64", "b"]),
                 ("rank1", "torch.cat((x0, x1, x0))", [T((5,)), T((2,))], F),
                 ("empty", "torch.cat([x0, x1], 0)", [T((0, 3)), T((2, 3))], F),
                 ("legacy_empty", "torch.cat([x0, x1])", [T((0,)), T((2, 3))], F),
                 ("neg_dim", "torch.cat([x0, x1], dim=-1)", [T(RANK[5]), T(RANK[5])], F),
                 ("noncontig", "torch.cat([x0.transpose(0, 1), x1], 0)", [T((4, 3)), T((2, 4))], F)])
shape_op("stack", [("dtypes", "torch.stack([x0, x1])", [T(BASE), T(BASE)], ALL),
                   ("dim", "torch.stack([x0, x1, x0], dim=-1)", [T(BASE), T(BASE)], F),
                   ("rank0", "torch.stack([x0, x1])", [T(()), T(())], F),
                   ("mix", "torch.stack([x0, x1], 1)", [T(BASE), T(BASE, dt="i64")], ["f32", "i32"])])
shape_op("permute", [("dtypes", "x0.permute(2, 0, 1)", X, ALL), ("rank5", "x0.permute(4, 2, 0, 3, 1)", X5, F),
                     ("neg", "torch.permute(x0, (-1, 0, 1))", X, F), ("rank0", "x0.permute([])", [T(())], F),
                     ("empty", "x0.permute(1, 0)", [T((0, 3))], F)])
shape_op("transpose", [("dtypes", "x0.transpose(0, 2)", X, ALL), ("neg", "torch.transpose(x0, -1, -2)", X5, F),
                       ("rank1", "x0.transpose(0, 0)", [T((5,))], F)])
shape_op("t", [("dtypes", "x0.t()", [T((3, 4))], ALL), ("rank1", "torch.t(x0)", [T((5,))], F),
               ("rank0", "x0.t()", [T(())], F), ("rank3", "x0.t()", X, F)])
add("aten::t_", "inplace", "x0.clone().t_()", [T((3, 4))], F32_I64)
for name in ["movedim", "moveaxis"]:
    shape_op(name, [("dtypes", f"torch.{name}(x0, 0, 2)", X, ALL),
                    ("list", f"torch.{name}(x0, (0, 1), (-1, 0))", X5, F)])
for name in ["swapaxes", "swapdims"]:
    shape_op(name, [("dtypes", f"torch.{name}(x0, 0, -1)", X, ALL)])
shape_op("unsqueeze", [("dtypes", "x0.unsqueeze(1)", X, ALL), ("neg", "torch.unsqueeze(x0, -1)", X5, F),
                       ("rank0", "x0.unsqueeze(0)", [T(())], F)])
add("aten::unsqueeze", "inplace", "x0.clone().unsqueeze_(0)", X, F, kind="aten::unsqueeze_")
shape_op("squeeze", [("dtypes", "x0.squeeze()", [T((2, 1, 3, 1))], ALL),
                     ("dim", "x0.squeeze(1)", [T((2, 1, 3))], F), ("dim_not1", "x0.squeeze(0)", X, F),
                     ("rank0", "x0.squeeze()", [T(())], F), ("empty", "x0.squeeze(1)", [T((0, 1))], F)])
shape_op("expand", [("dtypes", "x0.expand(2, 3, 4)", [T((3, 1))], ALL),
                    ("keep", "x0.expand(-1, 3, -1)", [T((2, 1, 4))], F),
                    ("rank0", "x0.expand(2, 2)", [T(())], F),
                    ("then_op", "x0.expand(3, 4) * 2", [T((4,))], F)])
shape_op("expand_as", [("dtypes", "x0.expand_as(x1)", [T((3, 1)), T(BASE)], ALL)])
shape_op("broadcast_to", [("dtypes", "torch.broadcast_to(x0, (2, 3, 4))", [T((1, 4))], ALL)])
shape_op("tile", [("dtypes", "x0.tile((2,))", X, ALL), ("more_dims", "torch.tile(x0, (2, 1, 1, 2))", X, F),
                  ("rank0", "x0.tile((3,))", [T(())], F), ("same", "x0.tile((2, 1, 3))", X, F)])
shape_op("repeat_interleave", [("dtypes", "x0.repeat_interleave(2, dim=1)", X, ALL),
                               ("flat", "torch.repeat_interleave(x0, 3)", X, F),
                               ("neg_dim", "x0.repeat_interleave(3, -1)", X5, F),
                               ("zero", "x0.repeat_interleave(0, dim=0)", X, F),
                               ("counts", "x0.repeat_interleave(torch.tensor([2, 0, 1]), dim=1)", X, F)])
shape_op("repeat", [("dtypes", "x0.repeat(2, 1, 3)", X, ALL), ("more_dims", "x0.repeat(2, 1, 1, 2)", X, F),
                    ("rank0", "x0.repeat(3)", [T(())], F), ("zero", "x0.repeat(0, 1, 1)", X, F)])
for name, expr in [("split", "torch.split(x0, 2, 2)"),
                   ("split_with_sizes", "torch.split(x0, [1, 3], 2)"),
                   ("chunk", "torch.chunk(x0, 2, 1)"), ("unbind", "torch.unbind(x0, 1)"),
                   ("unsafe_chunk", "torch.unsafe_chunk(x0, 2, -1)"),
                   ("unsafe_split", "torch.unsafe_split(x0, 3, 1)")]:
    shape_op(name, [("dtypes", expr, X, ALL), ("rank5", expr, X5, F)],
             script=name != "split_with_sizes")  # scripted, torch.split records aten::split
add("aten::split_with_sizes", "dtypes", "x0.split_with_sizes([1, 3], 2)", X, F32_I64, ("script",))
add("aten::split", "uneven", "torch.split(x0, 3, 2)", X, F)
add("aten::chunk", "uneven", "x0.chunk(3, 2)", [T((2, 3, 7))], F)
shape_op("select", [("dtypes", "x0[:, 1]", X, ALL), ("neg", "x0.select(-1, -2)", X5, F),
                    ("out_of_range", "x0.select(1, 5)", X, F), ("rank1", "x0[2]", [T((5,))], F)])
shape_op("slice", [("dtypes", "x0[:, 1:3]", X, ALL), ("step", "x0[..., ::2]", X5, F),
                   ("neg", "x0[-2:, :-1]", X, F), ("clamped", "x0[:, 1:100]", X, F),
                   ("empty_result", "x0[:, 3:1]", X, F), ("noncontig", "x0.transpose(0, 2)[1:3]", X, F)])
shape_op("narrow", [("dtypes", "torch.narrow(x0, 2, 1, 2)", X, ALL), ("neg", "x0.narrow(-1, 0, 3)", X5, F)])
shape_op("index_select", [("dtypes", "torch.index_select(x0, 1, x1)", [T(BASE), T((4,), "idx3", "i64")], ALL),
                          ("int32_index", "x0.index_select(0, x1)", [T(BASE), T((3,), "idx2", "i32")], F),
                          ("empty_index", "x0.index_select(2, x1)", [T(BASE), T((0,), "idx2", "i64")], F)])
shape_op("nonzero", [("dtypes", "torch.nonzero(x0)", [T(BASE, "unit")], ALL),
                     ("scalar", "torch.nonzero(x0.sum() > 100)", [T(BASE)], F)])
shape_op("gather", [("dtypes", "torch.gather(x0, 1, x1)", [T(BASE), T((2, 5, 4), "idx3", "i64")], ALL),
                    ("last", "x0.gather(-1, x1)", [T(BASE), T((2, 3, 2), "idx4", "i64")], F)])
shape_op("index", [("tensor", "x0[x1]", [T(BASE), T((3,), "idx2", "i64")], ALL),
                   ("second_dim", "x0[:, x1]", [T(BASE), T((2, 2), "idx3", "i64")], F),
                   ("two", "x0[x1, x2]", [T(BASE), T((4,), "idx2", "i64"), T((4,), "idx3", "i64")], F),
                   ("bool_mask", "x0[x1]", [T(BASE), T(BASE, "mask", "b")], F32_I64),
                   ("bool_mask_dtypes", "x0[x1]", [T(BASE), T(BASE[:1], "mask", "b")], ALL),
                   ("bool_mask_inner", "x0[:, x1]", [T(BASE), T(BASE[1:], "mask", "b")], F),
                   ("bool_mask_mixed", "x0[x2, x1]", [T(BASE), T(BASE[1:2], "mask", "b"),
                                                        T((1,), "idx2", "i64")], F),
                   ("mask_mismatch", "x0[x1]", [T(BASE), T((BASE[0] + 1,), "mask", "b")], F),
                   ("int32", "x0[x1]", [T(BASE), T((3,), "idx2", "i32")], F)])
shape_op("scatter", [("src", "x0.scatter(1, x1, x2)", [T(BASE), T((2, 2, 4), "idx3", "i64"), T((2, 2, 4))], ALL),
                     ("value", "x0.scatter(2, x1, 1.5)", [T(BASE), T((2, 3, 2), "idx4", "i64")], FLOAT + ["i64"]),
                     ("smaller_index", "torch.scatter(x0, 0, x1, x2)", [T(BASE), T((1, 2, 3), "idx2", "i64"), T(BASE)], F),
                     ("reduce_add", "x0.scatter(1, x1, x2, reduce='add')", [T(BASE), T((2, 5, 4), "idx3", "i64"), T((2, 5, 4))], F),
                     ("reduce_multiply", "x0.scatter(1, x1, x2, reduce='multiply')", [T(BASE), T((2, 5, 4), "idx3", "i64"), T((2, 5, 4))], F)])
add("aten::scatter", "inplace", "x0.clone().scatter_(1, x1, x2)", [T(BASE), T((2, 2, 4), "idx3", "i64"), T((2, 2, 4))],
    F, kind="aten::scatter_")
shape_op("scatter_add", [("dtypes", "x0.scatter_add(1, x1, x2)", [T(BASE), T((2, 6, 4), "idx3", "i64"), T((2, 6, 4))],
                          FLOAT + INT),
                         ("neg_dim", "torch.scatter_add(x0, -1, x1, x2)", [T(BASE), T((2, 3, 7), "idx4", "i64"), T((2, 3, 7))], F)])
add("aten::scatter_add", "inplace", "x0.clone().scatter_add_(0, x1, x2)",
    [T(BASE), T((5, 3, 4), "idx2", "i64"), T((5, 3, 4))], F, kind="aten::scatter_add_")
for reduce in ["sum", "prod", "mean", "amax", "amin"]:
    for include_self in [True, False]:
        add("aten::scatter_reduce", f"{reduce}_{'self' if include_self else 'noself'}",
            f"x0.scatter_reduce(1, x1, x2, '{reduce}', include_self={include_self})",
            [T(BASE), T((2, 6, 4), "idx3", "i64"), T((2, 6, 4))],
            ["f32", "f64", "i64"] if include_self else ["f32"])
add("aten::scatter_reduce", "sum_self", "x0.scatter_reduce(1, x1, x2, 'sum')",
    [T(BASE), T((2, 6, 4), "idx3", "i64"), T((2, 6, 4))], ["f32"], ("script",))
add("aten::empty_strided", "filled", "torch.empty_strided((2, 3, 4), (12, 4, 1)).fill_(1.5) + x0", X, F32_I64)
add("aten::scalar_tensor", "default", "x0 + torch.scalar_tensor(3)", X, ["f32", "i64", "b"])
add("aten::scalar_tensor", "dtype", "x0 * torch.scalar_tensor(2, dtype=torch.int64)", X, F32_I64)
# self[indices] = values: what x[idx] = v and x[mask] = v record (aten::index_put_).
for variant, index, value, inputs, dtypes in [
        ("mask", "x1", "0.5", [T(BASE), T(BASE, "mask", "b")], FLOAT + ["i64"]),
        ("mask_rows", "x1", "x2", [T(BASE), T((2, 3), "mask", "b"), T((4,))], F32_I64),
        ("tensor", "x1", "x2", [T(BASE), T((2,), "idx2", "i64"), T((2, 3, 4))], ALL),
        ("second_dim", "(slice(None), x1)", "-1.0", [T(BASE), T((2,), "idx3", "i64")], F),
        ("two", "(x1, x2)", "x3", [T(BASE), T((4,), "idx2", "i64"), T((4,), "idx3", "i64"), T((4, 4))], F)]:
    add("aten::index_put", variant, f"(lambda y: (y.__setitem__({index}, {value}), y)[1])(x0.clone())",
        inputs, dtypes, kind="aten::index_put_")
add("aten::index_put", "accumulate", "torch.index_put(x0, (x1,), x2, accumulate=True)",
    [T(BASE), T((5,), "idx2", "i64"), T((5, 3, 4))], ["f32", "f64", "i64"])
shape_op("slice_scatter", [("dtypes", "torch.slice_scatter(x0, x1, 1, 0, 2)", [T(BASE), T((2, 2, 4))], ALL),
                           ("step", "torch.slice_scatter(x0, x1, -1, 0, 4, 2)", [T(BASE), T((2, 3, 2))], F)])
shape_op("select_scatter", [("dtypes", "torch.select_scatter(x0, x1, 1, 1)", [T(BASE), T((2, 4))], ALL)])
# fill_, zero_, copy_ are the in-place forms of the fill, zero and copy rows; written through
# views (slice, view, transpose) they change the tensor the view was taken from.
for variant, expr, inputs, dtypes in [
        ("slice", "x0.clone().fill_(2)", X, ALL),
        ("tensor", "x0.clone().fill_(x1)", [T(BASE), T(())], F32_I64),
        ("slice_write", "torch.ops.aten.fill_(x0.clone()[:, 1:], 1.5)", X, F32_I64),
        ("view_write", "(lambda y: (y.view(-1)[3:7].fill_(-2), y)[1])(x0.clone())", X, F32_I64)]:
    add("aten::fill", variant, expr, inputs, dtypes, kind="aten::fill_")
add("aten::fill", "slice", "x0.clone().fill_(2)", X, F32_I64, ("script",), kind="aten::fill_")
add("aten::zero", "dtypes", "x0.clone().zero_()", X, ALL, kind="aten::zero_")
add("aten::zero", "transpose_write", "(lambda y: (y.transpose(0, 2)[1].zero_(), y)[1])(x0.clone())",
    X, F, kind="aten::zero_")
add("aten::copy", "dtypes", "x0.clone().copy_(x1)", [T(BASE), T((4,))], ALL, kind="aten::copy_")
add("aten::copy", "dtypes", "x0.clone().copy_(x1)", [T(BASE), T((4,))], F32_I64, ("script",),
    kind="aten::copy_")
add("aten::copy", "mix", "x0.clone().copy_(x1)", [T(BASE), T(BASE, dt="f64")], ["f32", "i32", "b"],
    kind="aten::copy_")
add("aten::tensor", "number", "x0 * torch.tensor(2.5)", X, F, ("script",))
add("aten::tensor", "int_like", "x0 + torch.tensor(3, dtype=x0.dtype)", X, ["i64", "f32"], ("script",))
shape_op("roll", [("dtypes", "torch.roll(x0, 1, 2)", X, ALL), ("flat", "x0.roll(3)", X, F),
                  ("dims", "torch.roll(x0, (1, -2), (0, 2))", X5, F)])
shape_op("flip", [("dtypes", "torch.flip(x0, [0, 2])", X, ALL), ("neg", "x0.flip(-1)", X5, F)])
shape_op("fliplr", [("dtypes", "torch.fliplr(x0)", X, ALL)])
shape_op("flipud", [("dtypes", "torch.flipud(x0)", X, ALL)])
for name in ["tril", "triu"]:
    shape_op(name, [("dtypes", f"torch.{name}(x0)", X, ALL), ("diag", f"torch.{name}(x0, -1)", [T((4, 5))], F),
                    ("diag_pos", f"x0.{name}(2)", X5, F)])
    add(f"aten::{name}", "inplace", f"x0.clone().{name}_(1)", X, F32_I64, kind=f"aten::{name}_")
shape_op("pixel_shuffle", [("dtypes", "F.pixel_shuffle(x0, 2)", [T((1, 8, 2, 3))], ALL),
                           ("rank5", "F.pixel_shuffle(x0, 2)", [T((2, 1, 4, 2, 2))], F)])
shape_op("pixel_unshuffle", [("dtypes", "F.pixel_unshuffle(x0, 2)", [T((1, 2, 4, 6))], ALL)])
P4 = [T((1, 2, 4, 5))]
# F.pad records aten::pad (traced and scripted); the padding ops themselves are called as such.
shape_op("constant_pad_nd", [("dtypes", "torch.constant_pad_nd(x0, [1, 2])", X, ALL),
                             ("value", "torch.constant_pad_nd(x0, [1, 0, 0, 2], 1.5)", X, FLOAT + ["i64"]),
                             ("negative", "torch.constant_pad_nd(x0, [-1, 1, 0, -2])", X, F),
                             ("rank5", "torch.constant_pad_nd(x0, [1, 1, 1, 1, 1, 1])", X5, F)])
shape_op("pad", [("dtypes", "F.pad(x0, [1, 2])", X, ALL),
                 ("value", "F.pad(x0, [1, 0, 0, 2], value=1.5)", X, FLOAT + ["i64"]),
                 ("rank5", "F.pad(x0, [1, 1, 1, 1, 1, 1])", X5, F),
                 ("reflect", "F.pad(x0, [1, 2, 2, 1], mode='reflect')", P4, FLOAT + ["i64"]),
                 ("replicate", "F.pad(x0, [1, 2], mode='replicate')", X, F),
                 ("circular", "F.pad(x0, [1, 1, 1, 0], mode='circular')", P4, F)])
for n, pad in [(1, "[1, 2]"), (2, "[1, 2, 2, 1]"), (3, "[1, 1, 0, 1, 1, 0]")]:
    shape = [(1, 2, 5), (1, 2, 4, 5), (1, 2, 3, 4, 5)][n - 1]
    for mode, name in [("reflect", "reflection"), ("replicate", "replication")]:
        expr = f"torch.ops.aten.{name}_pad{n}d(x0, {pad})"
        add(f"aten::{name}_pad{n}d", "dtypes", expr, [T(shape)], ALL)
        add(f"aten::{name}_pad{n}d", "batchless", expr, [T(shape[1:])])
for name in ["contiguous", "detach", "clone", "alias"]:
    expr = {"contiguous": "x0.transpose(0, 1).contiguous()", "detach": "x0.detach()",
            "clone": "torch.clone(x0)", "alias": "torch.ops.aten.alias(x0) + 0"}[name]
    shape_op(name, [("dtypes", expr, X, ALL)])
for name, expr in [("dropout", "F.dropout(x0, 0.5, False)"),
                   ("feature_dropout", "torch.feature_dropout(x0, 0.5, False)"),
                   ("alpha_dropout", "torch.alpha_dropout(x0, 0.5, False)"),
                   ("feature_alpha_dropout", "torch.feature_alpha_dropout(x0, 0.5, False)")]:
    shape_op(name, [("dtypes", expr, X, ALL)])

# ---------------------------------------------------------------- creation and casts

XI = [T((2, 3))]
for name, expr in [("zeros", "torch.zeros(x0.size(0), 3, dtype={dt})"),
                   ("ones", "torch.ones([x0.size(1), 2], dtype={dt})"),
                   ("full", "torch.full([2, x0.size(1)], 3, dtype={dt})"),
                   ("empty", "torch.empty(x0.size(0), 2, dtype={dt}).fill_(1)")]:
    add(f"aten::{name}", "dtypes", expr, XI, ALL)
    add(f"aten::{name}", "dtypes", expr, XI, F32_I64, ("script",))
add("aten::zeros", "const", "torch.zeros(2, 3) + x0", XI, ["f32", "i64"])
add("aten::full", "default_dtype", "torch.full([2, 3], 1.5) + x0", XI, ["f32", "i32"])
add("aten::full", "int_default", "torch.full([2, 3], 7) + x0", XI, ["f32", "i32"], ("script",))
add("aten::zeros", "rank0", "torch.zeros([], dtype={dt}) + x0", [T(())], ["f32", "i64"])
for name, expr, kw in [
        ("zeros_like", "torch.zeros_like(x0)", "torch.zeros_like(x0, dtype=torch.float64)"),
        ("ones_like", "torch.ones_like(x0)", "torch.ones_like(x0, dtype=torch.float64)"),
        ("full_like", "torch.full_like(x0, 2)", "torch.full_like(x0, 2, dtype=torch.float64)"),
        ("empty_like", "torch.empty_like(x0).fill_(0)",
         "torch.empty_like(x0, dtype=torch.float64).fill_(0)")]:
    add(f"aten::{name}", "dtypes", expr, X, ALL)
    add(f"aten::{name}", "dtypes", expr, X, F32_I64, ("script",))
    add(f"aten::{name}", "kw_dtype", kw, X, ["f32", "i64", "b"])
add("aten::full_like", "float_fill", "torch.full_like(x0, 2.5)", X, ALL)
for name, expr, kw in [
        ("new_zeros", "x0.new_zeros([2, x0.size(1)])", "x0.new_zeros([2, 3], dtype=torch.int32)"),
        ("new_ones", "x0.new_ones(2, 3)", "x0.new_ones(2, 3, dtype=torch.int32)"),
        ("new_full", "x0.new_full((2, 3), 5)", "x0.new_full((2, 3), 5, dtype=torch.int32)"),
        ("new_empty", "x0.new_empty([2, 3]).fill_(1)",
         "x0.new_empty([2, 3], dtype=torch.int32).fill_(1)")]:
    add(f"aten::{name}", "dtypes", expr, X, ALL)
    add(f"aten::{name}", "kw_dtype", kw, X, ["f32"])
    add(f"aten::{name}", "dtypes", expr, X, F32_I64, ("script",))
for variant, expr, dtypes in [("dtypes", "torch.arange(x0.size(1), dtype={dt})", ALL),
                              ("start_step", "torch.arange(1, x0.size(0) * 4, 3)", F),
                              ("float_step", "torch.arange(0, 2, 0.25) + x0.sum()", F32_I64),
                              ("negative", "torch.arange(5, -3, -2)", F)]:
    add("aten::arange", variant, expr, XI, dtypes)
add("aten::arange", "dtypes", "torch.arange(x0.size(1), dtype={dt})", XI, F32_I64, ("script",))
add("aten::linspace", "dtypes", "torch.linspace(0, 3, 5, dtype={dt}) + x0.sum()", XI, FLOAT + ["i64"])
add("aten::linspace", "one", "torch.linspace(-1, 1, 1) + x0.sum()", XI)
add("aten::linspace", "dtypes", "torch.linspace(0, 3, 5) + x0.sum()", XI, ["f32"], ("script",))
add("aten::eye", "dtypes", "torch.eye(x0.size(1), dtype={dt})", XI, ALL)
add("aten::eye", "rect", "torch.eye(3, x0.size(0) + 2)", XI)
add("aten::eye", "dtypes", "torch.eye(3)", XI, ["f32"], ("script",))
CAST_TO = ["f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "b"]
TORCH_NAME = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
              "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64",
              "b": "bool"}
for to in CAST_TO:  # every pair: ten source dtypes to each target
    add("aten::to", f"to_{to}", f"x0.to(torch.{TORCH_NAME[to]})", X, ALL)
add("aten::to", "to_f32", "x0.to(torch.float32)", X, F32_I64, ("script",))
add("aten::to", "method", "x0.float() + x0.long() + x0.half().float()", X, ["f32", "u8"])
add("aten::to", "like", "x0.to(x1)", [T(BASE), T((2,), dt="f64")], ["f32", "i64"])
add("aten::to", "noncontig", "x0.transpose(0, 2).to(torch.int32)", X)
add("aten::to", "empty", "x0.to(torch.int64)", [T((0, 3))])
add("aten::to", "rank0", "x0.to(torch.float16)", [T(())], ["f32", "i64"])
add("aten::to", "nan", "torch.log(x0).to(torch.int32) * 0", X, kind="aten::to")
add("aten::type_as", "dtypes", "x0.type_as(x1)", [T(BASE), T((2,), dt="f16")], ALL)
add("aten::type_as", "to_int", "x0.type_as(x1)", [T(BASE), T((2,), dt="i32")], FLOAT + ["b"])
add("aten::_to_copy", "dtypes", "torch.ops.aten._to_copy(x0, dtype=torch.float64)", X, ALL)

# ---------------------------------------------------------------- linear algebra

S = "small"
MM = [("1x1", (4,), (4,)), ("1x2", (3,), (3, 4)), ("2x1", (3, 4), (4,)), ("2x2", (3, 4), (4, 5)),
      ("3x3", (2, 3, 4), (2, 4, 5)), ("3x2", (2, 3, 4), (4, 5)), ("4x3", (2, 1, 3, 4), (3, 4, 2)),
      ("1x3", (4,), (2, 4, 3)), ("5x2", (2, 1, 2, 3, 4), (4, 2)), ("empty", (0, 4), (4, 3))]
for variant, a, b in MM:
    add("aten::matmul", variant, "torch.matmul(x0, x1)", [T(a, S), T(b, S)],
        ALL if variant == "2x2" else ["f32"])
add("aten::matmul", "2x2", "x0 @ x1", [T((3, 4), S), T((4, 5), S)], F32_I64, ("script",))
add("aten::matmul", "noncontig", "torch.matmul(x0.t(), x1)", [T((4, 3), S), T((4, 5), S)])
add("aten::matmul", "mix", "torch.matmul(x0, x1)", [T((3, 4), S), T((4, 5), S, "f64")], ["f32"])
add("aten::mm", "dtypes", "torch.mm(x0, x1)", [T((3, 4), S), T((4, 5), S)], ALL)
add("aten::mm", "dtypes", "torch.mm(x0, x1)", [T((3, 4), S), T((4, 5), S)], ["f32"], ("script",))
add("aten::mm", "noncontig", "torch.mm(x0, x1.t())", [T((3, 4), S), T((5, 4), S)])
add("aten::bmm", "dtypes", "torch.bmm(x0, x1)", [T((2, 3, 4), S), T((2, 4, 5), S)], ALL)
add("aten::bmm", "empty", "torch.bmm(x0, x1)", [T((0, 3, 4), S), T((0, 4, 5), S)])
add("aten::mv", "dtypes", "torch.mv(x0, x1)", [T((3, 4), S), T((4,), S)], ALL)
for name in ["dot", "outer", "ger"]:
    add(f"aten::{name}", "dtypes", f"torch.{name}(x0, x1)", [T((4,), S), T((4,), S)], ALL)
add("aten::dot", "dtypes", "torch.dot(x0, x1)", [T((4,), S), T((4,), S)], ["f32"], ("script",))
add("aten::addmm", "dtypes", "torch.addmm(x0, x1, x2)", [T((5,), S), T((3, 4), S), T((4, 5), S)], ALL)
add("aten::addmm", "kw", "torch.addmm(x0, x1, x2, beta=0.5, alpha=2)",
    [T((3, 5), S), T((3, 4), S), T((4, 5), S)], FLOAT)
add("aten::addmm", "dtypes", "torch.addmm(x0, x1, x2)", [T((5,), S), T((3, 4), S), T((4, 5), S)],
    ["f32"], ("script",))
add("aten::baddbmm", "dtypes", "torch.baddbmm(x0, x1, x2)",
    [T((2, 3, 5), S), T((2, 3, 4), S), T((2, 4, 5), S)], ALL)
# beta=0: `self` is ignored. Products of at least 400 multiply-adds per matrix: below that,
# libtorch 1.13's own baddbmm kernel computes 0 * (its uninitialized output), which is NaN
# whenever the allocator hands it memory that held one (pytorch/pytorch#80588, fixed in 2.1),
# and the reference then varies from run to run (with a dirtied allocator, 18131 of 20000 calls
# at [2, 3, 4] x [2, 4, 5]; none at [2, 8, 8] x [2, 8, 8]).
add("aten::baddbmm", "kw", "torch.baddbmm(x0, x1, x2, beta=0.0, alpha=0.5)",
    [T((8,), S), T((2, 8, 8), S), T((2, 8, 8), S)], ["f32", "f64"])
add("aten::linear", "dtypes", "F.linear(x0, x1, x2)", [T((2, 3, 4), S), T((5, 4), S), T((5,), S)], ALL)
add("aten::linear", "no_bias", "F.linear(x0, x1)", [T((3, 4), S), T((5, 4), S)], ["f32", "f64"])
for r in (1, 2, 4, 5):
    add("aten::linear", f"rank{r}", "self.m(x0)", [T(RANK[r][:-1] + (4,), S)],
        init=["self.m = nn.Linear(4, 3).to({dt})"])
add("aten::linear", "module", "self.m(x0)", [T((2, 4), S)], FLOAT,
    init=["self.m = nn.Linear(4, 3).to({dt})"])
add("aten::linear", "module", "self.m(x0)", [T((2, 4), S)], ["f32"], ("script",),
    init=["self.m = nn.Linear(4, 3).to({dt})"])
add("aten::linear", "empty", "self.m(x0)", [T((0, 4), S)], init=["self.m = nn.Linear(4, 3)"])
add("aten::linear", "weight_1d", "F.linear(x0, x1)", [T((3, 4), S), T((4,), S)])
for variant, eq, shapes in [("bmm", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                            ("trace", "ii->i", [(3, 3)]), ("outer", "i,j->ij", [(3,), (4,)]),
                            ("sum", "bij->b", [(2, 3, 4)]), ("perm", "abc->cab", [(2, 3, 4)]),
                            ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (4, 2)])]:
    args = ", ".join(f"x{i}" for i in range(len(shapes)))
    add("aten::einsum", variant, f"torch.einsum('{eq}', {args})", [T(s, S) for s in shapes],
        ALL if variant == "bmm" else ["f32"])
add("aten::einsum", "bmm", "torch.einsum('bij,bjk->bik', x0, x1)", [T((2, 3, 4), S), T((2, 4, 5), S)],
    ["f32"], ("script",))
