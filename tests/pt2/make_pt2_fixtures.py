"""Writes the torch.export (.pt2) fixtures of the parity test, run by torch 2.14 in the Debian
sid chroot that scripts/make-export-chroot.sh makes (torch >= 2.8 writes the PT2 archive layout),
and with --legacy by torch 2.6 in its Debian trixie chroot (torch 2.1-2.7 write the older layout:
serialized_exported_program.json, the weights in torch.save pickles).

    python3 make_pt2_fixtures.py [--legacy] OUT_DIR [NAME ...]

For every model: OUT_DIR/NAME.pt2 (torch.export.save of torch.export.export with the dynamic
dims marked), and per case OUT_DIR/NAME/<case>/in.<input>.npy and out.<output>.npy: the inputs
and torch's own outputs, at two batch sizes (and two sequence lengths) where dims are dynamic.
Output names follow Kiln's flattening of a result: element i of a tuple is "output<i>", a
nested position appends ".<i>", a dict's value takes its key, a lone tensor is "output0".
OUT_DIR/manifest.json lists the models, their cases and tolerances. Weights are random (seeded)."""
import json
import os
import sys

import numpy as np
import torch
from torch.export import Dim

torch.manual_seed(0)


# ------------------------------------------------------------------ models

class Encoder(torch.nn.Module):
    """A BERT-shaped encoder: token embedding + positions, pre-LN attention blocks with a float
    additive mask, GELU MLP; int64 ids [batch, seq] and a float mask [batch, seq]."""

    def __init__(self, vocab=100, d=32, heads=4, layers=2, max_len=64):
        super().__init__()
        self.heads = heads
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(max_len, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict({
                "ln1": torch.nn.LayerNorm(d), "q": torch.nn.Linear(d, d),
                "k": torch.nn.Linear(d, d), "v": torch.nn.Linear(d, d),
                "proj": torch.nn.Linear(d, d), "ln2": torch.nn.LayerNorm(d),
                "fc1": torch.nn.Linear(d, 4 * d), "fc2": torch.nn.Linear(4 * d, d)}))
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, 2)

    def forward(self, input_ids, attention_mask):
        b, s = input_ids.shape
        positions = torch.arange(s, device=input_ids.device)
        x = self.tok(input_ids) + self.pos(positions)
        bias = (1.0 - attention_mask)[:, None, None, :] * -10000.0
        for blk in self.blocks:
            h = blk["ln1"](x)
            q, k, v = blk["q"](h), blk["k"](h), blk["v"](h)
            q = q.view(b, s, self.heads, -1).transpose(1, 2)
            k = k.view(b, s, self.heads, -1).transpose(1, 2)
            v = v.view(b, s, self.heads, -1).transpose(1, 2)
            att = torch.matmul(q, k.transpose(-1, -2)) / (q.shape[-1] ** 0.5) + bias
            att = torch.softmax(att, dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, -1)
            x = x + blk["proj"](y)
            x = x + blk["fc2"](torch.nn.functional.gelu(blk["fc1"](blk["ln2"](x))))
        x = self.ln(x)
        return self.head(x[:, 0])


class Decoder(torch.nn.Module):
    """A GPT-shaped decoder: token embedding + learned positions, pre-LN blocks with causal
    self-attention (a boolean mask built from the sequence length with torch.triu, applied by
    masked_fill), a GELU MLP, a final LayerNorm and an LM head tied to nothing; int64 ids
    [batch, seq] -> logits [batch, seq, vocab]."""

    def __init__(self, vocab=96, d=32, heads=4, layers=2, max_len=64):
        super().__init__()
        self.heads = heads
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(max_len, d) * 0.1)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict({
                "ln1": torch.nn.LayerNorm(d), "qkv": torch.nn.Linear(d, 3 * d),
                "proj": torch.nn.Linear(d, d), "ln2": torch.nn.LayerNorm(d),
                "fc1": torch.nn.Linear(d, 4 * d), "fc2": torch.nn.Linear(4 * d, d)}))
        self.ln = torch.nn.LayerNorm(d)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        b, s = input_ids.shape
        x = self.tok(input_ids) + self.pos[:s]
        future = torch.triu(torch.ones(s, s, dtype=torch.bool, device=x.device), diagonal=1)
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(x.shape[-1], dim=-1)
            q = q.view(b, s, self.heads, -1).transpose(1, 2)
            k = k.view(b, s, self.heads, -1).transpose(1, 2)
            v = v.view(b, s, self.heads, -1).transpose(1, 2)
            att = torch.matmul(q, k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
            att = torch.softmax(att.masked_fill(future, float("-inf")), dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, -1)
            x = x + blk["proj"](y)
            x = x + blk["fc2"](torch.nn.functional.gelu(blk["fc1"](blk["ln2"](x))))
        return self.lm_head(self.ln(x))


class SdpaAttention(torch.nn.Module):
    """F.scaled_dot_product_attention as current models call it: heads split with
    .transpose(1, 2), a BOOL key padding mask (true takes part), and a causal one with an
    explicit scale; a float input [batch, seq, 32] and the mask [batch, seq]."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x, keep):
        b, s, d = x.shape

        def split(t):
            return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        F = torch.nn.functional
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
        y = y + F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class DictHeads(torch.nn.Module):
    """Returns a dict: a small conv trunk with two heads."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.cls = torch.nn.Linear(8, 5)
        self.reg = torch.nn.Linear(8, 2)

    def forward(self, image):
        f = torch.relu(self.conv(image)).mean(dim=(2, 3))
        return {"logits": self.cls(f), "box": torch.sigmoid(self.reg(f))}


class MixedInputs(torch.nn.Module):
    """Several inputs of mixed dtypes: float features, int64 indices, a bool mask, a float64
    scale; returns a tuple."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(10, 4)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, features, index, mask, scale):
        e = self.table(index)
        y = self.lin(features + e)
        y = torch.where(mask.unsqueeze(-1), y, torch.zeros_like(y))
        return y, (y.to(torch.float64) * scale).sum(dim=-1)


class Float64Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16).double()
        self.fc2 = torch.nn.Linear(16, 3).double()

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class IntArith(torch.nn.Module):
    """Integer-only arithmetic on int64 and int32 inputs."""

    def forward(self, a, b):
        c = a * 3 + b.to(torch.int64)
        return c, torch.remainder(c, 7), (a > b.to(torch.int64))


class BufferModel(torch.nn.Module):
    """A registered buffer and a lifted tensor constant beside the parameters."""

    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.randn(8))
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x - self.offset) * torch.tensor([2.0])


class CondModel(torch.nn.Module):
    """torch.cond on a data-dependent predicate: a Linear + ReLU branch when the input's sum is
    positive, an affine map otherwise. Exported as torch.ops.higher_order.cond with both
    branches as subgraphs (the Linear's parameters are operands of the cond)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        def positive(x):
            return torch.relu(self.lin(x))

        def negative(x):
            return x * 2.0 - 1.0

        return torch.cond(x.sum() > 0, positive, negative, (x,))


class NestedCond(torch.nn.Module):
    """torch.cond inside a branch of torch.cond, each returning a pair: the input's sum picks
    the outer branch, its mean the inner one."""

    def forward(self, x):
        def big(x):
            return x * 3.0, x.sum(dim=-1)

        def small(x):
            return x + 1.0, x.mean(dim=-1)

        def positive(x):
            return torch.cond(x.mean() > 1.0, big, small, (x,))

        def negative(x):
            return torch.tanh(x), torch.sigmoid(x).sum(dim=-1)

        return torch.cond(x.sum() > 0, positive, negative, (x,))


class WhileModel(torch.nn.Module):
    """torch.ops.higher_order.while_loop: a Linear + tanh applied `steps` times (an int64
    input, so the trip count is known only at run time)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, steps):
        from torch._higher_order_ops import while_loop

        def cond_fn(i, y):
            return i < steps

        def body_fn(i, y):
            return i + 1, torch.tanh(self.lin(y))

        _, y = while_loop(cond_fn, body_fn, (torch.zeros_like(steps), x))
        return y


class HalfMlp(torch.nn.Module):
    """A float16 MLP: weights, inputs and outputs in that dtype."""

    def __init__(self, dtype):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16).to(dtype)
        self.fc2 = torch.nn.Linear(16, 4).to(dtype)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Bf16Mlp(torch.nn.Module):
    """bfloat16 weights and compute behind a float32 interface (a model cast to bfloat16 whose
    caller sends and reads float32): bfloat16 weights in the archive, casts at both ends."""

    def __init__(self):
        super().__init__()
        self.mlp = HalfMlp(torch.bfloat16)

    def forward(self, x):
        return self.mlp(x.to(torch.bfloat16)).float()


class MutatedBuffer(torch.nn.Module):
    """Counts its calls in a buffer: state kept between calls, which Kiln refuses to serve."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1.0)
        return x * self.calls


def vision(name):
    import torchvision
    return getattr(torchvision.models, name)(weights=None)


def segmentation(name):
    import torchvision
    return getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)


def image(b, size=64):
    return torch.randn(b, 3, size, size)


def Models():
    """(name, module, example args, dynamic_shapes, cases, tolerance); a case is a tuple of args."""
    batch = Dim("batch", min=1, max=64)
    seq = Dim("seq", min=2, max=64)
    out = []
    for name in ["resnet18", "mobilenet_v2", "squeezenet1_1", "mobilenet_v3_small"]:
        out.append((name, vision(name), (image(2),), ({0: batch},),
                    [(image(1),), (image(3),)], 1e-3))

    def ids(b, s):
        return torch.randint(0, 100, (b, s), dtype=torch.int64)

    def mask(b, s):
        m = torch.ones(b, s)
        m[:, s - 1:] = 0.0
        return m

    out.append(("bert_encoder", Encoder(), (ids(2, 8), mask(2, 8)),
                ({0: batch, 1: seq}, {0: batch, 1: seq}),
                [(ids(1, 5), mask(1, 5)), (ids(3, 12), mask(3, 12))], 1e-4))
    out.append(("gpt_decoder", Decoder(), (ids(2, 8),), ({0: batch, 1: seq},),
                [(ids(1, 5),), (ids(3, 12),)], 1e-4))
    # A segmentation model: a dict result ({"out": ...}) whose key names the output.
    out.append(("lraspp_mobilenet_v3_large", segmentation("lraspp_mobilenet_v3_large"),
                (image(2),), ({0: batch},), [(image(1),), (image(3),)], 1e-3))

    def attend(b, s):  # the first position always takes part
        keep = torch.rand(b, s) > 0.3
        keep[:, 0] = True
        return (torch.randn(b, s, 32), keep)

    out.append(("sdpa_attention", SdpaAttention(), attend(2, 8),
                ({0: batch, 1: seq}, {0: batch, 1: seq}),
                [attend(1, 5), attend(3, 12)], 1e-4))

    def attend_none(b, s):  # the first sequence hides every key: torch >= 2.5 gives zeros
        x, keep = attend(b, s)
        keep[0, :] = False
        return x, keep

    out.append(("sdpa_masked_rows", SdpaAttention(), attend_none(2, 8),
                ({0: batch, 1: seq}, {0: batch, 1: seq}),
                [attend_none(1, 5), attend_none(3, 12)], 1e-4))
    out.append(("dict_heads", DictHeads(), (image(2, 16),), ({0: batch},),
                [(image(1, 16),), (image(4, 16),)], 1e-4))

    def mixed(b):
        return (torch.randn(b, 3, 4), torch.randint(0, 10, (b, 3)), torch.rand(b, 3) > 0.5,
                torch.tensor(1.5, dtype=torch.float64))

    out.append(("mixed_inputs", MixedInputs(), mixed(2), ({0: batch}, {0: batch}, {0: batch}, None),
                [mixed(1), mixed(5)], 1e-5))
    out.append(("float64_mlp", Float64Mlp(), (torch.randn(2, 6, dtype=torch.float64),),
                ({0: batch},), [(torch.randn(1, 6, dtype=torch.float64),),
                                (torch.randn(7, 6, dtype=torch.float64),)], 1e-10))

    def ints(b):
        return (torch.randint(-50, 50, (b, 4)), torch.randint(-50, 50, (b, 4), dtype=torch.int32))

    out.append(("int_arith", IntArith(), ints(2), ({0: batch}, {0: batch}),
                [ints(1), ints(6)], 0.0))
    out.append(("buffer_model", BufferModel(), (torch.randn(2, 8),), None,
                [(torch.randn(2, 8),)], 1e-5))

    def signed(b, sign):  # a sum of that sign
        return (sign * (torch.rand(b, 4) + 0.1),)

    out.append(("cond_model", CondModel(), signed(2, 1.0), ({0: batch},),
                [signed(1, 1.0), signed(1, -1.0), signed(5, 1.0), signed(5, -1.0)], 1e-5))

    def scaled(b, low, high):  # elements in [low, high)
        return (low + (high - low) * torch.rand(b, 4),)

    out.append(("nested_cond", NestedCond(), scaled(2, 1.5, 3.0), ({0: batch},),
                [scaled(1, 1.5, 3.0), scaled(3, 0.1, 0.6), scaled(3, -2.0, -0.5)], 1e-5))

    def loop(b, steps):
        return (torch.randn(b, 4), torch.tensor(steps, dtype=torch.int64))

    out.append(("while_model", WhileModel(), loop(2, 2), ({0: batch}, None),
                [loop(1, 0), loop(1, 3), loop(4, 7)], 1e-5))
    out.append(("shape_lists", ShapeLists(), (torch.randn(2, 6, 12),), ({0: batch},),
                [(torch.randn(1, 6, 12),), (torch.randn(5, 6, 12),)], 1e-5))
    out.append(("activations", Activations(), (torch.randn(2, 4, 6),), ({0: batch},),
                [(torch.randn(1, 4, 6),), (torch.randn(5, 4, 6),)], 1e-5))
    # (bfloat16 has no .npy form for the CLI to send: this model's interface is float32.)
    out.append(("bfloat16_mlp", Bf16Mlp(), (torch.randn(2, 8),), ({0: batch},),
                [(torch.randn(1, 8),), (torch.randn(6, 8),)], 3e-2))
    out.append(("rms_norm", RmsNormModel(), (torch.randn(2, 4, 16),), ({0: batch},),
                [(torch.randn(1, 4, 16),), (torch.randn(5, 4, 16),)], 1e-5))
    out.append(("inplace_pieces", InPlacePieces(), (torch.randn(2, 4, 6),), ({0: batch},),
                [(torch.randn(1, 4, 6),), (torch.randn(3, 4, 6),)], 1e-5))
    out.append(("safe_softmax", SafeSoftmax(), masked_scores(2), ({0: batch}, {0: batch}),
                [masked_scores(1), masked_scores(3)], 1e-3))
    out.append(("fallback_ops", FallbackOps(), (torch.randn(2, 7),), ({0: batch},),
                [(torch.randn(1, 7),), (torch.randn(4, 7),)], 1e-5))
    out.append(("inplace_views", InPlaceViews(), (torch.randn(2, 5, 4, 6),), ({0: batch},),
                [(torch.randn(1, 5, 4, 6),), (torch.randn(3, 5, 4, 6),)], 1e-5))
    # The core ATen opset (names ending in "_core": exported, then run_decompositions()).
    out.append(("bert_encoder_core", Encoder(), (ids(2, 8), mask(2, 8)),
                ({0: batch, 1: seq}, {0: batch, 1: seq}),
                [(ids(1, 5), mask(1, 5)), (ids(3, 12), mask(3, 12))], 1e-4))
    out.append(("norms_core", NormsModel(), (image(2, 12),), ({0: batch},),
                [(image(1, 12),), (image(3, 12),)], 1e-4))

    def core_ops(b):
        return (torch.randn(b, 6), torch.randint(0, 6, (b, 6)))

    # Attention decomposed to core ATen: expand/view/bmm, _softmax and the masking of
    # _safe_softmax (eq -inf, any, where) after it; and that masking on fully masked rows.
    out.append(("sdpa_attention_core", SdpaAttention(), attend(2, 8),
                ({0: batch, 1: seq}, {0: batch, 1: seq}),
                [attend(1, 5), attend(3, 12)], 1e-4))
    out.append(("safe_softmax_core", SafeSoftmax(), masked_scores(2), ({0: batch}, {0: batch}),
                [masked_scores(1), masked_scores(3)], 1e-3))
    def sampling(b):
        return (torch.randn(b, 3, 10, 12), torch.rand(b, 7, 9, 2) * 2.8 - 1.4)

    out.append(("grid_sample", GridSample(), sampling(2), ({0: batch}, {0: batch}),
                [sampling(1), sampling(3)], 1e-5))
    def masks(b):
        return (torch.randn(b, 5), torch.tensor([True, False, False, True, False]))

    out.append(("masks", Masks(), masks(2), None, [masks(2), masks(2)], 1e-6))
    out.append(("core_ops", CoreOps(), core_ops(2), ({0: batch}, {0: batch}),
                [core_ops(1), core_ops(4)], 1e-5))
    out.append(("core_ops_core", CoreOps(), core_ops(2), ({0: batch}, {0: batch}),
                [core_ops(1), core_ops(4)], 1e-5))
    half = torch.float16
    out.append(("float16_mlp", HalfMlp(half), (torch.randn(2, 8, dtype=half),), ({0: batch},),
                [(torch.randn(1, 8, dtype=half),), (torch.randn(6, 8, dtype=half),)], 1e-2))
    return out


class ShapeLists(torch.nn.Module):
    """The list-returning shape ops as models call them: q, k, v = qkv(x).chunk(3, -1)
    (bert_like), unflatten of a packed projection (vit_b_16's attention), split by a size that
    leaves a shorter last piece and by sizes, unbind; x [batch, 6, 12]."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(12, 36)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        packed = self.qkv(x).unflatten(-1, (3, 12))
        head, tail = torch.split(x, 4, dim=1)
        first, rest = x.split([1, 5], dim=1)
        rows = x.unbind(1)
        return (q * k + v + packed[:, :, 1], head.sum(1) - tail.sum(1),
                first.squeeze(1) * rows[3] + rows[5])


class Activations(torch.nn.Module):
    """The parameterised activations with arguments off their defaults (elu's alpha, softplus's
    beta and threshold, the shrinks' lambd) and at them, PReLU per channel, GLU; x [batch, 4, 6]."""

    def __init__(self):
        super().__init__()
        self.prelu = torch.nn.PReLU(4)
        with torch.no_grad():
            self.prelu.weight.uniform_(0.05, 0.5)

    def forward(self, x):
        F = torch.nn.functional
        return (F.leaky_relu(x, 0.2) + F.leaky_relu(x), F.elu(x, 0.7) + F.selu(x) + F.celu(x, 1.3),
                F.softplus(x, 2.0, 1.5) + F.softplus(x), F.hardshrink(x, 0.4) + F.softshrink(x),
                F.threshold(x, 0.1, -2.0), self.prelu(x), F.glu(x, -1))


class SmallCnn(torch.nn.Module):
    """Two convolutions with batch norm (eval mode: running statistics as buffers, and
    num_batches_tracked, an int64 buffer) and ReLU, max pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2)
        self.bn2 = torch.nn.BatchNorm2d(16)
        self.fc = torch.nn.Linear(16, 5)
        with torch.no_grad():  # statistics that are not the defaults
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)

    def forward(self, image):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(image))), 2)
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


class StateModel(torch.nn.Module):
    """A persistent and a non-persistent buffer (torch 2.6 saves the latter with the
    constants), a buffer saved with transposed strides (a view the reader materializes), a
    lifted tensor constant."""

    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.randn(6))
        self.register_buffer("gain", torch.rand(6) + 0.5, persistent=False)
        self.register_buffer("mix", torch.randn(6, 6).t())
        self.weight = torch.nn.Parameter(torch.randn(6, 6))

    def forward(self, x):
        y = torch.nn.functional.linear(x - self.offset, self.weight) @ self.mix
        return y * self.gain + torch.tensor([1.0, -1.0, 0.5, 0.0, 2.0, -2.0])


class InPlaceViews(torch.nn.Module):
    """In-place writes through views, which torch.export's graph keeps: a mask built with fill_
    on slices of a zeros tensor (swin_t's shifted windows), x[:, 0] += 1 (a select, add_ and
    copy_ back), relu_ on a slice, a write through a view and a transpose, and a view taken
    before a write that must show it."""

    def forward(self, x):
        y = x.clone()
        before = y[:, 0]
        y[:, 0] += 1.0
        y[:, 1:3].relu_()
        y.view(y.shape[0], -1)[:, -1] = 0.0
        y.transpose(0, 1)[3].mul_(2.0)
        mask = x.new_zeros((4, 6))
        count = 0
        for h in ((0, -2), (-2, -1), (-1, None)):
            for w in ((0, -3), (-3, -1), (-1, None)):
                mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        return y + mask, before * 1.0


class InPlacePieces(torch.nn.Module):
    """In-place writes into pieces of split, chunk and unbind (q *= scale after
    q, k = qkv.chunk(2)), which write the tensor they were split from; a piece taken before
    a write into another shows it when it views the written rows."""

    def forward(self, x):
        y = x * 1.0
        q, k = y.chunk(2, dim=-1)
        q.mul_(2.0)
        a, b = y.split([1, 3], dim=1)
        b.add_(1.0)
        u = y.unbind(2)
        u[0].sub_(5.0)
        return y + 0.0, k * 1.0, a * 1.0


class NormsModel(torch.nn.Module):
    """Convolution, GroupNorm, adaptive average pooling, LayerNorm, Linear: exported as
    "norms_core" through run_decompositions(), the core ATen opset (native_group_norm,
    native_layer_norm, _adaptive_avg_pool2d, convolution, addmm) that edge toolchains and
    torch < 2.5's export wrote."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.gn = torch.nn.GroupNorm(4, 8)
        self.ln = torch.nn.LayerNorm(32)
        self.fc = torch.nn.Linear(32, 5)
        with torch.no_grad():
            self.gn.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        y = torch.relu(self.gn(self.conv(x)))
        y = torch.nn.functional.adaptive_avg_pool2d(y, (2, 2)).flatten(1)
        return self.fc(self.ln(y))


class GridSample(torch.nn.Module):
    """F.grid_sample (aten.grid_sampler_2d) in its three modes and paddings, on an image and a
    sampling grid given as inputs, the grid partly outside [-1, 1]; and a spatial transformer:
    F.affine_grid (aten.affine_grid_generator) of x's own size, which only the run knows."""

    def __init__(self):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.tensor([[0.9, -0.2, 0.1], [0.25, 1.1, -0.05]]))

    def forward(self, x, grid):
        F = torch.nn.functional
        warp = F.affine_grid(self.theta.expand(x.shape[0], 2, 3), x.size(), align_corners=False)
        return (F.grid_sample(x, grid, align_corners=False)
                + F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True)
                + F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection",
                                align_corners=False),
                F.grid_sample(x, warp, align_corners=False))


class Masks(torch.nn.Module):
    """Boolean-mask indexing and nonzero, whose results' lengths only the data decide (unbacked
    sizes in the exported program): x[x > 0], x[:, mask], a mask beside an integer index,
    torch.nonzero and torch.where(cond)."""

    def forward(self, x, keep):
        pos = x[x > 0]
        cols = x[:, keep]
        mixed = x[torch.tensor([1, 0]), keep]
        rows, _ = torch.where(x > 0.5)
        return (pos * 2, cols.sum(1), mixed + 1, torch.nonzero(x < -0.5), rows)


class CoreOps(torch.nn.Module):
    """Ops Kiln once ran only through libtorch: the scatters, index_put, repeat_interleave,
    tile, var_mean, isinf, nan_to_num, asinh and atanh; x [batch, 6] float, idx [batch, 6] INT64
    in [0, 6). Exported as written ("core_ops") and decomposed to core ATen ("core_ops_core")."""

    def forward(self, x, idx):
        summed = torch.zeros_like(x).scatter_add(1, idx, x)
        peak = torch.full_like(x, -1e4).scatter_reduce(1, idx, x, "amax", include_self=False)
        marked = x.scatter(1, idx[:, :2], 0.5)
        spread = x.repeat_interleave(2, dim=1) + x.tile((1, 2))
        var, mean = torch.var_mean(x, dim=1, keepdim=True)
        big = x * 3e38
        cleaned = torch.nan_to_num(torch.log(x)) + torch.nan_to_num(big, posinf=1.0, neginf=-1.0)
        curved = torch.asinh(x) + torch.atanh(torch.tanh(x) * 0.5)
        clipped = x.clone()
        clipped[x < -1.0] = 0.0  # index_put with a mask
        clipped[:, idx[0, :2]] = 1.0  # and with an index tensor
        return summed, peak, marked, spread, var, mean, torch.isinf(big), cleaned, curved, clipped


class RmsNormModel(torch.nn.Module):
    """nn.RMSNorm (torch >= 2.4, which libtorch 1.13 lacks), with and without an affine weight
    and with its default eps (the dtype's machine epsilon), as LLM blocks use it."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.RMSNorm(16)
        self.plain = torch.nn.RMSNorm([4, 16], eps=1e-5, elementwise_affine=False)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        return self.plain(self.norm(x) * 3.0)


class FallbackOps(torch.nn.Module):
    """An op Kiln does not translate (logcumsumexp, its dim given by name) between native ones:
    it runs through libtorch's fallback, which supplies the arguments the program leaves out."""

    def forward(self, x):
        return torch.logcumsumexp(x * 2.0, dim=1) + torch.cumsum(x, 1, dtype=torch.float64).float()


class NewerOp(torch.nn.Module):
    """An op torch 2.2+ has and libtorch 1.13 lacks (_int_mm, int8 x int8 -> int32 matmul):
    neither Kiln nor its fallback runs it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randint(-8, 8, (32, 16), dtype=torch.int8))

    def forward(self, x):
        return torch._int_mm(x, self.w).float() + 1.0


class SafeSoftmax(torch.nn.Module):
    """_safe_softmax (torch 2.5+, what torch's own attention decompositions use): a row whose
    every score is masked to -inf gives zeros, not NaN; in float32 from float16 scores too."""

    def forward(self, scores, mask):
        masked = scores.masked_fill(mask, float("-inf"))
        return (torch.ops.aten._safe_softmax(masked, -1),
                torch.ops.aten._safe_softmax(masked.half(), -1, torch.float32))


def masked_scores(b):
    """(scores, mask) with the first row of every batch fully masked and a partly masked one."""
    mask = torch.zeros(b, 4, 6, dtype=torch.bool)
    mask[:, 0, :] = True
    mask[:, 1, 2:] = True
    return torch.randn(b, 4, 6), mask


def LegacyModels():
    """The fixtures written by torch 2.6 (--legacy), as Models() lists them."""
    batch = Dim("batch", min=1, max=32)
    mlp = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                              torch.nn.Tanh(), torch.nn.Linear(32, 3))
    return [
        ("legacy_mlp", mlp, (torch.randn(2, 10),), ({0: batch},),
         [(torch.randn(1, 10),), (torch.randn(9, 10),)], 1e-5),
        ("legacy_cnn", SmallCnn(), (image(2, 16),), ({0: batch},),
         [(image(1, 16),), (image(4, 16),)], 1e-4),
        ("legacy_state", StateModel(), (torch.randn(3, 6),), None, [(torch.randn(3, 6),)], 1e-5),
        ("legacy_inplace_views", InPlaceViews(), (torch.randn(2, 5, 4, 6),), ({0: batch},),
         [(torch.randn(1, 5, 4, 6),), (torch.randn(3, 5, 4, 6),)], 1e-5),
    ]


def Refused():
    """(name, module, example args, the status code and a phrase of the refusal)."""
    return [("mutated_buffer", MutatedBuffer(), (torch.randn(2, 3),), "INVALID_ARGUMENT",
             "mutates buffer 'calls'"),
            ("newer_op", NewerOp(), (torch.randint(-8, 8, (32, 32), dtype=torch.int8),),
             "UNIMPLEMENTED", "libtorch has no operator aten::_int_mm")]


# ------------------------------------------------------------------ writing

def FlatOutputs(result):
    """[(name, tensor)] in Kiln's naming of a flattened result."""
    flat = []

    def walk(value, name):
        if isinstance(value, torch.Tensor):
            flat.append((name, value))
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, k if name is None else f"{name}.{k}")
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                walk(v, f"output{i}" if name is None else f"{name}.{i}")
        else:
            raise TypeError(f"unsupported output {type(value)}")

    if isinstance(result, torch.Tensor):
        return [("output0", result)]
    walk(result, None)
    return flat


def main():
    argv = sys.argv[1:]
    legacy = argv[:1] == ["--legacy"]
    if legacy:
        argv = argv[1:]
    out_dir = argv[0]
    only = set(argv[1:])
    os.makedirs(out_dir, exist_ok=True)
    manifest = {"torch": torch.__version__, "models": []}
    for name, module, example, dynamic, cases, tol in (LegacyModels() if legacy else Models()):
        if only and name not in only:
            continue
        module.eval()
        arg_names = list(module.forward.__code__.co_varnames[1:module.forward.__code__.co_argcount])
        with torch.no_grad():
            ep = torch.export.export(module, example, dynamic_shapes=dynamic)
            if name.endswith("_core"):
                ep = ep.run_decompositions()
            path = os.path.join(out_dir, name + ".pt2")
            torch.export.save(ep, path)
            if legacy:  # the layout this torch writes, not the PT2 archive of torch >= 2.8
                import zipfile
                names = zipfile.ZipFile(path).namelist()
                assert "serialized_exported_program.json" in names, names
            entry = {"name": name, "file": name + ".pt2", "tolerance": tol, "cases": []}
            for k, args in enumerate(cases):
                case_dir = os.path.join(out_dir, name, f"case{k}")
                os.makedirs(case_dir, exist_ok=True)
                inputs = {}
                for arg_name, a in zip(arg_names, args):
                    np.save(os.path.join(case_dir, f"in.{arg_name}.npy"), a.numpy())
                    inputs[arg_name] = f"{name}/case{k}/in.{arg_name}.npy"
                outputs = {}
                for out_name, t in FlatOutputs(module(*args)):
                    np.save(os.path.join(case_dir, f"out.{out_name}.npy"), t.numpy())
                    outputs[out_name] = f"{name}/case{k}/out.{out_name}.npy"
                entry["cases"].append({"inputs": inputs, "outputs": outputs})
        manifest["models"].append(entry)
        print("wrote", name, flush=True)
    # Programs Kiln refuses to serve, with what its message must name.
    manifest["refused"] = []
    for name, module, example, code, says in ([] if legacy else Refused()):
        if only and name not in only:
            continue
        ep = torch.export.export(module, example)
        torch.export.save(ep, os.path.join(out_dir, name + ".pt2"))
        manifest["refused"].append({"name": name, "file": name + ".pt2", "code": code,
                                    "says": says})
        print("wrote", name, flush=True)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
