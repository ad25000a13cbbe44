#!/usr/bin/python3
"""`make bench-overhead`: what serving through kilnd adds to a batch-1 request, against Kiln in
process, for the figure of issue 14 (within 0.3 ms or 3% of Kiln in process).

    overhead_bench.py --bin build/bin --work build/peers [--models tiny,mobilenet_v2,...]
                      [--rounds 60] [--threads 2] [--gap-ms 30]

Three long-lived kiln-bench workers per model, timed call by call in a shuffled order with --gap-ms
of idle before each call (a server sees requests after idle, not back to back):
  kiln   Kiln's engine in process (kiln-bench --worker kiln)
  shm    a real kilnd (--threads as given), ModelInfer over gRPC with the input in a registered
         shared-memory region (the system shared-memory extension)
  local  the same kilnd and input, over its local socket (kilnd --local-socket, proto/local/)
Reported per model: Kiln in process's median, and for shm and local the median of the per-round
differences to it, in ms and as a share, next to the figure max(0.3 ms, 3%). `tiny` (the mean of
a [1, 3, 224, 224] input) is what a request costs when the model costs nothing. The other models
are make bench's (tests/bench/bench_models.py), made under --work/models when missing. A measuring
instrument: it never fails on a number; on a shared machine run it twice.
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)

DEFAULT_MODELS = ["tiny", "mobilenet_v2", "resnet18", "efficientnet_b0", "resnet50"]


def make_model(name, models_dir):
    """The TorchScript file of `name` and its input's (dtype, shape), made when missing."""
    import torch  # noqa: E402  (host torch 1.13, only to write models)
    import bench_models  # noqa: E402
    os.makedirs(models_dir, exist_ok=True)
    if name == "tiny":
        path = os.path.join(models_dir, "tiny.pt")
        if not os.path.exists(path):
            class Tiny(torch.nn.Module):
                def forward(self, x):
                    return x.mean(dim=(2, 3))
            torch.jit.save(torch.jit.script(Tiny()), path)
        return path, "f32", (1, 3, 224, 224)
    bench_models.make(name, models_dir)
    dtype, shape, _ = bench_models.input_spec(name)
    return os.path.join(models_dir, f"{name}.pt"), dtype, (1, *shape)


class Worker:
    """One kiln-bench worker: `run` times one call (ms)."""

    def __init__(self, bin_dir, args, dtype, shape, input_path):
        self.proc = subprocess.Popen([os.path.join(bin_dir, "kiln-bench"), *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._expect("ready")
        self._send(f"input {dtype} {','.join(map(str, shape))} {input_path}")
        self.proc.stdout.readline()

    def _send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _expect(self, want):
        line = self.proc.stdout.readline().strip()
        if line != want:
            raise RuntimeError(f"kiln-bench said {line!r}, expected {want!r}")

    def run(self):
        self._send("run")
        return float(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def measure(args, name, models_dir):
    pt, dtype, shape = make_model(name, models_dir)
    io_dir = os.path.join(models_dir, "io")
    os.makedirs(io_dir, exist_ok=True)
    input_path = os.path.join(io_dir, f"overhead.{name}.input")
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 100, shape).astype(np.int64) if dtype == "i64"
         else rng.standard_normal(shape).astype(np.float32))
    x.tofile(input_path)
    repo = tempfile.mkdtemp(prefix="kiln-overhead-")
    socket = os.path.join(repo, "kilnd.sock")
    server = KilndProcess(args.bin, ["--port", "0", "--model-repository", os.path.join(repo, "m"),
                                     "--local-socket", socket, "--threads", args.threads,
                                     "--pin-threads", args.pin_threads,
                                     "--log-level", "warn", "--http-port", "-1",
                                     "--metrics-port", "-1"])
    workers = {}
    try:
        subprocess.run([os.path.join(args.bin, "kiln"), "--server", server.address, "upload", pt,
                        "--name", name, "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        client = ["--worker", "kilnd", "--server", server.address, "--model", name,
                  "--shared-memory"]
        workers = {
            "kiln": Worker(args.bin, ["--worker", "kiln", "--model", pt, "--threads",
                                      str(args.threads), "--pin-threads", args.pin_threads],
                           dtype, shape, input_path),
            "shm": Worker(args.bin, client, dtype, shape, input_path),
            "local": Worker(args.bin, client + ["--local-socket", socket], dtype, shape,
                            input_path),
        }
        times = {k: [] for k in workers}
        order = list(workers)
        shuffle = random.Random(1)
        for r in range(args.warmup + args.rounds):
            shuffle.shuffle(order)
            for k in order:
                time.sleep(args.gap_ms / 1e3)
                t = workers[k].run()
                if r >= args.warmup:
                    times[k].append(t)
    finally:
        for w in workers.values():
            w.close()
        server.stop()
        shutil.rmtree(repo, ignore_errors=True)
    kiln = statistics.median(times["kiln"])
    row = {"model": name, "kiln": kiln, "figure": max(0.3, 0.03 * kiln)}
    for k in ("shm", "local"):
        row[k] = statistics.median(a - b for a, b in zip(times[k], times["kiln"]))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--work", default="build/peers", help="models (shared with make bench)")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--gap-ms", type=float, default=30)
    ap.add_argument("--pin-threads", default="auto", choices=["auto", "on", "off"],
                    help="kilnd's and the in-process worker's --pin-threads")
    args = ap.parse_args()
    models_dir = os.path.join(args.work, "models")
    print(f"threads={args.threads} pin-threads={args.pin_threads} rounds={args.rounds} gap={args.gap_ms:g} ms (medians of "
          f"per-round differences to Kiln in process; figure = max(0.3 ms, 3%))")
    print(f"{'model':16} {'in process':>10} {'gRPC+shm':>18} {'local+shm':>18} {'figure':>7}  met")
    for name in args.models.split(","):
        row = measure(args, name, models_dir)
        cells = [f"{row[k]:+.2f} ms ({100 * row[k] / row['kiln']:+.1f}%)" for k in ("shm", "local")]
        met = "yes" if row["local"] <= row["figure"] else "no"
        print(f"{name:16} {row['kiln']:8.2f} ms {cells[0]:>18} {cells[1]:>18} "
              f"{row['figure']:5.2f} ms  {met}", flush=True)


if __name__ == "__main__":
    main()
