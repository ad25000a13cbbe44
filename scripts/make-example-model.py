#!/usr/bin/env python3
"""Writes the bundled example model: REPO/resnet18/1/model.pt, a torchvision
resnet18 with random (seeded) weights traced at [1, 3, 224, 224]."""
import os
import sys

import torch
import torchvision


def main() -> None:
    repo = sys.argv[1] if len(sys.argv) > 1 else "var/models"
    out_dir = os.path.join(repo, "resnet18", "1")
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, torch.rand(1, 3, 224, 224))
    tmp = os.path.join(out_dir, ".model.pt.tmp")
    traced.save(tmp)
    os.replace(tmp, os.path.join(out_dir, "model.pt"))
    print(f"example model written to {out_dir}/model.pt")


if __name__ == "__main__":
    main()
