"""End-to-end tests: real kilnd, real `kiln` CLI, real TorchScript files, numbers compared
with what libtorch gives for the same file and inputs (relative error <= 1e-4)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

FIXTURES = os.environ["KILN_FIXTURES"]
BIN = os.environ["KILN_BIN"]
SOURCE = os.environ.get("KILN_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)


def fixture(name):
    return os.path.join(FIXTURES, name)


class Kilnd(KilndProcess):
    """kilnd serving `repo` on a free loopback port."""

    def __init__(self, repo, threads=2, args=(), env=None, wrapper=()):
        super().__init__(BIN, ["--host", "127.0.0.1", "--port", "0", "--model-repository", repo,
                               "--threads", threads, "--log-level", "info", *args], env=env,
                         wrapper=wrapper)
        self.repo = repo


def assert_close(testcase, got, want, rtol=1e-4):
    """Relative error of the whole tensor: max |got - want| / max |want| <= rtol."""
    testcase.assertEqual(got.shape, want.shape)
    testcase.assertEqual(got.dtype, want.dtype)
    rel = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-12))
    testcase.assertLessEqual(rel, rtol, f"relative error {rel}")


class EndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-e2e-")
        cls.repo = os.path.join(cls.tmp, "models")
        os.makedirs(cls.repo)
        cls.server = Kilnd(cls.repo)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def kiln(self, *args, check=True, server=None):
        cmd = [os.path.join(BIN, "kiln"), "--server", server or self.server.address, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if check and r.returncode != 0:
            self.fail(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        return r

    def upload(self, name, file=None):
        return self.kiln("upload", file or fixture(f"{name}.pt"), "--name", name)

    def infer_and_compare(self, name, inputs, server=None):
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        args = ["infer", name, "--output-dir", out_dir]
        for arg in inputs:
            args += ["--input", f"{arg}={fixture(f'{name}.input.{arg}.npy')}"]
        self.kiln(*args, server=server)
        got = np.load(os.path.join(out_dir, "output0.npy"))
        assert_close(self, got, np.load(fixture(f"{name}.output0.npy")))

    # ------------------------------------------------------------------ happy paths

    def test_resnet18_matches_libtorch(self):
        self.upload("resnet18")
        self.infer_and_compare("resnet18", ["x"])

    def test_mobilenet_v2_matches_libtorch(self):
        self.upload("mobilenet_v2")
        self.infer_and_compare("mobilenet_v2", ["x"])

    def test_mlp_and_scripted_mlp_match_libtorch(self):
        self.upload("mlp")
        self.infer_and_compare("mlp", ["x"])
        self.upload("mlp_scripted")
        self.infer_and_compare("mlp_scripted", ["x"])

    def test_two_input_model_names_inputs_after_forward(self):
        self.upload("two_input")
        meta = self.kiln("metadata", "two_input").stdout
        self.assertIn("image", meta)
        self.assertIn("bias", meta)
        self.infer_and_compare("two_input", ["image", "bias"])

    def test_metadata_reports_forward_parameter_names_and_datatypes(self):
        self.upload("resnet18")
        meta = self.kiln("metadata", "resnet18").stdout
        self.assertRegex(meta, r"\bx\b")
        self.assertIn("FP32", meta)
        self.assertNotIn("x.1", meta)
        models = self.kiln("models").stdout
        self.assertIn("resnet18", models)

    def test_python_grpcio_client(self):
        self.upload("mlp")
        r = subprocess.run(
            [sys.executable, os.path.join(SOURCE, "client", "python", "kiln_client_example.py"),
             "--server", self.server.address, "--model", "mlp",
             "--input", f"x={fixture('mlp.input.x.npy')}", "--expect", fixture("mlp.output0.npy")],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("matches expected output", r.stdout)

    def test_requests_that_queue_up_run_one_thread_each_with_the_same_answers(self):
        # kilnd --threads 2 (--split-teams on by default): while two or more requests wait, the
        # team runs them one thread each, on plans compiled for one thread. Six clients keep it
        # busy; every answer must still be libtorch's.
        import threading
        import urllib.request
        import grpc
        sys.path.insert(0, os.path.join(SOURCE, "client", "python"))
        from kiln_client_example import load_stubs
        pb, pb_grpc = load_stubs()
        self.upload("mobilenet_v2")
        x = np.load(fixture("mobilenet_v2.input.x.npy"))
        want = np.load(fixture("mobilenet_v2.output0.npy"))
        req = pb.ModelInferRequest(model_name="mobilenet_v2")
        req.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        req.raw_input_contents.append(np.ascontiguousarray(x, np.float32).tobytes())
        channel = grpc.insecure_channel(self.server.address)
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        stub.ModelInfer(req, timeout=300)  # the whole team's plan, compiled alone

        def scrape():
            with urllib.request.urlopen(f"http://{self.server.metrics_address}/metrics",
                                        timeout=60) as r:
                text = r.read().decode()
            for line in text.splitlines():
                if line.startswith("kiln_compute_split_runs_total "):
                    return float(line.split()[1])
            self.fail("kiln_compute_split_runs_total is not in /metrics")

        before = scrape()
        answers, errors = [], []

        def client():
            try:
                for _ in range(4):
                    resp = stub.ModelInfer(req, timeout=300)
                    answers.append(np.frombuffer(resp.raw_output_contents[0], np.float32)
                                   .reshape(list(resp.outputs[0].shape)))
            except grpc.RpcError as e:  # reported below, not lost in the thread
                errors.append(f"{e.code().name}: {e.details()}")

        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        channel.close()
        self.assertEqual(errors, [])
        self.assertEqual(len(answers), 24)
        for got in answers:
            assert_close(self, got, want)
        self.assertGreater(scrape() - before, 0, "no request ran on a split team")

    # ------------------------------------------------------------------ bad input

    def test_corrupt_upload_is_refused_and_daemon_keeps_serving(self):
        self.upload("mlp")
        r = self.kiln("upload", fixture("corrupt.pt"), "--name", "broken", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr + r.stdout, r"(?i)invalid|torchscript|archive|read")
        # A bad file uploaded over a serving model must not replace it.
        r = self.kiln("upload", fixture("corrupt.pt"), "--name", "mlp", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue(self.server.alive())
        self.infer_and_compare("mlp", ["x"])
        self.assertFalse(os.path.exists(os.path.join(self.repo, "broken", "1", "model.pt")))

    def test_unsupported_ops_are_all_listed_in_strict_mode(self):
        config = os.path.join(self.tmp, "strict.json")
        with open(config, "w") as f:
            f.write('{"strict": true}')
        r = self.kiln("upload", fixture("unsupported.pt"), "--name", "unsupported_strict",
                      "--config", config, check=False)
        self.assertNotEqual(r.returncode, 0)
        msg = r.stderr + r.stdout
        self.assertIn("aten::i0", msg)
        self.assertIn("aten::logcumsumexp", msg)
        self.assertTrue(self.server.alive())

    def test_unsupported_ops_serve_through_the_fallback(self):
        r = self.upload("unsupported")
        self.assertIn("fallback_ops: aten::i0,aten::logcumsumexp", r.stdout)
        self.infer_and_compare("unsupported", ["x"])
        self.assertTrue(self.server.alive())

    def test_scripted_control_flow_matches_libtorch(self):
        config = os.path.join(self.tmp, "control_flow.json")
        with open(config, "w") as f:
            f.write('{"verify": {"inputs": [{"name": "x", "dims": [4, 8]}]}}')
        r = self.kiln("upload", fixture("control_flow.pt"), "--name", "control_flow",
                      "--config", config)
        self.assertIn("verify: passed", r.stdout)
        self.infer_and_compare("control_flow", ["x"])

    def test_shufflenet_matches_libtorch_and_inspect_shows_the_graph(self):
        r = self.upload("shufflenet_v2_x0_5")
        self.assertIn("verify: passed", r.stdout)
        self.infer_and_compare("shufflenet_v2_x0_5", ["x"])
        remote = self.kiln("inspect", "shufflenet_v2_x0_5", "--remote").stdout
        self.assertIn("Reshape(", remote)
        self.assertIn("fallback ops: none", remote)
        dot = os.path.join(self.tmp, "shufflenet.dot")
        offline = self.kiln("inspect", fixture("shufflenet_v2_x0_5.pt"), "--dot", dot).stdout
        self.assertIn("ScalarBinary", offline)
        self.assertIn("op histogram", offline)
        with open(dot) as f:
            self.assertIn("digraph kiln", f.read())

    def test_unknown_model(self):
        r = self.kiln("infer", "no_such_model", "--input", f"x={fixture('mlp.input.x.npy')}",
                      "--output-dir", self.tmp, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no_such_model", r.stderr + r.stdout)
        self.assertRegex(r.stderr + r.stdout, r"(?i)not.?found|unknown")

    def test_bad_inputs_get_clear_messages(self):
        self.upload("mlp")
        good = np.load(fixture("mlp.input.x.npy"))
        wrong_dtype = os.path.join(self.tmp, "x_int64.npy")
        np.save(wrong_dtype, good.astype(np.int64))
        wrong_shape = os.path.join(self.tmp, "x_shape.npy")
        np.save(wrong_shape, np.zeros((1, good.shape[1] + 1), np.float32))
        cases = [
            (["--input", f"x={wrong_dtype}"], r"expected datatype FP32, got INT64"),
            (["--input", f"x={wrong_shape}"], r"input 'x': expected shape"),
            (["--input", f"y={fixture('mlp.input.x.npy')}"], r"unknown input 'y'"),
        ]
        for extra, pattern in cases:
            r = self.kiln("infer", "mlp", *extra, "--output-dir", self.tmp, check=False)
            self.assertNotEqual(r.returncode, 0, extra)
            self.assertRegex(r.stderr + r.stdout, pattern)
        r = self.kiln("infer", "two_input_missing", "--output-dir", self.tmp, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.upload("two_input")
        r = self.kiln("infer", "two_input", "--input", f"image={fixture('two_input.input.image.npy')}",
                      "--output-dir", self.tmp, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing input 'bias'", r.stderr + r.stdout)
        self.assertTrue(self.server.alive())
        self.infer_and_compare("mlp", ["x"])

    # ------------------------------------------------------------------ lifecycle

    def test_unload_then_restart_serves_stored_models(self):
        self.upload("mlp")
        self.upload("two_input")
        self.kiln("unload", "two_input")
        r = self.kiln("infer", "two_input", "--input", f"image={fixture('two_input.input.image.npy')}",
                      "--input", f"bias={fixture('two_input.input.bias.npy')}",
                      "--output-dir", self.tmp, check=False)
        self.assertNotEqual(r.returncode, 0)
        # Files stay on disk; a new daemon on the same repository serves every stored model.
        self.assertTrue(os.path.exists(os.path.join(self.repo, "two_input", "1", "model.pt")))
        second = Kilnd(self.repo)
        try:
            self.infer_and_compare("mlp", ["x"], server=second.address)
            self.infer_and_compare("two_input", ["image", "bias"], server=second.address)
        finally:
            second.stop()
        self.assertEqual(second.proc.returncode, 0)


if __name__ == "__main__":
    unittest.main()
