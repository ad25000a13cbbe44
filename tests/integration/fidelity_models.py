#!/usr/bin/python3
"""Writes the fidelity fixtures (issue 17) into the directory given as argv[1].

Each model is saved once (traced on one example, or scripted) and then fed its inputs at
other legal datatypes and ranks than the example's. For every variant, libtorch runs the
saved archive; its outputs are written as <model>.<variant>.output<k>.npy, or, when
libtorch itself refuses the variant (softmax of int64, mean of int64), the variant is
recorded as an expected error. manifest.json lists, per model, its input names and
variants: {"inputs": {name: file}, "outputs": [file, ...] or null, "error": libtorch's
message or null}. Kiln must answer each variant as libtorch does (datatype, shape,
values), or refuse the ones libtorch refuses.

torchvision's operators must import and run: nms and roi_align natively, deform_conv2d
through the fallback. A TransformerEncoder traced under no_grad with a padding mask (PyTorch's
fast path: fused layers on nested tensors) must run natively too. Some models force a kernel's Prepare to refuse a signature (a functional linear whose
weight is 1-D, bitwise ops on every integer dtype, x[mask] with a bool mask): the node
must run through the libtorch fallback for that signature and the request succeed.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

torch.manual_seed(0)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class LinearOneDWeight(nn.Module):
    """F.linear with a 1-D weight: a dot product per row (Kiln's Linear kernel wants 2-D)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return F.linear(x, self.w)


class MaskIndex(nn.Module):
    def forward(self, x: torch.Tensor, m: torch.Tensor):
        return x[m] * 2


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def randint(*shape, dtype=torch.int64, lo=0, hi=5):
    return torch.randint(lo, hi, shape).to(dtype)


def variants_of(*dtypes, shapes):
    """One variant per dtype (all inputs of that dtype) for each tuple of input shapes."""
    out = []
    for dtype in dtypes:
        for shape in shapes:
            if dtype.is_floating_point:
                out.append(tuple(randn(*s, dtype=dtype) for s in shape))
            else:
                out.append(tuple(randint(*s, dtype=dtype, hi=2 if dtype == torch.bool else 5)
                                 for s in shape))
    return out


F32, F64, F16 = torch.float32, torch.float64, torch.float16
I64, I32, I16, I8, U8, B = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                            torch.bool)

# name -> (module, "trace" or "script", example inputs, input names, variants)
MODELS = {
    # (1) Datatypes no weight fixes: matmul, softmax and reductions of the inputs themselves.
    "softmax_of_input": (Fn(lambda x: torch.softmax(x, -1)), "trace", (randn(2, 3),), ["x"],
                         variants_of(F64, I64, shapes=[((2, 3),), ((4,),), ((2, 3, 5),)])),
    "matmul_of_inputs": (Fn(lambda a, b: a @ b), "trace", (randn(2, 3), randn(3, 4)), ["a", "b"],
                         variants_of(F64, I64, I32, shapes=[((2, 3), (3, 4)),
                                                            ((5, 2, 3), (3, 2))])),
    "mean_and_sum": (Fn(lambda x: (x.mean(-1), x.sum(0))), "trace", (randn(2, 3),), ["x"],
                     variants_of(F64, F16, I64, shapes=[((2, 3),), ((3, 2, 4),)])),
    "reductions_of_uint8": (Fn(lambda x: (x.any(-1), x.all(), x.sum(-1), x.amax(0), x.prod(1))),
                            "trace", (randint(2, 3, dtype=U8),), ["x"],
                            variants_of(U8, B, I32, I8, F64, shapes=[((2, 3),), ((3, 4, 2),)])),
    # (1) Ranks no weight fixes: a Linear on any leading dims (attention and a transformer
    # layer used sequence-first: build_sequence_first_models).
    "linear_any_leading_dims": (nn.Linear(4, 3).eval(), "trace", (randn(2, 4),), ["input"],
                                [(randn(2, 5, 4),), (randn(4),), (randn(2, 2, 3, 4),),
                                 (randn(2, 4, dtype=F64),)]),
    # (2) Prepare refusals: the node runs through libtorch for that signature.
    "linear_1d_weight": (LinearOneDWeight().eval(), "trace", (randn(2, 4),), ["x"],
                         [(randn(2, 4),), (randn(3, 5, 4),)]),
    "bitwise_and_integers": (Fn(lambda a, b: a & b), "trace",
                             (randint(2, 3), randint(2, 3)), ["a", "b"],
                             variants_of(I64, I32, I16, I8, U8, B, shapes=[((2, 3), (2, 3))])),
    # (1) A bool mask used for indexing is not taken for integer indices.
    "mask_index": (MaskIndex(), "script", None, ["x", "m"],
                   [(randn(4, 3), torch.tensor([True, False, True, True])),
                    (randn(4, 3), torch.tensor([2, 0])),
                    (randn(4, 3), torch.tensor([[True, False, True]] * 4))]),
}


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2)

    def forward(self, q):
        return self.mha(q, q, q, need_weights=False)[0]


class Nms(nn.Module):
    def forward(self, boxes, scores):
        return torchvision.ops.nms(boxes, scores, 0.5)


class RoiAlign(nn.Module):
    def forward(self, x, rois):
        return torchvision.ops.roi_align(x, rois, output_size=(2, 2), spatial_scale=0.5,
                                         sampling_ratio=2, aligned=True)


class DeformConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torchvision.ops.DeformConv2d(2, 3, 3, padding=1)

    def forward(self, x, offset):
        return self.conv(x, offset)


def boxes(n, dtype=F32):
    xy = torch.rand(n, 2) * 10
    return torch.cat([xy, xy + 1 + torch.rand(n, 2) * 5], 1).to(dtype)


def rois(k):
    return torch.cat([torch.zeros(k, 1), boxes(k) * 1.2], 1)


def build_torchvision_models():
    """(4) torchvision's operators, scripted: torchvision::nms, roi_align, deform_conv2d."""
    MODELS["torchvision_nms"] = (Nms(), "script", None, ["boxes", "scores"],
                                 [(boxes(8), torch.rand(8)), (boxes(20, F64), torch.rand(20).double())])
    # Traced: their scripted Python wrappers test the rois' type and build zeros of the
    # input's run-time dtype and device, which Kiln's importer does not take yet.
    MODELS["torchvision_roi_align"] = (RoiAlign(), "trace", (randn(1, 2, 8, 8), rois(3)),
                                       ["x", "rois"],
                                       [(randn(1, 2, 8, 8), rois(3)), (randn(2, 3, 6, 9), rois(1))])
    MODELS["torchvision_deform_conv2d"] = (DeformConv().eval(), "trace",
                                           (randn(1, 2, 5, 5), randn(1, 18, 5, 5)), ["x", "offset"],
                                           [(randn(1, 2, 5, 5), randn(1, 18, 5, 5) * 0.5),
                                            (randn(2, 2, 4, 6), randn(2, 18, 4, 6) * 0.5)])


class PaddedEncoder(nn.Module):
    def __init__(self, norm_first):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2)

    def forward(self, src, padding):
        return self.encoder(src, src_key_padding_mask=padding)


def padding(lengths, steps):
    return torch.arange(steps)[None, :] >= torch.tensor(lengths)[:, None]


def build_fast_path_models():
    """(5) Traced under no_grad (mode "trace_no_grad"): _transformer_encoder_layer_fwd, on
    nested tensors from _nested_tensor_from_mask when norm_first is False."""
    for norm_first in (False, True):
        MODELS[f"encoder_fast_path_norm_first_{norm_first}".lower()] = (
            PaddedEncoder(norm_first).eval(), "trace_no_grad",
            (randn(2, 5, 8), padding([5, 3], 5)), ["src", "padding"],
            [(randn(2, 5, 8), padding([5, 3], 5)), (randn(3, 6, 8), padding([4, 6, 1], 6)),
             (randn(3, 6, 8), padding([2, 4, 1], 6)), (randn(1, 3, 8), padding([3], 3))])


def build_sequence_first_models():
    MODELS["attention_sequence_first"] = (
        Attention().eval(), "trace", (randn(5, 2, 8),), ["q"],
        [(randn(5, 2, 8),), (randn(3, 1, 8),), (randn(7, 3, 8),)])
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)
    MODELS["transformer_layer_sequence_first"] = (
        layer.eval(), "trace", (randn(5, 2, 8),), ["src"],
        [(randn(5, 2, 8),), (randn(3, 1, 8),), (randn(6, 4, 8),)])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    build_sequence_first_models()
    build_torchvision_models()
    build_fast_path_models()
    manifest = {}
    for name, (module, mode, example, arg_names, variants) in MODELS.items():
        path = os.path.join(out, f"{name}.pt")
        # Traced with autograd on: under no_grad a transformer layer records PyTorch's fused
        # fast path instead (issue 17, item 5).
        if mode == "trace":
            saved = torch.jit.trace(module, example, check_trace=False)
        elif mode == "trace_no_grad":
            with torch.no_grad():
                saved = torch.jit.trace(module, example, check_trace=False)
        else:
            saved = torch.jit.script(module)
        saved.save(path)
        loaded = torch.jit.load(path).eval()
        entry = {"inputs": arg_names, "variants": []}
        for k, inputs in enumerate(variants):
            files = {}
            for arg, value in zip(arg_names, inputs):
                files[arg] = f"{name}.{k}.input.{arg}.npy"
                np.save(os.path.join(out, files[arg]), value.numpy())
            variant = {"inputs": files, "outputs": None, "error": None,
                       "signature": ", ".join(f"{str(v.dtype)[6:]}{list(v.shape)}"
                                              for v in inputs)}
            try:
                with torch.no_grad():
                    result = loaded(*[v.clone() for v in inputs])
            except Exception as e:  # libtorch refuses this variant itself
                variant["error"] = str(e).strip().splitlines()[-1][:300]
            else:
                results = result if isinstance(result, tuple) else (result,)
                variant["outputs"] = []
                for j, r in enumerate(results):
                    file = f"{name}.{k}.output{j}.npy"
                    np.save(os.path.join(out, file), r.numpy())
                    variant["outputs"].append(file)
            entry["variants"].append(variant)
        manifest[name] = entry
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
