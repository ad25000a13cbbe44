"""What verification on first use costs on the first request of a new signature.

torchvision's resnet18 (random weights, traced at batch 1) is uploaded to one kilnd with
`--verify-on-first-use on` and one with `off`, each without a config; the load verifies batch 1
(the contract fixes 3 x 224 x 224 but leaves the batch open), so the first request of each other
batch size is a new signature. For each batch size, one first request and then --rounds more are
timed on each kilnd. Prints the first request's latency and the median of the later ones.

  /usr/bin/python3 tests/bench/first_use_bench.py --bin build/bin [--batches 2 4] [--rounds 5]
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


def make_model(directory):
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    path = os.path.join(directory, "resnet18.pt")
    with torch.no_grad():
        torch.jit.trace(model, torch.randn(1, 3, 224, 224)).save(path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--batches", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import grpc
    from kiln_client_example import load_stubs
    pb, pb_grpc = load_stubs()
    work = tempfile.mkdtemp(prefix="kiln-first-use-bench-")
    path = make_model(work)
    servers = {}
    for mode in ("on", "off"):
        proc = KilndProcess(args.bin, ["--host", "127.0.0.1", "--port", "0", "--model-repository",
                                       os.path.join(work, f"repo-{mode}"), "--threads",
                                       args.threads, "--log-level", "warn",
                                       "--verify-on-first-use", mode])
        stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(
            proc.address, options=[("grpc.max_send_message_length", 1 << 30),
                                   ("grpc.max_receive_message_length", 1 << 30)]))
        req = pb.RepositoryModelLoadRequest(model_name="resnet18")
        with open(path, "rb") as f:
            req.parameters["file:1/model.pt"].bytes_param = f.read()
        stub.RepositoryModelLoad(req, timeout=600)
        servers[mode] = (proc, stub)

    def timed(stub, x):
        req = pb.ModelInferRequest(model_name="resnet18")
        req.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        req.raw_input_contents.append(x.tobytes())
        start = time.perf_counter()
        stub.ModelInfer(req, timeout=600)
        return (time.perf_counter() - start) * 1e3

    print(f"{'batch':>5} {'verify':>6} {'first ms':>9} {'later ms (median)':>18}")
    try:
        for batch in args.batches:
            x = np.random.default_rng(batch).standard_normal((batch, 3, 224, 224)).astype(np.float32)
            for mode, (_, stub) in servers.items():
                first = timed(stub, x)
                later = statistics.median(timed(stub, x) for _ in range(args.rounds))
                print(f"{batch:5} {mode:>6} {first:9.0f} {later:18.0f}", flush=True)
        # What the verifying kilnd found for each signature (all should have passed).
        meta = servers["on"][1].ModelMetadata(pb.ModelMetadataRequest(name="resnet18"), timeout=60)
        for key in ("verify", "verify.first_use.count", "verify.signatures"):
            print(f"{key}: {meta.properties.get(key, '(not in metadata)')[:160]}")
    finally:
        for proc, _ in servers.values():
            proc.stop()


if __name__ == "__main__":
    main()
