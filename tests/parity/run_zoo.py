#!/usr/bin/python3
"""Runs the parity models (gen_zoo.py) through a real kilnd and the kiln CLI.

For every model in <models>/manifest.json: upload it, run it on its sample
input, and compare with libtorch's output for the same file (relative error
max|got - want| / max|want| <= 1e-4). When that fails, the judge is libtorch's
float64 result for the same file: in deep residual nets (resnet101,
fcn_resnet50) two float32 implementations differ by about 1e-4 through
rounding alone. Kiln then passes when its error against the float64 result is
at most 1e-4, or at most 1.5 times libtorch's own float32 error against it;
the table prints all three numbers, and how far libtorch's second float32
convolution path (oneDNN off) is from libtorch's output. `kiln-parity --inspect` says whether the
import is native or which ops fell back to libtorch, and how many nodes the
imported graph has. Prints a table model -> native pass / fallback pass / fail
(reason); exits 1 when a model not listed in expected_zoo.txt does not pass
natively.

  --time N        also time Kiln and libtorch (frozen, inference mode) on each
                  model at 1 thread, N runs each, interleaved in one process
                  (`kiln-parity --time`), and report the median ratio
  --markdown F    write the table as Markdown to F (docs/ops.md's zoo table)
  --config JSON   a load config for every upload, e.g. '{"accumulation": "float64"}'
                  (the timing then marks Kiln's GEMM ops the same way)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from zoo_support import Kilnd, read_expected, read_manifest, relative_error, zoo_arguments  # noqa: E402


def time_model(bin_dir, pt, x, iters, float64):
    """(Kiln ms, libtorch ms), medians at 1 thread, or None when timing fails."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run([os.path.join(bin_dir, "kiln-parity"), "--time", pt, x, str(iters), "1"]
                       + (["float64"] if float64 else []),
                       capture_output=True, text=True, timeout=3600, env=env)
    try:
        kiln_ms, torch_ms = (float(v) for v in r.stdout.split())
        return kiln_ms, torch_ms
    except ValueError:
        print(f"  timing failed: {(r.stdout + r.stderr).strip()[-300:]}", flush=True)
        return None


def write_markdown(path, table):
    """The zoo table as Markdown: one row per model."""
    with open(path, "w") as f:
        f.write("| model | result | native ops | fallback ops | max rel err "
                "| Kiln / libtorch time, 1 thread |\n|---|---|---|---|---|---|\n")
        for name, status, nodes, kind, rel, timing in table:
            fallback = "none" if kind == "native" else kind.replace("fallback ", "").replace(",", ", ")
            err = "-" if rel is None else f"{rel:.1e}"
            ratio = "-" if not timing else (f"{timing[0] / timing[1]:.2f} "
                                            f"({timing[0]:.0f} / {timing[1]:.0f} ms)")
            f.write(f"| {name} | {status} | {nodes[0] if nodes else '?'} | {fallback} | {err} "
                    f"| {ratio} |\n")


def main():
    parser = zoo_arguments(os.path.join(HERE, "expected_zoo.txt"))
    parser.add_argument("--time", type=int, default=0, help="timed runs per model (0: no timing)")
    parser.add_argument("--markdown", default="", help="write the table as Markdown here")
    parser.add_argument("--config", default=os.environ.get("KILN_ZOO_CONFIG", ""),
                        help="load config (JSON text) for every upload (default: "
                             "$KILN_ZOO_CONFIG, which make test-zoo sets from ZOO_CONFIG), e.g. "
                             "'{\"accumulation\": \"float64\"}'")
    args = parser.parse_args()
    manifest = read_manifest(args.models, args.only)
    expected = read_expected(args.expect)
    tmp = tempfile.mkdtemp(prefix="kiln-zoo-")
    server = Kilnd(args.bin, os.path.join(tmp, "repo"))
    kiln = [os.path.join(args.bin, "kiln"), "--server", server.address]
    config = os.path.join(tmp, "config.json")
    with open(config, "w") as f:
        f.write(args.config)
    float64 = json.loads(args.config or "{}").get("accumulation") == "float64"
    rows, table, unexpected = [], [], 0
    try:
        for entry in manifest:
            name = entry["name"]
            pt = os.path.join(args.models, f"{name}.pt")
            start = time.time()
            inspect = subprocess.run([os.path.join(args.bin, "kiln-parity"), "--inspect", pt],
                                     capture_output=True, text=True, timeout=1800)
            lines = inspect.stdout.strip().splitlines()
            kind = lines[0] if lines else inspect.stderr.strip()[-300:]
            m = re.search(r"nodes (\d+) native, (\d+) fallback", inspect.stdout)
            nodes = (int(m.group(1)), int(m.group(2))) if m else None
            rel, timing = None, None
            status, detail = "fail", ""
            # kilnd verifies each import against libtorch with its default settings
            # (1e-4, past which libtorch's float64 result judges float32 rounding).
            upload = kiln + ["upload", pt, "--name", name]
            if args.config:
                upload += ["--config", config]
            r = subprocess.run(upload,
                               capture_output=True, text=True, timeout=3600)
            if r.returncode != 0:
                detail = "upload: " + (r.stderr or r.stdout).strip().splitlines()[-1][:300]
            else:
                out_dir = tempfile.mkdtemp(dir=tmp)
                inputs = []
                for arg in entry["inputs"]:
                    inputs += ["--input", f"{arg}={os.path.join(args.models, f'{name}.input.{arg}.npy')}"]
                r = subprocess.run(kiln + ["infer", name, "--output-dir", out_dir] + inputs,
                                   capture_output=True, text=True, timeout=3600)
                if r.returncode != 0:
                    detail = "infer: " + (r.stderr or r.stdout).strip().splitlines()[-1][:300]
                else:
                    got = np.load(os.path.join(out_dir, "output0.npy"))
                    want = np.load(os.path.join(args.models, f"{name}.output0.npy"))
                    # Datatype and shape before values.
                    if got.dtype != want.dtype:
                        detail = f"dtype {got.dtype}, libtorch {want.dtype}"
                    elif got.shape != want.shape:
                        detail = f"shape {got.shape}, libtorch {want.shape}"
                    else:
                        rel = relative_error(got, want)
                        detail = f"rel err {rel:.2e}"
                        ok = rel <= 1e-4
                        exact_path = os.path.join(args.models, f"{name}.output0.f64.npy")
                        if not ok and os.path.exists(exact_path):
                            # Both float32: judge against libtorch's float64 result.
                            # Kiln must be within 1e-4 of it, or about as close to it
                            # as libtorch's own float32 result (at most 1.5x farther).
                            exact = np.load(exact_path)
                            kiln64 = relative_error(got, exact)
                            torch64 = relative_error(want, exact)
                            detail += f"; vs float64: kiln {kiln64:.2e}, libtorch {torch64:.2e}"
                            second_path = os.path.join(args.models,
                                                       f"{name}.output0.no_onednn.npy")
                            if os.path.exists(second_path):
                                # libtorch against itself: its oneDNN-off float32 result.
                                own = relative_error(np.load(second_path), want)
                                detail += f"; libtorch without oneDNN vs libtorch {own:.2e}"
                            ok = kiln64 <= max(1e-4, 1.5 * torch64)
                        if ok:
                            status = "native" if kind == "native" else "fallback"
                        if ok and args.time > 0:
                            timing = time_model(args.bin, pt, os.path.join(
                                args.models, f"{name}.input.x.npy"), args.time, float64)
                            if timing:
                                detail += (f"; 1 thread: Kiln {timing[0]:.1f} ms, "
                                           f"libtorch {timing[1]:.1f} ms")
                        if not kind.startswith("native"):
                            detail += f" ({kind})"
                subprocess.run(kiln + ["unload", name], capture_output=True, text=True)
                shutil.rmtree(os.path.join(tmp, "repo", name), ignore_errors=True)
            known = name in expected
            if status != "native" and not known:
                unexpected += 1
            rows.append((name, status, detail, time.time() - start, known))
            table.append((name, status, nodes, kind, rel, timing))
            print(f"{name:32s} {status:9s} {detail}  [{time.time() - start:.0f} s]"
                  + (f"  expected: {expected[name]}" if known else ""), flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"{'model':32s} {'result':9s} detail")
    for name, status, detail, _, known in rows:
        note = "" if status == "native" else ("  (known: " + expected[name] + ")" if known else "  UNEXPECTED")
        print(f"{name:32s} {status:9s} {detail}{note}")
    if args.markdown:
        write_markdown(args.markdown, table)
    native = sum(1 for r in rows if r[1] == "native")
    print(f"\n{native} of {len(rows)} models pass natively")
    for name in expected:
        if any(r[0] == name and r[1] == "native" for r in rows):
            print(f"NOW NATIVE (remove from {os.path.basename(args.expect)}): {name}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
