"""What the two zoo runners share (tests/parity/run_zoo.py for TorchScript, tests/pt2/run_pt2_zoo.py
for .pt2): the kilnd they serve through, the command line, the manifest, the list of models known
not to pass, and the relative error they judge by."""
import argparse
import json
import os

import numpy as np

from kilnd_process import KilndProcess  # the one kilnd launcher


def Kilnd(bin_dir, repo):
    """kilnd for the zoo: uploads up to 4 GiB, imports given 16 GB and 30 minutes."""
    return KilndProcess(bin_dir, [
        "--host", "127.0.0.1", "--port", "0", "--model-repository", repo, "--threads", "2",
        "--log-level", "warn", "--max-upload-bytes", 4 << 30, "--import-memory-mb", 16000,
        "--import-timeout-s", 1800])


def relative_error(got, want):
    """max |got - want| / max |want|, the issue's relative error."""
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(float(np.max(np.abs(want))), 1e-12))


def read_expected(path):
    """NAME -> reason, from a file of models known not to pass (one a line, # comments)."""
    expected = {}
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, reason = line.partition(" ")
                expected[name] = reason.strip()
    return expected


def zoo_arguments(expect):
    """The parser of --bin, --models, --expect (default `expect`) and --only; a runner adds its own."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--expect", default=expect)
    parser.add_argument("--only", default="", help="comma-separated model names")
    return parser


def read_manifest(models, only, key=None):
    """The entries of <models>/manifest.json (under `key` when given), those named in `only`
    (comma-separated) when it is not empty."""
    with open(os.path.join(models, "manifest.json")) as f:
        manifest = json.load(f)
    if key is not None:
        manifest = manifest[key]
    if only:
        manifest = [e for e in manifest if e["name"] in only.split(",")]
    return manifest
