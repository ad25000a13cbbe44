"""Dynamic batching end to end (server/scheduler/): the real kilnd on a loopback port, stock
grpcio, models made by torch at test time. Concurrent requests are batched and each response
equals the model's own result for that request alone (and libtorch's); preserve_ordering returns
responses in arrival order; a full queue is UNAVAILABLE and a queue timeout DEADLINE_EXCEEDED (or,
with timeout_action DELAY, a late answer); statistics count inferences, executions and batch sizes
truly; a model whose dim 0 is not a batch dim, or whose graph mixes rows, is not batched and its
metadata says why."""
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import torch

import test_end_to_end as e2e

sys.path.insert(0, os.path.join(e2e.SOURCE, "client", "python"))
import kiln_client_example  # noqa: E402  (stub generation)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Slow(torch.nn.Module):
    """Row-wise, and as slow as the row is wide: a wide request takes long, a narrow one not. The
    answer is one number per row, so that both responses take as long to send."""

    def forward(self, x):
        # Slow enough that a wide request (1M columns) outlasts the test's 0.3 s head start
        # even on a quiet machine with fast kernels.
        for _ in range(160):
            x = torch.sin(x) * 1.5 + 0.25
        return x.sum(1, keepdim=True)


class Centered(torch.nn.Module):
    """Mixes rows: each row minus the mean over the batch."""

    def forward(self, x):
        return x - x.mean(0, keepdim=True)


# Traced files record no shapes: the configs declare dim 0 (and the rest) dynamic.
DIMS = {"mlp": [-1, 64], "slow": [-1, -1], "centered": [-1, 8]}


def batching(model, max_batch_size=8, **dynamic):
    return {"inputs": [{"name": "x", "dims": DIMS[model]}], "max_batch_size": max_batch_size,
            "dynamic_batching": dynamic}


class BatchingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-batching-")
        torch.manual_seed(0)
        cls.files = {}
        for name, module, example in (("mlp", Mlp(), torch.rand(1, 64)),
                                      ("slow", Slow(), torch.rand(1, 8)),
                                      ("centered", Centered(), torch.rand(2, 8))):
            path = os.path.join(cls.tmp, f"{name}.pt")
            torch.jit.trace(module.eval(), example).save(path)
            cls.files[name] = path
        cls.torch_mlp = torch.jit.load(cls.files["mlp"])
        # Two compute threads, so that two batches can run at once.
        cls.server = e2e.Kilnd(os.path.join(cls.tmp, "repo"), threads=1,
                               args=["--concurrent-inferences", "2"])
        cls.pb, pb_grpc = kiln_client_example.load_stubs()
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def load(self, name, model, config):
        req = self.pb.RepositoryModelLoadRequest(model_name=name)
        with open(self.files[model], "rb") as f:
            req.parameters["file:1/model.pt"].bytes_param = f.read()
        req.parameters["config"].string_param = json.dumps(config)
        self.stub.RepositoryModelLoad(req, timeout=300)

    def request(self, name, x, timeout=None):
        req = self.pb.ModelInferRequest(model_name=name)
        if timeout is not None:
            req.parameters["timeout"].int64_param = timeout
        req.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        req.raw_input_contents.append(np.ascontiguousarray(x, np.float32).tobytes())
        return req

    def infer(self, name, x, timeout=60):
        resp = self.stub.ModelInfer(self.request(name, x), timeout=timeout)
        out = resp.outputs[0]
        return np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(list(out.shape))

    def infer_all(self, name, xs):
        """All at once, one thread each; the results in request order."""
        with ThreadPoolExecutor(len(xs)) as pool:
            return list(pool.map(lambda x: self.infer(name, x), xs))

    def stats(self, name):
        resp = self.stub.ModelStatistics(self.pb.ModelStatisticsRequest(name=name))
        return resp.model_stats[0]

    def property(self, name, key):
        return self.stub.ModelMetadata(self.pb.ModelMetadataRequest(name=name)).properties[key]

    def assert_status(self, code, fragment, call):
        with self.assertRaises(grpc.RpcError) as ctx:
            call()
        self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        self.assertIn(fragment, ctx.exception.details())
        return ctx.exception

    # ------------------------------------------------------------------ tests

    def test_batched_responses_equal_unbatched_and_stats_count_executions(self):
        # Eight rows make a preferred batch; the delay is long enough for all to arrive.
        self.load("mlp_batched", "mlp", batching("mlp", 8, preferred_batch_size=[8],
                                                 max_queue_delay_microseconds=2_000_000))
        self.load("mlp_alone", "mlp", {})
        self.assertTrue(self.property("mlp_batched", "dynamic_batching").startswith(
            "on (max_batch_size 8, preferred [8]"), self.property("mlp_batched", "dynamic_batching"))
        self.assertEqual(self.property("mlp_alone", "dynamic_batching"),
                         "off: no max_batch_size in the config")
        rng = np.random.default_rng(1)
        # Six requests of one row and one of two: eight rows.
        xs = [rng.standard_normal((1, 64), np.float32) for _ in range(6)]
        xs.append(rng.standard_normal((2, 64), np.float32))
        start = time.monotonic()
        got = self.infer_all("mlp_batched", xs)
        # One batch of eight rows runs as soon as it is complete, not after the delay.
        self.assertLess(time.monotonic() - start, 1.9)
        for x, y in zip(xs, got):
            alone = self.infer("mlp_alone", x)
            self.assertEqual(y.shape, (x.shape[0], 10))
            np.testing.assert_allclose(y, alone, rtol=1e-5, atol=1e-6)
            want = self.torch_mlp(torch.from_numpy(x)).detach().numpy()
            e2e.assert_close(self, y, want)
        s = self.stats("mlp_batched")
        self.assertEqual(s.inference_count, 8)  # rows, as Triton counts
        self.assertEqual(s.inference_stats.success.count, 7)  # requests
        self.assertEqual(s.inference_stats.queue.count, 7)
        self.assertEqual(s.execution_count, 1)
        self.assertEqual([(b.batch_size, b.compute_infer.count) for b in s.batch_stats], [(8, 1)])
        # Every request waited in the queue for its batch to fill.
        self.assertGreater(s.inference_stats.queue.ns, 0)

        # A request beyond max_batch_size, and inputs that disagree on dim 0.
        self.assert_status(grpc.StatusCode.INVALID_ARGUMENT, "exceeds the model's max_batch_size 8",
                           lambda: self.infer("mlp_batched", np.zeros((9, 64), np.float32)))

    def test_batches_run_padded_to_an_allowed_size(self):
        # Five one-row requests form a batch (preferred size 5) that runs as 8 rows, the next
        # allowed size; each answer is still its own row's.
        self.load("mlp_padded", "mlp", batching("mlp", 8, preferred_batch_size=[5],
                                                allowed_batch_sizes=[1, 2, 4, 8],
                                                max_queue_delay_microseconds=2_000_000))
        self.assertIn("batches padded to [1, 2, 4, 8]", self.property("mlp_padded", "dynamic_batching"))
        rng = np.random.default_rng(2)
        xs = [rng.standard_normal((1, 64), np.float32) for _ in range(5)]
        got = self.infer_all("mlp_padded", xs)
        for x, y in zip(xs, got):
            self.assertEqual(y.shape, (1, 10))
            want = self.torch_mlp(torch.from_numpy(x)).detach().numpy()
            e2e.assert_close(self, y, want)
        s = self.stats("mlp_padded")
        self.assertEqual(s.inference_count, 5)  # the requests' rows, not the padding
        self.assertEqual(s.execution_count, 1)
        self.assertEqual([(b.batch_size, b.compute_infer.count) for b in s.batch_stats], [(8, 1)])

        # "allowed_batch_sizes": [] runs each batch at its own size.
        self.load("mlp_unpadded", "mlp", batching("mlp", 8, preferred_batch_size=[3],
                                                  allowed_batch_sizes=[],
                                                  max_queue_delay_microseconds=2_000_000))
        self.assertIn("batches run at their own size", self.property("mlp_unpadded", "dynamic_batching"))
        self.infer_all("mlp_unpadded", xs[:3])
        s = self.stats("mlp_unpadded")
        self.assertEqual([(b.batch_size, b.compute_infer.count) for b in s.batch_stats], [(3, 1)])

    def test_preserve_ordering(self):
        # No delay: each request runs as soon as a compute thread is free. A wide (slow) request
        # and a narrow (fast) one after it run at once on the two compute threads.
        def finish_times(name):
            """When each call returned, in seconds from the wide request's start."""
            wide = np.full((1, 1_000_000), 0.5, np.float32)
            narrow = np.full((1, 8), 0.5, np.float32)
            done = {}
            start = time.monotonic()

            def call(tag, x):
                self.infer(name, x)
                done[tag] = time.monotonic() - start
            first = threading.Thread(target=call, args=("wide", wide))
            first.start()
            time.sleep(0.3)
            second = threading.Thread(target=call, args=("narrow", narrow))
            second.start()
            first.join()
            second.join()
            return done

        self.load("slow_ordered", "slow", batching("slow", 4, preserve_ordering=True))
        self.load("slow_unordered", "slow", batching("slow", 4))
        self.assertTrue(self.property("slow_ordered", "dynamic_batching").startswith("on"),
                        self.property("slow_ordered", "dynamic_batching"))
        self.infer("slow_ordered", np.zeros((1, 1_000_000), np.float32))  # compile both plans
        self.infer("slow_ordered", np.zeros((1, 8), np.float32))
        self.infer("slow_unordered", np.zeros((1, 1_000_000), np.float32))
        self.infer("slow_unordered", np.zeros((1, 8), np.float32))
        # Without ordering the narrow request overtakes the wide one (which shows the test can
        # tell); with it, its answer waits for the wide one's.
        # (Released together, the two answers reach their client threads in either order, so
        # the test compares times, not arrival order.)
        unordered = finish_times("slow_unordered")
        self.assertLess(unordered["narrow"], unordered["wide"] - 0.1, unordered)
        ordered = finish_times("slow_ordered")
        self.assertGreaterEqual(ordered["narrow"], ordered["wide"] - 0.02, ordered)

    def kilnd_threads(self):
        return len(os.listdir(f"/proc/{self.server.proc.pid}/task"))

    def test_waiting_requests_hold_no_thread_each(self):
        # 48 requests wait in the queue for a batch (the queue delay is 2 s): kilnd answers
        # them through callbacks, so its thread count stays where it was, not one per request.
        self.load("mlp_wait", "mlp", batching("mlp", 64, max_queue_delay_microseconds=2_000_000))
        x = np.random.rand(1, 64).astype(np.float32)
        self.infer("mlp_wait", x)  # the first request compiles batch 1
        before = self.kilnd_threads()
        xs = [np.full((1, 64), i / 48.0, np.float32) for i in range(48)]
        with ThreadPoolExecutor(len(xs)) as pool:
            futures = [pool.submit(self.infer, "mlp_wait", xi) for xi in xs]
            time.sleep(1.0)
            during = self.kilnd_threads()
            self.assertFalse(any(f.done() for f in futures), "a request ran before its delay")
            results = [f.result() for f in futures]
        self.assertLessEqual(during - before, 4, f"kilnd threads: {before} before, {during} "
                             "with 48 requests waiting")
        expected = self.torch_mlp(torch.from_numpy(np.concatenate(xs))).detach().numpy()
        np.testing.assert_allclose(np.concatenate(results), expected, rtol=1e-4, atol=1e-5)

    def test_full_queue_is_unavailable(self):
        self.load("mlp_queue1", "mlp", batching(
            "mlp", 4, max_queue_delay_microseconds=1_500_000,
            default_queue_policy={"max_queue_size": 1}))
        x = np.ones((1, 64), np.float32)
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(self.infer, "mlp_queue1", x)  # waits 1.5 s for a batch
            time.sleep(0.3)
            self.assert_status(grpc.StatusCode.UNAVAILABLE, "queue is full",
                               lambda: self.infer("mlp_queue1", x))
            self.assertEqual(waiting.result().shape, (1, 10))
        s = self.stats("mlp_queue1")
        self.assertEqual(s.inference_stats.success.count, 1)
        self.assertEqual(s.inference_stats.fail.count, 1)
        self.assertEqual(s.execution_count, 1)

    def test_queue_timeout(self):
        self.load("mlp_reject", "mlp", batching(
            "mlp", 4, max_queue_delay_microseconds=3_000_000,
            default_queue_policy={"default_timeout_microseconds": 200_000}))
        start = time.monotonic()
        self.assert_status(grpc.StatusCode.DEADLINE_EXCEEDED, "default_timeout_microseconds",
                           lambda: self.infer("mlp_reject", np.ones((1, 64), np.float32)))
        self.assertLess(time.monotonic() - start, 2.5)
        s = self.stats("mlp_reject")
        self.assertEqual((s.inference_stats.fail.count, s.execution_count), (1, 0))
        # DELAY keeps the request: it runs when its batch is due.
        self.load("mlp_delay", "mlp", batching(
            "mlp", 4, max_queue_delay_microseconds=500_000,
            default_queue_policy={"default_timeout_microseconds": 100_000,
                                  "timeout_action": "DELAY"}))
        self.assertEqual(self.infer("mlp_delay", np.ones((1, 64), np.float32)).shape, (1, 10))
        # The request's own timeout bounds its wait too.
        self.assert_status(grpc.StatusCode.DEADLINE_EXCEEDED, "batch queue",
                           lambda: self.stub.ModelInfer(
                               self.request("mlp_reject", np.ones((1, 64), np.float32),
                                            timeout=100_000), timeout=60))

    def test_models_that_are_not_batched_say_why(self):
        fixed = batching("centered", 4, max_queue_delay_microseconds=1000)
        fixed["inputs"] = [{"name": "x", "dims": [2, 8]}]
        self.load("centered_fixed", "centered", fixed)
        self.assertEqual(self.property("centered_fixed", "dynamic_batching"),
                         "off: input 'x' has a fixed dim 0 (2)")
        self.assertEqual(self.infer("centered_fixed", np.ones((2, 8), np.float32)).shape, (2, 8))

        # Dim 0 is dynamic, but the graph mixes rows: the first batch finds out, every request
        # still gets its own result, and batching stays off.
        self.load("centered", "centered", batching(
            "centered", 4, preferred_batch_size=[4], max_queue_delay_microseconds=2_000_000))
        rng = np.random.default_rng(2)
        xs = [rng.standard_normal((2, 8), np.float32) for _ in range(2)]
        for x, y in zip(xs, self.infer_all("centered", xs)):
            np.testing.assert_allclose(y, x - x.mean(0, keepdims=True), rtol=1e-5, atol=1e-6)
        reason = self.property("centered", "dynamic_batching")
        self.assertTrue(reason.startswith("off: output"), reason)
        self.assertIn("differs when run in a batch", reason)
        for x, y in zip(xs, self.infer_all("centered", xs)):
            np.testing.assert_allclose(y, x - x.mean(0, keepdims=True), rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
