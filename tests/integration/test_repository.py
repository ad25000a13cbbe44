"""The durable model repository and the compiled-graph cache, end to end: the real kilnd
(imports in its isolated child process, as deployed), the real `kiln` CLI, TorchScript files
from tests/fixtures. Covers restarts, kill -9 during uploads, corrupt cache entries, two
processes sharing a cache directory, the cache's byte bound, hostile names, and import
children that crash, hang or run out of memory, and a repository filled by copying files."""
import hashlib
import os
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np

from test_end_to_end import BIN, FIXTURES, fixture  # also puts tests/support on the path
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)

# kill -9 rounds; each costs about a second or two.
KILL_ROUNDS = int(os.environ.get("KILN_KILL_ROUNDS", "20"))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Kilnd(KilndProcess):
    """kilnd serving `repo` (and a cache dir) on a free loopback port."""

    def __init__(self, repo, cache=None, extra=(), env=None):
        args = ["--host", "127.0.0.1", "--port", "0", "--model-repository", repo, "--threads", "1",
                "--log-level", "info", *extra]
        if cache:
            args += ["--cache-dir", cache]
        # Passive OpenMP workers: these tests run several kilnds (and ctest runs tests side by
        # side) on two cores, where libgomp's default spin after each parallel region takes
        # milliseconds of CPU from the others.
        super().__init__(BIN, args, env={"OMP_WAIT_POLICY": "PASSIVE", **(env or {})})


def import_workers_of(repo, wait_s=0.0):
    """Running `kilnd --import-worker` processes working on files of `repo`; with `wait_s`,
    waits up to that long for them to end first (a killed daemon's children die with it, but
    not at once on a loaded machine)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = _import_workers_of(repo)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


def _import_workers_of(repo):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"--import-worker" in argv and any(repo.encode() in a for a in argv):
            found.append(int(pid))
    return found


class RepositoryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kiln-repo-")
        self.repo = os.path.join(self.tmp, "models")
        self.cache = os.path.join(self.tmp, "cache")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, repo=None, cache="default", **kwargs):
        server = Kilnd(repo or self.repo, self.cache if cache == "default" else cache, **kwargs)
        self.servers.append(server)
        return server

    def kiln(self, server, *args, check=True, timeout=300):
        cmd = [os.path.join(BIN, "kiln"), "--server", server.address, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            self.fail(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}\n"
                      f"--- kilnd log ---\n{server.text()}")
        return r

    def infer(self, server, name, model, version=None):
        """Runs `name` on <model>'s fixture inputs; returns output 0."""
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        args = ["infer", name, "--output-dir", out_dir]
        if version:
            args += ["--version", str(version)]
        for f in sorted(os.listdir(FIXTURES)):
            m = re.match(rf"{re.escape(model)}\.input\.(\w+)\.npy$", f)
            if m:
                args += ["--input", f"{m.group(1)}={fixture(f)}"]
        self.kiln(server, *args)
        return np.load(os.path.join(out_dir, "output0.npy"))

    def assert_matches_libtorch(self, got, model):
        want = np.load(fixture(f"{model}.output0.npy"))
        self.assertEqual(got.shape, want.shape)
        rel = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-12))
        self.assertLessEqual(rel, 1e-4, f"{model}: relative error {rel}")

    def stats(self, server, name=""):
        return self.kiln(server, "stats", *([name] if name else [])).stdout

    # ------------------------------------------------------------------ the repository

    def test_prefilled_repository_is_served_as_it_is(self):
        # Filled the way a volume or KServe's storage initializer fills it: plain copies in
        # Triton's layout, config.json beside the versions, no server involved.
        def put(name, version, model):
            os.makedirs(os.path.join(self.repo, name, str(version)))
            shutil.copy(fixture(f"{model}.pt"), os.path.join(self.repo, name, str(version),
                                                              "model.pt"))

        put("mlp", 1, "mlp")
        put("mlp", 2, "mlp_v2")
        put("mlp", 3, "corrupt")  # the newest version is broken: the other two still serve
        with open(os.path.join(self.repo, "mlp", "config.json"), "w") as f:
            f.write('{"version_policy": {"latest": {"num_versions": 3}},'
                    ' "inputs": [{"name": "features", "datatype": "FP32"}]}')
        put("resnet18", 4, "resnet18")
        put("broken", 1, "corrupt")
        os.makedirs(os.path.join(self.repo, "..data", "1"))           # Kubernetes' volume links
        shutil.copy(fixture("mlp.pt"), os.path.join(self.repo, "..data", "1", "model.pt"))
        os.makedirs(os.path.join(self.repo, "bad name", "1"))         # not a valid model name
        shutil.copy(fixture("mlp.pt"), os.path.join(self.repo, "bad name", "1", "model.pt"))
        os.makedirs(os.path.join(self.repo, "empty"))                 # no version yet

        server = self.start()
        rows = [line.split(None, 3) for line in self.kiln(server, "models").stdout.splitlines()[1:]]
        index = {(r[0], r[1]): (r[2], r[3] if len(r) > 3 else "") for r in rows}
        self.assertEqual(sorted(index), [("broken", "1"), ("mlp", "1"), ("mlp", "2"),
                                         ("mlp", "3"), ("resnet18", "4")], rows)
        self.assertEqual(index[("mlp", "1")][0], "READY")
        self.assertEqual(index[("mlp", "2")][0], "READY")
        self.assertEqual(index[("resnet18", "4")][0], "READY")
        for key in (("mlp", "3"), ("broken", "1")):
            state, reason = index[key]
            self.assertEqual(state, "UNAVAILABLE", key)
            self.assertIn("TorchScript import failed", reason, key)

        # ModelInfer names a version; config.json's input name is the one served.
        def infer_mlp(version, model):
            out_dir = tempfile.mkdtemp(dir=self.tmp)
            self.kiln(server, "infer", "mlp", "--version", str(version), "--output-dir", out_dir,
                      "--input", f"features={fixture(f'{model}.input.x.npy')}")
            return np.load(os.path.join(out_dir, "output0.npy"))

        self.assert_matches_libtorch(infer_mlp(1, "mlp"), "mlp")
        self.assert_matches_libtorch(infer_mlp(2, "mlp_v2"), "mlp_v2")
        r = self.kiln(server, "infer", "mlp", "--version", "3", "--input",
                      f"features={fixture('mlp.input.x.npy')}", check=False)
        self.assertIn("FAILED_PRECONDITION", r.stderr)
        self.assert_matches_libtorch(self.infer(server, "resnet18", "resnet18"), "resnet18")

        # Triton's single-message upload, with the SHA-256 in a parameter: a bad file as the
        # next version of resnet18 is refused and the previous version keeps serving.
        r = self.kiln(server, "upload", fixture("corrupt.pt"), "--name", "resnet18",
                      "--single-message", "--version", "5", check=False)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertEqual(sorted(os.listdir(os.path.join(self.repo, "resnet18"))), ["4"])
        self.assert_matches_libtorch(self.infer(server, "resnet18", "resnet18"), "resnet18")
        self.kiln(server, "upload", fixture("mobilenet_v2.pt"), "--name", "resnet18",
                  "--single-message", "--version", "5")
        self.assertEqual(sha256(os.path.join(self.repo, "resnet18", "5", "model.pt")),
                         sha256(fixture("mobilenet_v2.pt")))
        self.assert_matches_libtorch(self.infer(server, "resnet18", "mobilenet_v2"),
                                     "mobilenet_v2")
        # Without --version the single message installs the next version, as the streamed
        # upload does, instead of replacing version 1.
        r = self.kiln(server, "upload", fixture("resnet18.pt"), "--name", "resnet18",
                      "--single-message")
        self.assertIn("version 6", r.stdout)
        self.assertEqual(sha256(os.path.join(self.repo, "resnet18", "6", "model.pt")),
                         sha256(fixture("resnet18.pt")))
        self.assert_matches_libtorch(self.infer(server, "resnet18", "resnet18"), "resnet18")

        # Unload stops serving and keeps the files; delete removes them.
        self.kiln(server, "unload", "mlp")
        r = self.kiln(server, "infer", "mlp", "--version", "1", "--input",
                      f"features={fixture('mlp.input.x.npy')}", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("unloaded", self.kiln(server, "models").stdout)
        self.assertEqual(sorted(os.listdir(os.path.join(self.repo, "mlp"))),
                         ["1", "2", "3", "config.json"])
        self.kiln(server, "delete", "broken")
        self.assertFalse(os.path.exists(os.path.join(self.repo, "broken")))
        self.assertNotIn("broken", self.kiln(server, "models").stdout)
        # Nothing the server did touched what it does not own.
        self.assertTrue(os.path.exists(os.path.join(self.repo, "..data", "1", "model.pt")))
        self.assertTrue(os.path.exists(os.path.join(self.repo, "bad name", "1", "model.pt")))
        self.assertTrue(server.alive())

    # ------------------------------------------------------------------ restarts

    def test_restart_keeps_five_models_without_touching_libtorch(self):
        models = ["mlp", "mlp_scripted", "two_input", "resnet18", "mobilenet_v2"]
        first = self.start()
        outputs = {}
        for m in models:
            self.kiln(first, "upload", fixture(f"{m}.pt"), "--name", m)
            outputs[m] = self.infer(first, m, m)
            self.assert_matches_libtorch(outputs[m], m)
        self.assertEqual(self.stats(first).count("graph from import,"), 5)
        first.stop()

        # Any import would now crash (test-only hook): every model must come from the cache.
        second = self.start(env={"KILN_TEST_IMPORT_FAULT": "crash"})
        listing = self.kiln(second, "models").stdout
        self.assertEqual(listing.count("READY"), 5, listing)
        for m in models:
            np.testing.assert_array_equal(self.infer(second, m, m), outputs[m])
        stats = self.stats(second)
        self.assertEqual(stats.count("graph from disk-cache"), 5, stats)
        self.assertIn("disk hits 1", stats)
        self.assertNotIn("graph from import", stats)
        # Nothing needed libtorch, so kilnd never loaded it (server/torch/torch_backend.h).
        with open(f"/proc/{second.proc.pid}/maps") as f:
            self.assertNotIn("libtorch_cpu", f.read())
        self.assertNotIn("loaded libtorch", second.text())

    def test_kill9_during_upload_never_leaves_a_half_written_model(self):
        # resnet18 and mobilenet_v2 take the same input and give [1, 1000]; each round uploads
        # the one that is not current as a new version of "m" and kills kilnd at a random moment.
        files = {sha256(fixture(f"{m}.pt")): m for m in ("resnet18", "mobilenet_v2")}
        server = self.start()
        self.kiln(server, "upload", fixture("resnet18.pt"), "--name", "m")
        self.kiln(server, "upload", fixture("mobilenet_v2.pt"), "--name", "m")
        # Both graphs are cached now, as in every round: time such an upload to aim the kills.
        t0 = time.monotonic()
        self.kiln(server, "upload", fixture("resnet18.pt"), "--name", "m")
        window = (time.monotonic() - t0) * 1.2
        server.stop()
        rng = random.Random(5)
        outcomes = {"completed": 0, "interrupted": 0}
        for round_ in range(KILL_ROUNDS):
            server = self.start()
            # Start-up worked; every version on disk is one complete, known file; nothing else
            # lies in the model directory; the latest version serves and gives its own output.
            versions = sorted(int(v) for v in os.listdir(os.path.join(self.repo, "m")))
            for v in versions:
                vdir = os.path.join(self.repo, "m", str(v))
                self.assertEqual(os.listdir(vdir), ["model.pt"], f"round {round_}: {vdir}")
                self.assertIn(sha256(os.path.join(vdir, "model.pt")), files, f"round {round_}")
            current = files[sha256(os.path.join(self.repo, "m", str(versions[-1]), "model.pt"))]
            self.assert_matches_libtorch(self.infer(server, "m", current), current)
            self.assertEqual(import_workers_of(self.repo, wait_s=10), [])

            other = "mobilenet_v2" if current == "resnet18" else "resnet18"
            upload = subprocess.Popen(
                [os.path.join(BIN, "kiln"), "--server", server.address, "upload",
                 fixture(f"{other}.pt"), "--name", "m", "--chunk-bytes", "262144"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            time.sleep(rng.uniform(0, window))
            server.kill9()
            out, _ = upload.communicate(timeout=60)
            outcomes["completed" if upload.returncode == 0 else "interrupted"] += 1
            self.servers.remove(server)
        # The import children die with the daemon.
        self.assertEqual(import_workers_of(self.repo, wait_s=10), [])
        # Both outcomes happened, so the kills did land mid-upload.
        self.assertGreater(outcomes["interrupted"], 0, outcomes)

        # A last upload resumes from whatever the kills left behind and completes.
        server = self.start()
        versions = sorted(int(v) for v in os.listdir(os.path.join(self.repo, "m")))
        current = files[sha256(os.path.join(self.repo, "m", str(versions[-1]), "model.pt"))]
        other = "mobilenet_v2" if current == "resnet18" else "resnet18"
        self.kiln(server, "upload", fixture(f"{other}.pt"), "--name", "m")
        self.assert_matches_libtorch(self.infer(server, "m", other), other)
        print(f"\nkill -9 rounds: {outcomes}, kill window {window:.2f} s")

    def test_without_libtorch_cached_models_serve_natively_the_rest_fails_cleanly(self):
        # A kilnd without libtorch (built with -DKILN_WITH_TORCH=OFF, or deployed
        # without kiln-torch-worker) serves every model whose graph is in the compiled-graph cache
        # with the native kernels. An import, and a graph with fallback nodes, need libtorch:
        # they fail with FAILED_PRECONDITION saying so, and kilnd serves on.
        server = self.start()
        self.kiln(server, "upload", fixture("mlp.pt"), "--name", "mlp")
        self.kiln(server, "upload", fixture("unsupported.pt"), "--name", "unsupported")
        server.stop()
        self.servers.remove(server)
        bare = os.path.join(self.tmp, "bin")
        os.makedirs(bare)
        shutil.copy(os.path.join(BIN, "kilnd"), bare)  # no kiln-torch-worker beside it
        server = KilndProcess(bare, ["--host", "127.0.0.1", "--port", "0", "--model-repository",
                                     self.repo, "--cache-dir", self.cache, "--threads", "1"],
                              env={"OMP_WAIT_POLICY": "PASSIVE"})
        self.servers.append(server)
        self.assert_matches_libtorch(self.infer(server, "mlp", "mlp"), "mlp")
        for args in (["infer", "unsupported", "--input",
                      f"x={fixture('unsupported.input.x.npy')}"],
                     ["upload", fixture("two_input.pt"), "--name", "two_input"]):
            r = self.kiln(server, *args, check=False)
            self.assertEqual(r.returncode, 6, r.stderr)  # FAILED_PRECONDITION
            self.assertIn("FAILED_PRECONDITION", r.stderr)
            self.assertIn("libtorch is needed", r.stderr)
        self.assertTrue(server.alive())
        self.assert_matches_libtorch(self.infer(server, "mlp", "mlp"), "mlp")
        self.assertNotIn("loaded libtorch", server.text())
        self.assertFalse(os.path.exists(os.path.join(self.repo, "two_input")))

    # ------------------------------------------------------------------ the cache

    def test_corrupt_cache_entries_are_detected_removed_and_recompiled(self):
        server = self.start()
        for m in ("mlp", "two_input", "resnet18"):
            self.kiln(server, "upload", fixture(f"{m}.pt"), "--name", m)
            self.infer(server, m, m)
        server.stop()
        entries = sorted(
            os.path.join(d, f) for d in (os.path.join(self.cache, "graphs"),
                                         os.path.join(self.cache, "plans"))
            for f in os.listdir(d))
        self.assertEqual(len(entries), 6)  # a graph and a plan per model
        for i, path in enumerate(entries):
            with open(path, "rb") as f:
                data = bytearray(f.read())
            if i % 2 == 0:
                data = data[: len(data) // 2]        # truncated
            else:
                data[len(data) // 2] ^= 0x04          # one bit flipped
            with open(path, "wb") as f:
                f.write(data)

        server = self.start()
        for m in ("mlp", "two_input", "resnet18"):
            self.assert_matches_libtorch(self.infer(server, m, m), m)
        log = server.text()
        self.assertEqual(log.count("is corrupt"), 6, log)
        self.assertIn("entry removed, recompiling", log)
        self.assertIn("6 corrupt removed", self.stats(server))
        server.stop()

        # The recompiled entries were written back intact.
        server = self.start(env={"KILN_TEST_IMPORT_FAULT": "crash"})
        stats = self.stats(server)
        self.assertEqual(stats.count("graph from disk-cache"), 3, stats)
        for m in ("mlp", "two_input", "resnet18"):
            self.assert_matches_libtorch(self.infer(server, m, m), m)
        self.assertIn("0 corrupt removed", self.stats(server))

    def test_dry_run_leaves_nothing_in_the_repository_or_the_cache(self):
        server = self.start()
        r = self.kiln(server, "upload", fixture("resnet18.pt"), "--name", "dry", "--dry-run")
        self.assertIn("dry run", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.repo, "dry")))
        cached = [f for _, _, files in os.walk(self.cache) for f in files]
        self.assertEqual(cached, [], "a dry run wrote into the compiled-graph cache")
        # A real upload of the same file does fill it.
        self.kiln(server, "upload", fixture("resnet18.pt"), "--name", "real")
        self.assertTrue([f for _, _, files in os.walk(self.cache) for f in files])
        self.assertTrue(server.alive())

    def test_two_processes_share_a_cache_directory(self):
        a = self.start(repo=os.path.join(self.tmp, "repo_a"))
        b = self.start(repo=os.path.join(self.tmp, "repo_b"))
        self.kiln(a, "upload", fixture("resnet18.pt"), "--name", "r")
        out_a = self.infer(a, "r", "resnet18")
        # B never imported this file, yet needs neither libtorch nor the passes for it.
        self.kiln(b, "upload", fixture("resnet18.pt"), "--name", "r")
        out_b = self.infer(b, "r", "resnet18")
        np.testing.assert_array_equal(out_a, out_b)
        stats_b = self.stats(b, "r")
        self.assertIn("graph from disk-cache", stats_b)
        self.assertIn("disk hits 1, misses 0", stats_b)

        # Both at once, on a file neither has seen: both succeed and agree.
        results = {}

        def upload(server, key):
            results[key] = self.kiln(server, "upload", fixture("mobilenet_v2.pt"), "--name", "mb",
                                     check=False)

        threads = [threading.Thread(target=upload, args=(s, k)) for s, k in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for key, r in results.items():
            self.assertEqual(r.returncode, 0, f"{key}: {r.stdout}{r.stderr}")
        np.testing.assert_array_equal(self.infer(a, "mb", "mobilenet_v2"),
                                      self.infer(b, "mb", "mobilenet_v2"))
        self.assert_matches_libtorch(self.infer(b, "mb", "mobilenet_v2"), "mobilenet_v2")

    def test_byte_bound_evicts_least_recently_used_plans(self):
        probe = self.start(cache=None)
        held = {}
        for m in ("resnet18", "mobilenet_v2"):
            self.kiln(probe, "upload", fixture(f"{m}.pt"), "--name", m)
            self.infer(probe, m, m)
            held[m] = float(re.search(r"([\d.]+) MB held", self.stats(probe, m)).group(1))
        probe.stop()
        # Room for the larger plan and half the smaller: the two cannot both stay.
        bound = int((max(held.values()) + min(held.values()) / 2) * 1e6)
        server = self.start(cache=None, extra=["--cache-bytes", str(bound)])
        self.infer(server, "resnet18", "resnet18")
        self.infer(server, "mobilenet_v2", "mobilenet_v2")  # evicts resnet18's plan
        self.assert_matches_libtorch(self.infer(server, "resnet18", "resnet18"), "resnet18")
        # Loads may compile plans too (a verified import runs the model), so count at least.
        for m in ("resnet18", "mobilenet_v2"):
            evictions = int(re.search(r"evictions (\d+)", self.stats(server, m)).group(1))
            self.assertGreaterEqual(evictions, 1, m)
        stats = self.stats(server)
        self.assertGreaterEqual(int(re.search(r"(\d+) evictions\)", stats).group(1)), 2, stats)
        used = float(re.search(r"cache: ([\d.]+) of", stats).group(1))
        self.assertLessEqual(used * 1e6, bound + 1e5)
        self.assertIn("evicted the least recently used plan", server.text())

    # ------------------------------------------------------------------ hostile input

    def test_path_traversal_names_are_refused(self):
        server = self.start()
        for name in ("../evil", "a/b", "..", ".", ".hidden", "/tmp/x", "x" * 129, "a\\b"):
            r = self.kiln(server, "upload", fixture("mlp.pt"), "--name", name, check=False)
            self.assertNotEqual(r.returncode, 0, name)
            self.assertIn("INVALID_ARGUMENT", r.stderr, name)
            r = self.kiln(server, "delete", name, check=False)
            self.assertIn("INVALID_ARGUMENT", r.stderr, name)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["cache", "models"])
        self.assertEqual(os.listdir(self.repo), [".kiln-uploads"])
        self.assertTrue(server.alive())

    def test_crashing_or_hanging_import_gets_a_clear_error_and_daemon_keeps_serving(self):
        server = self.start()
        self.kiln(server, "upload", fixture("mlp.pt"), "--name", "mlp")
        r = self.kiln(server, "upload", fixture("crash_import.pt"), "--name", "crash", check=False)
        self.assertEqual(r.returncode, 3)  # INVALID_ARGUMENT's exit status (kiln --help)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertIn("crashed with signal 11", r.stderr)
        self.assertTrue(server.alive())
        self.assert_matches_libtorch(self.infer(server, "mlp", "mlp"), "mlp")
        self.assertFalse(os.path.exists(os.path.join(self.repo, "crash")))
        server.stop()

        # A hang is cut off at --load-timeout-s (test-only hook makes the import hang); its old
        # name --import-timeout-s still works.
        server = self.start(extra=["--import-timeout-s", "2"], env={"KILN_TEST_IMPORT_FAULT": "hang"})
        t0 = time.monotonic()
        r = self.kiln(server, "upload", fixture("two_input.pt"), "--name", "hangs", check=False)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertIn("DEADLINE_EXCEEDED", r.stderr)
        self.assertIn("import: did not finish within the 2 s left of the load's time limit", r.stderr)
        self.assertTrue(server.alive())
        self.assert_matches_libtorch(self.infer(server, "mlp", "mlp"), "mlp")  # from the cache
        self.assertEqual(import_workers_of(self.repo), [])
        server.stop()

        # So is an import that needs more than --import-memory-mb (test-only hook again).
        server = self.start(extra=["--import-memory-mb", "256"], env={"KILN_TEST_IMPORT_FAULT": "oom"})
        r = self.kiln(server, "upload", fixture("two_input.pt"), "--name", "oom", check=False)
        self.assertIn("RESOURCE_EXHAUSTED", r.stderr)
        self.assertIn("256 MiB", r.stderr)
        self.assertTrue(server.alive())
        self.assertFalse(os.path.exists(os.path.join(self.repo, "oom")))
        self.assert_matches_libtorch(self.infer(server, "mlp", "mlp"), "mlp")
        self.assertEqual(import_workers_of(self.repo), [])


if __name__ == "__main__":
    unittest.main()
