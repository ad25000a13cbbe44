#!/usr/bin/python3
"""`make bench`: Kiln next to its peers, side by side in one run.

    peer_bench.py --bin build/bin --work build/peers [--export-chroot build/pt2/sid]
                  [--threads 2] [--batch 1 --batch 8] [--rounds 20] [--models resnet18,bert_like]

Engines, each in its own long-lived process that loads the model once (so thread pools never mix
and the peak RSS is the engine's own):
  kiln    Kiln's engine in process (kiln-bench --worker kiln: kiln::runtime::Model, no fallback)
  kilnd   a real kilnd on loopback; ModelInfer from a kiln-bench client worker (Kiln's C++ client)
  kdshm   the same kilnd, from a second client that passes its input through a registered
          shared-memory region (the system shared-memory extension) instead of the request;
          shm-k is the median per-round difference kdshm - kiln (what serving adds)
  kdloc   the same kilnd, from a third client that passes its input through shared memory and
          makes the call over kilnd's local socket (kilnd --local-socket) instead of gRPC;
          loc-k is kdloc - kiln as shm-k, and loc% the same as a share of kiln's median
  torch   libtorch 1.13, the frozen TorchScript (kiln-bench --worker torch), at the best of five
          settings for that model and batch: libgomp's default wait policy or
          OMP_WAIT_POLICY=PASSIVE, times OpenBLAS at 1 thread or at --threads, and the default one
          with its OpenMP threads pinned to cores (OMP_PROC_BIND=close, OMP_PLACES=cores: what
          Kiln's --pin-threads auto does for its own team); chosen by a short interleaved
          calibration in the same run, and named in the table
  ort     ONNX Runtime 1.21 from a Debian trixie chroot (made on first use, cached in --work)
          on the .onnx export (opset 14) of the same traced file
  pt2     Kiln in process again, on the torch.export archive (.pt2) of the same weights, written by
          torch 2.14 in the Debian sid chroot of --export-chroot (export_pt2.py; made on first
          use, cached); pt2/k is its median per-round ratio to the kiln column. Left out when
          --export-chroot is not given or that chroot cannot be made here

Per model and batch: a warm-up, a parity check of every engine's output against libtorch's, then
--rounds rounds in which each engine runs once (the order rotates every round), with --gap-ms of
idle between timed calls so no engine's leftover threads take the next one's cores. Reported:
medians, the median of per-round ratios (kiln/ort, kiln/torch), GFLOP/s from the FLOP count
(FlopCounterMode of the chroot's torch 2.6), VmHWM of each engine's process, and the measured
sgemm peak at --threads. A measuring instrument: it never fails on a number.
"""
import argparse
import contextlib
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
sys.path.insert(0, HERE)
from bench_models import MODELS, input_spec  # noqa: E402
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)

ENGINES = ["kiln", "kilnd", "kdshm", "kdloc", "ort", "torch"]
# Kiln in process on the torch.export archive of the same weights (--export-chroot; export_pt2.py):
# timed with the others when the archive could be made.
PT2 = "pt2"
CHROOT_MOUNT = "/kiln-bench"  # where --work/models appears inside the chroot
# libtorch's settings: (libgomp's wait policy or None for its default, OpenBLAS threads or None
# for --threads, OMP_PROC_BIND or None for unpinned).
TORCH_SETTINGS = [(None, None, None), (None, 1, None), ("PASSIVE", None, None), ("PASSIVE", 1, None),
                  (None, None, "close")]


# The environment of every engine: no thread settings of the caller's leak in.
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                          "OMP_PROC_BIND", "OMP_PLACES")}


def torch_setting_label(setting, threads):
    wait, blas, bind = setting
    label = f"OMP_WAIT_POLICY={wait or 'default'},OPENBLAS_NUM_THREADS={blas or threads}"
    return label + (f",OMP_PROC_BIND={bind}" if bind else "")


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def vm_hwm_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Worker:
    """An engine process speaking kiln-bench's worker protocol (bench.cc) on stdin/stdout."""

    def __init__(self, name, argv, log_path, env=None, path_map=lambda path: path):
        """Starts `argv`; its stderr goes to `log_path`, whose tail an error message shows.
        `path_map` gives a file's path as the worker sees it (inside a chroot)."""
        self.name, self.log_path, self.path_map = name, log_path, path_map
        self.settle_ms = 0.0  # how long its threads may spin after a call (see interleave)
        with open(log_path, "w") as log_file:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log_file, text=True,
                                         env={**CLEAN_ENV, **(env or {})})
        self._expect("ready")

    def _call(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._expect(None)

    def _expect(self, want):
        reply = self.proc.stdout.readline().strip()
        if not reply or reply.startswith("error") or (want and reply != want):
            with open(self.log_path, errors="replace") as f:
                tail = "".join(f.readlines()[-5:])
            raise RuntimeError(f"{self.name}: {reply or 'exited'}\n{tail}")
        return reply

    def set_input(self, dtype, shape, path):
        self._call(f"input {dtype} {','.join(map(str, shape))} {self.path_map(path)}")

    def run(self):
        return float(self._call("run"))

    def save(self, path):
        self._call(f"save {self.path_map(path)}")

    def profile(self, path):
        """One call under Kiln's profiler (the kiln worker); its table goes to `path`."""
        self._call(f"profile {self.path_map(path)}")

    @property
    def pid(self):
        return self.proc.pid

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class ClientEngine:
    """An engine timed by a kiln-bench client worker (self.client) of a kilnd."""

    def set_input(self, dtype, shape, path):
        self.client.set_input(dtype, shape, path)

    def run(self):
        return self.client.run()

    def save(self, path):
        self.client.save(path)


class KilndEngine(ClientEngine):
    """A kilnd serving one model, loaded here with stock grpcio; each call is one ModelInfer over
    loopback gRPC made and timed by a kiln-bench client worker (Kiln's C++ client library), so
    the column carries transport and serving, not this interpreter's per-call overhead."""

    def __init__(self, bin_dir, model_path, name, threads, log_path, precision="fp32"):
        self.name = "kilnd"
        self.model_name = name
        self.repo = tempfile.mkdtemp(prefix="kiln-bench-repo-")
        self.socket = os.path.join(self.repo, "kilnd.sock")
        self.server = KilndProcess(bin_dir, ["--port", "0", "--model-repository", self.repo,
                                             "--local-socket", self.socket,
                                             "--threads", threads, "--log-level", "warn"])
        self.client = None
        try:
            self._load(bin_dir, model_path, name, precision)
            self.client = Worker("kilnd", [os.path.join(bin_dir, "kiln-bench"), "--worker", "kilnd",
                                           "--server", self.server.address, "--model", name],
                                 log_path)
        except BaseException:
            self.close()
            raise

    def _load(self, bin_dir, model_path, name, precision):
        # `kiln upload` streams the file in chunks (Kiln's documented way), so kilnd's peak RSS
        # measures serving the model, not holding a one-message upload in memory.
        cmd = [os.path.join(bin_dir, "kiln"), "upload", model_path, "--name", name, "--no-progress"]
        config = {}
        if os.path.exists(model_path + ".json"):
            with open(model_path + ".json") as f:
                config = json.load(f)
        if precision != "fp32":
            # bfloat16 measured as such: "bf16" alone runs float32 where this CPU's bfloat16 GEMMs
            # are not faster (README, "Opt-in speed"), and the in-process column forces it too.
            config["precision"] = "bf16_always" if precision == "bf16" else precision
        with tempfile.NamedTemporaryFile("w", suffix=".json") as config_file:
            if config:
                json.dump(config, config_file)
                config_file.flush()
                cmd += ["--config", config_file.name]
            env = dict(os.environ, KILN_SERVER=self.server.address)
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)

    @property
    def pid(self):
        return self.server.proc.pid

    def shared_memory_client(self, bin_dir, log_path, local_socket=False):
        """A second client of the same kilnd that passes its input through a registered
        shared-memory region (the system shared-memory extension) instead of the request; with
        `local_socket`, over kilnd's local socket instead of gRPC (the kdloc column)."""
        name = "kdloc" if local_socket else "kdshm"
        cmd = [os.path.join(bin_dir, "kiln-bench"), "--worker", "kilnd", "--server",
               self.server.address, "--model", self.model_name, "--shared-memory"]
        if local_socket:
            cmd += ["--local-socket", self.socket]
        return KilndSharedMemoryClient(self, Worker(name, cmd, log_path), name)

    def close(self):
        if self.client is not None:
            self.client.close()
        self.server.stop()
        shutil.rmtree(self.repo, ignore_errors=True)


class KilndSharedMemoryClient(ClientEngine):
    """The kdshm and kdloc columns: kilnd through shared memory; its server (and MB) is the kilnd
    column's."""

    def __init__(self, kilnd, worker, name):
        self.name, self.kilnd, self.client = name, kilnd, worker

    def close(self):
        self.client.close()

    @property
    def pid(self):
        return self.kilnd.pid


@contextlib.contextmanager
def mounted_chroot(chroot, models_dir):
    """Yields a function that makes sure /proc and the models folder are bind-mounted into the
    chroot (call it before starting a process there: on this shared machine a mount has been seen
    to vanish mid-run); unmounts both on the way out."""
    targets = [(os.path.abspath(models_dir), os.path.join(chroot, CHROOT_MOUNT.lstrip("/"))),
               ("/proc", os.path.join(chroot, "proc"))]

    def mounted(target):  # os.path.ismount misses a bind mount from the same file system
        return subprocess.run(["mountpoint", "-q", target]).returncode == 0

    def unmount_all():
        for _, target in reversed(targets):
            while mounted(target) and subprocess.run(["umount", target]).returncode == 0:
                pass

    def ensure():
        for source, target in targets:
            os.makedirs(target, exist_ok=True)
            if not mounted(target):
                subprocess.run(["mount", "--bind", source, target], check=True)

    try:
        unmount_all()  # whatever an interrupted run left
        ensure()
        yield ensure
    finally:
        unmount_all()


def interleave(engines, rounds, gap_ms):
    """The one timing loop: `rounds` rounds, each engine once per round in an order shuffled every
    round (seeded), `gap_ms` of idle before each timed call. Returns each engine's list of ms.

    Shuffled, not rotated: a rotation keeps every engine behind the same neighbour, and what a
    call leaves running lands on the next engine's call. libtorch with OPENBLAS_NUM_THREADS=2
    leaves OpenBLAS's threads spinning for ~0.1 s after each call (its THREAD_TIMEOUT), so with
    a rotation the engine after it was slowed 2-8x in most rounds (Kiln in process, whose OpenMP
    threads wait on each other at every parallel region, the most). An engine that leaves threads
    spinning says for how long (`settle_ms`), and the next call waits that much longer."""
    order = list(range(len(engines)))
    shuffle = random.Random(rounds).shuffle
    times = [[] for _ in engines]
    settle_ms = 0.0  # what the previous call leaves running (Worker.settle_ms)
    for _ in range(rounds):
        shuffle(order)
        for k in order:
            time.sleep((gap_ms + settle_ms) / 1e3)
            times[k].append(engines[k].run())
            settle_ms = getattr(engines[k], "settle_ms", 0.0)
    return times


def median_ratio(a, b):
    """Median of the per-round ratios a[i] / b[i]."""
    return statistics.median(x / y for x, y in zip(a, b))


def geomean(values):
    values = [v for v in values if v and not math.isnan(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


class Bench:
    def __init__(self, args):
        self.args = args
        self.models_dir = os.path.join(args.work, "models")
        self.chroot = os.path.join(args.work, "trixie")
        self.export_chroot = args.export_chroot  # None: no .pt2 column
        self.kiln_bench = os.path.join(args.bin, "kiln-bench")
        self.ensure_mounts = None  # set while the chroot's mounts are held (run())

    def in_chroot(self, *argv):
        self.ensure_mounts()
        return ["chroot", self.chroot, "python3", f"{CHROOT_MOUNT}/chroot_worker.py", *argv]

    def inside(self, path):
        return f"{CHROOT_MOUNT}/{os.path.relpath(path, self.models_dir)}"

    def prepare(self, models):
        subprocess.run([os.path.join(ROOT, "scripts", "make-peer-chroot.sh"), self.chroot],
                       check=True)
        subprocess.run([sys.executable, os.path.join(HERE, "bench_models.py"), self.models_dir,
                        *models], check=True)
        shutil.copy(os.path.join(HERE, "chroot_worker.py"), self.models_dir)
        os.makedirs(os.path.join(self.models_dir, "io"), exist_ok=True)
        if self.export_chroot:
            self.export_pt2(models)

    def export_pt2(self, models):
        """The .pt2 of each model (the same weights, torch.export of torch 2.14 in a Debian sid
        chroot, export_pt2.py); where that chroot cannot be made, the table has no pt2 column."""
        made = subprocess.run([os.path.join(ROOT, "scripts", "make-export-chroot.sh"),
                               self.export_chroot], stdout=sys.stderr)
        if made.returncode != 0:
            log(f"no .pt2 column: the export chroot could not be made (exit {made.returncode})")
            self.export_chroot = None
            return
        for script in ("export_pt2.py", "bench_models.py"):
            shutil.copy(os.path.join(HERE, script), self.models_dir)
        with mounted_chroot(self.export_chroot, self.models_dir):
            subprocess.run(["chroot", self.export_chroot, "env", "OMP_NUM_THREADS=2", "python3",
                            f"{CHROOT_MOUNT}/export_pt2.py", CHROOT_MOUNT, *models], check=True)

    def flops(self, name, batch):
        """FLOPs of one call, counted once in the chroot and cached next to the model."""
        cache = os.path.join(self.models_dir, f"{name}.b{batch}.flops")
        if not os.path.exists(cache):
            dtype, shape, _ = input_spec(name)
            out = subprocess.run(self.in_chroot("flops", f"{CHROOT_MOUNT}/{name}.pt", dtype,
                                                ",".join(map(str, (batch, *shape)))),
                                 check=True, capture_output=True, text=True).stdout
            with open(cache, "w") as f:
                f.write(out.strip().splitlines()[-1])
        with open(cache) as f:
            return int(f.read())

    def sgemm_peak(self):
        out = subprocess.run([self.kiln_bench, "--sgemm-peak", "--threads", str(self.args.threads)],
                             check=True, capture_output=True, text=True).stdout
        return dict((k, float(v)) for k, v in (line.split() for line in out.splitlines()))

    def write_input(self, name, batch):
        dtype, shape, _ = input_spec(name)
        rng = np.random.default_rng(batch)
        shape = (batch, *shape)
        x = (rng.integers(0, 30522, shape, dtype=np.int64) if dtype == "i64"
             else rng.standard_normal(shape, dtype=np.float32))
        path = os.path.join(self.models_dir, "io", f"{name}.b{batch}.input")
        x.tofile(path)
        return dtype, shape, path

    def start(self, name, engines, torch):
        """Starts every engine for `name` into `engines` (ENGINES order, without torch) and `torch`
        (one per TORCH_SETTINGS); what started before a failure is in the lists to be closed."""
        t, pt = str(self.args.threads), os.path.join(self.models_dir, f"{name}.pt")
        log = os.path.join(self.models_dir, "io", f"{name}.%s.log")
        engines.append(Worker("kiln", [self.kiln_bench, "--worker", "kiln", "--model", pt,
                                       "--threads", t, "--precision", self.args.precision],
                              log % "kiln"))
        engines.append(KilndEngine(self.args.bin, pt, name, t, log % "kilnd", self.args.precision))
        kilnd = engines[-1]
        engines.append(kilnd.shared_memory_client(self.args.bin, log % "kdshm"))
        engines.append(kilnd.shared_memory_client(self.args.bin, log % "kdloc", local_socket=True))
        engines.append(Worker("ort", self.in_chroot("ort", f"{CHROOT_MOUNT}/{name}.onnx", t),
                              log % "ort", path_map=self.inside))
        pt2 = os.path.join(self.models_dir, f"{name}.pt2")
        if self.export_chroot and os.path.exists(pt2):
            engines.append(Worker(PT2, [self.kiln_bench, "--worker", "kiln", "--model", pt2,
                                        "--threads", t, "--precision", self.args.precision],
                                  log % PT2))
        for i, setting in enumerate(TORCH_SETTINGS):
            wait, blas, bind = setting
            env = {"OMP_WAIT_POLICY": wait} if wait else {}
            if bind:
                env.update(OMP_PROC_BIND=bind, OMP_PLACES="cores")
            torch.append(Worker(torch_setting_label(setting, t),
                                [self.kiln_bench, "--worker", "torch", "--model", pt, "--threads", t,
                                 "--blas-threads", str(blas or t)],
                                log % f"torch{i}", env))
            if (blas or self.args.threads) > 1:
                # OpenBLAS's idle threads spin (yielding) for 2^28 cycles, ~0.1 s here, after
                # each call before they sleep.
                torch[-1].settle_ms = 150.0

    def parity(self, name, batch, engines):
        """Max |engine - libtorch| / max |libtorch| over the engines' outputs (the last engine is
        libtorch)."""
        outputs = []
        for i, e in enumerate(engines):
            path = os.path.join(self.models_dir, "io", f"{name}.b{batch}.{i}.out")
            e.save(path)
            outputs.append(np.fromfile(path, dtype=np.float32))
        ref = outputs[-1]
        scale = float(np.abs(ref).max()) or 1.0
        return max(float(np.abs(v - ref).max()) / scale for v in outputs)

    def measure(self, name, batch, engines, torch):
        args = self.args
        dtype, shape, path = self.write_input(name, batch)
        for e in engines + torch:
            e.set_input(dtype, shape, path)
            for _ in range(args.warmup):
                e.run()
        diff = self.parity(name, batch, engines + torch[:1])
        # libtorch's best setting for this model and batch, from a short interleaved calibration.
        labels = [w.name for w in torch]
        calib = dict(zip(labels, map(statistics.median,
                                     interleave(torch, args.calib_rounds, args.gap_ms))))
        best = min(range(len(torch)), key=lambda i: calib[labels[i]])
        timed = {e.name: e for e in engines}
        timed["torch"] = torch[best]
        times = dict(zip(timed, interleave(list(timed.values()), args.rounds, args.gap_ms)))
        # Where the kiln worker's time went: one call after the timed rounds, given the idle a timed
        # call gets (the last call may have been libtorch's, whose threads still spin).
        time.sleep((args.gap_ms + max(e.settle_ms for e in torch)) / 1e3)
        engines[0].profile(os.path.join(self.models_dir, "io", f"{name}.b{batch}.kiln.profile"))
        flops = self.flops(name, batch)
        row = {"model": name, "batch": batch, "gflop": flops / 1e9, "diff": diff,
               "torch_setting": labels[best], "calib": calib}
        for key, e in timed.items():
            row[f"{key}_ms"] = statistics.median(times[key])
            row[f"{key}_gflops"] = flops / 1e6 / row[f"{key}_ms"]
            row[f"{key}_mb"] = vm_hwm_mb(e.pid)
        row["kiln/ort"] = median_ratio(times["kiln"], times["ort"])
        row["kiln/torch"] = median_ratio(times["kiln"], times["torch"])
        row["kilnd/ort"] = median_ratio(times["kilnd"], times["ort"])
        row["kdshm/kiln"] = median_ratio(times["kdshm"], times["kiln"])
        row["kdshm-kiln"] = statistics.median(a - b for a, b in zip(times["kdshm"], times["kiln"]))
        row["kdloc-kiln"] = statistics.median(a - b for a, b in zip(times["kdloc"], times["kiln"]))
        row["kdloc%"] = 100 * row["kdloc-kiln"] / row["kiln_ms"]
        # The .pt2 against the TorchScript of the same weights, both Kiln in process.
        row["pt2/kiln"] = (median_ratio(times[PT2], times["kiln"]) if PT2 in times
                           else float("nan"))
        peer = "torch" if row["torch_ms"] < row["ort_ms"] else "ort"
        row["best_peer"] = peer
        row["kiln/best"] = row[f"kiln/{peer}"]
        return row

    def run(self):
        args = self.args
        models = args.models.split(",") if args.models else MODELS
        self.prepare(models)
        peak = self.sgemm_peak()
        rows = []
        with mounted_chroot(self.chroot, self.models_dir) as self.ensure_mounts:
            for name in models:
                log(f"{name}: loading into every engine")
                engines, torch = [], []
                try:
                    self.start(name, engines, torch)
                    for batch in args.batch:
                        rows.append(self.measure(name, batch, engines, torch))
                        log(format_row(rows[-1]))
                except Exception as e:  # noqa: BLE001  (one model failing skips that model)
                    log(f"{name}: skipped: {e}")
                finally:
                    for e in engines + torch:
                        e.close()
        print_tables(args, rows, peak)


COLUMNS = [  # (header, unit, width, format of a row)
    ("model", "", 15, lambda r: r["model"]),
    ("b", "", 2, lambda r: str(r["batch"])),
    ("GFLOP", "", 6, lambda r: f"{r['gflop']:.1f}"),
    ("kiln", "ms", 8, lambda r: f"{r['kiln_ms']:.2f}"),
    ("kilnd", "ms", 8, lambda r: f"{r['kilnd_ms']:.2f}"),
    ("kd-shm", "ms", 8, lambda r: f"{r['kdshm_ms']:.2f}"),
    ("kd-loc", "ms", 8, lambda r: f"{r['kdloc_ms']:.2f}"),
    ("torch", "ms", 8, lambda r: f"{r['torch_ms']:.2f}"),
    ("ort", "ms", 8, lambda r: f"{r['ort_ms']:.2f}"),
    ("k/ort", "", 6, lambda r: f"{r['kiln/ort']:.2f}"),
    ("k/torch", "", 7, lambda r: f"{r['kiln/torch']:.2f}"),
    ("kd/ort", "", 6, lambda r: f"{r['kilnd/ort']:.2f}"),
    ("shm-k", "ms", 6, lambda r: f"{r['kdshm-kiln']:+.2f}"),
    ("loc-k", "ms", 6, lambda r: f"{r['kdloc-kiln']:+.2f}"),
    ("loc%", "", 5, lambda r: f"{r['kdloc%']:+.1f}"),
    ("pt2/k", "", 6, lambda r: f"{r['pt2/kiln']:.2f}"),
    ("kiln", "GF/s", 6, lambda r: f"{r['kiln_gflops']:.0f}"),
    ("kilnd", "GF/s", 6, lambda r: f"{r['kilnd_gflops']:.0f}"),
    ("torch", "GF/s", 6, lambda r: f"{r['torch_gflops']:.0f}"),
    ("ort", "GF/s", 6, lambda r: f"{r['ort_gflops']:.0f}"),
    ("kiln", "MB", 6, lambda r: f"{r['kiln_mb']:.0f}"),
    ("kilnd", "MB", 6, lambda r: f"{r['kilnd_mb']:.0f}"),
    ("torch", "MB", 6, lambda r: f"{r['torch_mb']:.0f}"),
    ("ort", "MB", 6, lambda r: f"{r['ort_mb']:.0f}"),
    ("diff", "", 7, lambda r: f"{r['diff']:.0e}"),
    ("libtorch's setting", "", 0, lambda r: r["torch_setting"]),
]


def format_row(row):
    cells = [fmt(row).rjust(w) if i else fmt(row).ljust(w)
             for i, (_, _, w, fmt) in enumerate(COLUMNS)]
    return " ".join(cells)


def print_tables(args, rows, peak):
    print(f"threads={args.threads} rounds={args.rounds} gap={args.gap_ms:g} ms "
          f"kiln precision={args.precision} "
          f"(medians; ratios are medians of per-round ratios; MB is each process's VmHWM)")
    print("sgemm peak at %d threads: %s GFLOP/s" % (
        args.threads, ", ".join(f"{k} {v:.0f}" for k, v in peak.items())))
    for batch in args.batch:
        table = [r for r in rows if r["batch"] == batch]
        if not table:
            continue
        print()
        print(" ".join(h.rjust(w) if i else h.ljust(w) for i, (h, _, w, _) in enumerate(COLUMNS)))
        print(" ".join(u.rjust(w) for (_, u, w, _) in COLUMNS))
        for r in table:
            print(format_row(r))
        print(f"batch {batch}: geomean kiln/ort {geomean(r['kiln/ort'] for r in table):.2f}, "
              f"kiln/best-peer {geomean(r['kiln/best'] for r in table):.2f}, "
              f"kilnd/ort {geomean(r['kilnd/ort'] for r in table):.2f} over {len(table)} models")
    print()
    print(f"libtorch's calibration ({args.calib_rounds} interleaved rounds, median ms per setting):")
    for r in rows:
        print(f"  {r['model']:<15} b{r['batch']:<2} " + "  ".join(
            f"{label} {ms:.2f}" for label, ms in r["calib"].items()))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--work", default="build/peers", help="chroot, models and I/O files (cached)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, action="append", help="default: 1 and 8")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--calib-rounds", type=int, default=5,
                    help="rounds that pick libtorch's best setting")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--gap-ms", type=float, default=20)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="Kiln's plan precision, in process and in kilnd (the load config's "
                         "\"precision\"); the peers run float32")
    ap.add_argument("--models", help=f"comma-separated subset of {','.join(MODELS)}")
    ap.add_argument("--export-chroot",
                    help="the Debian sid chroot of scripts/make-export-chroot.sh (made when "
                         "missing): adds the pt2 column, Kiln in process on each model's .pt2")
    args = ap.parse_args()
    args.batch = args.batch or [1, 8]
    if os.geteuid() != 0:
        sys.exit("peer_bench.py needs root: ONNX Runtime runs in a chroot")
    # SIGTERM unwinds like Ctrl-C, so the engines stop and the chroot's mounts are released.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
