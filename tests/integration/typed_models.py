"""Writes the TorchScript models of test_typed_inputs.py into a directory.

Models take and return tensors of many dtypes (float64, int64 token ids, bool masks,
uint8 images, int32), return tuples, lists and dicts, and mix dtypes under PyTorch's
promotion rules. For every model <name>.pt it writes the sample inputs
<name>.input.<arg>.npy and libtorch's outputs for exactly the saved archive,
<name>.output.<output-name>.npy, with output names as Kiln derives them from the
model's structure (output0, output1.0, dict keys), and manifest.json: per model, the
parameter names of the Python forward() (a tuple parameter p as p.0, p.1; a list
parameter xs as xs.0, its elements saved as <name>.input.xs.<i>.npy) and the
output names. Seeded: reruns are identical.

    python3 typed_models.py OUTPUT_DIR
"""
import inspect
import json
import os
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from torch_fixtures import save_and_run  # noqa: E402


class Float64Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x)) + x.mean(dim=1, keepdim=True)


class TinyBert(nn.Module):
    """nn.Embedding + nn.TransformerEncoder (batch_first), padding from the attention mask."""

    def __init__(self, vocab=50, d_model=32, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(1, 16, d_model) * 0.1)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=64, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, input_ids, attention_mask):
        h = self.embed(input_ids) + self.position[:, : input_ids.shape[1]]
        return self.encoder(h, src_key_padding_mask=attention_mask == 0)


class Uint8Image(nn.Module):
    """Takes raw uint8 pixels and normalises inside the model."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, image):
        x = image.float() / 255.0
        return self.conv((x - self.mean) / self.std)


class BoolMask(nn.Module):
    def forward(self, values, mask):
        kept = values.masked_fill(mask, 0.0)
        return kept.sum(dim=1)


class ArgmaxAndSign(nn.Module):
    """Integer and bool outputs: the argmax of each row and which elements are positive."""

    def forward(self, x):
        return x.argmax(dim=1), x > 0


class Promotion(nn.Module):
    """PyTorch's promotion rules: int32 + int64, int tensor * 2.5, bool * float, int / int."""

    def forward(self, a, b, m, f):
        return a + b, b * 2.5, m * f, a / b


class IntDivision(nn.Module):
    """Integer division of int64 tensors with negatives: trunc rounds toward zero, floor down;
    both stay int64 (not a float division then a rounding)."""

    def forward(self, a, b):
        return torch.div(a, b, rounding_mode="trunc"), torch.div(a, b, rounding_mode="floor")


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x) -> Dict[str, torch.Tensor]:
        logits = self.fc(x)
        return {"logits": logits, "probs": torch.softmax(logits, dim=1)}


class NestedTupleOut(nn.Module):
    def forward(self, x) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        return x * 2.0, (x + 1.0, x.sum(dim=1))


class NestedTupleFromBranches(nn.Module):
    """A nested tuple returned from both branches of an if (libtorch 1.13's own tuple lowering
    asserts on this; Kiln flattens it first)."""

    def forward(self, x) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        if bool(x.sum() > 0):
            return x * 3.0, (x + 1.0, x.abs())
        else:
            return x - 1.0, (x, x * x)


class ListOut(nn.Module):
    def forward(self, x) -> List[torch.Tensor]:
        return [x * 3.0, x - 1.0]


class TupleInput(nn.Module):
    def forward(self, pair: Tuple[torch.Tensor, torch.Tensor], scale: torch.Tensor):
        return (pair[0] + pair[1]) * scale


class ListInput(nn.Module):
    """A List[Tensor] parameter, sent as inputs xs.0, xs.1, ...: cat and a loop over it."""

    def forward(self, xs: List[torch.Tensor], scale: torch.Tensor):
        total = torch.zeros_like(xs[0])
        for x in xs:
            total = total + x
        return torch.cat(xs, 0) * scale, total


class OptionalListInput(nn.Module):
    """An Optional[List[Tensor]] parameter: left out it is None; sent as extra.0, extra.1, ...
    or whole, as one tensor "extra" stacked on a new first dim ([0, ...] for an empty list)."""

    def forward(self, x, extra: Optional[List[torch.Tensor]] = None):
        if extra is None:
            return x * 2.0, -1
        y = x
        for e in extra:
            y = y + e
        return y, len(extra)


class Defaults(nn.Module):
    """int/float/bool parameters with defaults: a request may leave them out."""

    def forward(self, x, scale: float = 2.5, n: int = 3, flag: bool = True):
        y = x * scale + n
        if flag:
            y = y - 1.0
        return y


class HalfMix(nn.Module):
    """float16 in: the float16 arithmetic libtorch 1.13 has on CPU (float32 compute, rounded per
    op), promotion to float32 with a float32 operand, and a float16 mean."""

    def forward(self, h, f):
        y = torch.where(h > 0, h * 2.0 + 1.0, h.abs()) - h
        return y, h + f, torch.maximum(h, y).mean(dim=1)


class Bf16Head(nn.Module):
    """A bfloat16 model (model.to(torch.bfloat16)): linear, gelu, layer norm, softmax."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)
        self.norm = nn.LayerNorm(6)

    def forward(self, x):
        return torch.softmax(self.norm(nn.functional.gelu(self.fc(x))), dim=-1)


class Bf16Cnn(nn.Module):
    """A bfloat16 CNN: conv, batch norm, relu, max pool, depthwise conv, hardswish, adaptive
    average pool, linear, log_softmax. Kiln has no bfloat16 kernel for most of these: each runs
    its float32 kernel, widened and rounded back, as libtorch computes bfloat16 on CPU."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = nn.functional.max_pool2d(y, 2)
        y = nn.functional.hardswish(self.dw(y))
        y = nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.log_softmax(self.fc(y), dim=1)


class Renamed(nn.Module):
    """Scripted, reassigning its parameters: TorchScript names the graph inputs x.1, y.1."""

    def forward(self, x, y):
        x = x * 2.0
        y = y + x
        return y


def _flatten(value, prefix, out):
    """Names libtorch's result the way Kiln names its outputs."""
    if isinstance(value, dict):
        for key, v in value.items():
            _flatten(v, key if prefix is None else f"{prefix}.{key}", out)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _flatten(v, f"output{i}" if prefix is None else f"{prefix}.{i}", out)
    else:
        out[prefix if prefix is not None else "output0"] = value


MANIFEST = {}


def _numpy(t):
    """NumPy has no bfloat16: saved widened to float32, which is exact (the CLI does the same).
    An int/float/bool result is a 0-dim INT64/FP64/BOOL tensor, as Kiln returns it."""
    if isinstance(t, (bool, int, float)):
        return np.array(t, dtype=np.bool_ if isinstance(t, bool) else
                        np.int64 if isinstance(t, int) else np.float64)
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def save_case(out_dir, name, module, inputs, eager):
    """Saves `module` (scripted or traced from the nn.Module class `eager`) as <name>.pt."""
    params = []
    for p in list(inspect.signature(eager.forward).parameters)[1:]:
        if p not in inputs:  # a parameter with a default, left out of the sample
            params.append(p)
        elif isinstance(inputs[p], tuple):
            params += [f"{p}.{i}" for i in range(len(inputs[p]))]
        elif isinstance(inputs[p], list):
            params.append(f"{p}.0")  # one metadata entry stands for every element
        else:
            params.append(p)
    result = save_and_run(module, os.path.join(out_dir, f"{name}.pt"), inputs.values())
    outputs = {}
    _flatten(result, None, outputs)
    for arg, value in inputs.items():
        if isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                np.save(os.path.join(out_dir, f"{name}.input.{arg}.{i}.npy"), _numpy(v))
        else:
            np.save(os.path.join(out_dir, f"{name}.input.{arg}.npy"), _numpy(value))
    for out_name, value in outputs.items():
        np.save(os.path.join(out_dir, f"{name}.output.{out_name}.npy"), _numpy(value))
    MANIFEST[name] = {"inputs": params, "outputs": list(outputs)}


def trace(module, inputs, grad=False):
    module.eval()
    with torch.set_grad_enabled(grad):
        # check_trace re-traces and compares graphs, which differ only in module names here.
        return torch.jit.trace(module, tuple(inputs.values()), check_trace=False)


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUTPUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)

    inputs = {"x": torch.randn(3, 8, dtype=torch.float64)}
    save_case(out_dir, "float64_mlp", trace(Float64Mlp().double(), inputs), inputs, Float64Mlp)

    ids = torch.randint(1, 50, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.int64)
    mask[1, 5:] = 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    # Traced with autograd on: in eval mode without it, PyTorch 1.13 takes the fused
    # "fast path" (one opaque op per layer); with it, the graph has the real ops.
    save_case(out_dir, "tiny_bert", trace(TinyBert(), inputs, grad=True), inputs, TinyBert)

    inputs = {"image": torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)}
    save_case(out_dir, "uint8_image", trace(Uint8Image(), inputs), inputs, Uint8Image)

    inputs = {"values": torch.randn(3, 5), "mask": torch.rand(3, 5) > 0.5}
    save_case(out_dir, "bool_mask", torch.jit.script(BoolMask()), inputs, BoolMask)

    inputs = {"x": torch.randn(4, 6)}
    save_case(out_dir, "argmax_sign", trace(ArgmaxAndSign(), inputs), inputs, ArgmaxAndSign)

    inputs = {"a": torch.randint(-20, 20, (2, 3), dtype=torch.int32),
              "b": torch.randint(1, 9, (2, 3), dtype=torch.int64),
              "m": torch.rand(2, 3) > 0.5,
              "f": torch.randn(2, 3)}
    save_case(out_dir, "promotion", torch.jit.script(Promotion()), inputs, Promotion)

    inputs = {"a": torch.tensor([[-7, 7, -9, 9, -1, 0], [-100, 100, 5, -5, 13, -13]]),
              "b": torch.tensor([[2, 2, -4, -4, 3, 5], [7, -7, 2, 3, -5, -6]])}
    save_case(out_dir, "int_division", trace(IntDivision(), inputs), inputs, IntDivision)

    inputs = {"h": torch.randn(3, 4).half(), "f": torch.randn(3, 4)}
    save_case(out_dir, "half_mix", torch.jit.script(HalfMix()), inputs, HalfMix)

    inputs = {"x": torch.randn(4, 8).bfloat16()}
    save_case(out_dir, "bf16_head", trace(Bf16Head().to(torch.bfloat16), inputs), inputs, Bf16Head)

    inputs = {"x": torch.randn(2, 3, 16, 16).bfloat16()}
    save_case(out_dir, "bf16_cnn", trace(Bf16Cnn().to(torch.bfloat16), inputs), inputs, Bf16Cnn)

    inputs = {"x": torch.randn(2, 6)}
    save_case(out_dir, "dict_out", torch.jit.script(DictOut().eval()), inputs, DictOut)

    inputs = {"x": torch.randn(2, 3)}
    save_case(out_dir, "nested_tuple_out", torch.jit.script(NestedTupleOut()), inputs, NestedTupleOut)
    save_case(out_dir, "list_out", torch.jit.script(ListOut()), inputs, ListOut)
    inputs = {"x": torch.rand(2, 3) + 0.1}  # the then-branch; the test sends -x for the else
    save_case(out_dir, "nested_branches", torch.jit.script(NestedTupleFromBranches()), inputs,
              NestedTupleFromBranches)

    inputs = {"pair": (torch.randn(2, 3), torch.randn(2, 3)), "scale": torch.randn(1, 3)}
    save_case(out_dir, "tuple_input", torch.jit.script(TupleInput()), inputs, TupleInput)

    inputs = {"xs": [torch.randn(2, 3) for _ in range(3)], "scale": torch.randn(1, 3)}
    save_case(out_dir, "list_input", torch.jit.script(ListInput()), inputs, ListInput)

    inputs = {"x": torch.randn(2, 3), "extra": [torch.randn(2, 3) for _ in range(3)]}
    save_case(out_dir, "optional_list", torch.jit.script(OptionalListInput()), inputs,
              OptionalListInput)

    # Saved with every default left out: libtorch's output for the defaults.
    inputs = {"x": torch.randn(2, 3)}
    save_case(out_dir, "defaults", torch.jit.script(Defaults()), inputs, Defaults)

    inputs = {"x": torch.randn(2, 3), "y": torch.randn(2, 3)}
    save_case(out_dir, "renamed", torch.jit.script(Renamed()), inputs, Renamed)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(MANIFEST, f, indent=1)


if __name__ == "__main__":
    main()
