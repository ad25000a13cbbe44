"""The checks kilnd runs when it loads a model, end to end: the real kilnd, the real `kiln` CLI,
TorchScript files written here with torch, numbers compared with libtorch's output for the same
file (relative error <= 1e-4).

  - ops Kiln has no translation for run through the libtorch fallback; the upload answer and
    ModelMetadata's parameters list them, and the model matches libtorch;
  - "strict": true fails the load with one list of every unsupported op;
  - verified import publishes the largest difference per output in the upload answer and
    ModelMetadata;
  - a diverging import fails naming the first diverging node, and with
    "on_mismatch": "fallback" is served through libtorch instead. The divergence is made with
    the importer's fault-injection hook: a kilnd started with KILN_TEST_PERTURB_OP=aten::gelu
    adds 0.5 to the output of its native gelu translation (and only there). Nothing else can
    make a correct translation diverge on purpose; the hook is for tests only.

After every refused load the daemon must still be serving.
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn

from test_end_to_end import BIN, Kilnd, assert_close

# Three ops that Kiln has no native translation for (see docs/ops.md).
UNSUPPORTED = ["aten::erfinv", "aten::i0", "aten::lgamma"]


class ThreeUnsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        h = self.linear(x)
        return torch.i0(h) + torch.lgamma(h.abs() + 0.5) + torch.erfinv(torch.tanh(h) * 0.9)


class GeluMlp(nn.Module):
    """Two outputs, so the verified import reports one difference per output."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        h = self.act(self.fc1(x))
        return self.fc2(h), h.sum(dim=1)


class Canary(nn.Module):
    """A plain model that any healthy daemon loads and serves."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.linear(x))


class CancellingConv(nn.Module):
    """A 1x1 convolution whose sums cancel: 1e8 + 1 - 1e8 is 0 when summed in float32 in order,
    1 in double."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 1)
        with torch.no_grad():
            self.conv.weight.copy_(torch.tensor([[1.0, 1.0, 1.0], [1.0, 2.0, 1.0]]).view(2, 3, 1, 1))
            self.conv.bias.copy_(torch.tensor([0.5, 0.25]))

    def forward(self, x):
        return self.conv(x)


class ConvNet(nn.Module):
    """Convolutions with batch norm, a residual add and a linear head: the ops that
    "precision": "bf16" runs with bfloat16 operands."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Linear(16 * 16 * 16, 10)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(self.conv2(h) + h)
        return self.head(h.flatten(1))


def write_model(out_dir, name, module, x):
    """Traces `module`, saves it, and writes the sample input and libtorch's outputs for the file."""
    torch.manual_seed(0)
    with torch.no_grad():
        traced = torch.jit.trace(module.eval(), x)
    path = os.path.join(out_dir, f"{name}.pt")
    traced.save(path)
    np.save(os.path.join(out_dir, f"{name}.input.x.npy"), x.numpy())
    with torch.no_grad():
        out = torch.jit.load(path)(x)
    outs = out if isinstance(out, tuple) else (out,)
    for i, o in enumerate(outs):
        np.save(os.path.join(out_dir, f"{name}.output{i}.npy"), o.numpy())
    return len(outs)


class ImportChecksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-import-checks-")
        cls.models = os.path.join(cls.tmp, "models")
        os.makedirs(cls.models)
        torch.manual_seed(0)
        cls.outputs = {
            "unsupported3": write_model(cls.models, "unsupported3", ThreeUnsupported(),
                                        torch.randn(4, 8)),
            "gelu_mlp": write_model(cls.models, "gelu_mlp", GeluMlp(), torch.randn(4, 16)),
            "canary": write_model(cls.models, "canary", Canary(), torch.randn(2, 8)),
            "convnet": write_model(cls.models, "convnet", ConvNet().eval(),
                                   torch.randn(2, 3, 16, 16)),
            "cancelling": write_model(cls.models, "cancelling", CancellingConv(), torch.tensor(
                [1e8, 3e7, 1.0, 1.0, -1e8, -3e7]).view(1, 3, 1, 2)),
        }
        cls.server = Kilnd(os.path.join(cls.tmp, "repo"))
        cls.servers = [cls.server]

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def kiln(self, *args, server=None, check=True):
        cmd = [os.path.join(BIN, "kiln"), "--server", (server or self.server).address, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if check and r.returncode != 0:
            self.fail(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        return r

    def config(self, name, text):
        path = os.path.join(self.tmp, f"{name}.json")
        with open(path, "w") as f:
            f.write(text)
        return path

    def upload(self, model, name, config=None, server=None, check=True):
        args = ["upload", os.path.join(self.models, f"{model}.pt"), "--name", name]
        if config:
            args += ["--config", config]
        return self.kiln(*args, server=server, check=check)

    def metadata(self, name, server=None):
        """ModelMetadata's parameters, as the CLI prints them ("property  key = value")."""
        text = self.kiln("metadata", name, server=server).stdout
        return dict(re.findall(r"^property\s+(\S+) = (.*)$", text, re.M))

    def infer_and_compare(self, model, name, server=None):
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        self.kiln("infer", name, "--input", f"x={os.path.join(self.models, model + '.input.x.npy')}",
                  "--output-dir", out_dir, server=server)
        for i in range(self.outputs[model]):
            want = np.load(os.path.join(self.models, f"{model}.output{i}.npy"))
            assert_close(self, np.load(os.path.join(out_dir, f"output{i}.npy")), want)

    def assert_still_serving(self, server=None):
        """The daemon survived: alive, and it still loads and answers correctly."""
        server = server or self.server
        self.assertTrue(server.alive(), "".join(server.lines[-30:]))
        self.upload("canary", "canary", server=server)
        self.infer_and_compare("canary", "canary", server=server)

    # ------------------------------------------------------------------ fallback and strict

    def test_unsupported_ops_load_through_the_fallback_and_are_listed(self):
        r = self.upload("unsupported3", "fallback3")
        self.assertIn("fallback_ops: " + ",".join(UNSUPPORTED), r.stdout)
        self.assertEqual(self.metadata("fallback3")["fallback_ops"], ",".join(UNSUPPORTED))
        self.infer_and_compare("unsupported3", "fallback3")
        self.assert_still_serving()

    def test_strict_lists_every_unsupported_op_at_once(self):
        strict = self.config("strict", '{"strict": true}')
        r = self.upload("unsupported3", "strict3", config=strict, check=False)
        self.assertNotEqual(r.returncode, 0)
        message = r.stdout + r.stderr
        # One error with the whole list, not one op per attempt.
        self.assertIn("unsupported ops: " + ", ".join(UNSUPPORTED), message)
        r = self.kiln("infer", "strict3", "--input",
                      f"x={os.path.join(self.models, 'unsupported3.input.x.npy')}",
                      "--output-dir", self.tmp, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assert_still_serving()

    # ------------------------------------------------------------------ verified import

    def test_verified_import_publishes_the_largest_difference_per_output(self):
        verify = self.config("verify", '{"verify": {"inputs": [{"name": "x", "dims": [4, 16]}]}}')
        r = self.upload("gelu_mlp", "verified", config=verify)
        self.assertRegex(r.stdout, r"verify: passed on x=FP32\[4, 16\]: output0 max \|diff\| \S+, "
                                   r"output1 max \|diff\| \S+")
        props = self.metadata("verified")
        for output in ("output0", "output1"):
            diff = float(props[f"verify.max_abs_diff.{output}"])
            self.assertGreaterEqual(diff, 0.0)
            self.assertLess(diff, 1e-4)
        self.assertEqual(props["fallback_ops"], "")
        self.infer_and_compare("gelu_mlp", "verified")

    def test_diverging_import_names_the_first_diverging_node_or_falls_back(self):
        os.environ["KILN_TEST_PERTURB_OP"] = "aten::gelu"
        try:
            perturbed = Kilnd(os.path.join(self.tmp, "repo-perturbed"))
        finally:
            del os.environ["KILN_TEST_PERTURB_OP"]
        self.servers.append(perturbed)
        inputs = '"inputs": [{"name": "x", "dims": [4, 16]}]'
        strict_verify = self.config("verify_fail", '{"verify": {%s}}' % inputs)
        r = self.upload("gelu_mlp", "diverging", config=strict_verify, server=perturbed, check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        message = r.stdout + r.stderr
        self.assertIn("verified import failed", message)
        self.assertRegex(message, r"first divergence: node \d+ \(aten::gelu\) output %\S+: "
                                  r"max \|diff\| 0\.5\b")
        self.assertTrue(perturbed.alive())

        fallback = self.config("verify_fallback",
                               '{"verify": {%s, "on_mismatch": "fallback"}}' % inputs)
        r = self.upload("gelu_mlp", "diverging", config=fallback, server=perturbed)
        self.assertIn("verify.fallback_ops: aten::gelu", r.stdout)
        self.assertRegex(r.stdout, r"verify: passed .*served through the fallback: aten::gelu")
        props = self.metadata("diverging", server=perturbed)
        self.assertEqual(props["fallback_ops"], "aten::gelu")
        self.assertEqual(props["verify.fallback_ops"], "aten::gelu")
        self.assertLess(float(props["verify.max_abs_diff.output0"]), 1e-4)
        self.infer_and_compare("gelu_mlp", "diverging", server=perturbed)

        # The hook really perturbs: without verification the perturbed import is what serves,
        # and it is off by the injected 0.5 (this is what the verified import protects from).
        unchecked = self.config("verify_off", '{"verify": false}')
        self.upload("gelu_mlp", "unchecked", config=unchecked, server=perturbed)
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        self.kiln("infer", "unchecked", "--input",
                  f"x={os.path.join(self.models, 'gelu_mlp.input.x.npy')}", "--output-dir", out_dir,
                  server=perturbed)
        got = np.load(os.path.join(out_dir, "output1.npy"))
        want = np.load(os.path.join(self.models, "gelu_mlp.output1.npy"))
        np.testing.assert_allclose(got - want, np.full_like(want, 0.5 * 32), rtol=1e-3)
        self.assert_still_serving(perturbed)

    def test_accumulation_float64_makes_convolutions_accumulate_in_double(self):
        wide = self.config("wide", '{"accumulation": "float64", "verify": false}')
        self.upload("cancelling", "wide", config=wide)
        self.upload("cancelling", "narrow")  # the same file, default accumulation
        self.assertEqual(self.metadata("wide")["accumulation"],
                         "float64 (float32 convolutions, matmuls and linear layers accumulate "
                         "in double)")
        self.assertEqual(self.metadata("narrow")["accumulation"], "float32")
        graph = self.kiln("inspect", "wide", "--remote").stdout
        self.assertRegex(graph, r"Conv\b.*accumulate=\"?float64")
        x = os.path.join(self.models, "cancelling.input.x.npy")
        outputs = {}
        for name in ("wide", "narrow"):
            out_dir = tempfile.mkdtemp(dir=self.tmp)
            self.kiln("infer", name, "--input", f"x={x}", "--output-dir", out_dir)
            outputs[name] = np.load(os.path.join(out_dir, "output0.npy"))
        # The exact sums (1 and 2, plus the bias), which float32 cannot hold on the way.
        np.testing.assert_array_equal(outputs["wide"].reshape(-1), [1.5, 1.5, 2.25, 2.25])
        # Each model runs its own plans: the float32 one loses the small terms (OpenBLAS sums
        # in order), so one file gives two answers here.
        self.assertFalse(np.array_equal(outputs["narrow"], outputs["wide"]), outputs["narrow"])
        self.assert_still_serving()

    def test_precision_bf16_is_verified_and_publishes_its_deviation(self):
        sample = '"verify": {"inputs": [{"name": "x", "dims": [2, 3, 16, 16]}]}'
        self.upload("convnet", "conv_fp32", config=self.config("fp32", "{" + sample + "}"))
        # "bf16_always": bfloat16 on any CPU (the speed request "bf16" is the next test's).
        r = self.upload("convnet", "conv_bf16",
                        config=self.config("bf16", '{"precision": "bf16_always", ' + sample + "}"))
        self.assertIn("verify: passed", r.stdout)
        fp32, bf16 = self.metadata("conv_fp32"), self.metadata("conv_bf16")
        self.assertEqual(fp32["precision"], "fp32")
        self.assertTrue(bf16["precision"].startswith("bf16 "), bf16["precision"])
        self.assertIn("GEMMs ran at", bf16["precision"])  # the CPU's measured rates, published
        x = os.path.join(self.models, "convnet.input.x.npy")
        want = np.load(os.path.join(self.models, "convnet.output0.npy"))
        got = {}
        for name in ("conv_fp32", "conv_bf16"):
            out_dir = tempfile.mkdtemp(dir=self.tmp)
            self.kiln("infer", name, "--input", f"x={x}", "--output-dir", out_dir)
            got[name] = np.load(os.path.join(out_dir, "output0.npy"))
        scale = np.abs(want).max()
        assert_close(self, got["conv_fp32"], want)
        # bfloat16 operands: off by their rounding (so they ran), within the bf16 tolerance,
        # and the verified import published that deviation.
        deviation = np.abs(got["conv_bf16"] - want).max()
        self.assertGreater(deviation, 1e-5 * scale)
        self.assertLess(deviation, 5e-2 * scale)
        published = float(bf16["verify.max_abs_diff.output0"])
        self.assertGreater(published, 1e-5 * scale)
        self.assertLess(published, 5e-2 * scale)
        self.assertLess(float(fp32["verify.max_abs_diff.output0"]), 1e-4 * scale)
        self.assert_still_serving()


    def test_precision_bf16_runs_bfloat16_only_where_it_is_faster(self):
        """"bf16" asks for speed: kilnd measures this CPU's bfloat16 GEMM rate against its
        float32 one once, runs bfloat16 when it is at least 1.15x faster, float32 otherwise,
        and says which and why in the metadata. Whichever this CPU gets, the answer agrees
        with the published rate, and the numbers with the precision it names."""
        sample = '"verify": {"inputs": [{"name": "x", "dims": [2, 3, 16, 16]}]}'
        self.upload("convnet", "conv_hint",
                    config=self.config("hint", '{"precision": "bf16", ' + sample + "}"))
        text = self.metadata("conv_hint")["precision"]
        m = re.search(r"GEMMs ran at ([0-9.]+)x its float32 rate", text)
        self.assertIsNotNone(m, text)
        speedup = float(m.group(1))
        x = os.path.join(self.models, "convnet.input.x.npy")
        want = np.load(os.path.join(self.models, "convnet.output0.npy"))
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        self.kiln("infer", "conv_hint", "--input", f"x={x}", "--output-dir", out_dir)
        deviation = np.abs(np.load(os.path.join(out_dir, "output0.npy")) - want).max()
        scale = np.abs(want).max()
        if speedup >= 1.15:
            self.assertTrue(text.startswith("bf16 "), text)
            self.assertGreater(deviation, 1e-5 * scale)  # bfloat16's rounding: it ran
        else:
            self.assertTrue(text.startswith('fp32 ["bf16" requested, float32 used'), text)
            self.assertLess(deviation, 1e-4 * scale)  # float32's answer
        self.assert_still_serving()

    def test_the_graph_verification_chose_is_served_after_a_restart(self):
        """kilnd keeps imported graphs in its disk cache and does not verify one it reads back:
        the cache must hold the graph as served (with the op verification moved onto the
        fallback), under the verify settings that chose it, not the file's first import."""
        repo = os.path.join(self.tmp, "repo-restart")
        args = ["--cache-dir", os.path.join(self.tmp, "cache-restart")]
        env = {"KILN_TEST_PERTURB_OP": "aten::gelu"}
        server = Kilnd(repo, args=args, env=env)
        self.servers.append(server)
        # The same file unverified first: its graph (the perturbed import) enters the cache too,
        # and must not stand in for the verified model's.
        self.upload("gelu_mlp", "unchecked", config=self.config("off", '{"verify": false}'),
                    server=server)
        fallback = self.config("restart_fallback", '{"verify": {"inputs": [{"name": "x", '
                               '"dims": [4, 16]}], "on_mismatch": "fallback"}}')
        r = self.upload("gelu_mlp", "diverging", config=fallback, server=server)
        self.assertIn("served through the fallback: aten::gelu", r.stdout)
        self.infer_and_compare("gelu_mlp", "diverging", server=server)
        self.assertEqual(server.stop(), 0)

        server = Kilnd(repo, args=args, env=env)
        self.servers.append(server)
        props = self.metadata("diverging", server=server)
        self.assertIn("graph read from the disk cache", props["verify"])
        self.assertEqual(props["fallback_ops"], "aten::gelu")
        self.infer_and_compare("gelu_mlp", "diverging", server=server)
        self.assert_still_serving(server)


if __name__ == "__main__":
    unittest.main()
