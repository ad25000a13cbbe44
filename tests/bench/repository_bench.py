#!/usr/bin/env python3
"""What the durable repository and the compiled-graph cache buy: for each model,

  cold upload-to-ready   `kiln upload` on a server that has never seen the file (transfer,
                         SHA-256 check, import in the isolated child through libtorch,
                         model contract), until the server answers READY;
  restart-to-ready       kilnd started on the same repository, until it listens with the
                         model READY: with the disk cache (no libtorch, no passes), and without
                         it (a cold import at start-up) for comparison;
  first request          the first ModelInfer after each start: it compiles the plan for the
                         request's signature, or with the cache only re-runs Prepare/planning;
  steady request         median of later requests, for scale;
  load_import/load_cache the server's own load time of the model at those restarts (kiln stats),
                         which excludes the process start every restart pays alike.

    repository_bench.py --bin build/bin --fixtures build/fixtures [--threads 2] [--model resnet50]

Models: resnet50 and bert_like (BERT-base shaped encoder: 12 layers, hidden 768, 12 heads,
sequence 128) are generated here with torch; resnet18 and mobilenet_v2 come from the
fixtures. A model Kiln cannot import yet is reported and skipped. Each number is the median
of --repeat runs. A measuring instrument: it never fails on a number.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "client", "python"))
from kiln_client_example import load_stubs  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_models import make_bert_like  # noqa: E402  (the one BERT-base shaped encoder)


def make_resnet50(path):
    import torch
    import torchvision
    m = torchvision.models.resnet50(weights=None).eval()
    x = torch.rand(1, 3, 224, 224)
    with torch.no_grad():
        torch.jit.trace(m, x).save(path)
    return {"x": x.numpy()}


def from_fixture(fixtures, name):
    def make(path):
        shutil.copy(os.path.join(fixtures, f"{name}.pt"), path)
        return {"x": np.load(os.path.join(fixtures, f"{name}.input.x.npy"))}
    return make


def Server(bin_dir, repo, cache, threads):
    """kilnd on a free port; its ready_s is the time from exec to listening (models loaded)."""
    args = ["--port", "0", "--model-repository", repo, "--threads", threads, "--log-level", "warn"]
    if cache:
        args += ["--cache-dir", cache]
    return KilndProcess(bin_dir, args)


def request_ms(pb, stub, name, inputs, n=1):
    req = pb.ModelInferRequest(model_name=name)
    for arg, value in inputs.items():
        dtype = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}[value.dtype]
        req.inputs.add(name=arg, datatype=dtype, shape=list(value.shape))
        req.raw_input_contents.append(value.tobytes())
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        stub.ModelInfer(req)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def load_ms(bin_dir, server, name):
    """The server's own load time of `name` (kiln stats), free of process start-up noise."""
    r = subprocess.run([os.path.join(bin_dir, "kiln"), "--server", server.address, "stats", name],
                       capture_output=True, text=True)
    m = re.search(r"load ([\d.]+) ms \(graph from ([\w-]+)", r.stdout)
    return (float(m.group(1)), m.group(2)) if m else (float("nan"), "?")


def measure(args, pb, pb_grpc, name, path, inputs):
    opts = [("grpc.max_send_message_length", 1 << 30), ("grpc.max_receive_message_length", 1 << 30)]
    work = tempfile.mkdtemp(prefix="kiln-repo-bench-")
    rows = []
    try:
        for _ in range(args.repeat):
            repo, cache = os.path.join(work, "models"), os.path.join(work, "cache")
            shutil.rmtree(repo, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            row = {}
            server = Server(args.bin, repo, cache, args.threads)
            try:
                t0 = time.perf_counter()
                config = ["--config", path + ".json"] if os.path.exists(path + ".json") else []
                r = subprocess.run([os.path.join(args.bin, "kiln"), "--server", server.address,
                                    "upload", path, "--name", name, *config],
                                   capture_output=True, text=True)
                row["cold_upload_s"] = time.perf_counter() - t0
                if r.returncode != 0:
                    return None, r.stderr.strip()
                stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.address, options=opts))
                row["cold_load_ms"] = load_ms(args.bin, server, name)[0]
                row["cold_first_ms"] = request_ms(pb, stub, name, inputs)[0]
                row["steady_ms"] = statistics.median(request_ms(pb, stub, name, inputs, 10))
            finally:
                server.stop()
            # Restart with the disk cache.
            server = Server(args.bin, repo, cache, args.threads)
            try:
                row["restart_cached_s"] = server.ready_s
                row["cached_load_ms"], source = load_ms(args.bin, server, name)
                assert source == "disk-cache", source
                stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.address, options=opts))
                row["restart_first_ms"] = request_ms(pb, stub, name, inputs)[0]
            finally:
                server.stop()
            # Restart without it: the model is imported again at start-up.
            shutil.rmtree(cache)
            server = Server(args.bin, repo, None, args.threads)
            try:
                row["restart_uncached_s"] = server.ready_s
                row["uncached_load_ms"] = load_ms(args.bin, server, name)[0]
                stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.address, options=opts))
                row["restart_uncached_first_ms"] = request_ms(pb, stub, name, inputs)[0]
            finally:
                server.stop()
            # An empty server's start, the floor under every restart figure.
            shutil.rmtree(repo)
            server = Server(args.bin, repo, None, args.threads)
            row["empty_start_s"] = server.ready_s
            server.stop()
            rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}, None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--fixtures", default="build/fixtures")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model", action="append")
    args = ap.parse_args()

    makers = {"resnet50": make_resnet50, "bert_like": make_bert_like,
              "resnet18": from_fixture(args.fixtures, "resnet18"),
              "mobilenet_v2": from_fixture(args.fixtures, "mobilenet_v2")}
    pb, pb_grpc = load_stubs()
    models_dir = tempfile.mkdtemp(prefix="kiln-bench-models-")
    print(f"threads={args.threads} repeat={args.repeat} (medians; seconds for readiness, "
          f"milliseconds for requests)")
    header = (f"{'model':<13} {'MB':>6} {'cold_upload':>11} {'restart_cache':>13} "
              f"{'restart_import':>14} {'empty_start':>11} {'x_restart':>9} {'x_cold':>7} "
              f"{'load_import':>11} {'load_cache':>10} {'x_load':>7} {'first_cold':>10} "
              f"{'first_cached':>12} {'steady':>8}")
    print(header)
    print(f"{'':<13} {'':>6} {'s':>11} {'s':>13} {'s':>14} {'s':>11} {'':>9} {'':>7} {'ms':>11} "
          f"{'ms':>10} {'':>7} {'ms':>10} {'ms':>12} {'ms':>8}")
    try:
        for name in args.model or ["resnet50", "bert_like", "resnet18", "mobilenet_v2"]:
            path = os.path.join(models_dir, f"{name}.pt")
            inputs = makers[name](path)
            result, error = measure(args, pb, pb_grpc, name, path, inputs)
            size_mb = os.path.getsize(path) / 1e6
            if result is None:
                print(f"{name:<13} {size_mb:>6.1f} not importable yet: {error.splitlines()[-1][:160]}",
                      flush=True)
                continue
            # load_*: the server's own time from "model file on disk" to READY, without the
            # process start (dynamic loading, ~1 s here) that every restart pays alike.
            # x_restart: restart-to-ready without the disk cache (an import at start-up) over
            # with it; x_cold: cold upload-to-ready over restart-to-ready with the cache.
            print(f"{name:<13} {size_mb:>6.1f} {result['cold_upload_s']:>11.2f} "
                  f"{result['restart_cached_s']:>13.2f} {result['restart_uncached_s']:>14.2f} "
                  f"{result['empty_start_s']:>11.2f} "
                  f"{result['restart_uncached_s'] / result['restart_cached_s']:>8.1f}x "
                  f"{result['cold_upload_s'] / result['restart_cached_s']:>6.1f}x "
                  f"{result['uncached_load_ms']:>11.0f} {result['cached_load_ms']:>10.0f} "
                  f"{result['uncached_load_ms'] / result['cached_load_ms']:>6.1f}x "
                  f"{result['cold_first_ms']:>10.1f} {result['restart_first_ms']:>12.1f} "
                  f"{result['steady_ms']:>8.1f}", flush=True)
    finally:
        shutil.rmtree(models_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
