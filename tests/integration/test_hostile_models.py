"""Hostile models against the real kilnd, driven by the real `kiln` CLI (issue 15, items 1 and 2).

No request or load may abort or hang the daemon:
  - a tensor too large for the per-request memory limit (--max-request-memory-mb), whether its
    size is in the compiled plan or read from the input's values, is RESOURCE_EXHAUSTED naming
    it; one whose size overflows 64 bits is INVALID_ARGUMENT; a verify.inputs shape too large
    is RESOURCE_EXHAUSTED at the load;
  - `while True:` in forward ends with DEADLINE_EXCEEDED at the server's --request-timeout-s or
    at the client's deadline (and the server's thread is freed); with a verify shape the load
    ends with DEADLINE_EXCEEDED at --load-timeout-s naming the verified import, and a load
    waiting behind it goes through;
  - an HTTP client that hangs up in the middle of such a request cancels it: the run stops
    (CANCELLED) long before the server's time limit and its compute thread is free again;
  - SIGTERM with such a request running exits within --shutdown-grace-s (plus the second the
    watchdog allows).
After each case kilnd must be alive and serve a good model's correct outputs. The models come
from hostile_models.py, scripted by torch at test time.
"""
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

import numpy as np
import torch

import hostile_models
from test_end_to_end import BIN, Kilnd, assert_close

MEMORY_MB = 64
REQUEST_TIMEOUT_S = 3
LOAD_TIMEOUT_S = 5


class HostileModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-hostile-")
        cls.models = os.path.join(cls.tmp, "models")
        hostile_models.write_all(cls.models)
        cls.x = os.path.join(cls.tmp, "x.npy")
        np.save(cls.x, np.array([1.0, 2.0, 3.0], dtype=np.float32))
        cls.want = torch.relu(torch.from_numpy(np.load(cls.x))).numpy()
        cls.server = Kilnd(os.path.join(cls.tmp, "repo"), args=[
            "--max-request-memory-mb", MEMORY_MB, "--request-timeout-s", REQUEST_TIMEOUT_S,
            "--load-timeout-s", LOAD_TIMEOUT_S])
        cls.servers = [cls.server]
        for name in ("huge_zeros", "huge_zeros_from_data", "overflowing_zeros", "endless_loop",
                     "relu"):
            cls.kiln_cli(cls.server, "upload", os.path.join(cls.models, f"{name}.pt"),
                         "--name", name)

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def kiln_cli(server, *args, check=True, timeout=120):
        cmd = [os.path.join(BIN, "kiln"), "--server", server.address, *map(str, args)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        return r

    def kiln(self, *args, server=None, check=False, timeout=120):
        return self.kiln_cli(server or self.server, *args, check=check, timeout=timeout)

    def infer(self, name, *extra, server=None):
        out = tempfile.mkdtemp(dir=self.tmp)
        return self.kiln(*extra, "infer", name, "--input", f"x={self.x}", "--output-dir", out,
                         server=server)

    def config(self, text):
        fd, path = tempfile.mkstemp(dir=self.tmp, suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path

    def assert_error(self, r, code, exit_status, *fragments):
        """The CLI failed with `code` (its exit status `exit_status`) and a message holding
        every fragment."""
        self.assertEqual(r.returncode, exit_status, r.stdout + r.stderr)
        self.assertIn(f"kiln: error: {code}: ", r.stderr)
        for fragment in fragments:
            self.assertIn(fragment, r.stderr)

    def assert_still_serving(self, server=None):
        """kilnd survived: alive, and a good model answers with libtorch's numbers."""
        server = server or self.server
        self.assertTrue(server.alive(), "".join(server.lines[-30:]))
        out = tempfile.mkdtemp(dir=self.tmp)
        self.kiln("infer", "relu", "--input", f"x={self.x}", "--output-dir", out, server=server,
                  check=True)
        assert_close(self, np.load(os.path.join(out, "output0.npy")), self.want)

    # ------------------------------------------------------------------ memory

    def test_a_tensor_in_the_plan_past_the_memory_limit_is_resource_exhausted(self):
        r = self.infer("huge_zeros")
        # 3 * 2^40 float32 elements: 12 TiB.
        self.assert_error(
            r, "RESOURCE_EXHAUSTED", 8, "the plan for inputs FP32[3] needs 12288.0 GiB, more "
            f"than the per-request memory limit of {MEMORY_MB}.0 MiB (--max-request-memory-mb); "
            "its largest tensor is %", " FP32[3298534883328] (12288.0 GiB), the output of node ",
            "aten::zeros)")
        self.assert_still_serving()
        # Again: the model stays loaded and refuses every time, it never takes kilnd down.
        self.assert_error(self.infer("huge_zeros"), "RESOURCE_EXHAUSTED", 8, "12288.0 GiB")
        self.assert_still_serving()

    def test_a_tensor_sized_by_the_input_values_past_the_limit_is_resource_exhausted(self):
        r = self.infer("huge_zeros_from_data")
        # sum([1, 2, 3]) * 2^30 float32 elements: 24 GiB, allocated while the request runs.
        self.assert_error(
            r, "RESOURCE_EXHAUSTED", 8, "output 0 (%", "aten::zeros) needs 24.0 GiB with ",
            f"already held, more than the per-request memory limit of {MEMORY_MB}.0 MiB "
            "(--max-request-memory-mb)")
        self.assert_still_serving()

    def test_a_shape_whose_size_overflows_is_invalid_argument(self):
        r = self.infer("overflowing_zeros")
        self.assert_error(r, "INVALID_ARGUMENT", 3, "aten::zeros): shape [3298534883328, "
                          "1099511627776] of FP32 is too large (its size overflows)")
        self.assert_still_serving()

    def test_a_verify_shape_past_the_memory_limit_fails_the_load(self):
        config = self.config('{"verify": {"inputs": [{"name": "x", "dims": [1099511627776]}]}}')
        r = self.kiln("upload", os.path.join(self.models, "relu.pt"), "--name", "relu_huge_verify",
                      "--config", config)
        self.assert_error(
            r, "RESOURCE_EXHAUSTED", 8, "verified import: the sample input 'x' needs 4096.0 GiB "
            "with 0 bytes already held, more than the per-request memory limit of "
            f"{MEMORY_MB}.0 MiB (--max-request-memory-mb)")
        self.assertFalse(os.path.exists(os.path.join(self.server.repo, "relu_huge_verify")))
        self.assert_still_serving()

    # ------------------------------------------------------------------ deadlines

    def test_an_endless_loop_ends_at_the_request_timeout(self):
        t0 = time.monotonic()
        r = self.infer("endless_loop")
        elapsed = time.monotonic() - t0
        self.assert_error(
            r, "DEADLINE_EXCEEDED", 5, "ran past the server's request time limit of "
            f"{REQUEST_TIMEOUT_S} s (--request-timeout-s) (at node ")
        self.assertRegex(r.stderr, r"\(at node \d+ \((Loop, prim::Loop|[^)]*aten::add)\)\)")
        self.assertLess(elapsed, REQUEST_TIMEOUT_S + 5)
        self.assert_still_serving()

    def test_an_endless_loop_ends_at_the_clients_deadline_and_frees_its_thread(self):
        r = self.infer("endless_loop", "--timeout", "1")
        self.assert_error(r, "DEADLINE_EXCEEDED", 5)
        # The server stopped too, at the client's deadline rather than its own time limit.
        self.assertTrue(self.server.wait_for_log(
            r"ModelInfer 'endless_loop' failed: DEADLINE_EXCEEDED: ran past the client's "
            r"deadline \(at node", timeout=REQUEST_TIMEOUT_S - 1), self.server.text()[-3000:])
        self.assert_still_serving()

    def test_an_http_client_hanging_up_cancels_its_request(self):
        host, port = self.server.http_address.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        body = json.dumps({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32",
                                       "data": [1.0, 2.0, 3.0]}]})
        t0 = time.monotonic()
        conn.request("POST", "/v2/models/endless_loop/infer", body,
                     {"Content-Type": "application/json"})
        time.sleep(0.5)  # running by now: the loop spins until something stops it
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        # Stopped by the hang-up, well before the server's own time limit would have.
        self.assertTrue(self.server.wait_for_log(
            r"HTTP infer 'endless_loop' failed: CANCELLED: the client cancelled the request "
            r"\(at node", timeout=REQUEST_TIMEOUT_S - 1), self.server.text()[-3000:])
        self.assertLess(time.monotonic() - t0, REQUEST_TIMEOUT_S)
        self.assertNotRegex(self.server.text(), r"HTTP infer 'endless_loop' failed: DEADLINE")
        # Counted as Triton counts a cancellation.
        with urllib.request.urlopen(f"http://{self.server.metrics_address}/metrics") as r:
            metrics = r.read().decode()
        self.assertRegex(metrics, r'nv_inference_request_failure\{model="endless_loop",'
                                  r'reason="CANCELED",version="1"\} [1-9]')
        self.assert_still_serving()

    def test_an_endless_loop_in_the_verified_import_ends_at_the_load_timeout(self):
        config = self.config('{"verify": {"inputs": [{"name": "x", "dims": [2]}]}}')
        result = {}

        def hostile_upload():
            t0 = time.monotonic()
            result["r"] = self.kiln("upload", os.path.join(self.models, "endless_loop.pt"),
                                    "--name", "loop_verified", "--config", config)
            result["s"] = time.monotonic() - t0

        hostile = threading.Thread(target=hostile_upload)
        hostile.start()
        time.sleep(1)
        # A load waiting behind it goes through once the hostile one is cut off.
        t0 = time.monotonic()
        self.kiln("upload", os.path.join(self.models, "relu.pt"), "--name", "relu_after_loop",
                  check=True)
        self.assertLess(time.monotonic() - t0, LOAD_TIMEOUT_S + 5)
        hostile.join()
        self.assert_error(
            result["r"], "DEADLINE_EXCEEDED", 5, "verified import: ran past the load's time "
            f"limit of {LOAD_TIMEOUT_S} s (--load-timeout-s) (at node ")
        self.assertLess(result["s"], LOAD_TIMEOUT_S + 5)
        self.assertFalse(os.path.exists(os.path.join(self.server.repo, "loop_verified")))
        self.assert_still_serving()

    def test_sigterm_exits_within_the_grace_period_cancelling_a_runaway_request(self):
        grace_s = 2
        repo = os.path.join(self.tmp, "repo-sigterm")
        server = Kilnd(repo, args=["--shutdown-grace-s", grace_s])
        self.servers.append(server)
        self.kiln("upload", os.path.join(self.models, "endless_loop.pt"), "--name", "loop",
                  server=server, check=True)
        result = {}
        runaway = threading.Thread(target=lambda: result.update(r=self.infer("loop", server=server)))
        runaway.start()
        time.sleep(1)
        t0 = time.monotonic()
        server.proc.send_signal(15)
        server.proc.wait(timeout=30)
        elapsed = time.monotonic() - t0
        runaway.join(timeout=30)
        self.assertLess(elapsed, grace_s + 1.5, server.text()[-3000:])
        self.assertEqual(server.proc.returncode, 0, server.text()[-3000:])
        self.assertTrue(server.wait_for_log(r"cancelling 1 request\(s\) still running"), server.text())
        self.assertNotEqual(result["r"].returncode, 0)
        self.assert_still_serving()


if __name__ == "__main__":
    unittest.main()
