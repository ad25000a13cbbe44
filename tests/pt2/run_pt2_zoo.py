#!/usr/bin/python3
"""Runs the .pt2 zoo (make_pt2_zoo.py) through a real kilnd and the kiln CLI: `make test-zoo-pt2`.

For every model in <models>/manifest.json: upload the archive (a .pt2 imports natively, no
libtorch), infer each case (batch 1 and 2, one exported program) and compare every output with
torch 2.14's, with run_zoo.py's tolerances: relative error max|got - want| / max|want| <= 1e-4,
or, past that, Kiln within 1e-4 of torch's float64 result or at most 1.5 times as far from it as
torch's own float32 result. A model torch.export refused is reported as such. Exits 1 when a
model not listed in expected_pt2_zoo.txt (with the reason) does not pass.

  run_pt2_zoo.py --bin BUILD/bin --models BUILD/pt2/zoo [--only a,b]
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from zoo_support import Kilnd, read_expected, read_manifest, relative_error, zoo_arguments  # noqa: E402


def check(kiln, models, entry, tmp):
    """(status, detail) of one model."""
    name = entry["name"]
    if "export_error" in entry:
        return "refused", "torch.export: " + entry["export_error"].splitlines()[0][:200]
    r = subprocess.run(kiln + ["upload", os.path.join(models, entry["file"]), "--name", name,
                               "--no-progress"], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        return "fail", "upload: " + (r.stderr or r.stdout).strip().splitlines()[-1][:300]
    worst, details = 0.0, []
    try:
        for k, case in enumerate(entry["cases"]):
            out_dir = os.path.join(tmp, f"{name}.{k}")
            args = kiln + ["infer", name, "-o", out_dir]
            for arg, file in case["inputs"].items():
                args += ["-i", f"{arg}={os.path.join(models, file)}"]
            r = subprocess.run(args, capture_output=True, text=True, timeout=3600)
            if r.returncode != 0:
                return "fail", f"infer case {k}: " + (r.stderr or r.stdout).strip().splitlines()[-1][:300]
            for out, file in case["outputs"].items():
                want = np.load(os.path.join(models, file))
                got = np.load(os.path.join(out_dir, f"{out}.npy"))
                if got.dtype != want.dtype or got.shape != want.shape:
                    return "fail", f"case {k} {out}: {got.dtype}{got.shape}, torch {want.dtype}{want.shape}"
                rel = relative_error(got, want)
                worst = max(worst, rel)
                if rel <= 1e-4:
                    continue
                exact = np.load(os.path.join(models, case["float64"][out]))
                kiln64, torch64 = relative_error(got, exact), relative_error(want, exact)
                details.append(f"case {k} {out} vs float64: kiln {kiln64:.2e}, torch {torch64:.2e}")
                if kiln64 > max(1e-4, 1.5 * torch64):
                    return "fail", f"case {k} {out}: rel err {rel:.2e}; " + details[-1]
    finally:
        subprocess.run(kiln + ["unload", name], capture_output=True, text=True)
    return "pass", "; ".join([f"max rel err {worst:.2e}"] + details)


def main():
    args = zoo_arguments(os.path.join(HERE, "expected_pt2_zoo.txt")).parse_args()
    manifest = read_manifest(args.models, args.only, key="models")
    expected = read_expected(args.expect)
    tmp = tempfile.mkdtemp(prefix="kiln-pt2-zoo-")
    server = Kilnd(args.bin, os.path.join(tmp, "repo"))
    kiln = [os.path.join(args.bin, "kiln"), "--server", server.address]
    rows = []
    try:
        for entry in manifest:
            start = time.time()
            status, detail = check(kiln, args.models, entry, tmp)
            shutil.rmtree(os.path.join(tmp, "repo", entry["name"]), ignore_errors=True)
            rows.append((entry["name"], status, detail))
            print(f"{entry['name']:32s} {status:8s} {detail}  [{time.time() - start:.0f} s]",
                  flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    unexpected = [n for n, s, _ in rows if s != "pass" and n not in expected]
    for name, status, _ in rows:
        if status == "pass" and name in expected:
            print(f"NOW PASSES (remove from {os.path.basename(args.expect)}): {name}")
    print(f"\n{sum(s == 'pass' for _, s, _ in rows)} of {len(rows)} pass, "
          f"{sum(s == 'refused' for _, s, _ in rows)} refused by torch.export, "
          f"{sum(s == 'fail' for _, s, _ in rows)} fail"
          + (f"; unexpected: {', '.join(unexpected)}" if unexpected else ""))
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
