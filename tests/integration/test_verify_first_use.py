"""Verification on first use, end to end: the real kilnd, the real `kiln` CLI, TorchScript files
traced here with torch, numbers compared with libtorch's output for the same file.

A model uploaded without a config whose input has no shape known at load is loaded with
"verify: skipped"; its first request of each signature also runs through libtorch (in the
sandboxed worker child) and is compared:
  - a signature that matches is recorded as verified, once: a second request of it, or a
    concurrent first one, does not verify again (verify.first_use.count);
  - a signature where Kiln diverges is answered with libtorch's numbers and served with the
    diverging op through the libtorch fallback from then on (recorded as falling back). The
    divergence is made with the importer's fault-injection hook: a kilnd started with
    KILN_TEST_PERTURB_OP=aten::gelu adds 0.5 to the output of its native gelu translation;
  - with the option off (per model, or kilnd's --verify-on-first-use off) nothing is verified,
    and the perturbed numbers come back as Kiln computes them;
  - a model taking a List[Tensor] is verified the same way, its list passed to libtorch as one;
  - both outcomes outlive a restart: a passed signature is not verified again, and one that
    fell back is served with the same ops forced onto the fallback without verifying it again.
"""
import os
import re
import tempfile
import threading
import unittest
from typing import List

import numpy as np
import torch
import torch.nn as nn

import test_import_checks as checks
from test_end_to_end import Kilnd, assert_close


class GeluScale(nn.Module):
    """Elementwise only: no op fixes the input's rank, so the load cannot make a sample."""

    def forward(self, x):
        return torch.nn.functional.gelu(x) * 2.0 + 1.0


class CatGelu(nn.Module):
    """A List[Tensor] input: the load cannot make a sample of a list whose elements' rank
    nothing fixes."""

    def forward(self, xs: List[torch.Tensor]):
        return torch.nn.functional.gelu(torch.cat(xs, 0)) * 2.0 + 1.0


class VerifyFirstUseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-first-use-")
        cls.models = os.path.join(cls.tmp, "models")
        os.makedirs(cls.models)
        with torch.no_grad():
            traced = torch.jit.trace(GeluScale().eval(), torch.randn(2, 3))
        cls.model_path = os.path.join(cls.models, "gelu_scale.pt")
        traced.save(cls.model_path)
        cls.reference = torch.jit.load(cls.model_path)
        cls.list_model_path = os.path.join(cls.models, "cat_gelu.pt")
        torch.jit.script(CatGelu().eval()).save(cls.list_model_path)
        cls.list_reference = torch.jit.load(cls.list_model_path)
        cls.server = Kilnd(os.path.join(cls.tmp, "repo"))
        cls.perturbed = Kilnd(os.path.join(cls.tmp, "repo-perturbed"),
                              env={"KILN_TEST_PERTURB_OP": "aten::gelu"})
        cls.servers = [cls.server, cls.perturbed]

    # The import-checks test's: stop every server, remove the scratch folder; run the CLI.
    tearDownClass = classmethod(checks.ImportChecksTest.tearDownClass.__func__)
    kiln = checks.ImportChecksTest.kiln

    def upload(self, name, server, config=None, file=None):
        args = ["upload", file or self.model_path, "--name", name]
        if config is not None:
            path = os.path.join(self.tmp, f"{name}.json")
            with open(path, "w") as f:
                f.write(config)
            args += ["--config", path]
        return self.kiln(*args, server=server)

    def metadata(self, name, server):
        text = self.kiln("metadata", name, server=server).stdout
        return dict(re.findall(r"^property\s+(\S+) = (.*)$", text, re.M))

    def infer(self, name, server, x):
        """kilnd's answer for `x`, and libtorch's for the same file."""
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        path = os.path.join(out_dir, "x.npy")
        np.save(path, x)
        self.kiln("infer", name, "--input", f"x={path}", "--output-dir", out_dir, server=server)
        with torch.no_grad():
            want = self.reference(torch.from_numpy(x)).numpy()
        return np.load(os.path.join(out_dir, "output0.npy")), want

    def infer_list(self, name, server, xs):
        """kilnd's answer for the list `xs` (sent as xs.0, xs.1, ...), and libtorch's."""
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        args = []
        for k, x in enumerate(xs):
            path = os.path.join(out_dir, f"x{k}.npy")
            np.save(path, x)
            args += ["--input", f"xs.{k}={path}"]
        self.kiln("infer", name, *args, "--output-dir", out_dir, server=server)
        with torch.no_grad():
            want = self.list_reference([torch.from_numpy(x) for x in xs]).numpy()
        return np.load(os.path.join(out_dir, "output0.npy")), want

    def restart_and_request(self, repo, name, x, signatures, env=None):
        """A new kilnd on `repo`: model `name` shows `signatures` remembered, before and after a
        request of that signature (x * 2), which is answered as libtorch answers it without
        being verified again. Returns the new kilnd."""
        again = Kilnd(repo, env=env)
        self.servers.append(again)
        props = self.metadata(name, again)
        self.assertEqual(props["verify.signatures"], signatures)
        key = signatures.split(": ")[0]
        self.assertIn("remembered from an earlier run",
                      props["verify.signature." + key.replace(" ", "").rstrip(";")])
        got, want = self.infer(name, again, x * 2)
        assert_close(self, got, want)
        props = self.metadata(name, again)
        self.assertEqual(props["verify.first_use.count"], "0")
        self.assertEqual(props["verify.signatures"], signatures)
        return again

    def assert_serving(self, server):
        self.assertTrue(server.alive(), "".join(server.lines[-30:]))

    def test_a_skipped_load_is_verified_on_the_first_request_once(self):
        self.upload("plain", self.server)
        props = self.metadata("plain", self.server)
        self.assertTrue(props["verify"].startswith("skipped"), props["verify"])
        self.assertEqual(props["verify.first_use"], "on")
        self.assertEqual(props["verify.first_use.count"], "0")

        x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
        got, want = self.infer("plain", self.server, x)
        assert_close(self, got, want)
        props = self.metadata("plain", self.server)
        self.assertEqual(props["verify.first_use.count"], "1")
        self.assertEqual(props["verify.first_use.fallbacks"], "0")
        self.assertEqual(props["verify.signatures"], "FP32[4, 16];: passed")
        self.assertIn("verified on first use: passed on x=FP32[4, 16]",
                      props["verify.signature.FP32[4,16]"])

        # (d) The same signature again (other values) is not verified again.
        got, want = self.infer("plain", self.server, x * 3)
        assert_close(self, got, want)
        self.assertEqual(self.metadata("plain", self.server)["verify.first_use.count"], "1")

        # A new signature is verified on its first request.
        y = np.random.default_rng(2).standard_normal((2, 3, 5)).astype(np.float32)
        got, want = self.infer("plain", self.server, y)
        assert_close(self, got, want)
        props = self.metadata("plain", self.server)
        self.assertEqual(props["verify.first_use.count"], "2")
        self.assertIn("FP32[2, 3, 5];: passed", props["verify.signatures"])
        self.assertIn("signature FP32[2, 3, 5]; verified on first use", "".join(self.server.lines))
        self.assert_serving(self.server)

    def test_a_restart_remembers_the_signatures_that_passed(self):
        repo = os.path.join(self.tmp, "repo-restart")
        server = Kilnd(repo)
        self.servers.append(server)
        self.upload("kept", server)
        x = np.random.default_rng(3).standard_normal((3, 8)).astype(np.float32)
        got, want = self.infer("kept", server, x)
        assert_close(self, got, want)
        self.assertEqual(self.metadata("kept", server)["verify.first_use.count"], "1")
        server.stop()

        # The same repository, a new kilnd: the signature is not verified again.
        again = self.restart_and_request(repo, "kept", x, "FP32[3, 8];: passed")
        # A new signature still is.
        y = np.random.default_rng(4).standard_normal((5, 8)).astype(np.float32)
        got, want = self.infer("kept", again, y)
        assert_close(self, got, want)
        self.assertEqual(self.metadata("kept", again)["verify.first_use.count"], "1")
        # The record lives in the repository's hidden folder, never a model.
        self.assertEqual(len(os.listdir(os.path.join(repo, ".kiln-verified"))), 1)
        models = self.kiln("models", server=again).stdout
        self.assertNotIn("kiln-verified", models)
        self.assert_serving(again)

    def test_a_list_input_is_verified_on_first_use(self):
        self.upload("listed", self.server, file=self.list_model_path)
        props = self.metadata("listed", self.server)
        self.assertTrue(props["verify"].startswith("skipped"), props["verify"])
        rng = np.random.default_rng(7)
        xs = [rng.standard_normal((2, 3)).astype(np.float32),
              rng.standard_normal((1, 3)).astype(np.float32)]
        got, want = self.infer_list("listed", self.server, xs)
        assert_close(self, got, want)
        props = self.metadata("listed", self.server)
        self.assertEqual(props["verify.first_use.count"], "1")
        self.assertEqual(props["verify.signatures"], "lists=2;FP32[2, 3];FP32[1, 3];: passed")
        self.assertIn("verified on first use: passed on xs=[FP32[2, 3], FP32[1, 3]]",
                      props["verify.signature.lists=2;FP32[2,3];FP32[1,3]"])
        # Another list length is another signature.
        got, want = self.infer_list("listed", self.server, xs + [xs[1]])
        assert_close(self, got, want)
        props = self.metadata("listed", self.server)
        self.assertEqual(props["verify.first_use.count"], "2")
        self.assertIn("lists=3;FP32[2, 3];FP32[1, 3];FP32[1, 3];: passed",
                      props["verify.signatures"])
        self.assert_serving(self.server)

    def test_a_diverging_list_signature_falls_back(self):
        self.upload("listed_diverging", self.perturbed, file=self.list_model_path)
        rng = np.random.default_rng(8)
        xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(2)]
        got, want = self.infer_list("listed_diverging", self.perturbed, xs)
        # libtorch's numbers, not Kiln's perturbed ones.
        assert_close(self, got, want)
        props = self.metadata("listed_diverging", self.perturbed)
        self.assertEqual(props["verify.first_use.fallbacks"], "1")
        self.assertEqual(props["verify.signatures"],
                         "lists=2;FP32[2, 4];FP32[2, 4];: fallback (aten::gelu)")
        # Later requests run on the repaired model.
        got, want = self.infer_list("listed_diverging", self.perturbed, [x + 1 for x in xs])
        assert_close(self, got, want)
        self.assertEqual(self.metadata("listed_diverging", self.perturbed)[
            "verify.first_use.count"], "1")
        self.assert_serving(self.perturbed)

    def test_a_restart_remembers_the_signatures_that_fell_back(self):
        repo = os.path.join(self.tmp, "repo-restart-fallback")
        env = {"KILN_TEST_PERTURB_OP": "aten::gelu"}
        server = Kilnd(repo, env=env)
        self.servers.append(server)
        self.upload("repaired", server)
        x = np.random.default_rng(9).standard_normal((4, 16)).astype(np.float32)
        got, want = self.infer("repaired", server, x)
        assert_close(self, got, want)
        props = self.metadata("repaired", server)
        self.assertEqual(props["verify.signatures"], "FP32[4, 16];: fallback (aten::gelu)")
        server.stop()

        # A new kilnd on the same repository: served with gelu through the fallback again
        # (libtorch's numbers, not the perturbed ones), without verifying the signature again.
        again = self.restart_and_request(repo, "repaired", x, "FP32[4, 16];: fallback (aten::gelu)",
                                         env=env)
        self.assertIn("signature FP32[4, 16]; served with aten::gelu through the libtorch "
                      "fallback, as an earlier run of kilnd found", "".join(again.lines))
        self.assert_serving(again)

    def test_concurrent_first_requests_of_one_signature_verify_once(self):
        self.upload("concurrent", self.server)
        x = np.random.default_rng(3).standard_normal((3, 7)).astype(np.float32)
        results, errors = [], []

        def one():
            try:
                results.append(self.infer("concurrent", self.server, x))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 4)
        for got, want in results:
            assert_close(self, got, want)
        props = self.metadata("concurrent", self.server)
        self.assertEqual(props["verify.first_use.count"], "1")
        # (The same file served under another name shares what was verified for it: a test
        # that ran before may have left remembered signatures.)
        self.assertIn("FP32[3, 7];: passed", props["verify.signatures"])
        self.assertIn("verified on first use: passed", props["verify.signature.FP32[3,7]"])
        self.assertNotIn("remembered", props["verify.signature.FP32[3,7]"])

    def test_a_diverging_signature_answers_with_libtorch_and_falls_back(self):
        self.upload("diverging", self.perturbed)
        props = self.metadata("diverging", self.perturbed)
        self.assertTrue(props["verify"].startswith("skipped"), props["verify"])
        self.assertEqual(props["fallback_ops"], "")

        x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32)
        got, want = self.infer("diverging", self.perturbed, x)
        # libtorch's numbers, not Kiln's perturbed ones (off by 2 * 0.5 = 1).
        assert_close(self, got, want)
        props = self.metadata("diverging", self.perturbed)
        self.assertEqual(props["verify.first_use.count"], "1")
        self.assertEqual(props["verify.first_use.fallbacks"], "1")
        self.assertEqual(props["verify.signatures"], "FP32[4, 16];: fallback (aten::gelu)")
        summary = props["verify.signature.FP32[4,16]"]
        self.assertIn("Kiln diverged from libtorch", summary)
        self.assertRegex(summary, r"first divergence: node \d+ \(aten::gelu\)")
        self.assertIn("served with aten::gelu through the libtorch fallback: passed", summary)
        self.assertIn("signature FP32[4, 16]; fallback", "".join(self.perturbed.lines))

        # Later requests of the signature run on the repaired model, and verify nothing again.
        got, want = self.infer("diverging", self.perturbed, x - 1)
        assert_close(self, got, want)
        props = self.metadata("diverging", self.perturbed)
        self.assertEqual(props["verify.first_use.count"], "1")
        self.assertEqual(props["verify.first_use.fallbacks"], "1")
        self.assert_serving(self.perturbed)

    def test_off_per_model_verifies_nothing(self):
        self.upload("unverified", self.perturbed, config='{"verify": {"on_first_use": false}}')
        props = self.metadata("unverified", self.perturbed)
        self.assertEqual(props["verify.first_use"], 'off: "on_first_use": false in the load config')
        self.assertNotIn("verify.first_use.count", props)
        x = np.random.default_rng(5).standard_normal((4, 16)).astype(np.float32)
        got, want = self.infer("unverified", self.perturbed, x)
        # Kiln's own (perturbed) numbers: gelu + 0.5, times 2.
        np.testing.assert_allclose(got, want + 1.0, rtol=1e-4, atol=1e-4)
        self.assertNotIn("verify.signatures", self.metadata("unverified", self.perturbed))

    def test_off_server_wide_verifies_nothing(self):
        server = Kilnd(os.path.join(self.tmp, "repo-off"), args=["--verify-on-first-use", "off"],
                       env={"KILN_TEST_PERTURB_OP": "aten::gelu"})
        self.servers.append(server)
        self.upload("off", server)
        props = self.metadata("off", server)
        self.assertEqual(props["verify.first_use"],
                         "off: kilnd runs with --verify-on-first-use off")
        x = np.random.default_rng(6).standard_normal((2, 16)).astype(np.float32)
        got, want = self.infer("off", server, x)
        np.testing.assert_allclose(got, want + 1.0, rtol=1e-4, atol=1e-4)
        self.assertNotIn("verify.first_use.count", self.metadata("off", server))


if __name__ == "__main__":
    unittest.main()
