#!/usr/bin/env python3
"""Closed-loop load through a real kilnd on loopback (`make bench-load`).

    python3 tests/bench/load_bench.py --bin build/bin --work build/bench-load \
        [--models mlp,mobilenet_v2,bert_small] [--concurrency 1,4,16,64] [--seconds 2] [--rounds 3]

For each model, one kilnd (--threads THREADS, its default --concurrent-inferences) serves the
model twice: "<model>" without batching and "<model>_batched" with Triton's dynamic batching
(max_batch_size per model below, max_queue_delay_microseconds 0: a batch is whatever waits when a
compute thread frees up). At each concurrency C, C client threads each send one batch-1 request,
wait for its answer and send the next (closed loop), first --warmup seconds unmeasured, then
--seconds measured. The batched model's config has a model_warmup sample, so its batch sizes (the
batcher's allowed sizes) are compiled at load. Printed per point: requests/s, p50,
p90 and p99 latency (ms, client side), errors, the cores kilnd and the clients (this process)
used over the measured window (kd-cpu, cl-cpu: CPU seconds per second; on a 2-core machine the
clients' share is taken from kilnd), the share of runs (singles and batches) that ran on one thread
of a split compute team (split: kilnd's kiln_compute_split_runs_total; the rest ran on the whole
team), the share of a batched model's requests that went around the batcher's queue rather than
through it (around: kiln_batcher_requests_total; nan for the unbatched model), kilnd's peak
resident memory so far (kd-MB, VmHWM: it only grows, so read each model's last
row), and the batch sizes the server ran (statistics).

Models (made once under --work, seeded):
  mlp          Linear 1024->2048, ReLU, 2048->2048, ReLU, 2048->1000 (about 8 M float
               parameters): weight-bound at batch 1
  mobilenet_v2 torchvision's, as the parity zoo builds it; input [1, 3, 224, 224]
  bert_small   tests/bench/bench_models.py's BertLike, BERT-shaped but small enough for a short
               run on two cores: 4 layers, hidden 256, 4 heads, FFN 1024, sequence 64, int64 ids

A measuring instrument: it never fails on a number. The machine's load average is printed before
and after; read ratios.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
sys.path.insert(0, HERE)
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)

MAX_BATCH = {"mlp": 64, "mobilenet_v2": 8, "bert_small": 8}
BERT_SMALL = dict(vocab=30522, d=256, layers=4, heads=4, ffn=1024, seq=64)


def make_model(name, work):
    """The model file (and its config, if any) under `work`; made once."""
    path = os.path.join(work, f"{name}.pt")
    if os.path.exists(path):
        return path
    import torch
    print(f"making {name}.pt", file=sys.stderr, flush=True)
    torch.manual_seed(0)
    config = None
    if name == "mlp":
        model = torch.nn.Sequential(
            torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
            torch.nn.ReLU(), torch.nn.Linear(2048, 1000)).eval()
        example = torch.randn(1, 1024)
        config = {"inputs": [{"name": "x", "datatype": "FP32", "dims": [-1, 1024]}]}
    elif name == "bert_small":
        from bench_models import BertLike
        model = BertLike(**BERT_SMALL).eval()
        example = torch.randint(0, BERT_SMALL["vocab"], (1, BERT_SMALL["seq"]))
        config = {"inputs": [{"name": "input_ids", "datatype": "INT64",
                              "dims": [-1, BERT_SMALL["seq"]]}]}
    elif name == "mobilenet_v2":
        from bench_models import make_torchvision
        make_torchvision(name, path + ".partial")
        os.replace(path + ".partial", path)
        return path
    else:
        sys.exit(f"unknown model {name}")
    with torch.no_grad():
        torch.jit.trace(model, example).save(path + ".partial")
    if config is not None:
        with open(path + ".json", "w") as f:
            json.dump(config, f)
    os.replace(path + ".partial", path)
    return path


def sample_input(name):
    """(datatype, array) of one batch-1 request."""
    rng = np.random.default_rng(0)
    if name == "mlp":
        return "FP32", rng.standard_normal((1, 1024), np.float32)
    if name == "bert_small":
        return "INT64", rng.integers(0, BERT_SMALL["vocab"], (1, BERT_SMALL["seq"]), np.int64)
    return "FP32", rng.standard_normal((1, 3, 224, 224), np.float32)


def percentile(sorted_ms, q):
    if not sorted_ms:
        return float("nan")
    return sorted_ms[min(len(sorted_ms) - 1, int(q / 100.0 * len(sorted_ms)))]


class Server:
    """One kilnd serving `name` without and with dynamic batching."""

    def __init__(self, args, name, path):
        import grpc
        from kiln_client_example import load_stubs
        self.grpc = grpc
        self.pb, pb_grpc = load_stubs()
        self.repo = tempfile.mkdtemp(prefix="kiln-load-repo-")
        self.proc = KilndProcess(args.bin, ["--host", "127.0.0.1", "--port", "0",
                                            "--model-repository", self.repo,
                                            "--threads", args.threads, "--log-level", "warn"])
        opts = [("grpc.max_send_message_length", 1 << 30),
                ("grpc.max_receive_message_length", 1 << 30)]
        # A few channels, so that the client side is not one HTTP/2 connection's queue.
        self.stubs = [pb_grpc.GRPCInferenceServiceStub(
            grpc.insecure_channel(self.proc.address, options=opts + [("grpc.channel_id", i)]))
            for i in range(4)]
        base = {}
        if os.path.exists(path + ".json"):
            with open(path + ".json") as f:
                base = json.load(f)
        # Warmed up as a production config would be: one zero row, which also compiles every
        # batch size the batcher runs (its allowed sizes, by default powers of two), so the
        # measured window holds no compile.
        datatype, x = sample_input(name)
        warmup = [{"name": "zeros", "batch_size": 1, "inputs": {"INPUT__0": {
            "data_type": f"TYPE_{datatype}", "dims": list(x.shape[1:]), "zero_data": True}}}]
        batched = dict(base, max_batch_size=MAX_BATCH[name],
                       dynamic_batching={"max_queue_delay_microseconds": 0},
                       model_warmup=warmup)
        with open(path, "rb") as f:
            data = f.read()
        for model, config in ((name, base), (f"{name}_batched", batched)):
            req = self.pb.RepositoryModelLoadRequest(model_name=model)
            req.parameters["file:1/model.pt"].bytes_param = data
            req.parameters["config"].string_param = json.dumps(config)
            self.stubs[0].RepositoryModelLoad(req, timeout=600)
        self.batching = self.stubs[0].ModelMetadata(self.pb.ModelMetadataRequest(
            name=f"{name}_batched")).properties["dynamic_batching"]

    def request(self, model, datatype, x):
        req = self.pb.ModelInferRequest(model_name=model)
        req.inputs.add(name="INPUT__0", datatype=datatype, shape=list(x.shape))
        req.raw_input_contents.append(x.tobytes())
        return req

    def batch_counts(self, model):
        s = self.stubs[0].ModelStatistics(self.pb.ModelStatisticsRequest(name=model)).model_stats[0]
        return {b.batch_size: b.compute_infer.count for b in s.batch_stats}

    def counters(self, model):
        """From one scrape of kilnd's /metrics: runs on one thread of a split compute team
        (kiln_compute_split_runs_total), and `model`'s successful requests through its batcher's
        queue and around it (kiln_batcher_requests_total; absent for a model without dynamic
        batching). Each nan when absent or unreadable."""
        import urllib.request
        wanted = ["kiln_compute_split_runs_total"] + [
            f'kiln_batcher_requests_total{{model="{model}",route="{route}",version="1"}}'
            for route in ("queue", "around")]
        values = dict.fromkeys(wanted, float("nan"))
        try:
            with urllib.request.urlopen(f"http://{self.proc.metrics_address}/metrics",
                                        timeout=10) as r:
                for line in r.read().decode().splitlines():
                    sample, _, value = line.rpartition(" ")
                    if sample in values:
                        values[sample] = float(value)
        except (OSError, ValueError):
            pass
        return tuple(values[k] for k in wanted)

    def close(self):
        self.proc.stop()
        shutil.rmtree(self.repo, ignore_errors=True)


def cpu_seconds(pid):
    """CPU time (user + system, s) of process `pid` so far; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def peak_mb(pid):
    """VmHWM of process `pid` in MB; nan when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return float("nan")


def run_point(server, model, req, concurrency, warmup_s, seconds):
    """Closed loop at `concurrency`; returns the measured latencies (ms), errors, the batch
    sizes run, and the cores kilnd and the clients used over the measured window."""
    lock = threading.Lock()
    latencies, errors = [], []
    start = time.monotonic()
    measure_from = start + warmup_s
    stop_at = measure_from + seconds

    def client(i):
        stub = server.stubs[i % len(server.stubs)]
        while True:
            t0 = time.monotonic()
            if t0 >= stop_at:
                return
            try:
                stub.ModelInfer(req, timeout=60)
                ok = True
            except server.grpc.RpcError as e:
                ok = False
                error = f"{e.code().name}: {e.details()}"
            t1 = time.monotonic()
            if t0 >= measure_from and t1 <= stop_at:
                with lock:
                    if ok:
                        latencies.append((t1 - t0) * 1e3)
                    else:
                        errors.append(error)

    cpu = {}

    def sample_cpu():
        # Cores used over the measured window: kilnd's, and this process's (the clients).
        for when, key in ((measure_from, "from"), (stop_at, "to")):
            time.sleep(max(0.0, when - time.monotonic()))
            cpu[key] = (cpu_seconds(server.proc.proc.pid), cpu_seconds(os.getpid()), time.monotonic())

    before = server.batch_counts(model)
    counters_before = server.counters(model)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    threads.append(threading.Thread(target=sample_cpu))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = server.batch_counts(model)
    ran = {b: after.get(b, 0) - before.get(b, 0) for b in after if after.get(b, 0) > before.get(b, 0)}
    runs = sum(ran.values())
    split_runs, queued, around = (a - b for a, b in zip(server.counters(model), counters_before))
    split = split_runs / runs if runs else float("nan")
    # nan for a model without dynamic batching (its samples are absent).
    around_share = around / (queued + around) if queued + around > 0 else float("nan")
    latencies.sort()
    cores = (float("nan"), float("nan"))
    if "from" in cpu and "to" in cpu and None not in cpu["from"] + cpu["to"]:
        span = cpu["to"][2] - cpu["from"][2]
        cores = tuple((cpu["to"][i] - cpu["from"][i]) / span for i in (0, 1))
    return latencies, errors, ran, cores, split, around_share


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--work", default="build/bench-load", help="models (made once, cached)")
    ap.add_argument("--threads", default="2", help="kilnd --threads")
    ap.add_argument("--models", default="mlp,mobilenet_v2,bert_small")
    ap.add_argument("--concurrency", default="1,4,16,64")
    # Several short rounds rather than one long one: on a shared machine a single 5 s point
    # swings by 10-25% between runs of the same build, and batched against unbatched is then
    # read as the median of per-round ratios (each pair measured seconds apart).
    ap.add_argument("--seconds", type=float, default=2.0, help="measured per point")
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured, before each point")
    ap.add_argument("--rounds", type=int, default=3,
                    help="sweeps of every point, interleaved; the figures use the medians")
    ap.add_argument("--json", help="write every point here")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"load average before: {loadavg()}; {os.cpu_count()} cores; kilnd --threads "
          f"{args.threads}", flush=True)
    rows = []
    for name in args.models.split(","):
        path = make_model(name, args.work)
        server = Server(args, name, path)
        try:
            print(f"\n{name}: dynamic batching of {name}_batched: {server.batching}", flush=True)
            print(f"{'model':<22} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p90 ms':>8} "
                  f"{'p99 ms':>8} {'errors':>6} {'kd-cpu':>6} {'cl-cpu':>6} {'split':>5} {'around':>6} {'kd-MB':>6}  "
                  f"batch sizes run (size x count)", flush=True)
            datatype, x = sample_input(name)
            models = (name, f"{name}_batched")
            reqs = {model: server.request(model, datatype, x) for model in models}
            for model in models:
                server.stubs[0].ModelInfer(reqs[model], timeout=600)  # compile batch 1
            # Without and with batching side by side at each concurrency, so that the
            # machine's drift does not fall between them; --rounds repeats the whole sweep.
            for rnd, c, model in ((r, c, m) for r in range(args.rounds) for c in levels
                                  for m in models):
                req = reqs[model]
                lat, errors, ran, cores, split, around = run_point(server, model, req, c,
                                                                   args.warmup, args.seconds)
                row = {"model": model, "concurrency": c, "round": rnd,
                       "rps": len(lat) / args.seconds,
                       "p50": percentile(lat, 50), "p90": percentile(lat, 90),
                       "p99": percentile(lat, 99), "errors": len(errors),
                       "batches": {str(k): v for k, v in sorted(ran.items())},
                       "first_error": errors[0] if errors else "",
                       "kilnd_cores": cores[0], "client_cores": cores[1], "split_share": split,
                       "around_share": around,
                       "kilnd_peak_mb": peak_mb(server.proc.proc.pid)}
                rows.append(row)
                sizes = " ".join(f"{k}x{v}" for k, v in sorted(ran.items()))
                label = model if args.rounds == 1 else f"{model} r{rnd}"
                print(f"{label:<22} {c:>4} {row['rps']:>8.1f} {row['p50']:>8.2f} "
                      f"{row['p90']:>8.2f} {row['p99']:>8.2f} {row['errors']:>6} "
                      f"{cores[0]:>6.2f} {cores[1]:>6.2f} {split:>5.2f} {around:>6.2f} {row['kilnd_peak_mb']:>6.0f}  {sizes}",
                      flush=True)
                if errors:
                    print(f"  first error: {errors[0]}", flush=True)
            # What the batcher measured (its batch size by cost), after the last point.
            print(f"  {models[1]}: " + server.stubs[0].ModelMetadata(server.pb.ModelMetadataRequest(
                name=models[1])).properties["dynamic_batching"], flush=True)
        finally:
            server.close()
    print(f"\nload average after: {loadavg()}")
    # Each point's medians over the rounds.
    points_of = {}
    for model in sorted({r["model"] for r in rows}):
        points = {}
        for c in sorted({r["concurrency"] for r in rows if r["model"] == model}):
            runs = [r for r in rows if r["model"] == model and r["concurrency"] == c]
            points[c] = {k: statistics.median(r[k] for r in runs) for k in ("rps", "p50", "p90", "p99")}
            points[c]["rounds"] = {r["round"]: r["rps"] for r in runs}
        points_of[model] = points
    if args.rounds > 1:
        print(f"\nmedians over {args.rounds} rounds:")
        for model, points in points_of.items():
            for c, p in points.items():
                print(f"{model:<22} {c:>4} {p['rps']:>8.1f} {p['p50']:>8.2f} {p['p90']:>8.2f} "
                      f"{p['p99']:>8.2f}")
    # The figures, as ratios (of the medians; batched against unbatched, the median of
    # the per-round ratios).
    print("\nfigures:")
    for model, points in points_of.items():
        if 16 in points:
            lower = [points[c]["rps"] for c in points if c < 16]
            best = max(lower) if lower else float("nan")
            p = points[16]
            print(f"  {model:<22} c16/best-lower throughput {p['rps'] / best:.2f}, "
                  f"c16 p99/p50 {p['p99'] / p['p50']:.2f}"
                  + (f", c16/c1 throughput {p['rps'] / points[1]['rps']:.2f}" if 1 in points else ""))
        if model.endswith("_batched"):
            alone = points_of.get(model[:-len("_batched")], {})

            def ratio(c):
                per_round = [b / alone[c]["rounds"][r] for r, b in points[c]["rounds"].items()
                             if alone[c]["rounds"].get(r)]
                return statistics.median(per_round) if per_round else float("nan")
            print(f"  {model:<22} throughput against unbatched: " + ", ".join(
                f"c{c} {ratio(c):.2f}" for c in sorted(points) if c in alone))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"loadavg": loadavg(), "threads": args.threads, "points": rows}, f, indent=1)


if __name__ == "__main__":
    main()
