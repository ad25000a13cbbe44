"""The libtorch fallback runs in a sandboxed worker process per model, never in kilnd (issue 15):
the real kilnd, driven through the real `kiln` CLI and stock grpcio, with models torch scripts here.

  - A model with an op only libtorch runs (aten::i0) answers with PyTorch's numbers; the op ran in
    a child of kilnd (`kiln-torch-worker --fallback-worker`, another pid), and kilnd never mapped
    libtorch.
  - Native code in the worker that tries to read /etc/passwd, create files, open sockets, exec,
    signal or trace the daemon, or shrink the memory it shares with kilnd (a SIGBUS in kilnd's
    mapping) is refused each time (test-only probe, KILN_TEST_FALLBACK_FAULT).
  - An op allocating past --import-memory-mb is RESOURCE_EXHAUSTED naming the op and the limit;
    the next request runs.
  - Killing the worker in the middle of a request is INTERNAL naming the op; the next request
    starts a new worker and gets the right numbers. A worker killed while idle is replaced
    silently.
  - A worker that hangs is stopped at the request's deadline (DEADLINE_EXCEEDED naming the op).
After each case kilnd is alive and a good model still serves libtorch's numbers. About a minute.
"""
import os
import signal
import subprocess
import threading
import time
import unittest

import grpc
import numpy as np
import torch
import torch.nn as nn

from test_end_to_end import BIN, assert_close
from test_security import SecurityTestBase, pb, pb_grpc

MEMORY_MB = 1024


class I0(nn.Module):
    """aten::i0 has no native translation: it runs through the libtorch fallback."""

    def forward(self, x):
        return torch.i0(x) * 2.0 + x


class I0Loop(nn.Module):
    """The fallback op 3000 times in a loop: several seconds on a large input."""

    def forward(self, x):
        for _ in range(3000):
            x = torch.i0(x) * 0.5
        return x


class Bincount(nn.Module):
    """A result sized by the input's values: bincount of [2^28] is 2 GiB of int64."""

    def forward(self, x):
        return torch.bincount(x)


def worker_pids(kilnd_pid):
    """The pids of kilnd's `--fallback-worker` children."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if ppid == kilnd_pid and b"--fallback-worker" in argv:
            found.append(int(entry))
    return found


class FallbackWorkerTest(SecurityTestBase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.outside = os.path.join(cls.tmp, "outside")
        os.makedirs(cls.outside)
        for name, module in (("i0", I0()), ("i0_loop", I0Loop()), ("bincount", Bincount())):
            torch.jit.script(module).save(os.path.join(cls.models, f"{name}.pt"))
        # i0's verified import runs Kiln's side (its fallback op) through the worker too.
        # bincount's samples would be random int64 counts (terabytes): not verified.
        cls.no_verify = os.path.join(cls.tmp, "no_verify.json")
        with open(cls.no_verify, "w") as f:
            f.write('{"verify": false}')
        cls.int64_input = os.path.join(cls.tmp, "int64_input.json")
        with open(cls.int64_input, "w") as f:
            f.write('{"inputs": [{"name": "x", "datatype": "INT64", "dims": [-1]}], '
                    '"verify": false}')
        cls.verify_i0 = os.path.join(cls.tmp, "verify_i0.json")
        with open(cls.verify_i0, "w") as f:
            f.write('{"verify": {"inputs": [{"name": "x", "dims": [8]}]}}')
        cls.server = cls.start("repo", ["--import-memory-mb", MEMORY_MB])
        for name in ("relu", "i0_loop"):
            cls.upload_to(cls.server, name)
        cls.upload_to(cls.server, "i0", cls.verify_i0)
        cls.upload_to(cls.server, "bincount", cls.int64_input)

    @classmethod
    def upload_to(cls, server, name, config=None):
        cls.kiln_cls(server, "upload", os.path.join(cls.models, f"{name}.pt"), "--name", name,
                     *(["--config", config] if config else []))

    @classmethod
    def kiln_cls(cls, server, *args):
        r = subprocess.run([os.path.join(BIN, "kiln"), "--server", server.address,
                            *map(str, args)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    def infer(self, server, model, x, timeout=60):
        stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.address))
        req = pb.ModelInferRequest(model_name=model)
        dtype = {np.float32: "FP32", np.int64: "INT64"}[x.dtype.type]
        req.inputs.add(name="x", datatype=dtype, shape=list(x.shape))
        req.raw_input_contents.append(x.tobytes())
        reply = stub.ModelInfer(req, timeout=timeout)
        out = reply.outputs[0]
        want = {"FP32": np.float32, "INT64": np.int64}[out.datatype]
        return np.frombuffer(reply.raw_output_contents[0], dtype=want).reshape(out.shape)

    def test_a_fallback_op_runs_in_a_sandboxed_worker_with_pytorchs_numbers(self):
        x = np.linspace(-3, 3, 1000, dtype=np.float32)
        got = self.infer(self.server, "i0", x)
        want = (torch.i0(torch.from_numpy(x)) * 2.0 + torch.from_numpy(x)).numpy()
        assert_close(self, got, want)
        meta = self.kiln(self.server, "metadata", "i0", check=True).stdout
        self.assertIn("fallback_ops = aten::i0", meta)
        # The verified import ran Kiln's side, fallback op included, through the worker.
        self.assertRegex(meta, r"verify = passed on x=FP32\[8\]")
        # The op ran in a child of kilnd, not in kilnd: kilnd never mapped libtorch.
        pids = worker_pids(self.server.proc.pid)
        self.assertTrue(pids, "no --fallback-worker child")
        self.assertNotIn(self.server.proc.pid, pids)
        with open(f"/proc/{self.server.proc.pid}/maps") as f:
            self.assertNotIn("libtorch_cpu", f.read())
        with open(f"/proc/{pids[0]}/maps") as f:
            self.assertIn("libtorch_cpu", f.read())
        self.assertRegex(self.server.text(),
                         r"i0:1: libtorch fallback worker started \(pid \d+; sandbox: "
                         r".*no-new-privs.*seccomp")
        if os.geteuid() == 0:
            with open(f"/proc/{pids[0]}/status") as f:
                self.assertRegex(f.read(), r"\nUid:\s+65534\s")
        self.assert_still_serving(self.server)

    def test_an_op_past_the_memory_limit_is_contained(self):
        self.assertEqual(self.infer(self.server, "bincount", np.array([0, 2, 2])).tolist(),
                         [1, 0, 2])
        with self.assertRaises(grpc.RpcError) as caught:
            self.infer(self.server, "bincount", np.array([1 << 28]))
        e = caught.exception
        self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
        self.assertIn("aten::bincount", e.details())
        self.assertIn(f"memory limit of {MEMORY_MB} MiB (--import-memory-mb)", e.details())
        self.assertEqual(self.infer(self.server, "bincount", np.array([3, 1])).tolist(),
                         [0, 1, 0, 1])
        self.assert_still_serving(self.server)

    def test_a_worker_killed_mid_request_fails_it_cleanly_and_the_next_starts_anew(self):
        small = np.array([0.5, -1.0, 2.0], dtype=np.float32)
        want = torch.from_numpy(small)
        for _ in range(3000):
            want = torch.i0(want) * 0.5
        assert_close(self, self.infer(self.server, "i0_loop", small), want.numpy())
        before = set(worker_pids(self.server.proc.pid))
        errors = []

        def slow_request():
            try:
                self.infer(self.server, "i0_loop", np.ones(1 << 20, dtype=np.float32),
                           timeout=120)
            except grpc.RpcError as e:
                errors.append(e)

        t = threading.Thread(target=slow_request)
        t.start()
        # The request runs for tens of seconds; on a busy machine it may take a while to reach
        # the worker, which must be busy with it when it is killed.
        time.sleep(4)
        for pid in before:
            os.kill(pid, signal.SIGSEGV)
        t.join(timeout=120)
        self.assertEqual(len(errors), 1, "the request did not fail")
        e = errors[0]
        self.assertEqual(e.code(), grpc.StatusCode.INTERNAL, e.details())
        self.assertIn("libtorch fallback's worker", e.details())
        self.assertIn("crashed with signal 11", e.details())
        self.assertIn("aten::i0", e.details())
        # The next request starts a new worker.
        assert_close(self, self.infer(self.server, "i0_loop", small), want.numpy())
        after = set(worker_pids(self.server.proc.pid))
        self.assertTrue(after)
        self.assertFalse(after & before, (before, after))
        # Killed while idle: replaced without failing anything.
        for pid in after:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        assert_close(self, self.infer(self.server, "i0_loop", small), want.numpy())
        self.assertTrue(self.server.wait_for_log(r"ended while idle"), self.server.text()[-2000:])
        self.assert_still_serving(self.server)

    def test_a_hanging_worker_is_stopped_at_the_request_deadline(self):
        server = self.start("repo_hang", ["--import-memory-mb", MEMORY_MB],
                            env={"KILN_TEST_FALLBACK_FAULT": "hang"})
        # Not verified: the verified import would run the op (and hang) at the upload.
        self.upload_to(server, "relu")
        self.upload_to(server, "i0", self.no_verify)
        start = time.monotonic()
        with self.assertRaises(grpc.RpcError) as caught:
            self.infer(server, "i0", np.ones(4, dtype=np.float32), timeout=3)
        self.assertLess(time.monotonic() - start, 30)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        # kilnd stopped the worker at the deadline (the client gives up at the same moment).
        self.assertTrue(server.wait_for_log(r"stopping the libtorch fallback's worker \(pid \d+\) "
                                            r"running aten::i0: "), server.text()[-2000:])
        deadline = time.monotonic() + 10
        while worker_pids(server.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(worker_pids(server.proc.pid), [])
        self.assert_still_serving(server)

    def test_native_code_in_the_worker_cannot_leave_the_sandbox(self):
        target = os.path.join(self.outside, "probe-was-here")
        server = self.start("repo_probe", env={"KILN_TEST_FALLBACK_FAULT": "escape",
                                               "KILN_TEST_ESCAPE_FILE": target})
        self.upload_to(server, "relu")
        self.upload_to(server, "i0", self.no_verify)
        with self.assertRaises(grpc.RpcError) as caught:
            self.infer(server, "i0", np.ones(4, dtype=np.float32))
        e = caught.exception
        self.assertEqual(e.code(), grpc.StatusCode.PERMISSION_DENIED, e.details())
        attempts = e.details().split("sandbox probe: ", 1)[1].strip().split("; ")
        names = [a.split(": ")[0] for a in attempts]
        for what in ("read /etc/passwd", f"create {target}", "open a TCP socket",
                     "open a Unix socket", "exec /bin/sh", "fork", "signal the daemon",
                     "trace the daemon", "lift its memory limit",
                     "shrink the memory it shares with the daemon"):
            self.assertIn(what, names, attempts)
        for attempt in attempts:
            self.assertIn(": refused (", attempt)
        self.assertFalse(os.path.exists(target))
        self.assertEqual(os.listdir(self.outside), [])
        self.assert_still_serving(server)


if __name__ == "__main__":
    unittest.main()
