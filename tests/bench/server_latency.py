#!/usr/bin/env python3
"""Latency of ModelInfer through a real kilnd (loopback gRPC, raw tensor bytes) next to
libtorch running the same TorchScript file in this process with the same thread count.

    server_latency.py --bin build/bin --fixtures build/fixtures --threads 2 [--model resnet18]

Starts kilnd on a free port with an empty temporary repository, uploads the model, then
alternates one gRPC request and one libtorch call (pause between calls) and prints the
medians and their ratio. A measuring instrument: it never fails on a number.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import grpc
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "client", "python"))
from kiln_client_example import load_stubs  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)

SHAPES = {"resnet18": (1, 3, 224, 224), "mobilenet_v2": (1, 3, 224, 224), "mlp": (1, 16)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--fixtures", default="build/fixtures")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--pause-ms", type=float, default=5)
    ap.add_argument("--model", action="append")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    pb, pb_grpc = load_stubs()
    repo = tempfile.mkdtemp(prefix="kiln-bench-")
    server = KilndProcess(args.bin, ["--port", "0", "--model-repository", repo, "--threads",
                                     args.threads, "--log-level", "warn"])
    try:
        opts = [("grpc.max_send_message_length", 1 << 30),
                ("grpc.max_receive_message_length", 1 << 30)]
        stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.address, options=opts))
        print(f"threads={args.threads} iters={args.iters} (batch 1, median ms)")
        print(f"{'model':<14} {'server_ms':>10} {'torch_ms':>10} {'ratio':>8}")
        for name in args.model or ["resnet18", "mobilenet_v2", "mlp"]:
            path = os.path.join(args.fixtures, f"{name}.pt")
            req = pb.RepositoryModelLoadRequest(model_name=name)
            with open(path, "rb") as f:
                req.parameters["file:1/model.pt"].bytes_param = f.read()
            stub.RepositoryModelLoad(req)
            input_name = stub.ModelMetadata(pb.ModelMetadataRequest(name=name)).inputs[0].name

            x = torch.rand(*SHAPES[name])
            infer = pb.ModelInferRequest(model_name=name)
            infer.inputs.add(name=input_name, datatype="FP32", shape=list(x.shape))
            infer.raw_input_contents.append(x.numpy().tobytes())
            module = torch.jit.freeze(torch.jit.load(path).eval())

            def run_server():
                return stub.ModelInfer(infer)

            def run_torch():
                with torch.no_grad():
                    return module(x)

            for _ in range(3):
                run_server()
                run_torch()
            ts, tt = [], []
            for _ in range(args.iters):
                t0 = time.perf_counter()
                run_server()
                ts.append((time.perf_counter() - t0) * 1e3)
                time.sleep(args.pause_ms / 1e3)
                t0 = time.perf_counter()
                run_torch()
                tt.append((time.perf_counter() - t0) * 1e3)
                time.sleep(args.pause_ms / 1e3)
            s, t = statistics.median(ts), statistics.median(tt)
            print(f"{name:<14} {s:>10.3f} {t:>10.3f} {s / t:>8.2f}", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
