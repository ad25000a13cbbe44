#!/usr/bin/python3
"""The benchmark's models as torch.export archives, run in the Debian sid chroot (torch 2.14):

    export_pt2.py MODELS_DIR NAME ...

For each NAME whose MODELS_DIR/<name>.pt exists (bench_models.py made it with the host's torch
1.13) and whose <name>.pt2 does not, builds the same eager module, loads the traced file's own
state dict into it (strictly: every parameter and buffer by name), and writes
torch.export.export(...) with a dynamic batch dimension to MODELS_DIR/<name>.pt2 (torch.export.save;
the PT2 archive layout). Kiln then runs the TorchScript file and the .pt2 of exactly the same
weights, so their times compare the two importer fronts and nothing else.
"""
import os
import sys

import torch
import torchvision.models as M
from torch.export import Dim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_models import BERT_SEQ, BERT_VOCAB, TORCHVISION, BertLike  # noqa: E402


def export(name, models_dir):
    pt, pt2 = os.path.join(models_dir, f"{name}.pt"), os.path.join(models_dir, f"{name}.pt2")
    if os.path.exists(pt2) or not os.path.exists(pt):
        return
    print(f"exporting {name}.pt2", file=sys.stderr, flush=True)
    if name in TORCHVISION:
        model = getattr(M, name)(weights=None)
        example = torch.randn(2, 3, 224, 224)
    else:
        model = BertLike()
        example = torch.randint(0, BERT_VOCAB, (2, BERT_SEQ))
    model.load_state_dict(torch.jit.load(pt).state_dict(), strict=True)
    model.eval()
    batch = Dim("batch", min=1, max=64)
    with torch.no_grad():
        ep = torch.export.export(model, (example,), dynamic_shapes=({0: batch},))
    partial = os.path.join(models_dir, f"{name}.partial.pt2")  # renamed once complete
    torch.export.save(ep, partial)
    os.replace(partial, pt2)


def main():
    if len(sys.argv) < 3:
        sys.exit(f"usage: {sys.argv[0]} MODELS_DIR NAME ...")
    for name in sys.argv[2:]:
        export(name, sys.argv[1])


if __name__ == "__main__":
    main()
