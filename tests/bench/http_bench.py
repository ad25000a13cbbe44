#!/usr/bin/env python3
"""HTTP/REST with the binary tensor extension next to gRPC: one batch-1 resnet18 request, the same
kilnd, interleaved request by request.

    python3 tests/bench/http_bench.py --bin build/bin --work build/bench-http [--rounds 200]

One kilnd (--threads 2) serves resnet18. A kept-alive gRPC channel (stock grpcio) and a kept-alive
HTTP/1.1 connection (the standard library's http.client) each send the same [1, 3, 224, 224]
float32 input: gRPC in raw_input_contents, HTTP as the binary tensor data extension (a JSON header,
`Inference-Header-Content-Length`, then the 602 KB of raw bytes; the output asked for in binary
too). Each round sends one request of each, the order alternating, with a short gap before each, so
both see the same machine. Printed: median and p90 of each, the median of the per-round
differences and the ratio of the medians; the outputs are checked equal. A measuring instrument:
it never fails on a number.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
sys.path.insert(0, HERE)
from kilnd_process import KilndProcess  # noqa: E402
from load_bench import percentile  # noqa: E402

MODEL = "resnet18"


def make_model(work):
    path = os.path.join(work, f"{MODEL}.pt")
    if not os.path.exists(path):
        from bench_models import make_torchvision
        make_torchvision(MODEL, path + ".partial")
        os.replace(path + ".partial", path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--work", default="build/bench-http")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import grpc
    from kiln_client_example import load_stubs
    pb, pb_grpc = load_stubs()

    os.makedirs(args.work, exist_ok=True)
    path = make_model(args.work)
    repo = tempfile.mkdtemp(prefix="kiln-http-bench-")
    server = None
    try:
        os.makedirs(os.path.join(repo, MODEL, "1"))
        shutil.copy(path, os.path.join(repo, MODEL, "1", "model.pt"))
        server = KilndProcess(args.bin, ["--host", "127.0.0.1", "--port", "0", "--http-port", "0",
                                         "--model-repository", repo, "--threads", str(args.threads),
                                         "--log-level", "warn"])
        x = np.random.default_rng(0).standard_normal((1, 3, 224, 224), np.float32)
        raw = x.tobytes()

        stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(
            server.address, options=[("grpc.max_send_message_length", 1 << 30),
                                     ("grpc.max_receive_message_length", 1 << 30)]))
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name=MODEL), timeout=600)
        name = meta.inputs[0].name
        req = pb.ModelInferRequest(model_name=MODEL)
        req.inputs.add(name=name, datatype="FP32", shape=list(x.shape))
        req.raw_input_contents.append(raw)

        host, port = server.http_address.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        header = json.dumps({
            "inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape),
                        "parameters": {"binary_data_size": len(raw)}}],
            "parameters": {"binary_data_output": True}}).encode()
        body = header + raw
        headers = {"Content-Type": "application/octet-stream",
                   "Inference-Header-Content-Length": str(len(header))}

        def via_grpc():
            start = time.perf_counter()
            out = stub.ModelInfer(req, timeout=600)
            ms = (time.perf_counter() - start) * 1e3
            return ms, np.frombuffer(out.raw_output_contents[0], np.float32)

        def via_http():
            start = time.perf_counter()
            conn.request("POST", f"/v2/models/{MODEL}/infer", body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            ms = (time.perf_counter() - start) * 1e3
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
            n = int(resp.getheader("Inference-Header-Content-Length"))
            return ms, np.frombuffer(data[n:], np.float32)

        calls = {"grpc": via_grpc, "http": via_http}
        for _ in range(args.warmup):
            for call in calls.values():
                call()
        _, a = via_grpc()
        _, b = via_http()
        same = a.shape == b.shape and np.array_equal(a, b)
        ms = {"grpc": [], "http": []}
        diffs = []
        for i in range(args.rounds):
            order = ("grpc", "http") if i % 2 == 0 else ("http", "grpc")
            got = {}
            for which in order:
                time.sleep(args.gap_ms / 1e3)
                got[which] = calls[which]()[0]
                ms[which].append(got[which])
            diffs.append(got["http"] - got["grpc"])
        print(f"{MODEL} batch 1 (602 KB in), kilnd --threads {args.threads}, kept-alive "
              f"connections, {args.rounds} interleaved rounds, {args.gap_ms:g} ms gap, "
              f"load average {os.getloadavg()[0]:.1f}; outputs equal: {same}")
        for which, label in (("grpc", "gRPC (grpcio)"), ("http", "HTTP binary (http.client)")):
            s = sorted(ms[which])
            print(f"  {label:26s} median {statistics.median(s):7.2f} ms  p90 "
                  f"{percentile(s, 90):7.2f} ms")
        g, h = statistics.median(ms["grpc"]), statistics.median(ms["http"])
        print(f"  HTTP - gRPC {statistics.median(diffs):+.3f} ms per request (median of per-round "
              f"differences); ratio of medians {h / g:.3f}")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
