"""Writes PyTorch's type-promotion results, and a sample of traced modules with
their outputs, for Kiln's promotion tests (tests/engine/common).

Usage: gen_promotion_table.py OUT_DIR

OUT_DIR/promotion_table.tsv has one row per (op, lhs dtype, lhs kind, rhs
dtype, rhs kind): the dtype libtorch gives, or "error" when libtorch raises.
Kinds are "tensor" (dimensioned), "zerodim" (a 0-dim tensor) and "scalar" (a
Python number: INT64 stands for int, FP64 for float, BOOL for bool, the dtypes
Kiln gives run-time scalars).

OUT_DIR/promotion_cases/ holds a sample of those rows as traced TorchScript
modules (case_N.pt), plus a few small models over the dtypes models bring
(float64 MLP, float64 CNN, float64 decoder head, int64/int32 embedding ids with argmax, bool masks, uint8
images, integer arithmetic, mixed promotion), and promotion_cases.tsv lists,
per case, the inputs and
the output libtorch computed from that file (loaded and frozen, as Kiln's
importer does), as raw little-endian bytes in hex, so the
numeric test compares Kiln with libtorch bit for bit.
"""
import os
import sys

import torch

DTYPES = [
    ("BOOL", torch.bool), ("UINT8", torch.uint8), ("INT8", torch.int8),
    ("INT16", torch.int16), ("INT32", torch.int32), ("INT64", torch.int64),
    ("FP16", torch.float16), ("BF16", torch.bfloat16), ("FP32", torch.float32),
    ("FP64", torch.float64),
]
NAME_OF = {t: n for n, t in DTYPES}
# A Python scalar of each kind, and the dtype name the table records for it.
SCALARS = [("INT64", -3), ("FP64", 2.5), ("BOOL", True)]

LHS_VALUES = [5, -7, 3, 1, 0, 9]
RHS_VALUES = [2, 3, -2, 4, 7, -5]  # no zero: integer division by zero raises


def op_fn(op):
    """The op as a function of (a, b); `where` selects with a fixed mask."""
    mask = torch.tensor([True, False, True, False, False, True])
    table = {
        "add": lambda a, b: torch.add(a, b),
        "sub": lambda a, b: torch.sub(a, b),
        "mul": lambda a, b: torch.mul(a, b),
        "div": lambda a, b: torch.div(a, b),
        "floor_divide": lambda a, b: torch.floor_divide(a, b),
        "remainder": lambda a, b: torch.remainder(a, b),
        "eq": lambda a, b: torch.eq(a, b),
        "lt": lambda a, b: torch.lt(a, b),
        "bitwise_and": lambda a, b: torch.bitwise_and(a, b),
        "logical_and": lambda a, b: torch.logical_and(a, b),
        "maximum": lambda a, b: torch.maximum(a, b),
        "where": lambda a, b: torch.where(mask if a.dim() else mask[0], a, b),
        "add_": lambda a, b: a.clone().add_(b),
    }
    return table[op]


OPS = ["add", "sub", "mul", "div", "floor_divide", "remainder", "eq", "lt", "bitwise_and",
       "logical_and", "maximum", "where", "add_"]


def make_operand(dtype, kind, values):
    if kind == "tensor":
        return torch.tensor(values).to(dtype)
    return torch.tensor(values[1]).to(dtype)  # zerodim: a negative value


def hexbytes(t):
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        raw = t.view(torch.int16).numpy().tobytes()
    else:
        raw = t.numpy().tobytes()
    return raw.hex() if raw else "-"


def describe(t):
    dims = ",".join(str(d) for d in t.shape)
    return f"{NAME_OF[t.dtype]}:[{dims}]:{hexbytes(t)}"


class Binary(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.fn = op_fn(op)

    def forward(self, a, b):
        return self.fn(a, b)


class WithScalar(torch.nn.Module):
    def __init__(self, op, scalar):
        super().__init__()
        self.fn = op_fn(op)
        self.scalar = scalar

    def forward(self, a):
        return self.fn(a, self.scalar)


class F64Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16).double()
        self.fc2 = torch.nn.Linear(16, 4).double()
        self.norm = torch.nn.LayerNorm(16).double()

    def forward(self, x):
        h = self.norm(torch.nn.functional.gelu(self.fc1(x)))
        return torch.softmax(self.fc2(torch.tanh(h) + torch.sigmoid(h)), dim=-1)


class F64Cnn(torch.nn.Module):
    """model.double() on a small conv net: 3x3 conv with padding, batch norm
    (eval, non-trivial running statistics; the second one follows a pool, so
    freezing cannot fold it into a conv), relu, max pool, depthwise conv,
    adaptive average pool and linear, all in float64."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.head = torch.nn.Linear(8, 5)
        for bn in (self.bn1, self.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.2, 0.2)
        self.double()

    def forward(self, x):
        h = self.pool(torch.relu(self.bn1(self.conv(x))))
        h = torch.relu(self.dw(self.bn2(h)))
        h = torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)
        return self.head(h)


class F64DecoderHead(torch.nn.Module):
    """model.double() on the float64 kernels beyond a CNN: a transposed conv
    (stride 2, output_padding), bilinear resizing with and without
    align_corners and bicubic, var/std/logsumexp/norm/cumsum statistics, an
    einsum, an nn.MultiheadAttention over the pixels as tokens (PyTorch's fused
    attention, traced without grad), an LSTM and a two-layer bidirectional
    GRU; every result flattened into one float64 output."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.proj = torch.nn.Linear(6, 8)
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.lstm = torch.nn.LSTM(8, 5, batch_first=True)
        self.gru = torch.nn.GRU(8, 4, num_layers=2, bidirectional=True)
        self.double()

    def forward(self, x):
        interp = torch.nn.functional.interpolate
        h = self.up(x)  # [B, 6, 12, 12]
        a = interp(h, size=(17, 15), mode="bilinear", align_corners=False)
        b = interp(h, size=(9, 10), mode="bilinear", align_corners=True)
        c = interp(h, scale_factor=1.5, mode="bicubic", align_corners=False)
        stats = [a.var(dim=(2, 3)), b.std(dim=-1).flatten(1), torch.logsumexp(h, dim=1).flatten(1),
                 torch.norm(c, dim=(2, 3)), torch.cumsum(b, dim=3).flatten(1)]
        seq = self.proj(b.flatten(2).transpose(1, 2))  # [B, 90, 8]
        gram = torch.einsum("bld,bmd->blm", seq[:, :6], seq[:, 6:12])
        attended, _ = self.attn(seq, seq, seq, need_weights=False)
        rnn, _ = self.lstm(attended)
        gru, _ = self.gru(attended.transpose(0, 1))
        return torch.cat(stats + [a.flatten(1), c.flatten(1), gram.flatten(1),
                                  attended.flatten(1), rnn.flatten(1),
                                  gru.transpose(0, 1).flatten(1)], dim=1)


class EmbeddingArgmax(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)
        self.head = torch.nn.Linear(8, 6)

    def forward(self, ids):
        return self.head(self.emb(ids)).argmax(dim=-1)


class MaskCount(torch.nn.Module):
    def forward(self, x, mask):
        return (x.masked_fill(mask, 0.0) > 0).sum(dim=-1)


class Uint8Normalize(torch.nn.Module):
    def forward(self, img):
        return img.float() / 255.0 - 0.5


class IntArithmetic(torch.nn.Module):
    def forward(self, a, b):
        return (a * 3 + b) // 2 % 5 - (a // -3)


class IntTruncDiv(torch.nn.Module):
    """div(rounding_mode='trunc') of int64 tensors with negatives stays int64, toward zero."""

    def forward(self, a, b):
        return torch.div(a, b, rounding_mode="trunc") * 10 + torch.div(a, 4, rounding_mode="trunc")


class MixedPromotion(torch.nn.Module):
    def forward(self, i, f, m):
        return (i + 2.5) * m + f.double() / i


def model_cases():
    """Small models over the dtypes models bring: (name, module, inputs)."""
    torch.manual_seed(0)
    return [
        ("f64_mlp", F64Mlp(), (torch.randn(3, 8, dtype=torch.float64),)),
        ("f64_cnn", F64Cnn(), (torch.randn(2, 3, 12, 12, dtype=torch.float64),)),
        ("f64_decoder_head", F64DecoderHead(), (torch.randn(2, 4, 6, 6, dtype=torch.float64),)),
        ("embedding_argmax_int64", EmbeddingArgmax(), (torch.randint(0, 20, (2, 5)),)),
        ("embedding_argmax_int32", EmbeddingArgmax(),
         (torch.randint(0, 20, (2, 5), dtype=torch.int32),)),
        ("mask_count", MaskCount(), (torch.randn(3, 7), torch.rand(3, 7) > 0.5)),
        ("uint8_normalize", Uint8Normalize(),
         (torch.randint(0, 256, (2, 3, 4, 4), dtype=torch.uint8),)),
        ("int_arithmetic", IntArithmetic(),
         (torch.randint(-50, 50, (4, 5)), torch.randint(-50, 50, (4, 5), dtype=torch.int32))),
        ("int_trunc_div", IntTruncDiv(),
         (torch.randint(-50, 50, (4, 5)),
          torch.randint(1, 9, (4, 5)) * (torch.randint(0, 2, (4, 5)) * 2 - 1))),
        ("mixed_promotion", MixedPromotion(),
         (torch.randint(1, 9, (2, 3), dtype=torch.int32), torch.randn(2, 3),
          torch.rand(2, 3) > 0.3)),
    ]


def main():
    out_dir = sys.argv[1]
    case_dir = os.path.join(out_dir, "promotion_cases")
    os.makedirs(case_dir, exist_ok=True)
    rows = []
    cases = []
    row_index = 0
    for op in OPS:
        fn = op_fn(op)
        for lname, ldt in DTYPES:
            for lkind in ("tensor", "zerodim"):
                a = make_operand(ldt, lkind, LHS_VALUES)
                rhs = [(rname, rkind, make_operand(rdt, rkind, RHS_VALUES))
                       for rname, rdt in DTYPES for rkind in ("tensor", "zerodim")]
                rhs += [(sname, "scalar", value) for sname, value in SCALARS]
                for rname, rkind, b in rhs:
                    if op == "add_" and lkind == "zerodim" and rkind == "tensor":
                        continue  # a shape error (a 0-dim output cannot broadcast), not a type one
                    try:
                        result = fn(a, b)
                        got = NAME_OF[result.dtype]
                    except (RuntimeError, TypeError):
                        result = None
                        got = "error"
                    rows.append(f"{op}\t{lname}\t{lkind}\t{rname}\t{rkind}\t{got}")
                    row_index += 1
                    # Every 9th row that libtorch runs, over all ops and kinds.
                    if result is None or row_index % 9 != 0:
                        continue
                    n = len(cases)
                    path = os.path.join(case_dir, f"case_{n}.pt")
                    try:
                        if rkind == "scalar":
                            module = torch.jit.trace(WithScalar(op, b), (a,), check_trace=False)
                            inputs = [a]
                        else:
                            module = torch.jit.trace(Binary(op), (a, b), check_trace=False)
                            inputs = [a, b]
                        module.save(path)
                        # What libtorch computes for the same file, frozen as Kiln imports it.
                        frozen = torch.jit.freeze(torch.jit.load(path).eval())
                        traced_result = frozen(*inputs)
                    except RuntimeError:
                        continue  # the tracer cannot record some scalar overloads (bool)
                    if traced_result.dtype != result.dtype:
                        # The traced file disagrees with eager PyTorch: floor_divide by a
                        # float records the number as a plain 0-dim double tensor, which
                        # then promotes an integer tensor to FP64. Kiln follows eager.
                        continue
                    result = traced_result
                    cases.append("\t".join(
                        [f"case_{n}", op, lname, lkind, rname, rkind,
                         " ".join(describe(t) for t in inputs), describe(result)]))
    for name, module, inputs in model_cases():
        path = os.path.join(case_dir, f"{name}.pt")
        # Without grad, as a served model runs: nn.MultiheadAttention then
        # records PyTorch's fused attention op, which is what Kiln imports.
        with torch.no_grad():
            torch.jit.trace(module.eval(), inputs, check_trace=False).save(path)
        result = torch.jit.freeze(torch.jit.load(path).eval())(*inputs)
        cases.append("\t".join([name, "model", NAME_OF[inputs[0].dtype], "tensor", "-", "-",
                                 " ".join(describe(t) for t in inputs), describe(result)]))
    with open(os.path.join(out_dir, "promotion_table.tsv"), "w") as f:
        f.write("# op\tlhs_dtype\tlhs_kind\trhs_dtype\trhs_kind\tresult (from libtorch "
                + torch.__version__ + ")\n")
        f.write("\n".join(rows) + "\n")
    with open(os.path.join(out_dir, "promotion_cases.tsv"), "w") as f:
        f.write("# name\top\tlhs_dtype\tlhs_kind\trhs_dtype\trhs_kind\t"
                "inputs (DTYPE:[dims]:hex ...)\toutput\n")
        f.write("\n".join(cases) + "\n")


if __name__ == "__main__":
    main()
