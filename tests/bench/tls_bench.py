#!/usr/bin/env python3
"""What TLS adds to a request: batch-1 mobilenet_v2 over a kept-alive gRPC channel, with and without
TLS, interleaved request by request.

    python3 tests/bench/tls_bench.py --bin build/bin --work build/bench-tls [--rounds 200]

Two kilnds with the same settings (--threads 1, one shared compiled-graph cache) serve the same
model file, one with --tls-cert/--tls-key (a throwaway certificate made with openssl) and bearer
tokens, one in plaintext without tokens. One client channel to each is opened and warmed up (the
TLS handshake happens once, as on any kept-alive channel); then each round sends one request to
each, the order alternating, so both see the same machine. Printed: median and p90 latency of
each, the median of the per-round differences, and the ratio of the medians. A measuring
instrument: it never fails on a number.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
sys.path.insert(0, HERE)
from kilnd_process import KilndProcess  # noqa: E402
from load_bench import make_model, sample_input, percentile  # noqa: E402

MODEL = "mobilenet_v2"


def make_certificate(d):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", os.path.join(d, "server.key"), "-out", os.path.join(d, "server.pem")],
                   check=True, capture_output=True)
    return os.path.join(d, "server.pem"), os.path.join(d, "server.key")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--work", default="build/bench-tls")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    import grpc
    from kiln_client_example import load_stubs
    pb, pb_grpc = load_stubs()

    os.makedirs(args.work, exist_ok=True)
    path = make_model(MODEL, args.work)
    tmp = tempfile.mkdtemp(prefix="kiln-tls-bench-")
    servers = []
    try:
        cert, key = make_certificate(tmp)
        tokens = os.path.join(tmp, "tokens")
        with open(tokens, "w") as f:
            f.write("infer bench-token-0123456789abcdef\n")
        os.chmod(tokens, 0o600)
        cache = os.path.join(args.work, "cache")
        for name, extra in (("plain", []),
                            ("tls", ["--tls-cert", cert, "--tls-key", key, "--auth-tokens", tokens])):
            repo = os.path.join(tmp, name)
            os.makedirs(os.path.join(repo, MODEL, "1"))
            shutil.copy(path, os.path.join(repo, MODEL, "1", "model.pt"))
            servers.append(KilndProcess(args.bin, ["--host", "127.0.0.1", "--port", "0",
                                                   "--http-port", "-1", "--model-repository", repo,
                                                   "--cache-dir", cache, "--threads", "1",
                                                   "--log-level", "warn", *extra]))
        opts = [("grpc.max_send_message_length", 1 << 30),
                ("grpc.max_receive_message_length", 1 << 30)]
        with open(cert, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        plain = pb_grpc.GRPCInferenceServiceStub(
            grpc.insecure_channel(servers[0].address, options=opts))
        tls = pb_grpc.GRPCInferenceServiceStub(
            grpc.secure_channel(servers[1].address, creds, options=opts))
        datatype, x = sample_input(MODEL)
        req = pb.ModelInferRequest(model_name=MODEL)
        req.inputs.add(name="INPUT__0", datatype=datatype, shape=list(x.shape))
        req.raw_input_contents.append(x.tobytes())
        md = {"plain": [], "tls": [("authorization", "Bearer bench-token-0123456789abcdef")]}
        stubs = {"plain": plain, "tls": tls}

        def once(which):
            start = time.perf_counter()
            stubs[which].ModelInfer(req, metadata=md[which], timeout=120)
            return (time.perf_counter() - start) * 1e3

        for _ in range(args.warmup):
            once("plain")
            once("tls")
        ms = {"plain": [], "tls": []}
        diffs = []
        for i in range(args.rounds):
            order = ("plain", "tls") if i % 2 == 0 else ("tls", "plain")
            got = {which: once(which) for which in order}
            for which in order:
                ms[which].append(got[which])
            diffs.append(got["tls"] - got["plain"])
        print(f"{MODEL} batch 1, gRPC over a kept-alive channel, {args.rounds} interleaved rounds, "
              f"load average {os.getloadavg()[0]:.1f}")
        for which in ("plain", "tls"):
            s = sorted(ms[which])
            label = "plaintext" if which == "plain" else "TLS + token"
            print(f"  {label:12s} median {statistics.median(s):7.2f} ms  p90 "
                  f"{percentile(s, 90):7.2f} ms")
        p, t = statistics.median(ms["plain"]), statistics.median(ms["tls"])
        print(f"  TLS adds {statistics.median(diffs):+.3f} ms per request (median of per-round "
              f"differences); ratio of medians {t / p:.3f}")
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
