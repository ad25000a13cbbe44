"""The differential sweep's case builders: for every aten op in Kiln's translation table, generated
variants across the ten dtypes, ranks 0 to 5, broadcasting, scalar operands, keyword
variants, empty and non-contiguous inputs, traced and scripted.

A case is an expression over inputs x0, x1, ... (`{dt}` stands for the case's torch dtype),
the op whose row of the coverage matrix it counts in (the op must appear in the saved
graph; gen_sweep.py checks), and input makers. Families build the usual variants:

  dtypes     the base shape (2, 3, 4) in each applicable dtype
  rankN      float32 at rank N (0 to 5)
  empty      a zero-sized dim
  noncontig  every input transposed inside the module (a strided view)
  bcast*     operands that broadcast; mix_* operands of two dtypes (promotion)
  s_*        Python number operands; kw_* keyword arguments; inplace the `op_` form
  .script    the same expression scripted instead of traced

Inputs stay inside each op's domain (positive for log, distinct values for sort) so that
the comparison measures Kiln's arithmetic; integer divisors are non-zero.
"""
import re

import torch

TORCH = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
         "bf16": torch.bfloat16, "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16,
         "i32": torch.int32, "i64": torch.int64, "b": torch.bool}
FLOAT = ["f32", "f64", "f16", "bf16"]
INT = ["i8", "u8", "i16", "i32", "i64"]
ALL = FLOAT + INT + ["b"]
RANK = {0: (), 1: (5,), 2: (3, 4), 3: (2, 3, 4), 4: (2, 1, 3, 4), 5: (2, 1, 2, 3, 2)}
BASE = RANK[3]

# Table ops that no TorchScript program records (torch.export's forms); the sweep reaches
# them only through the .pt2 importer's tests.
NOT_COVERED = {
    "aten::_native_batch_norm_legit_no_training": "torch.export form; libtorch 1.13 has no such op",
    "aten::sym_size": "torch.export form (symbolic sizes); TorchScript records aten::size",
    "aten::lift_fresh_copy": "torch.export form; TorchScript records no such node",
    "aten::scaled_dot_product_attention": "no such op in libtorch 1.13 (torch >= 2.0): the "
                                          ".pt2 fixture sdpa_attention (pt2.parity)",
    "aten::_prelu_kernel": "torch.export's form of prelu; TorchScript records aten::prelu: the "
                           ".pt2 fixture activations (pt2.parity)",
    "aten::_safe_softmax": "no such op in libtorch 1.13 (torch >= 2.5): the .pt2 fixture "
                           "safe_softmax (pt2.parity)",
    "aten::rms_norm": "no such op in libtorch 1.13 (torch >= 2.4): the .pt2 fixture rms_norm "
                      "(pt2.parity)",
    "aten::softmin": "no such op in libtorch 1.13: F.softmin records aten::neg and aten::softmax",
    "aten::grid_sampler_2d": "torch.export's form of F.grid_sample on 4-D input; TorchScript "
                             "records aten::grid_sampler (its cases here)",
    # Not generated here yet; tests/parity/gen_ops.py has their cases against libtorch.
    "aten::_nested_tensor_from_mask": "recorded only inside a TransformerEncoder's fast path "
                                      "(no_grad, padding mask): parity's encoder cases",
    "aten::to_padded_tensor": "recorded only inside a TransformerEncoder's fast path: parity's "
                              "encoder cases",
    "torchvision::nms": "torchvision's op: parity's nms cases (ties, float64, empty, batched_nms)",
    "torchvision::roi_align": "torchvision's op: parity's roi_align cases (aligned, sampling "
                              "ratios, float64)",
}

# Table ops that TorchScript records under another name (its alias normalization, traced
# and scripted alike): their cases count in the alias's row and show the canonical op.
ALIASES = {"aten::fix": "aten::trunc", "aten::fix_": "aten::trunc_", "aten::true_divide": "aten::div",
           "aten::true_divide_": "aten::div_", "aten::greater": "aten::gt",
           "aten::greater_equal": "aten::ge", "aten::less": "aten::lt",
           "aten::less_equal": "aten::le", "aten::not_equal": "aten::ne",
           "aten::clip": "aten::clamp", "aten::clip_": "aten::clamp_",
           "aten::moveaxis": "aten::movedim", "aten::swapaxes": "aten::transpose",
           "aten::swapdims": "aten::transpose", "aten::ger": "aten::outer",
           "aten::arcsin": "aten::asin", "aten::arccos": "aten::acos", "aten::arctan": "aten::atan",
           "aten::arcsinh": "aten::asinh", "aten::arccosh": "aten::acosh",
           "aten::arctanh": "aten::atanh", "aten::arcsin_": "aten::asin_",
           "aten::arccos_": "aten::acos_", "aten::arctan_": "aten::atan_",
           "aten::arcsinh_": "aten::asinh_", "aten::arctanh_": "aten::atanh_"}


class Case:
    def __init__(self, op, variant, dtype, mode, expr, inputs, init=(), kind=None):
        self.op = op  # its row in the coverage matrix
        self.kind = kind or op  # the node kind the saved graph must contain
        short = op.split("::")[1]
        self.name = f"{short}.{variant}.{dtype}" + (".script" if mode == "script" else "")
        self.dtype = dtype
        self.mode = mode
        dt = f"torch.{str(TORCH[dtype]).split('.')[1]}"
        self.expr = expr.replace("{dt}", dt)
        self.init = [s.replace("{dt}", dt) for s in init]
        self.makers = [maker(shape, dom, dtype if d is None else d) for shape, dom, d in inputs]
        self.inputs = inputs


def maker(shape, dom, dtype):
    td = TORCH[dtype]
    shape = tuple(shape)

    def make():
        if dom.startswith("idx"):  # indices in [0, n), int64
            return torch.randint(0, int(dom[3:]), shape)
        if dom == "mask":
            return torch.rand(shape) < 0.5
        n = 1
        for s in shape:
            n *= s
        if td.is_floating_point:
            if dom == "pos":
                x = torch.rand(shape) * 2 + 0.5
            elif dom == "unit":
                x = torch.rand(shape) * 1.6 - 0.8
            elif dom == "small":
                x = torch.randn(shape) * 0.5
            elif dom == "distinct":  # exact in bfloat16 too
                x = (torch.randperm(n).float() - n // 2).reshape(shape) / 4
            else:
                x = torch.randn(shape)
            return x.to(td)
        if td == torch.bool:
            return torch.ones(shape, dtype=torch.bool) if dom == "pos" else torch.rand(shape) < 0.5
        lo = 0 if td == torch.uint8 else -4
        if dom == "pos":
            x = torch.randint(1, 6, shape)
        elif dom == "unit":
            x = torch.randint(max(lo, -1), 2, shape)
        elif dom == "distinct":
            x = torch.randperm(n).reshape(shape) - (0 if td == torch.uint8 else n // 2)
        else:
            x = torch.randint(lo, 5, shape)
        return x.to(td)

    return make


def T(shape, dom="any", dt=None):
    """One input: shape, domain, dtype (None: the case's dtype)."""
    return (shape, dom, dt)


CASES = []


def add(op, variant, expr, inputs, dtypes=("f32",), modes=("trace",), init=(), kind=None):
    for d in dtypes:
        for m in modes:
            CASES.append(Case(op, variant, d, m, expr, inputs, init, kind))


def noncontig(expr):
    return re.sub(r"\bx(\d)\b", r"x\1.transpose(-1, -2)", expr)


def std_variants(op, expr, doms, dtypes=ALL, ranks=(0, 1, 2, 4, 5), script=("f32", "i64"),
                 empty=True, nc=True, base=BASE, kind=None):
    """dtypes, rankN, empty, noncontig and scripted cases of `expr` whose inputs all share a
    shape (doms: one domain per input)."""
    add(op, "dtypes", expr, [T(base, d) for d in doms], dtypes, kind=kind)
    for r in ranks:
        add(op, f"rank{r}", expr, [T(RANK[r], d) for d in doms], kind=kind)
    if empty:
        add(op, "empty", expr, [T((0, 3), d) for d in doms], kind=kind)
    if nc:
        add(op, "noncontig", noncontig(expr), [T((3, 4, 5), d) for d in doms], kind=kind)
    add(op, "dtypes", expr, [T(base, d) for d in doms], [d for d in script if d in dtypes],
        ("script",), kind=kind)
