"""The `kiln` CLI and kilnd's own hygiene, as a user meets them: the real kilnd on a loopback port,
the real CLI as a subprocess, fixtures from tests/fixtures/make_models.py, numbers compared with
libtorch's output for the same file.

Covers inline inputs and printed tables, KILN_SERVER, --timeout, exit statuses, the upload progress
bar, kilnd --config (YAML and JSON), JSON log lines and draining on SIGTERM."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import numpy as np
import torch

from test_end_to_end import BIN, fixture  # also puts tests/support on the path
from kilnd_process import KilndProcess  # noqa: E402  (the one kilnd launcher)

KILN = os.path.join(BIN, "kiln")
KILND = os.path.join(BIN, "kilnd")

# The exit statuses documented in `kiln --help` and the README.
EXIT_USAGE = 1
EXIT_UNAVAILABLE = 2
EXIT_INVALID_ARGUMENT = 3
EXIT_NOT_FOUND = 4
EXIT_DEADLINE = 5


def Daemon(*args):
    """kilnd with exactly these flags; its log (stderr) is kept apart from the address line."""
    return KilndProcess(BIN, args, merge_log=False)


class ChainMatmul(torch.nn.Module):
    """aten::chain_matmul: no native translation (runs through the libtorch fallback), and
    libtorch warns that it is deprecated when it runs."""

    def forward(self, a, b):
        return torch.chain_matmul(a, b, b.t())


def run_kiln(*args, env=None, timeout=300):
    return subprocess.run([KILN, *args], capture_output=True, text=True, timeout=timeout, env=env)


def parse_table(text, name):
    """The values `kiln infer` printed for output `name`, as {row label: [values...]}: rows
    start with a "[i, j]" label (or nothing for 1-D outputs), column chunks append."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.split()[:1] == [name])
    rows = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        m = re.match(r"\s*(\[[\d, ]*\])?\s*(.*)$", line)
        label, values = m.group(1), m.group(2).split()
        if label is None and all(re.fullmatch(r"\d+", v) for v in values):
            continue  # a column-number header
        rows.setdefault(label or "", []).extend(float(v) for v in values)
    return rows


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-cli-")
        cls.server = Daemon("--host", "127.0.0.1", "--port", "0", "--model-repository",
                            os.path.join(cls.tmp, "models"), "--threads", "2")
        r = run_kiln("--server", cls.server.address, "upload", fixture("mlp.pt"), "--name", "mlp")
        assert r.returncode == 0, r.stdout + r.stderr

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def kiln(self, *args, expect=0, env=None):
        r = run_kiln("--server", self.server.address, *args, env=env)
        self.assertEqual(r.returncode, expect, f"kiln {' '.join(args)}:\n{r.stdout}{r.stderr}")
        return r

    def assert_table_matches(self, stdout, want):
        rows = parse_table(stdout, "output0")
        self.assertEqual(list(rows), ["[0]"], stdout)
        got = np.array(rows["[0]"], np.float32).reshape(want.shape)
        # The table prints 6 significant digits.
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())

    # ------------------------------------------------------------------ kiln infer

    def test_inline_values_print_a_table_matching_libtorch(self):
        x = np.load(fixture("mlp.input.x.npy"))  # [1, 16]
        want = np.load(fixture("mlp.output0.npy"))  # [1, 10]
        values = ",".join(repr(float(v)) for v in x.ravel())
        # Datatype and shape from the model's metadata ([-1, 16] holds 16 values one way).
        r = self.kiln("infer", "mlp", "-i", f"x={values}")
        self.assertIn("output0  FP32  [1, 10]", r.stdout)
        self.assert_table_matches(r.stdout, want)
        # Explicit datatype and shape, either order, and the nested-bracket form.
        r = self.kiln("infer", "mlp", "--input", f"x={values}:FP32:1x16")
        self.assert_table_matches(r.stdout, want)
        r = self.kiln("infer", "mlp", "-i", f"x={values}:1x16:fp32")
        self.assert_table_matches(r.stdout, want)
        nested = "[[" + values + "]]"
        r = self.kiln("infer", "mlp", "-i", f"x={nested}")
        self.assert_table_matches(r.stdout, want)

    def test_npy_input_and_output_dir(self):
        out = tempfile.mkdtemp(dir=self.tmp)
        r = self.kiln("infer", "mlp", "-i", f"x={fixture('mlp.input.x.npy')}", "-o", out)
        self.assertIn("output0 FP32 [1, 10] ->", r.stdout)
        np.testing.assert_allclose(np.load(os.path.join(out, "output0.npy")),
                                   np.load(fixture("mlp.output0.npy")), rtol=1e-4, atol=1e-6)
        # Over --print-limit: a summary with the argmax, not a table.
        want = np.load(fixture("mlp.output0.npy"))
        r = self.kiln("infer", "mlp", "-i", f"x={fixture('mlp.input.x.npy')}", "--print-limit", "5")
        self.assertIn("(10 values: min", r.stdout)
        self.assertIn(f"at [0, {int(want.argmax())}]", r.stdout)
        self.assertIn("-o DIR", r.stdout)

    def test_inline_input_errors_are_invalid_argument(self):
        for arg, message in [("x=1,2,3", r"3 values do not fill the declared shape \[-1, 16\]"),
                             ("x=1,2,zz:1x3", r"'zz' is not a number"),
                             ("x=[[1,2],[3]]", r"ragged"),
                             ("x=1,2:FP32:2x2", r"2 values, but shape \[2, 2\] holds 4"),
                             ("x=1,2:WAT", r"neither a datatype")]:
            r = self.kiln("infer", "mlp", "-i", arg, expect=EXIT_INVALID_ARGUMENT)
            self.assertRegex(r.stderr, message, arg)
            self.assertIn("kiln: error: INVALID_ARGUMENT", r.stderr)

    # ------------------------------------------------------------------ server address, deadlines, exit codes

    def test_kiln_server_environment_variable(self):
        env = dict(os.environ, KILN_SERVER=self.server.address)
        r = run_kiln("models", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"mlp\s+1\s+READY")
        # --server wins over the variable.
        env = dict(os.environ, KILN_SERVER="127.0.0.1:1")
        self.assertEqual(run_kiln("--server", self.server.address, "models", env=env).returncode, 0)
        r = run_kiln("models", env=env)
        self.assertEqual(r.returncode, EXIT_UNAVAILABLE, r.stderr)
        self.assertIn("127.0.0.1:1", r.stderr)

    def test_unreachable_server_has_its_own_exit_status(self):
        r = run_kiln("--server", f"127.0.0.1:{free_port()}", "health")
        self.assertEqual(r.returncode, EXIT_UNAVAILABLE, r.stderr)
        self.assertIn("kiln: error: UNAVAILABLE", r.stderr)
        self.assertIn("is kilnd running", r.stderr)

    def test_timeout_gives_deadline_exceeded(self):
        self.kiln("upload", fixture("resnet18.pt"), "--name", "resnet18")
        # resnet18 takes tens of milliseconds; a one-millisecond deadline cannot be met.
        r = self.kiln("--timeout", "0.001", "infer", "resnet18", "-i",
                      f"x={fixture('resnet18.input.x.npy')}", "-o", self.tmp, expect=EXIT_DEADLINE)
        self.assertIn("kiln: error: DEADLINE_EXCEEDED", r.stderr)
        self.assertIn("within --timeout 0.001 s", r.stderr)
        # A generous deadline changes nothing.
        self.kiln("--timeout", "60", "infer", "resnet18", "-i",
                  f"x={fixture('resnet18.input.x.npy')}", "-o", self.tmp)

    def test_exit_statuses_are_documented_and_distinct(self):
        r = run_kiln("--help")
        self.assertEqual(r.returncode, 0)
        for code, word in [(EXIT_USAGE, "usage"), (EXIT_UNAVAILABLE, "UNAVAILABLE"),
                           (EXIT_INVALID_ARGUMENT, "INVALID_ARGUMENT"),
                           (EXIT_NOT_FOUND, "NOT_FOUND"), (EXIT_DEADLINE, "DEADLINE_EXCEEDED")]:
            self.assertRegex(r.stdout, rf"\n\s+{code}\s+.*{word}")
        self.assertEqual(run_kiln("infer").returncode, EXIT_USAGE)
        self.assertEqual(run_kiln("--no-such-flag", "models").returncode, EXIT_USAGE)
        r = self.kiln("infer", "no_such_model", "-i", "x=1", expect=EXIT_NOT_FOUND)
        self.assertIn("no_such_model", r.stderr)
        self.kiln("upload", "/nonexistent/model.pt", "--name", "m", expect=EXIT_NOT_FOUND)

    # ------------------------------------------------------------------ upload

    def test_upload_progress_and_contract(self):
        r = self.kiln("upload", fixture("mobilenet_v2.pt"), "--name", "mnv2", "--progress",
                      "--chunk-bytes", str(256 << 10))
        # Not a terminal: one progress line per redraw, ending at 100 %.
        lines = [l for l in r.stderr.splitlines() if l.startswith("mobilenet_v2.pt [")]
        self.assertTrue(lines, r.stderr)
        self.assertRegex(lines[-1], r"\[#+\] 100%  [\d.]+ MB/[\d.]+ MB  [\d.]+ [kMG]?B/s")
        self.assertNotIn("\r", r.stderr)
        # Waits for the server, then the final line and the contract.
        self.assertRegex(r.stdout, r"uploaded 'mnv2' version 1 .*: READY in")
        self.assertRegex(r.stdout, r"input  x FP32 \[-1, 3, -1, -1\]")
        self.assertRegex(r.stdout, r"output output0 FP32")
        self.assertRegex(self.kiln("models").stdout, r"mnv2\s+1\s+READY")
        # Without a terminal and without --progress: no bar, only the final line.
        r = self.kiln("upload", fixture("mlp_v2.pt"), "--name", "mlp_v2")
        self.assertEqual(r.stderr, "")
        self.assertIn("READY", r.stdout)


class KilndTest(unittest.TestCase):
    """kilnd's flags, config file, logs and shutdown; each test starts its own daemon."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kilnd-")
        self.repo = os.path.join(self.tmp, "models")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_help_documents_every_flag(self):
        out = subprocess.run([KILND, "--help"], capture_output=True, text=True).stdout
        for flag in ["--config", "--host", "--port", "--http-port", "--http-thread-count",
                     "--metrics-port", "--model-repository", "--cache-dir",
                     "--cache-bytes", "--import-isolation", "--import-memory-mb",
                     "--import-timeout-s", "--threads", "--max-upload-bytes", "--shutdown-grace-s",
                     "--log-level", "--log-format"]:
            self.assertRegex(out, rf"{flag}\b[^\n]*\S+\s+\S+", flag)
        self.assertIn("SIGTERM", out)
        self.assertIn("Exit status", out)

    def test_yaml_config_sets_port_and_threads_and_flags_win(self):
        port = free_port()
        config = self.write("kiln.yaml", f"# kilnd settings\nport: {port}\nthreads: 3\n"
                                         f"model_repository: {self.repo}\nlog-format: json\n")
        server = Daemon("--config", config)
        try:
            self.assertEqual(server.port, port)
            self.assertTrue(server.wait_for_log(r"threads=3"), server.text())
            self.assertTrue(all(json.loads(l) for l in server.text().splitlines()), server.text())
            r = run_kiln("--server", server.address, "health")
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            self.assertEqual(server.stop(), 0)
        self.assertTrue(os.path.isdir(self.repo))
        # The same file in JSON; a flag on the command line wins over it.
        config = self.write("kiln.json", json.dumps(
            {"port": 0, "threads": 3, "model-repository": self.repo}))
        server = Daemon("--config", config, "--threads", "2")
        try:
            self.assertNotEqual(server.port, port)
            self.assertTrue(server.wait_for_log(r"threads=2"), server.text())
        finally:
            self.assertEqual(server.stop(), 0)

    def test_config_errors_name_the_key(self):
        cases = [("port: 0\nthreads_per_request: 2\n", r"unknown key 'threads_per_request'"),
                 ("port: 70000\n", r"port"),
                 ("host:\n  name: localhost\n", r"key 'host' holds a nested mapping"),
                 ("port: [1\n", r"not valid YAML or JSON"),
                 ('{"port": 0, "bogus": 1}', r"unknown key 'bogus'")]
        for text, message in cases:
            config = self.write("bad.yaml", text)
            r = subprocess.run([KILND, "--config", config, "--model-repository", self.repo],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, text + r.stderr)
            self.assertRegex(r.stderr, message, text)
        r = subprocess.run([KILND, "--config", os.path.join(self.tmp, "missing.yaml")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.yaml", r.stderr)

    def test_json_logs_are_one_object_per_line(self):
        server = Daemon("--port", "0", "--model-repository", self.repo, "--log-format", "json",
                        "--log-level", "debug")
        try:
            self.assertEqual(run_kiln("--server", server.address, "upload", fixture("mlp.pt"),
                                      "--name", "mlp").returncode, 0)
            self.assertEqual(run_kiln("--server", server.address, "infer", "mlp", "-i",
                                      f"x={fixture('mlp.input.x.npy')}").returncode, 0)
            # An error path logs too (a corrupt upload quotes a multi-line libtorch message).
            self.assertNotEqual(run_kiln("--server", server.address, "upload",
                                         fixture("corrupt.pt"), "--name", "bad").returncode, 0)
            # libtorch's own warnings (here: a deprecated op run through the fallback) are log
            # events too, not raw stderr lines.
            chain = os.path.join(self.tmp, "chain.pt")
            torch.jit.script(ChainMatmul()).save(chain)
            self.assertEqual(run_kiln("--server", server.address, "upload", chain,
                                      "--name", "chain").returncode, 0)
            r = run_kiln("--server", server.address, "infer", "chain", "-i", "a=[[1,2]]",
                         "-i", "b=[[1],[2]]")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(server.wait_for_log("chain_matmul is deprecated"), server.text())
        finally:
            self.assertEqual(server.stop(), 0)
        lines = server.text().splitlines()
        self.assertGreater(len(lines), 3)
        events = [json.loads(line) for line in lines]  # every line, or the test fails here
        for event in events:
            self.assertEqual(list(event)[:3], ["time", "level", "logger"])
            self.assertRegex(event["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertIn("msg", event)
        messages = [e["msg"] for e in events]
        self.assertTrue(any("serving on" in m for m in messages), messages)
        self.assertTrue(any("mlp" in m for m in messages), messages)
        self.assertEqual(messages[-1], "stopped")

    def test_text_logs_are_one_line_per_event(self):
        server = Daemon("--port", "0", "--model-repository", self.repo)
        try:
            run_kiln("--server", server.address, "upload", fixture("corrupt.pt"), "--name", "bad")
            # A client's bytes reach the log: a model name with ESC (a terminal's colour
            # sequence), a line break and a byte that is not UTF-8, and a body of such bytes.
            base = f"http://{server.http_address}/v2/models"
            for name in ("%1b%5b31m%0aforged%ff", "m%c3%a9"):
                subprocess.run(["curl", "-s", f"{base}/{name}"], capture_output=True, timeout=60,
                               check=True)
            subprocess.run(["curl", "-s", "-X", "POST", f"{base}/m%c3%a9/infer",
                            "--data-binary", "@-"], input=b"\xff\x1b[2J", capture_output=True,
                           timeout=60, check=True)
        finally:
            self.assertEqual(server.stop(), 0)
        text = server.text()  # decoded as UTF-8; a byte that is not shows as U+FFFD
        for line in text.splitlines():
            self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (trace|debug|info|"
                                   r"warning|error|critical) \S")
        self.assertNotIn("\x1b", text)
        self.assertNotIn("\ufffd", text)
        self.assertIn(r"unknown model '\x1b[31m\nforged\xff'", text)
        self.assertIn("unknown model 'm\u00e9'", text)  # valid UTF-8 stays as it is
        self.assertIn(r"last read: '\xff'", text)  # the body's byte, in the JSON parser's message

    def test_sigterm_drains_in_flight_requests_then_exits_zero(self):
        server = Daemon("--port", "0", "--model-repository", self.repo, "--threads", "1",
                        "--log-level", "debug")  # debug: one line per RPC
        try:
            r = run_kiln("--server", server.address, "upload", fixture("resnet18.pt"), "--name",
                         "resnet18")
            self.assertEqual(r.returncode, 0, r.stderr)
            # A batch of 8 makes each request take about a second on one thread.
            x = np.load(fixture("resnet18.input.x.npy"))
            batch = os.path.join(self.tmp, "batch.npy")
            np.save(batch, np.repeat(x, 8, axis=0))
            outs = [os.path.join(self.tmp, f"out{i}") for i in range(4)]
            clients = [subprocess.Popen([KILN, "--server", server.address, "infer", "resnet18",
                                         "-i", f"x={batch}", "-o", out],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                       for out in outs]
            started = r"rpc /inference.GRPCInferenceService/ModelInfer started"
            deadline = time.time() + 60
            while len(re.findall(started, server.text())) < 4 and time.time() < deadline:
                time.sleep(0.05)
            self.assertTrue(all(c.poll() is None for c in clients), "requests ended too early")
            server.proc.send_signal(signal.SIGTERM)
            self.assertTrue(server.wait_for_log(r"received SIGTERM"), server.text())
            self.assertRegex(server.text(), r"draining 4 in flight")
            # While it drains, new requests are refused ...
            r = run_kiln("--server", server.address, "infer", "resnet18", "-i",
                         f"x={fixture('resnet18.input.x.npy')}", "-o", self.tmp)
            self.assertEqual(r.returncode, EXIT_UNAVAILABLE, r.stdout + r.stderr)
            self.assertTrue(any(c.poll() is None for c in clients),
                            "the in-flight requests finished before the refused one")
            # ... and every in-flight one completes with the right numbers.
            want = np.load(fixture("resnet18.output0.npy"))
            for client, out in zip(clients, outs):
                stdout, stderr = client.communicate(timeout=120)
                self.assertEqual(client.returncode, 0, stdout + stderr)
                got = np.load(os.path.join(out, "output0.npy"))
                self.assertEqual(got.shape, (8,) + want.shape[1:])
                for row in got:
                    np.testing.assert_allclose(row, want[0], rtol=1e-4,
                                               atol=1e-4 * np.abs(want).max())
            self.assertEqual(server.proc.wait(timeout=60), 0, server.text())
            self.assertRegex(server.text(), r"drained in \d+ ms")
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
