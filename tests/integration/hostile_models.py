"""Hostile models for test_hostile_models.py: scripted TorchScript a buggy or malicious user might
upload. Each loads (or gets as far as the verified import); what it does at run time is the test.

  python3 hostile_models.py OUT_DIR   writes OUT_DIR/<name>.pt for every model below
"""
import os
import sys

import torch
import torch.nn as nn


class HugeZeros(nn.Module):
    """Allocates 2^40 elements per row of its input: a size the signature fixes, so it is in the
    compiled plan (the issue's `torch.zeros(x.size(0) * (1 << 40))`)."""

    def forward(self, x):
        return torch.zeros(x.size(0) * (1 << 40))


class HugeZerosFromData(nn.Module):
    """The same, with the size read from the input's values: allocated while the request runs."""

    def forward(self, x):
        return torch.zeros(int(x.sum()) * (1 << 30))


class OverflowingZeros(nn.Module):
    """2^80 elements per row: a count that overflows 64 bits."""

    def forward(self, x):
        return torch.zeros([x.size(0) * (1 << 40), 1 << 40])


class EndlessLoop(nn.Module):
    """`while True:` in forward."""

    def forward(self, x):
        while True:
            x = x + 1.0
        return x


class Relu(nn.Module):
    """Harmless; its verify.inputs is what is hostile."""

    def forward(self, x):
        return torch.relu(x)


MODELS = {
    "huge_zeros": HugeZeros,
    "huge_zeros_from_data": HugeZerosFromData,
    "overflowing_zeros": OverflowingZeros,
    "endless_loop": EndlessLoop,
    "relu": Relu,
}


def write_all(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, cls in MODELS.items():
        torch.jit.script(cls()).save(os.path.join(out_dir, f"{name}.pt"))


if __name__ == "__main__":
    write_all(sys.argv[1])
