#!/usr/bin/python3
"""Writes the torchvision model zoo for the parity suite into argv[1].

Every torchvision 0.14 classification builder the issue lists, traced at batch
1 with random (seeded) weights, the segmentation models that trace (wrapped to
return their "out" map), and scripted (not traced) models. Each model is saved
as <name>.pt next to its sample input <name>.input.x.npy, libtorch's output for
the saved file, <name>.output0.npy, and libtorch's output in float64,
<name>.output0.f64.npy; manifest.json lists them.

BatchNorm statistics are calibrated on random batches first: with their initial
statistics a random network's activations shrink layer after layer and the
logits end near zero, which would make the comparison vacuous.

  --set fast   a few small models, for `make test`
  --set all    the whole zoo (about 3.5 GB), for `make test-zoo`
  --only a,b   just these models
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision.models as M
import torchvision.models.segmentation as S

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from torch_fixtures import calibrate_batchnorm, save_and_run  # noqa: E402

CLASSIFIERS = [
    "resnet18", "resnet34", "resnet50", "resnet101", "resnext50_32x4d", "wide_resnet50_2",
    "vgg11", "vgg11_bn", "vgg16", "vgg16_bn", "alexnet", "squeezenet1_0", "squeezenet1_1",
    "densenet121", "inception_v3", "googlenet", "mobilenet_v2", "mobilenet_v3_small",
    "mobilenet_v3_large", "mnasnet0_5", "mnasnet1_0", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
    "efficientnet_b0", "regnet_y_400mf", "regnet_x_400mf", "convnext_tiny", "vit_b_16", "swin_t",
]
SEGMENTATION = ["fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
SCRIPTED = ["resnet18_scripted", "mobilenet_v3_small_scripted"]
FAST = ["squeezenet1_1", "mobilenet_v3_small", "mnasnet0_5", "mobilenet_v3_small_scripted"]


class SegmentationOut(nn.Module):
    """torchvision segmentation models return a dict; serving wants the "out" tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def build(name):
    """Returns (module, input shape, mode)."""
    base = name.replace("_scripted", "")
    size = 299 if base == "inception_v3" else 224
    if base in SEGMENTATION:
        kwargs = dict(weights=None, weights_backbone=None)
        if base != "lraspp_mobilenet_v3_large":
            kwargs["aux_loss"] = False
        model = getattr(S, base)(**kwargs)
        size = 160  # segmentation nets are fully convolutional; keep the run short
    else:
        kwargs = dict(weights=None)
        if base in ("inception_v3", "googlenet"):
            kwargs.update(aux_logits=False, init_weights=True)
        model = getattr(M, base)(**kwargs)
    # Zero-initialised classifier heads (vit_b_16's) would make every output 0 and
    # the comparison vacuous: give them small random weights.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear) and not m.weight.any():
                nn.init.normal_(m.weight, std=0.02)
    model = calibrate_batchnorm(model, (2, 3, size, size))
    if base in SEGMENTATION:
        model = SegmentationOut(model).eval()
    return model, (1, 3, size, size), "script" if name.endswith("_scripted") else "trace"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--set", choices=["fast", "all"], default="fast")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    names = (args.only.split(",") if args.only
             else FAST if args.set == "fast" else CLASSIFIERS + SEGMENTATION + SCRIPTED)
    manifest_path = os.path.join(args.out_dir, "manifest.json")
    manifest = []
    for index, name in enumerate(names):
        start = time.time()
        torch.manual_seed(index)
        path = os.path.join(args.out_dir, f"{name}.pt")
        # Written last, so its presence means the model is complete (reruns skip it).
        expected = os.path.join(args.out_dir, f"{name}.output0.npy")
        if not os.path.exists(expected):
            model, shape, mode = build(name)
            x = torch.randn(*shape)
            with torch.no_grad():
                saved = torch.jit.script(model) if mode == "script" else torch.jit.trace(model, x)
            out = save_and_run(saved, path + ".tmp", [x])
            os.replace(path + ".tmp", path)
            np.save(os.path.join(args.out_dir, f"{name}.input.x.npy"), x.numpy())
            np.save(expected, out.numpy())
        exact = os.path.join(args.out_dir, f"{name}.output0.f64.npy")
        if not os.path.exists(exact):
            # libtorch in float64 on the same file: the arbiter when Kiln and
            # libtorch, both float32, differ by float noise (deep residual nets).
            x = torch.from_numpy(np.load(os.path.join(args.out_dir, f"{name}.input.x.npy")))
            try:
                with torch.no_grad():
                    out64 = torch.jit.load(path).eval().double()(x.double())
                np.save(exact, out64.numpy())
            except Exception as e:  # a graph with float32 baked in; no arbiter then
                print(f"{name}: no float64 reference ({type(e).__name__})")
        second = os.path.join(args.out_dir, f"{name}.output0.no_onednn.npy")
        if not os.path.exists(second):
            # libtorch's other float32 convolution path (oneDNN off: im2col and BLAS) on the
            # same file: how far libtorch's own two float32 results are apart.
            x = torch.from_numpy(np.load(os.path.join(args.out_dir, f"{name}.input.x.npy")))
            torch._C._set_mkldnn_enabled(False)
            try:
                with torch.no_grad():
                    np.save(second, torch.jit.load(path).eval()(x).numpy())
            finally:
                torch._C._set_mkldnn_enabled(True)
        manifest.append({"name": name, "inputs": ["x"], "bytes": os.path.getsize(path)})
        print(f"{name}: {time.time() - start:.1f} s", flush=True)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
