"""What running the libtorch fallback out of process costs per op (issue 15).

One kilnd with `--import-isolation none` (fallback ops run by libtorch inside kilnd) and one with the
default `process` (each model's fallback ops run in its sandboxed worker, server/torch/), the same
binary, alternating call by call. Two models, each on a 16-element and a 1 MiB float32 input:
  one  torch.hypot(x, x): a request with one fallback op (aten::hypot, a cheap one);
  loop 100 x (torch.hypot(x, x) * 0.5): one request, 100 fallback calls, so that the RPC's own cost
       divides out: (worker - in process) / 100 is the cost of one call through the worker.
Prints the median latency per request of each, and the per-op difference in microseconds.

  /usr/bin/python3 tests/bench/fallback_bench.py --bin build/bin [--rounds 300]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)

LOOP = 100


def make_models(directory):
    import torch
    import torch.nn as nn

    class One(nn.Module):
        def forward(self, x):
            return torch.hypot(x, x)

    class Loop(nn.Module):
        def forward(self, x):
            for _ in range(100):
                x = torch.hypot(x, x) * 0.5
            return x

    paths = {}
    for name, module in (("one", One()), ("loop", Loop())):
        paths[name] = os.path.join(directory, f"{name}.pt")
        torch.jit.script(module).save(paths[name])
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import grpc
    from kiln_client_example import load_stubs
    pb, pb_grpc = load_stubs()
    work = tempfile.mkdtemp(prefix="kiln-fallback-bench-")
    paths = make_models(work)
    servers = {}
    for mode in ("none", "process"):
        repo = os.path.join(work, f"repo-{mode}")
        proc = KilndProcess(args.bin, ["--host", "127.0.0.1", "--port", "0", "--model-repository",
                                       repo, "--threads", args.threads, "--log-level", "warn",
                                       "--import-isolation", mode])
        stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(
            proc.address, options=[("grpc.max_send_message_length", 1 << 30),
                                   ("grpc.max_receive_message_length", 1 << 30)]))
        for name, path in paths.items():
            req = pb.RepositoryModelLoadRequest(model_name=name)
            with open(path, "rb") as f:
                req.parameters["file:1/model.pt"].bytes_param = f.read()
            req.parameters["config"].string_param = '{"verify": false}'
            stub.RepositoryModelLoad(req, timeout=600)
        servers[mode] = (proc, stub)

    def request(model, x):
        req = pb.ModelInferRequest(model_name=model)
        req.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        req.raw_input_contents.append(x.tobytes())
        return req

    print(f"{'model':6} {'input':>10} {'in process us':>14} {'worker us':>10} {'per op us':>10}")
    try:
        for model in ("one", "loop"):
            for elements in (16, 1 << 18):
                x = np.random.default_rng(0).uniform(-1, 1, elements).astype(np.float32)
                req = request(model, x)
                times = {mode: [] for mode in servers}
                for mode, (_, stub) in servers.items():
                    for _ in range(5):  # warm: compile, start the worker
                        stub.ModelInfer(req, timeout=300)
                for _ in range(args.rounds):
                    for mode, (_, stub) in servers.items():
                        start = time.perf_counter()
                        stub.ModelInfer(req, timeout=300)
                        times[mode].append((time.perf_counter() - start) * 1e6)
                inproc = statistics.median(times["none"])
                worker = statistics.median(times["process"])
                ops = LOOP if model == "loop" else 1
                size = f"{x.nbytes // 1024} KiB" if x.nbytes >= 1024 else f"{x.nbytes} B"
                print(f"{model:6} {size:>10} {inproc:14.0f} {worker:10.0f} "
                      f"{(worker - inproc) / ops:10.1f}", flush=True)
    finally:
        for proc, _ in servers.values():
            proc.stop()


if __name__ == "__main__":
    main()
