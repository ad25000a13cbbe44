"""kilnd under Valgrind's Memcheck: one daemon driven through its request paths (uploads good,
corrupt and hostile; inference over gRPC, HTTP (JSON and binary) and the local socket, right and
wrong, with tensors inline and in shared memory; a batched model past its queue bound; a profiled
request; unload, delete, SIGTERM), then every report Memcheck wrote must be empty. A read of freed or uninitialised memory in kilnd fails here every time, where in a
plain run it crashes only when the freed block happens to be unmapped. Import children are forks of
kilnd, so Memcheck follows them too; the libtorch worker (exec'd) is not traced.

Answers are checked as the other integration tests check them (numbers against libtorch's), but
deadlines are generous: under Memcheck kilnd runs 20-50 times slower."""
import glob
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import threading
import unittest
from multiprocessing import shared_memory

import numpy as np

import hostile_models
import test_end_to_end as e2e

VALGRIND = shutil.which("valgrind")
SUPPRESSIONS = os.path.join(e2e.SOURCE, "tests", "support", "memcheck.supp")
ERROR_EXIT = 97  # kilnd's exit status when Memcheck saw an error


@unittest.skipIf(VALGRIND is None, "valgrind is not installed")
class MemcheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-memcheck-")
        cls.logs = os.path.join(cls.tmp, "memcheck")
        os.makedirs(cls.logs)
        hostile_models.write_all(os.path.join(cls.tmp, "hostile"))
        cls.server = e2e.Kilnd(
            os.path.join(cls.tmp, "repo"),
            args=["--cache-dir", os.path.join(cls.tmp, "cache"), "--max-request-memory-mb", 256,
                  "--local-socket", os.path.join(cls.tmp, "kilnd.sock")],
            wrapper=[VALGRIND, "-q", f"--error-exitcode={ERROR_EXIT}", "--num-callers=30",
                     f"--suppressions={SUPPRESSIONS}",
                     f"--log-file={os.path.join(cls.logs, 'kilnd.%p.log')}"])
        cls.http = cls.server.http_address

    @classmethod
    def tearDownClass(cls):
        if cls.server.alive():
            cls.server.stop(timeout=120)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def kiln(self, *args, check=True, local=False):
        cmd = [os.path.join(e2e.BIN, "kiln"), "--server", self.server.address, "--timeout", "600",
               *(["--local-socket", os.path.join(self.tmp, "kilnd.sock")] if local else []),
               *map(str, args)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if check and r.returncode != 0:
            self.fail(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        return r

    def post(self, path, body, headers=None):
        conn = http.client.HTTPConnection(self.http, timeout=600)
        conn.request("POST", path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, data

    def infer_json(self, model, x, datatype="FP32"):
        body = {"inputs": [{"name": "x", "datatype": datatype, "shape": list(x.shape),
                            "data": x.ravel().tolist()}]}
        return self.post(f"/v2/models/{model}/infer", json.dumps(body))

    def test_request_paths_read_no_freed_or_uninitialised_memory(self):
        x = np.load(e2e.fixture("mlp.input.x.npy"))
        want = np.load(e2e.fixture("mlp.output0.npy"))

        # Uploads over gRPC: good, corrupt, one whose import crashes, control flow, hostile.
        self.kiln("upload", e2e.fixture("mlp.pt"), "--name", "mlp")
        r = self.kiln("upload", e2e.fixture("corrupt.pt"), "--name", "bad", check=False)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        r = self.kiln("upload", e2e.fixture("crash_import.pt"), "--name", "crash", check=False)
        self.assertIn("the import process crashed", r.stderr)
        self.kiln("upload", e2e.fixture("control_flow.pt"), "--name", "cf")
        self.kiln("upload", os.path.join(self.tmp, "hostile", "huge_zeros.pt"), "--name", "huge")

        # gRPC inference through the CLI, numbers against libtorch's.
        out = tempfile.mkdtemp(dir=self.tmp)
        self.kiln("infer", "mlp", "--input", f"x={e2e.fixture('mlp.input.x.npy')}",
                  "--output-dir", out)
        e2e.assert_close(self, np.load(os.path.join(out, "output0.npy")), want)
        self.kiln("infer", "cf", "--input", f"x={e2e.fixture('control_flow.input.x.npy')}",
                  "--output-dir", out)
        e2e.assert_close(self, np.load(os.path.join(out, "output0.npy")),
                         np.load(e2e.fixture("control_flow.output0.npy")))
        x3 = os.path.join(self.tmp, "x3.npy")
        np.save(x3, np.array([1.0, 2.0, 3.0], dtype=np.float32))
        r = self.kiln("infer", "huge", "--input", f"x={x3}", check=False)
        self.assertIn("RESOURCE_EXHAUSTED", r.stderr)
        r = self.kiln("profile", "mlp", "--input", f"x={e2e.fixture('mlp.input.x.npy')}")
        self.assertIn("Linear", r.stdout)

        # HTTP: JSON right and wrong, the binary extension, a body that is not JSON.
        status, body = self.infer_json("mlp", x)
        self.assertEqual(status, 200, body)
        got = json.loads(body)["outputs"][0]
        e2e.assert_close(self, np.array(got["data"], dtype=np.float32).reshape(got["shape"]), want)
        status, body = self.infer_json("mlp", x.astype(np.float64), "FP64")
        self.assertEqual(status, 400, body)
        self.assertIn(b"expected datatype FP32", body)
        status, body = self.infer_json("mlp", x[:, :-1])
        self.assertEqual(status, 400, body)
        status, body = self.infer_json("mlp", np.zeros((0, x.shape[1]), np.float32))
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["outputs"][0]["shape"], [0, want.shape[1]])
        header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                         "parameters": {"binary_data_size": x.nbytes}}],
                             "outputs": [{"name": "output0",
                                          "parameters": {"binary_data": True}}]}).encode()
        status, body = self.post("/v2/models/mlp/infer", header + x.tobytes(),
                                 {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(status, 200, body)
        e2e.assert_close(self, np.frombuffer(body[-want.nbytes:], np.float32).reshape(want.shape),
                         want)
        status, body = self.post("/v2/models/mlp/infer", header + x.tobytes()[:-3],
                                 {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(status, 400, body)
        for bad in (b'{"inputs": 1e999}', b"{", b"\xff\xfe", b'{"inputs": [{"name": "x"}]}'):
            status, body = self.post("/v2/models/mlp/infer", bad)
            self.assertEqual(status, 400, (bad, body))

        # The local socket, and inputs and outputs in a registered shared-memory region (one
        # request whose output would run past the region's end).
        self.kiln("infer", "mlp", "--input", f"x={e2e.fixture('mlp.input.x.npy')}",
                  "--output-dir", out, local=True)
        e2e.assert_close(self, np.load(os.path.join(out, "output0.npy")), want)
        seg = shared_memory.SharedMemory(create=True, size=x.nbytes + want.nbytes)
        try:
            np.ndarray(x.shape, np.float32, buffer=seg.buf)[...] = x
            status, body = self.post("/v2/systemsharedmemory/region/r/register", json.dumps(
                {"key": "/" + seg.name, "offset": 0, "byte_size": x.nbytes + want.nbytes}))
            self.assertEqual(status, 200, body)
            for out_offset, expect in ((x.nbytes, 200), (x.nbytes + 4, 400)):
                status, body = self.post("/v2/models/mlp/infer", json.dumps({
                    "inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                "parameters": {"shared_memory_region": "r",
                                               "shared_memory_byte_size": x.nbytes}}],
                    "outputs": [{"name": "output0", "parameters": {
                        "shared_memory_region": "r", "shared_memory_offset": out_offset,
                        "shared_memory_byte_size": want.nbytes}}]}))
                self.assertEqual(status, expect, body)
            e2e.assert_close(self, np.ndarray(want.shape, np.float32, buffer=seg.buf,
                                              offset=x.nbytes).copy(), want)
            status, body = self.post("/v2/systemsharedmemory/region/r/unregister", b"")
            self.assertEqual(status, 200, body)
        finally:
            seg.close()
            seg.unlink()

        # A batched model past its queue bound: every request answered, 200 or 503.
        config = os.path.join(self.tmp, "batched.json")
        with open(config, "w") as f:
            json.dump({"max_batch_size": 8, "dynamic_batching": {
                "max_queue_delay_microseconds": 2000,
                "default_queue_policy": {"max_queue_size": 2}}}, f)
        self.kiln("upload", e2e.fixture("mlp.pt"), "--name", "batched", "--config", config)
        statuses = []

        def one():
            statuses.append(self.infer_json("batched", x[:1])[0])
        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(statuses), 8)
        self.assertTrue(set(statuses) <= {200, 503}, statuses)
        self.assertIn(200, statuses)

        self.kiln("unload", "mlp")
        self.kiln("delete", "cf")
        self.assertTrue(self.server.alive(), self.server.text()[-3000:])

        # SIGTERM: kilnd drains and exits 0 unless Memcheck saw an error.
        status = self.server.stop(timeout=300)
        reports = {}
        for path in glob.glob(os.path.join(self.logs, "*.log")):
            with open(path, errors="replace") as f:
                text = f.read()
            if text.strip():
                reports[os.path.basename(path)] = text
        self.assertEqual(reports, {}, "Memcheck reported:\n" + "\n".join(
            f"--- {name}\n{text[:6000]}" for name, text in reports.items()))
        self.assertEqual(status, 0, self.server.text()[-3000:])


if __name__ == "__main__":
    unittest.main()
