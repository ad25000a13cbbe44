"""The HTTP/REST endpoint (KServe v2 REST with Triton's binary tensor data, repository and
statistics extensions) end to end: the real kilnd with --http-port 0, driven by the standard
library's HTTP client and by curl. A model made by torch at test time is uploaded over HTTP (as the
body, and as Triton's base64 "file:" parameter), inferred with JSON and with binary tensors, and
every answer is checked against libtorch's numbers and against the gRPC answer for the same
request; bad requests get their exact statuses and the gRPC messages; the daemon stays up."""
import base64
import http.client
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np
import torch

import test_end_to_end as e2e

sys.path.insert(0, os.path.join(e2e.SOURCE, "client", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kiln_client_example  # noqa: E402  (stub generation, dtype tables)
from torch_fixtures import save_and_run  # noqa: E402

NP_OF = kiln_client_example.NP_OF
NAME_OF = kiln_client_example.NAME_OF

# The HTTP status each gRPC code maps to (server/http/http_status.cc).
HTTP_OF = {grpc.StatusCode.INVALID_ARGUMENT: 400, grpc.StatusCode.NOT_FOUND: 404,
           grpc.StatusCode.FAILED_PRECONDITION: 400, grpc.StatusCode.UNAVAILABLE: 503,
           grpc.StatusCode.RESOURCE_EXHAUSTED: 429, grpc.StatusCode.DEADLINE_EXCEEDED: 504,
           grpc.StatusCode.UNIMPLEMENTED: 501, grpc.StatusCode.INTERNAL: 500}


class Mixed(torch.nn.Module):
    """Three inputs of three datatypes, three outputs."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, ids, mask):
        return torch.relu(self.fc(x)), ids * 2 + 1, torch.logical_not(mask)


class Half(torch.nn.Module):
    def forward(self, h):
        return h * 2 + 1


class HttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-http-")
        cls.repo = os.path.join(cls.tmp, "models")
        os.makedirs(cls.repo)
        torch.manual_seed(0)
        cls.x = torch.randn(2, 4)
        cls.ids = torch.tensor([3, -5], dtype=torch.int64)
        cls.mask = torch.tensor([True, False])
        cls.mixed_file = os.path.join(cls.tmp, "mixed.pt")
        cls.expected = [t.numpy() for t in save_and_run(
            torch.jit.trace(Mixed().eval(), (cls.x, cls.ids, cls.mask)), cls.mixed_file,
            (cls.x, cls.ids, cls.mask))]
        cls.h = torch.tensor([[0.5, -1.25, 3.0]], dtype=torch.float16)
        cls.half_file = os.path.join(cls.tmp, "half.pt")
        cls.half_expected = save_and_run(torch.jit.trace(Half().eval(), (cls.h,)), cls.half_file,
                                         (cls.h,)).numpy()
        cls.server = e2e.Kilnd(cls.repo)
        host, port = cls.server.http_address.rsplit(":", 1)
        cls.host, cls.port = host, int(port)
        cls.base = f"http://{cls.server.http_address}"
        cls.pb, pb_grpc = kiln_client_example.load_stubs()
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)
        with open(cls.mixed_file, "rb") as f:
            status, body, _ = cls.request(cls, "POST", "/v2/repository/models/mixed/load", f.read(),
                                          {"Content-Type": "application/octet-stream"})
        assert status == 200, body

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def request(self, method, path, body=None, headers=None):
        """One request on a fresh connection; returns (status, body bytes, headers)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read(), resp
        finally:
            conn.close()

    def json_request(self, method, path, payload=None):
        body = None if payload is None else json.dumps(payload).encode()
        status, data, _ = self.request(method, path, body,
                                       {"Content-Type": "application/json"} if body else {})
        return status, (json.loads(data) if data else None)

    def curl(self, *args):
        r = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", *args], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        body, _, code = r.stdout.rpartition("\n")
        return int(code), body

    def assert_error(self, status, payload, want_status, *fragments):
        self.assertEqual(status, want_status, payload)
        self.assertIsInstance(payload, dict)
        self.assertEqual(list(payload), ["error"])
        for fragment in fragments:
            self.assertIn(fragment, payload["error"])

    def grpc_infer(self, name, inputs, outputs=()):
        req = self.pb.ModelInferRequest(model_name=name)
        for arg, value in inputs.items():
            req.inputs.add(name=arg, datatype=NAME_OF[value.dtype], shape=list(value.shape))
            req.raw_input_contents.append(np.ascontiguousarray(value).tobytes())
        for o in outputs:
            req.outputs.add(name=o)
        resp = self.stub.ModelInfer(req)
        return {o.name: np.frombuffer(raw, NP_OF[o.datatype]).reshape(list(o.shape))
                for o, raw in zip(resp.outputs, resp.raw_output_contents)}

    def grpc_error(self, req):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.ModelInfer(req)
        return ctx.exception

    def mixed_inputs(self):
        return {"x": self.x.numpy(), "ids": self.ids.numpy(), "mask": self.mask.numpy()}

    def assert_mixed(self, got):
        e2e.assert_close(self, got["output0"], self.expected[0], rtol=1e-5)
        np.testing.assert_array_equal(got["output1"], self.expected[1])
        np.testing.assert_array_equal(got["output2"], self.expected[2])

    @staticmethod
    def from_json(output):
        return np.array(output["data"], NP_OF[output["datatype"]]).reshape(output["shape"])

    # ------------------------------------------------------------------ health, metadata

    def test_health_and_server_metadata(self):
        self.assertEqual(self.request("GET", "/v2/health/live")[0], 200)
        self.assertEqual(self.request("GET", "/v2/health/ready")[0], 200)
        status, meta = self.json_request("GET", "/v2")
        self.assertEqual(status, 200)
        self.assertEqual(meta["name"], "kiln")
        self.assertIn("binary_tensor_data", meta["extensions"])
        self.assertIn("model_repository", meta["extensions"])
        code, body = self.curl(f"{self.base}/v2/health/ready")
        self.assertEqual(code, 200)
        self.assertEqual(json.loads(body), {"ready": True})

    def test_model_metadata_and_readiness(self):
        status, meta = self.json_request("GET", "/v2/models/mixed")
        self.assertEqual(status, 200)
        self.assertEqual(meta["name"], "mixed")
        self.assertEqual([t["name"] for t in meta["inputs"]], ["x", "ids", "mask"])
        self.assertEqual([t["name"] for t in meta["outputs"]], ["output0", "output1", "output2"])
        # The same answer as gRPC's.
        grpc_meta = self.stub.ModelMetadata(self.pb.ModelMetadataRequest(name="mixed"))
        self.assertEqual([t["datatype"] for t in meta["inputs"]],
                         [t.datatype for t in grpc_meta.inputs])
        self.assertEqual(meta["versions"], list(grpc_meta.versions))
        self.assertEqual([t["shape"] for t in meta["inputs"]],
                         [list(t.shape) for t in grpc_meta.inputs])
        self.assertEqual(meta["properties"]["sha256"], grpc_meta.properties["sha256"])
        version = meta["versions"][0]
        self.assertEqual(self.json_request("GET", f"/v2/models/mixed/versions/{version}")[0], 200)
        self.assertEqual(self.json_request("GET", "/v2/models/mixed/ready"),
                         (200, {"name": "mixed", "ready": True}))
        self.assertEqual(self.json_request("GET", "/v2/models/nope/ready")[0], 400)
        status, err = self.json_request("GET", "/v2/models/nope")
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.ModelMetadata(self.pb.ModelMetadataRequest(name="nope"))
        self.assert_error(status, err, HTTP_OF[ctx.exception.code()], ctx.exception.details())
        self.assertEqual(status, 404)

    # ------------------------------------------------------------------ inference

    def test_json_infer_matches_libtorch_and_grpc(self):
        payload = {"id": "req-7", "inputs": [
            {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": self.x.tolist()},  # nested
            {"name": "ids", "datatype": "INT64", "shape": [2], "data": self.ids.tolist()},
            {"name": "mask", "datatype": "BOOL", "shape": [2], "data": self.mask.tolist()}]}
        status, resp = self.json_request("POST", "/v2/models/mixed/infer", payload)
        self.assertEqual(status, 200, resp)
        self.assertEqual(resp["id"], "req-7")
        self.assertEqual(resp["model_name"], "mixed")
        got = {o["name"]: self.from_json(o) for o in resp["outputs"]}
        self.assert_mixed(got)
        via_grpc = self.grpc_infer("mixed", self.mixed_inputs())
        for name, value in via_grpc.items():
            np.testing.assert_array_equal(got[name], value, name)
        # Only the outputs asked for, in the order asked.
        payload["outputs"] = [{"name": "output2"}, {"name": "output1"}]
        status, resp = self.json_request("POST", "/v2/models/mixed/versions/1/infer", payload)
        self.assertEqual(status, 200, resp)
        self.assertEqual([o["name"] for o in resp["outputs"]], ["output2", "output1"])
        self.assertEqual(resp["outputs"][0]["data"], [False, True])

    def test_binary_infer_matches_grpc_bytes(self):
        x = np.ascontiguousarray(self.x.numpy())
        header = json.dumps({
            "inputs": [
                {"name": "x", "datatype": "FP32", "shape": [2, 4],
                 "parameters": {"binary_data_size": x.nbytes}},
                {"name": "ids", "datatype": "INT64", "shape": [2], "data": self.ids.tolist()},
                {"name": "mask", "datatype": "BOOL", "shape": [2],
                 "parameters": {"binary_data_size": 2}}],
            "outputs": [{"name": "output0", "parameters": {"binary_data": True}},
                        {"name": "output1"}]}).encode()
        body = header + x.tobytes() + self.mask.numpy().tobytes()
        # One kept-alive connection for two requests, as a client library would.
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        for _ in range(2):
            conn.request("POST", "/v2/models/mixed/infer", body=body,
                         headers={"Inference-Header-Content-Length": str(len(header)),
                                  "Content-Type": "application/octet-stream"})
            resp = conn.getresponse()
            data = resp.read()
            self.assertEqual(resp.status, 200, data[:500])
            n = int(resp.getheader("Inference-Header-Content-Length"))
            meta = json.loads(data[:n])
            out0, out1 = meta["outputs"]
            self.assertNotIn("data", out0)
            size = out0["parameters"]["binary_data_size"]
            self.assertEqual(len(data), n + size)
            got0 = np.frombuffer(data[n:], np.float32).reshape(out0["shape"])
            via_grpc = self.grpc_infer("mixed", self.mixed_inputs(), ["output0", "output1"])
            self.assertEqual(data[n:], via_grpc["output0"].tobytes())  # bit for bit
            e2e.assert_close(self, got0, self.expected[0], rtol=1e-5)
            np.testing.assert_array_equal(self.from_json(out1), self.expected[1])
        conn.close()

        # binary_data_output: every output binary, in order.
        payload = json.dumps({"parameters": {"binary_data_output": True}, "inputs": [
            {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": self.x.flatten().tolist()},
            {"name": "ids", "datatype": "INT64", "shape": [2], "data": self.ids.tolist()},
            {"name": "mask", "datatype": "BOOL", "shape": [2], "data": self.mask.tolist()}]})
        status, data, resp = self.request("POST", "/v2/models/mixed/infer", payload.encode())
        self.assertEqual(status, 200)
        n = int(resp.getheader("Inference-Header-Content-Length"))
        offset, got = n, {}
        for o in json.loads(data[:n])["outputs"]:
            size = o["parameters"]["binary_data_size"]
            got[o["name"]] = np.frombuffer(data[offset:offset + size],
                                           NP_OF[o["datatype"]]).reshape(o["shape"])
            offset += size
        self.assertEqual(offset, len(data))
        self.assert_mixed(got)

    def test_large_binary_output_is_sent_whole(self):
        """A 3 MB binary input in, a 3 MB binary output out: kilnd sends the output from its
        tensor after the JSON header (no copy into the body); every byte arrives, in place."""
        with open(self.half_file, "rb") as f:
            status, body, _ = self.request("POST", "/v2/repository/models/half_large/load",
                                           f.read(), {"Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, body)
        h = np.random.default_rng(5).standard_normal((1024, 1536)).astype(np.float16)
        header = json.dumps({"parameters": {"binary_data_output": True}, "inputs": [
            {"name": "h", "datatype": "FP16", "shape": list(h.shape),
             "parameters": {"binary_data_size": h.nbytes}}]}).encode()
        status, data, resp = self.request(
            "POST", "/v2/models/half_large/infer", header + h.tobytes(),
            {"Inference-Header-Content-Length": str(len(header)),
             "Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, data[:200])
        n = int(resp.getheader("Inference-Header-Content-Length"))
        self.assertEqual(int(resp.getheader("Content-Length")), len(data))
        out = json.loads(data[:n])["outputs"][0]
        self.assertEqual(out["parameters"]["binary_data_size"], h.nbytes)
        self.assertEqual(len(data), n + h.nbytes)
        got = np.frombuffer(data[n:], np.float16).reshape(out["shape"])
        np.testing.assert_array_equal(got, (h * np.float16(2)) + np.float16(1))

    def test_curl_infer(self):
        payload = json.dumps({"inputs": [
            {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": self.x.flatten().tolist()},
            {"name": "ids", "datatype": "INT64", "shape": [2], "data": self.ids.tolist()},
            {"name": "mask", "datatype": "BOOL", "shape": [2], "data": self.mask.tolist()}]})
        code, body = self.curl("-X", "POST", "-H", "Content-Type: application/json",
                               "-d", payload, f"{self.base}/v2/models/mixed/infer")
        self.assertEqual(code, 200, body)
        self.assert_mixed({o["name"]: self.from_json(o) for o in json.loads(body)["outputs"]})

    def test_upload_as_base64_parameter_with_curl_then_fp16_json_infer(self):
        with open(self.half_file, "rb") as f:
            encoded = base64.b64encode(f.read()).decode()
        load = os.path.join(self.tmp, "load.json")
        with open(load, "w") as f:
            json.dump({"parameters": {"file:1/model.pt": encoded, "config": "{}"}}, f)
        code, body = self.curl("-X", "POST", "-H", "Content-Type: application/json",
                               "--data-binary", f"@{load}",
                               f"{self.base}/v2/repository/models/half/load")
        self.assertEqual(code, 200, body)
        self.assertEqual(json.loads(body)["inputs"][0]["name"], "h")  # the contract
        code, body = self.curl("-X", "POST", f"{self.base}/v2/repository/index")
        self.assertEqual(code, 200, body)
        index = {m["name"]: m for m in json.loads(body)}
        self.assertEqual(index["half"]["state"], "READY")
        self.assertEqual(index["mixed"]["state"], "READY")
        # FP16 travels as numbers and comes back as numbers.
        status, resp = self.json_request("POST", "/v2/models/half/infer", {"inputs": [
            {"name": "h", "datatype": "FP16", "shape": [1, 3], "data": self.h.float().tolist()}]})
        self.assertEqual(status, 200, resp)
        out = resp["outputs"][0]
        self.assertEqual(out["datatype"], "FP16")
        np.testing.assert_array_equal(self.from_json(out), self.half_expected)

    def test_statistics_count_http_requests(self):
        def count():
            status, stats = self.json_request("GET", "/v2/models/mixed/stats")
            self.assertEqual(status, 200, stats)
            return stats["model_stats"][0]["inference_stats"]["success"]["count"]
        before = count()
        payload = {"inputs": [
            {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": self.x.flatten().tolist()},
            {"name": "ids", "datatype": "INT64", "shape": [2], "data": self.ids.tolist()},
            {"name": "mask", "datatype": "BOOL", "shape": [2], "data": self.mask.tolist()}]}
        for _ in range(3):
            self.assertEqual(self.json_request("POST", "/v2/models/mixed/infer", payload)[0], 200)
        self.assertEqual(count(), before + 3)
        status, all_stats = self.json_request("GET", "/v2/models/stats")
        self.assertEqual(status, 200)
        self.assertIn("mixed", [m["name"] for m in all_stats["model_stats"]])

    def test_unload_and_load_from_the_repository(self):
        with open(self.mixed_file, "rb") as f:
            status, body, _ = self.request("POST", "/v2/repository/models/mixed_copy/load",
                                           f.read(), {"Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.json_request("POST", "/v2/repository/models/mixed_copy/unload")[0],
                         200)
        self.assertEqual(self.json_request("GET", "/v2/models/mixed_copy/ready")[0], 400)
        status, err = self.json_request("POST", "/v2/models/mixed_copy/infer", {"inputs": []})
        grpc_err = self.grpc_error(self.pb.ModelInferRequest(model_name="mixed_copy"))
        self.assert_error(status, err, HTTP_OF[grpc_err.code()], grpc_err.details())
        # An empty load body loads what the repository holds.
        self.assertEqual(self.json_request("POST", "/v2/repository/models/mixed_copy/load")[0], 200)
        self.assertEqual(self.json_request("GET", "/v2/models/mixed_copy/ready")[0], 200)

    # ------------------------------------------------------------------ bad requests

    def test_bad_requests_get_their_status_and_the_grpc_message(self):
        infer = "/v2/models/mixed/infer"
        status, body, _ = self.request("POST", infer, b'{"inputs": [', {})
        self.assert_error(status, json.loads(body), 400, "malformed JSON")
        status, body, _ = self.request("POST", infer, b"[" * 100000, {})
        self.assert_error(status, json.loads(body), 400, "nested deeper than")
        # A number past double's range is malformed JSON, not an internal error.
        for path in (infer, "/v2/repository/index"):
            status, body, _ = self.request("POST", path, b'{"inputs": 1e999}', {})
            self.assert_error(status, json.loads(body), 400, "number overflow parsing '1e999'")
        # A shape the model refuses: the gRPC message, word for word.
        x = np.zeros((2, 5), np.float32)
        status, err = self.json_request("POST", infer, {"inputs": [
            {"name": "x", "datatype": "FP32", "shape": [2, 5], "data": x.flatten().tolist()},
            {"name": "ids", "datatype": "INT64", "shape": [2], "data": [1, 2]},
            {"name": "mask", "datatype": "BOOL", "shape": [2], "data": [True, True]}]})
        req = self.pb.ModelInferRequest(model_name="mixed")
        for name, value in {**self.mixed_inputs(), "x": x}.items():
            req.inputs.add(name=name, datatype=NAME_OF[value.dtype], shape=list(value.shape))
            req.raw_input_contents.append(value.tobytes())
        grpc_err = self.grpc_error(req)
        self.assertEqual(grpc_err.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assert_error(status, err, 400, grpc_err.details(), "input 'x'")
        # Data that does not fill the shape.
        status, err = self.json_request("POST", infer, {"inputs": [
            {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [1.0, 2.0]}]})
        self.assert_error(status, err, 400, "shape [2, 4] needs 8 values in \"data\", got 2")
        # An unknown model: 404 and gRPC's message.
        status, err = self.json_request("POST", "/v2/models/no_such_model/infer", {"inputs": []})
        grpc_err = self.grpc_error(self.pb.ModelInferRequest(model_name="no_such_model"))
        self.assertEqual(grpc_err.code(), grpc.StatusCode.NOT_FOUND)
        self.assert_error(status, err, 404, grpc_err.details(), "no_such_model")
        # Binary sizes that do not add up, a header length past the body.
        status, body, _ = self.request("POST", infer, b'{"inputs": []}xx',
                                       {"Inference-Header-Content-Length": "14"})
        self.assert_error(status, json.loads(body), 400, "2 bytes of binary data")
        status, body, _ = self.request("POST", infer, b'{"inputs": []}',
                                       {"Inference-Header-Content-Length": "99"})
        self.assert_error(status, json.loads(body), 400, "larger than the body")
        status, body, _ = self.request("POST", infer, b'{}',
                                       {"Inference-Header-Content-Length": "abc"})
        self.assert_error(status, json.loads(body), 400, "Inference-Header-Content-Length")
        # A bad upload keeps the serving model.
        status, body, _ = self.request("POST", "/v2/repository/models/mixed/load",
                                       b"not a model", {"Content-Type": "application/octet-stream"})
        self.assertEqual(status, 400, body)
        self.assertIn("error", json.loads(body))
        # No such route.
        status, body, _ = self.request("GET", "/v2/nothing/here")
        self.assert_error(status, json.loads(body), 404, "no route for GET /v2/nothing/here")
        # Through curl too.
        code, body = self.curl("-X", "POST", "-d", "{not json", f"{self.base}{infer}")
        self.assert_error(code, json.loads(body), 400, "malformed JSON")
        self.assertTrue(self.server.alive())
        self.test_curl_infer()

    def test_oversized_body_is_413_and_the_daemon_keeps_serving(self):
        # The limit is gRPC's message bound: 1 GiB (--max-upload-bytes is below it). One byte more,
        # streamed in 1 MiB pieces with Content-Length, then chunked: kilnd reads past it keeping
        # nothing, and answers 413.
        limit, piece = 1 << 30, b"\0" * (1 << 20)

        def pieces():
            for _ in range(limit // len(piece)):
                yield piece
            yield b"\0"

        for chunked in (False, True):
            conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
            headers = {"Content-Type": "application/json"}
            if not chunked:
                headers["Content-Length"] = str(limit + 1)
            conn.request("POST", "/v2/models/mixed/infer", body=pieces(), headers=headers,
                         encode_chunked=chunked)
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            self.assert_error(resp.status, json.loads(body), 413,
                              f"larger than the server's limit of {limit} bytes")
        self.assertTrue(self.server.alive())
        self.test_curl_infer()


class HttpFlagsTest(unittest.TestCase):
    def test_negative_port_turns_http_off_and_grpc_port_is_an_alias(self):
        tmp = tempfile.mkdtemp(prefix="kiln-http-flags-")
        try:
            server = e2e.KilndProcess(e2e.BIN, ["--host", "127.0.0.1", "--grpc-port", "0",
                                                "--http-port", "-1", "--model-repository", tmp])
            try:
                self.assertIsNone(server.http_port)
                self.assertNotIn("HTTP listening", server.text())
                out = subprocess.run([os.path.join(e2e.BIN, "kiln"), "--server", server.address,
                                      "models"], capture_output=True, text=True, timeout=60)
                self.assertEqual(out.returncode, 0, out.stderr)
            finally:
                self.assertEqual(server.stop(), 0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
