"""Prometheus metrics and model warm-up, end to end: the real kilnd with --metrics-port 0 and
--http-port 0, driven by the standard library's HTTP client. A model torch makes at test time is
uploaded, inferred successfully and unsuccessfully, and /metrics, parsed by a strict parser of the
text exposition format written here, must show Triton's counters moved by exactly those numbers.
A model whose config has Triton's model_warmup is READY with its plans already compiled (and, after
a restart, read from the disk cache), so its first request hits a compiled plan; warm-up files
outside the model's warmup folder, missing or of the wrong size fail the load with a clear
message, and the daemon keeps serving."""
import http.client
import json
import math
import os
import re
import shutil
import struct
import tempfile
import time
import unittest

import numpy as np
import torch

import test_end_to_end as e2e

import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from torch_fixtures import save_and_run  # noqa: E402

# ---------------------------------------------------------------- exposition format parser

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_LABEL = rf'({_LABEL_NAME})="((?:[^"\\\n]|\\\\|\\"|\\n)*)"'
_VALUE = r"[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf|NaN)"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{((?:{_LABEL})(?:,{_LABEL})*)?\}})? ({_VALUE})$")


def _unescape(value):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], value)


def parse_exposition(text):
    """Parses Prometheus's text format strictly: every line is a HELP, a TYPE or a sample; each
    family has one HELP and one TYPE, before its samples, which follow contiguously; label values
    unescape; histograms have cumulative buckets ending in le="+Inf" equal to _count, and a _sum.
    Returns {family: {"type", "help", "samples": {(name, frozenset(labels)): value}}}."""
    families, current = {}, None
    assert text.endswith("\n"), "the exposition ends with a newline"
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert re.fullmatch(_NAME, name), line
            assert name not in families, f"family {name} appears twice"
            families[name] = {"help": help_text, "type": None, "samples": {}}
            current = name
            continue
        if line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name == current and families[name]["type"] is None, line
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            families[name]["type"] = kind
            continue
        assert not line.startswith("#"), f"unexpected comment: {line!r}"
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, value = m.group(1), float(m.group(m.lastindex).replace("Inf", "inf"))
        labels = dict((k, _unescape(v)) for k, v in re.findall(_LABEL, m.group(2) or ""))
        assert current is not None and families[current]["type"] is not None, line
        kind = families[current]["type"]
        suffixes = ("_bucket", "_sum", "_count") if kind == "histogram" else ("",)
        assert any(name == current + s for s in suffixes), f"{name} outside its family {current}"
        key = (name, frozenset(labels.items()))
        assert key not in families[current]["samples"], f"duplicate sample {line!r}"
        families[current]["samples"][key] = value
    for name, family in families.items():
        if family["type"] != "histogram":
            continue
        series = {}
        for (sample, labels), value in family["samples"].items():
            base = frozenset((k, v) for k, v in labels if k != "le")
            le = dict(labels).get("le")
            entry = series.setdefault(base, {"buckets": [], "sum": None, "count": None})
            if sample.endswith("_bucket"):
                entry["buckets"].append((float(le.replace("Inf", "inf")), value))
            elif sample.endswith("_sum"):
                entry["sum"] = value
            else:
                entry["count"] = value
        for base, entry in series.items():
            bounds = [b for b, _ in entry["buckets"]]
            counts = [c for _, c in entry["buckets"]]
            assert bounds == sorted(bounds) and bounds[-1] == math.inf, (name, bounds)
            assert counts == sorted(counts), f"{name} buckets are not cumulative: {counts}"
            assert entry["count"] == counts[-1] and entry["sum"] is not None, name
    return families


def value(families, family, sample=None, **labels):
    """The value of one sample (`sample` defaults to the family's name), None when absent."""
    want = frozenset((k, str(v)) for k, v in labels.items())
    return families[family]["samples"].get((sample or family, want))


class ParserTest(unittest.TestCase):
    def test_parser_is_strict(self):
        ok = ('# HELP a_total A.\n# TYPE a_total counter\na_total{m="x\\"y\\\\z\\n"} 3\n'
              '# HELP h H.\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\n'
              'h_sum 4.5\nh_count 2\n')
        f = parse_exposition(ok)
        self.assertEqual(value(f, "a_total", m='x"y\\z\n'), 3)
        self.assertEqual(value(f, "h", "h_count"), 2)
        for bad in ['a 1\n',  # no HELP/TYPE
                    '# HELP a A.\n# TYPE a counter\na{m="x} 1\n',  # unterminated label
                    '# HELP a A.\n# TYPE a counter\na 1e\n',  # bad number
                    '# HELP h H.\n# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\n'
                    'h_sum 1\nh_count 1\n']:  # not cumulative
            with self.assertRaises(AssertionError, msg=bad):
                parse_exposition(bad)


# ---------------------------------------------------------------- models

class Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


def http_request(address, method, path, body=None, headers=None):
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), resp
    finally:
        conn.close()


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-metrics-")
        cls.repo = os.path.join(cls.tmp, "models")
        cls.cache = os.path.join(cls.tmp, "cache")
        os.makedirs(cls.repo)
        cls.modules = {}  # model name -> (file, the module libtorch loaded back)
        cls.server = cls.start(cls)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, *args):
        return e2e.Kilnd(self.repo, args=["--cache-dir", self.cache, *args])

    # ------------------------------------------------------------ helpers

    def model_file(self, name):
        """A model file of its own for `name`: models with the same file would share their plans
        in the compiled-graph cache (it is keyed by content), and the counts here are exact."""
        if name not in self.modules:
            torch.manual_seed(len(self.modules) + 1)
            path = os.path.join(self.tmp, f"{name}.pt")
            x = torch.randn(2, 4)
            save_and_run(torch.jit.trace(Lin().eval(), (x,)), path, (x,))
            self.modules[name] = (path, torch.jit.load(path).eval())
        return self.modules[name][0]

    def scrape(self, server=None):
        server = server or self.server
        status, body, resp = http_request(server.metrics_address, "GET", "/metrics")
        self.assertEqual(status, 200, body)
        self.assertTrue(resp.getheader("Content-Type").startswith("text/plain; version=0.0.4"))
        return parse_exposition(body.decode())

    def http(self, method, path, payload=None, server=None, raw=None, headers=None):
        server = server or self.server
        body = raw if raw is not None else (None if payload is None else json.dumps(payload).encode())
        status, data, _ = http_request(server.http_address, method, path, body, headers or (
            {"Content-Type": "application/json"} if payload is not None else {}))
        return status, (json.loads(data) if data else None)

    def upload(self, name, config=None):
        with open(self.model_file(name), "rb") as f:
            data = f.read()
        query = "" if config is None else "?config=" + _quote(json.dumps(config))
        status, body = self.http("POST", f"/v2/repository/models/{name}/load{query}", raw=data,
                                 headers={"Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, body)

    def infer(self, name, x, server=None, input_name="x"):
        payload = {"inputs": [{"name": input_name, "datatype": "FP32", "shape": list(x.shape),
                               "data": x.flatten().tolist()}]}
        return self.http("POST", f"/v2/models/{name}/infer", payload, server=server)

    def check_answer(self, name, x, server=None):
        status, body = self.infer(name, x, server=server)
        self.assertEqual(status, 200, body)
        got = np.array(body["outputs"][0]["data"], dtype=np.float32).reshape(
            body["outputs"][0]["shape"])
        with torch.no_grad():
            want = self.modules[name][1](x).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    # ------------------------------------------------------------ metrics

    def test_counters_move_by_exactly_the_requests_made(self):
        self.upload("lin", {"verify": False})
        m = dict(model="lin", version=1)
        before = self.scrape()
        for family in ["nv_inference_request_success", "nv_inference_count",
                       "nv_inference_exec_count"]:
            self.assertEqual(before[family]["type"], "counter", family)
            self.assertEqual(value(before, family, **m), 0, family)
        # Failures by Triton's reasons, each declared from the start.
        self.assertEqual(before["nv_inference_request_failure"]["type"], "counter")
        for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
            self.assertEqual(value(before, "nv_inference_request_failure", reason=reason, **m), 0)
        self.assertEqual(before["nv_inference_pending_request_count"]["type"], "gauge")
        self.assertEqual(value(before, "kiln_plan_cache_misses_total", **m), 0)
        self.assertGreater(value(before, "kiln_model_load_duration_us", **m), 0)
        self.assertEqual(value(before, "kiln_fallback_ops", **m), 0)
        self.assertEqual(value(before, "kiln_model_ready", **m), 1)

        for _ in range(3):
            self.check_answer("lin", torch.randn(2, 4))
        status, body = self.infer("lin", torch.randn(2, 5))  # wrong width
        self.assertEqual(status, 400, body)
        status, body = self.infer("lin", torch.randn(2, 4), input_name="y")  # unknown input
        self.assertEqual(status, 400, body)
        status, _ = self.infer("no_such_model", torch.randn(2, 4))  # counted nowhere
        self.assertEqual(status, 404)

        after = self.scrape()
        self.assertEqual(value(after, "nv_inference_request_success", **m), 3)
        # A wrong shape and an unknown input are the request's fault: reason OTHER.
        self.assertEqual(value(after, "nv_inference_request_failure", reason="OTHER", **m), 2)
        for reason in ("REJECTED", "CANCELED", "BACKEND"):
            self.assertEqual(value(after, "nv_inference_request_failure", reason=reason, **m), 0)
        self.assertEqual(value(after, "nv_inference_count", **m), 3)
        self.assertEqual(value(after, "nv_inference_exec_count", **m), 3)
        self.assertEqual(value(after, "nv_inference_pending_request_count", **m), 0)
        total = value(after, "nv_inference_request_duration_us", **m)
        parts = [value(after, f"nv_inference_{p}_duration_us", **m)
                 for p in ("queue", "compute_input", "compute_infer", "compute_output")]
        self.assertTrue(all(p > 0 for p in parts), parts)
        self.assertAlmostEqual(total, sum(parts), delta=1.0)  # the phases make up the whole
        h = "kiln_inference_request_duration_us"
        self.assertEqual(after[h]["type"], "histogram")
        self.assertEqual(value(after, h, h + "_count", **m), 3)
        self.assertAlmostEqual(value(after, h, h + "_sum", **m), total, delta=1.0)
        self.assertEqual(value(after, h, h + "_bucket", le="+Inf", **m), 3)
        # One signature: compiled by the first request, found in memory by the next two.
        self.assertEqual(value(after, "kiln_plan_cache_misses_total", **m), 1)
        self.assertEqual(value(after, "kiln_plan_cache_hits_total", tier="memory", **m), 2)
        self.assertGreaterEqual(value(after, "kiln_plan_cache_entries"), 1)
        self.assertGreater(value(after, "kiln_plan_cache_bytes", **m), 0)
        # Between requests the arena waits free for the next run; none is in use.
        self.assertGreater(value(after, "kiln_arena_bytes", state="free"), 0)
        self.assertEqual(value(after, "kiln_arena_bytes", state="in_use"), 0)
        self.assertGreaterEqual(value(after, "kiln_arena_allocations_total"), 1)
        self.assertGreater(value(after, "process_resident_memory_bytes"), 1 << 20)
        self.assertGreater(value(after, "process_cpu_seconds_total"), 0)
        self.assertGreater(value(after, "nv_cpu_memory_total_bytes"), 0)
        self.assertEqual(after["nv_cpu_utilization"]["type"], "gauge")
        self.assertTrue(0 <= value(after, "nv_cpu_utilization") <= 1)
        self.assertEqual(after["process_cpu_seconds_total"]["type"], "counter")

        # The same numbers as the KServe statistics extension.
        status, stats = self.http("GET", "/v2/models/lin/stats")
        self.assertEqual(status, 200, stats)
        s = stats["model_stats"][0]
        self.assertEqual(int(s["inference_stats"]["success"]["count"]), 3)
        self.assertEqual(int(s["inference_stats"]["fail"]["count"]), 2)
        self.assertAlmostEqual(int(s["inference_stats"]["success"]["ns"]) / 1e3, total, delta=1.0)

    def test_batched_requests_are_counted_by_their_way_through_the_batcher(self):
        batching = {"verify": False, "inputs": [{"name": "x", "dims": [-1, 4]}],
                    "max_batch_size": 8}
        self.upload("lin_at_once", dict(batching, dynamic_batching={}))
        self.upload("lin_delayed",
                    dict(batching, dynamic_batching={"max_queue_delay_microseconds": 1000}))
        self.upload("lin_plain", {"verify": False})
        # One row at a time on an idle server, no queue delay: each runs at once, around the
        # queue; with a queue delay each waits in it. (The compute thread that answered a request
        # is idle again a moment after its answer left: on a loaded machine, later than a
        # closed-loop client's next request arrives, which then takes the queue. The pause lets
        # it get back, so that the server is idle as the test means.)
        for _ in range(3):
            time.sleep(0.1)
            self.check_answer("lin_at_once", torch.randn(1, 4))
        for _ in range(2):
            self.check_answer("lin_delayed", torch.randn(1, 4))
        self.check_answer("lin_plain", torch.randn(1, 4))
        m = self.scrape()
        family = "kiln_batcher_requests_total"
        self.assertEqual(m[family]["type"], "counter")
        at_once, delayed = dict(model="lin_at_once", version=1), dict(model="lin_delayed", version=1)
        self.assertEqual(value(m, family, route="around", **at_once), 3)
        self.assertEqual(value(m, family, route="queue", **at_once), 0)
        self.assertEqual(value(m, family, route="queue", **delayed), 2)
        self.assertEqual(value(m, family, route="around", **delayed), 0)
        # A model without dynamic batching has no such samples.
        self.assertIsNone(value(m, family, route="queue", model="lin_plain", version=1))
        self.assertIsNone(value(m, family, route="around", model="lin_plain", version=1))

    def test_unloading_a_model_frees_the_arenas_waiting_for_runs(self):
        self.upload("gone", {"verify": False})
        self.check_answer("gone", torch.randn(2, 4))
        self.assertGreater(value(self.scrape(), "kiln_arena_bytes", state="free"), 0)
        status, body = self.http("POST", "/v2/repository/models/gone/unload", raw=b"")
        self.assertEqual(status, 200, body)
        after = self.scrape()
        self.assertEqual(value(after, "kiln_arena_bytes", state="free"), 0)
        self.assertEqual(value(after, "kiln_arena_bytes", state="in_use"), 0)

    def test_other_paths_and_methods_are_refused(self):
        status, _, _ = http_request(self.server.metrics_address, "GET", "/v2/health/live")
        self.assertEqual(status, 404)
        status, _, _ = http_request(self.server.metrics_address, "POST", "/metrics", b"x")
        self.assertIn(status, (404, 405))

    def test_negative_metrics_port_serves_none(self):
        repo = tempfile.mkdtemp(prefix="kiln-metrics-off-", dir=self.tmp)
        server = e2e.Kilnd(repo, args=["--metrics-port", "-1"])
        try:
            self.assertIsNone(server.metrics_port)
            self.assertNotIn("metrics listening", server.text())
        finally:
            server.stop()

    # ------------------------------------------------------------ warm-up

    def write_model(self, name, config, files=None):
        """REPO/NAME/1/model.pt, REPO/NAME/config.json and REPO/NAME/warmup/* on disk."""
        os.makedirs(os.path.join(self.repo, name, "1"), exist_ok=True)
        shutil.copy(self.model_file(name), os.path.join(self.repo, name, "1", "model.pt"))
        with open(os.path.join(self.repo, name, "config.json"), "w") as f:
            json.dump(config, f)
        for rel, data in (files or {}).items():
            path = os.path.join(self.repo, name, "warmup", rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)

    def load(self, name, server=None):
        return self.http("POST", f"/v2/repository/models/{name}/load", server=server, raw=b"")

    def test_warmup_compiles_before_the_first_request_and_restarts_from_disk(self):
        ones = struct.pack("<4f", 1, 2, 3, 4)
        config = {"verify": False, "model_warmup": [
            {"name": "zeros", "batch_size": 1, "count": 2,
             "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [2, 4], "zero_data": True}}},
            {"name": "file", "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [1, 4],
                                              "input_data_file": "one_row.raw"}}},
            {"name": "random", "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [3, 4],
                                                "random_data": True}}}]}
        self.write_model("warm", config, {"one_row.raw": ones})
        self.write_model("cold", {"verify": False})
        for name in ("warm", "cold"):
            status, body = self.load(name)
            self.assertEqual(status, 200, body)
        # kilnd runs --threads 2 with --split-teams on: each sample also runs on the plans of a
        # split team's single-thread runs, so the warm-up runs twice over.
        self.assertTrue(self.server.wait_for_log(r"model warm:1: warm-up ran 3 sample\(s\) 8 time"))
        warm, cold = dict(model="warm", version=1), dict(model="cold", version=1)
        m = self.scrape()
        # Three signatures compiled at load, at two and at one thread (the second run of "zeros"
        # found its plan in memory), none yet for the model without warm-up.
        self.assertEqual(value(m, "kiln_plan_cache_misses_total", **warm), 6)
        self.assertEqual(value(m, "kiln_plan_cache_hits_total", tier="memory", **warm), 2)
        self.assertEqual(value(m, "kiln_plan_cache_misses_total", **cold), 0)
        self.assertGreater(value(m, "kiln_model_warmup_duration_us", **warm), 0)
        self.assertEqual(value(m, "kiln_model_warmup_duration_us", **cold), 0)
        # Warm-up runs are not requests.
        self.assertEqual(value(m, "nv_inference_count", **warm), 0)
        status, stats = self.http("GET", "/v2/models/warm/stats")
        self.assertEqual(status, 200, stats)
        self.assertEqual(int(stats["model_stats"][0]["inference_stats"]["cache_miss"]["count"]), 6)

        for rows in (2, 1, 3):
            self.check_answer("warm", torch.randn(rows, 4))
            self.check_answer("cold", torch.randn(rows, 4))
        m = self.scrape()
        # Every first request of the warmed model found its plan in memory; the cold one compiled.
        self.assertEqual(value(m, "kiln_plan_cache_misses_total", **warm), 6)
        self.assertEqual(value(m, "kiln_plan_cache_hits_total", tier="memory", **warm), 2 + 3)
        self.assertEqual(value(m, "kiln_plan_cache_misses_total", **cold), 3)
        self.assertEqual(value(m, "kiln_plan_cache_hits_total", tier="memory", **cold), 0)
        status, stats = self.http("GET", "/v2/models/warm/stats")
        self.assertEqual(status, 200, stats)
        self.assertEqual(int(stats["model_stats"][0]["inference_stats"]["cache_hit"]["count"]), 5)

        # After a restart, the warm-up reads its plans from the disk cache: nothing compiles.
        restarted = self.start()
        try:
            m = self.scrape(restarted)
            self.assertEqual(value(m, "kiln_plan_cache_misses_total", **warm), 0)
            self.assertEqual(value(m, "kiln_plan_cache_hits_total", tier="disk", **warm), 6)
            self.assertEqual(value(m, "kiln_plan_cache_hits_total", tier="memory", **warm), 2)
            self.check_answer("warm", torch.randn(2, 4), server=restarted)
            m = self.scrape(restarted)
            self.assertEqual(value(m, "kiln_plan_cache_hits_total", tier="memory", **warm), 3)
            self.assertEqual(value(m, "kiln_plan_cache_misses_total", **warm), 0)
        finally:
            restarted.stop()

    def test_warmup_of_a_batched_model_compiles_its_allowed_batch_sizes(self):
        # A batched model's joined batches run at its allowed sizes: the warm-up sample (one
        # row) compiles each of them, so no batch pays a compile either.
        config = {"verify": False, "inputs": [{"name": "x", "dims": [-1, 4]}], "max_batch_size": 8,
                  "dynamic_batching": {"allowed_batch_sizes": [1, 4, 8]},
                  "model_warmup": [{"name": "zeros", "batch_size": 1, "inputs": {
                      "x": {"data_type": "TYPE_FP32", "dims": [4], "zero_data": True}}}]}
        self.write_model("warmbatch", config)
        status, body = self.load("warmbatch")
        self.assertEqual(status, 200, body)
        labels = dict(model="warmbatch", version=1)
        m = self.scrape()
        # 1, 4 and 8 rows, at two threads and at one (--split-teams)
        self.assertEqual(value(m, "kiln_plan_cache_misses_total", **labels), 6)
        for rows in (1, 3, 8):
            self.check_answer("warmbatch", torch.randn(rows, 4))
        m = self.scrape()
        # Requests alone run at their own size: 3 rows compiles; 1 and 8 were warmed up.
        self.assertEqual(value(m, "kiln_plan_cache_misses_total", **labels), 7)

    def test_bad_warmup_files_fail_the_load_clearly(self):
        sample = lambda f: {"verify": False, "model_warmup": [{"name": "s", "inputs": {
            "x": {"data_type": "TYPE_FP32", "dims": [1, 4], "input_data_file": f}}}]}
        secret = os.path.join(self.tmp, "secret.raw")
        with open(secret, "wb") as f:
            f.write(struct.pack("<4f", 1, 2, 3, 4))
        cases = {
            "escape": (sample("../../../secret.raw"), 400, "'..' is not allowed"),
            "absolute": (sample(secret), 400, "not absolute"),
            "missing": (sample("nothing.raw"), 400, "is not a file in the model's warmup directory"),
            "short": (sample("short.raw"), 400, "holds 8 bytes, the sample's shape and data_type "
                                                "need 16"),
            "link": (sample("link.raw"), 400, "resolves outside the model's warmup directory"),
            "badinput": ({"verify": False, "model_warmup": [{"name": "s", "inputs": {
                "nope": {"data_type": "TYPE_FP32", "dims": [1, 4], "zero_data": True}}}]},
                400, "model_warmup sample 's' failed"),
        }
        for name, (config, want_status, fragment) in cases.items():
            with self.subTest(name):
                self.write_model(name, config, {"short.raw": b"\0" * 8})
                if name == "link":
                    os.symlink(secret, os.path.join(self.repo, name, "warmup", "link.raw"))
                status, body = self.load(name)
                self.assertEqual(status, want_status, body)
                self.assertIn(fragment, body["error"])
                status, body = self.http("GET", f"/v2/models/{name}/ready")
                self.assertNotEqual(status, 200, body)
        self.assertTrue(self.server.alive())
        self.check_answer_if_loaded()

    def check_answer_if_loaded(self):
        # The daemon still serves: a fresh model loads and answers.
        self.write_model("after_bad", {"verify": False})
        status, body = self.load("after_bad")
        self.assertEqual(status, 200, body)
        self.check_answer("after_bad", torch.randn(1, 4))


def _quote(text):
    from urllib.parse import quote
    return quote(text, safe="")


if __name__ == "__main__":
    unittest.main()
