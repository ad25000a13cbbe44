"""The system shared-memory extension end to end: the real kilnd on a loopback port, stock
grpcio, and POSIX shared-memory objects made by Python's multiprocessing.shared_memory. Inputs
read from a registered region (alone or mixed with raw inputs) and outputs written into one give
libtorch's numbers; every misuse (unknown region, a key that is not a shm_open name, a missing
object, a range outside the region or the object, a size that does not match the tensor, a name
registered twice) is a clear status, and the daemon keeps serving."""
import os
import shutil
import sys
import tempfile
import unittest
from multiprocessing import shared_memory

import json
import urllib.error
import urllib.request

import grpc
import numpy as np

import test_end_to_end as e2e

sys.path.insert(0, os.path.join(e2e.SOURCE, "client", "python"))
import kiln_client_example  # noqa: E402  (stub generation)


class SharedMemoryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-shm-")
        cls.repo = os.path.join(cls.tmp, "models")
        os.makedirs(cls.repo)
        cls.server = e2e.Kilnd(cls.repo)
        e2e.EndToEndTest.kiln(cls, "upload", e2e.fixture("two_input.pt"), "--name", "two_input")
        cls.pb, pb_grpc = kiln_client_example.load_stubs()
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)
        cls.image = np.load(e2e.fixture("two_input.input.image.npy"))
        cls.bias = np.load(e2e.fixture("two_input.input.bias.npy"))
        cls.expected = np.load(e2e.fixture("two_input.output0.npy"))

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def fail(self, msg=None):  # e2e.EndToEndTest.kiln reports through self.fail
        raise AssertionError(msg)

    def setUp(self):
        self.segments = []

    def tearDown(self):
        self.stub.SystemSharedMemoryUnregister(self.pb.SystemSharedMemoryUnregisterRequest())
        for s in self.segments:
            s.close()
            s.unlink()

    # ------------------------------------------------------------------ helpers

    def segment(self, size):
        s = shared_memory.SharedMemory(create=True, size=size)
        self.segments.append(s)
        return s

    def register(self, name, key, offset, size):
        self.stub.SystemSharedMemoryRegister(self.pb.SystemSharedMemoryRegisterRequest(
            name=name, key=key, offset=offset, byte_size=size))

    def code(self, call, *args):
        with self.assertRaises(grpc.RpcError) as cm:
            call(*args)
        return cm.exception.code(), cm.exception.details()

    def request(self, image_region=None, image_offset=0, image_size=None, raw_image=True,
                output=None):
        req = self.pb.ModelInferRequest(model_name="two_input")
        for name, array in (("image", self.image), ("bias", self.bias)):
            t = req.inputs.add(name=name, datatype="FP32", shape=list(array.shape))
            if name == "image" and image_region is not None:
                t.parameters["shared_memory_region"].string_param = image_region
                t.parameters["shared_memory_offset"].uint64_param = image_offset
                t.parameters["shared_memory_byte_size"].uint64_param = (
                    image_size if image_size is not None else array.nbytes)
            else:
                req.raw_input_contents.append(array.tobytes())
        if output is not None:
            region, offset, size = output
            o = req.outputs.add(name="output0")
            o.parameters["shared_memory_region"].string_param = region
            o.parameters["shared_memory_offset"].uint64_param = offset
            o.parameters["shared_memory_byte_size"].uint64_param = size
        return req

    def check_output(self, got):
        e2e.assert_close(self, got.reshape(self.expected.shape), self.expected)

    # ------------------------------------------------------------------ tests

    def test_inputs_and_outputs_through_a_region_match_libtorch(self):
        out_bytes = self.expected.nbytes
        seg = self.segment(4096 + 64 + self.image.nbytes + out_bytes)
        # The image at offset 64 of a region that starts 4096 bytes into the object.
        view = np.ndarray(self.image.shape, np.float32, buffer=seg.buf, offset=4096 + 64)
        view[...] = self.image
        self.register("data", "/" + seg.name, 4096, 64 + self.image.nbytes + out_bytes)
        status = self.stub.SystemSharedMemoryStatus(self.pb.SystemSharedMemoryStatusRequest())
        self.assertEqual(status.regions["data"].key, "/" + seg.name)
        self.assertEqual(status.regions["data"].offset, 4096)
        meta = self.stub.ServerMetadata(self.pb.ServerMetadataRequest())
        self.assertIn("system_shared_memory", meta.extensions)

        # Input from the region, output in the response.
        resp = self.stub.ModelInfer(self.request("data", 64))
        self.check_output(np.frombuffer(resp.raw_output_contents[0], np.float32))

        # Input and output through the region: the output lands after the image.
        out_offset = 64 + self.image.nbytes
        resp = self.stub.ModelInfer(self.request("data", 64, output=("data", out_offset, out_bytes)))
        self.assertEqual(resp.raw_output_contents[0], b"")
        self.assertEqual(resp.outputs[0].parameters["shared_memory_region"].string_param, "data")
        self.assertEqual(list(resp.outputs[0].shape), list(self.expected.shape))
        got = np.ndarray(self.expected.shape, np.float32, buffer=seg.buf, offset=4096 + out_offset)
        self.check_output(got.copy())

        # The request reads the region when it arrives: new bytes, new answer.
        view[...] = 0
        resp = self.stub.ModelInfer(self.request("data", 64))
        zero = np.frombuffer(resp.raw_output_contents[0], np.float32)
        self.assertFalse(np.allclose(zero.reshape(self.expected.shape), self.expected))

    def test_an_object_shrunk_after_registration_is_a_status_not_a_crash(self):
        # The client owns the object: it may truncate it after registering a range of it.
        # Reading or writing the lost pages through a mapping would be SIGBUS in kilnd. The
        # tensors lie two pages in, past what the truncation leaves.
        at, out_bytes = 8192, self.expected.nbytes
        size = at + self.image.nbytes + out_bytes
        out_at = at + self.image.nbytes
        seg = self.segment(size)
        self.register("shrunk", "/" + seg.name, 0, size)
        os.ftruncate(seg._fd, 100)
        for output in (None, ("shrunk", out_at, out_bytes)):
            code, details = self.code(self.stub.ModelInfer,
                                      self.request("shrunk", at, output=output))
            self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, details)
            self.assertIn("shrunk", details)
        # Input from raw bytes, output into the shrunk region.
        code, details = self.code(self.stub.ModelInfer,
                                  self.request(output=("shrunk", out_at, out_bytes)))
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, details)
        self.assertIn("shrunk", details)
        # Grown back, the same region serves again; the daemon never went away.
        os.ftruncate(seg._fd, size)
        np.ndarray(self.image.shape, np.float32, buffer=seg.buf, offset=at)[...] = self.image
        resp = self.stub.ModelInfer(self.request("shrunk", at))
        self.check_output(np.frombuffer(resp.raw_output_contents[0], np.float32))

    def test_misuse_gets_clear_statuses_and_the_daemon_keeps_serving(self):
        seg = self.segment(self.image.nbytes)
        key = "/" + seg.name
        NOT_FOUND, INVALID = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT
        reg = lambda *a: self.register(*a)  # noqa: E731
        self.assertEqual(self.code(reg, "x", "/../../etc/passwd", 0, 16)[0], INVALID)
        self.assertEqual(self.code(reg, "x", "relative", 0, 16)[0], INVALID)
        self.assertEqual(self.code(reg, "x", "/kiln-no-such-object", 0, 16)[0], NOT_FOUND)
        code, details = self.code(reg, "x", key, 8, self.image.nbytes)
        self.assertEqual(code, INVALID)
        self.assertIn("holds", details)
        self.assertEqual(self.code(reg, "x", key, 0, 0)[0], INVALID)
        self.register("img", key, 0, self.image.nbytes)
        self.assertEqual(self.code(reg, "img", key, 0, 16)[0], grpc.StatusCode.ALREADY_EXISTS)

        infer = self.stub.ModelInfer
        code, details = self.code(infer, self.request("nope"))
        self.assertEqual(code, NOT_FOUND)
        self.assertIn("'nope'", details)
        code, details = self.code(infer, self.request("img", image_size=self.image.nbytes - 4))
        self.assertEqual(code, INVALID)
        self.assertIn("shared_memory_byte_size", details)
        code, details = self.code(infer, self.request("img", image_offset=4))
        self.assertEqual(code, INVALID)
        self.assertIn("outside shared-memory region 'img'", details)
        code, details = self.code(infer, self.request("img", output=("img", 0, 2)))
        self.assertEqual(code, INVALID)
        self.assertIn("output 'output0'", details)

        np.ndarray(self.image.shape, np.float32, buffer=seg.buf)[...] = self.image
        resp = infer(self.request("img"))
        self.check_output(np.frombuffer(resp.raw_output_contents[0], np.float32))

        self.stub.SystemSharedMemoryUnregister(self.pb.SystemSharedMemoryUnregisterRequest(name="img"))
        self.assertEqual(self.code(infer, self.request("img"))[0], NOT_FOUND)
        unreg = self.stub.SystemSharedMemoryUnregister
        self.assertEqual(self.code(unreg, self.pb.SystemSharedMemoryUnregisterRequest(name="img"))[0],
                         NOT_FOUND)
        # Still serving, bytes in the request.
        resp = infer(self.request())
        self.check_output(np.frombuffer(resp.raw_output_contents[0], np.float32))

    def http(self, method, path, body=None):
        req = urllib.request.Request(f"http://{self.server.http_address}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                text = r.read().decode()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode())

    def test_the_same_over_http(self):
        out_bytes = self.expected.nbytes
        seg = self.segment(self.image.nbytes + out_bytes)
        np.ndarray(self.image.shape, np.float32, buffer=seg.buf)[...] = self.image
        code, _ = self.http("POST", "/v2/systemsharedmemory/region/h/register",
                            {"key": "/" + seg.name, "offset": 0,
                             "byte_size": self.image.nbytes + out_bytes})
        self.assertEqual(code, 200)
        code, status = self.http("GET", "/v2/systemsharedmemory/status")
        self.assertEqual(status, [{"name": "h", "key": "/" + seg.name, "offset": 0,
                                   "byte_size": self.image.nbytes + out_bytes}])
        body = {"inputs": [
            {"name": "image", "datatype": "FP32", "shape": list(self.image.shape),
             "parameters": {"shared_memory_region": "h",
                            "shared_memory_byte_size": self.image.nbytes}},
            {"name": "bias", "datatype": "FP32", "shape": list(self.bias.shape),
             "data": self.bias.ravel().tolist()}],
            "outputs": [{"name": "output0", "parameters": {
                "shared_memory_region": "h", "shared_memory_offset": self.image.nbytes,
                "shared_memory_byte_size": out_bytes}}]}
        code, resp = self.http("POST", "/v2/models/two_input/infer", body)
        self.assertEqual(code, 200, resp)
        self.assertNotIn("data", resp["outputs"][0])
        self.assertEqual(resp["outputs"][0]["parameters"]["shared_memory_region"], "h")
        got = np.ndarray(self.expected.shape, np.float32, buffer=seg.buf, offset=self.image.nbytes)
        self.check_output(got.copy())

        code, err = self.http("POST", "/v2/systemsharedmemory/region/x/register",
                              {"key": "/../x", "byte_size": 4})
        self.assertEqual(code, 400)
        self.assertIn("shm_open", err["error"])
        self.assertEqual(self.http("POST", "/v2/systemsharedmemory/region/h/unregister")[0], 200)
        self.assertEqual(self.http("GET", "/v2/systemsharedmemory/region/h/status")[0], 404)
        code, err = self.http("POST", "/v2/models/two_input/infer", body)
        self.assertEqual(code, 404)
        self.assertIn("'h'", err["error"])


if __name__ == "__main__":
    unittest.main()
