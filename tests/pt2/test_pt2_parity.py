"""torch.export (.pt2) models end to end, as a user serves them: the real kilnd on a loopback port,
the real `kiln` CLI uploading each archive and inferring from .npy files, the outputs compared with
torch 2.14's own (written by make_pt2_fixtures.py in the Debian sid chroot, see
scripts/make-pt2-fixtures.sh). Every case of every fixture: two batch sizes (and two sequence
lengths) where dims are dynamic. The fixtures in legacy/ were written by torch 2.6 (Debian
trixie) in torch 2.1-2.7's older layout and are checked the same way against torch 2.6's outputs.

KILN_PT2_FIXTURES names the fixture directory; when it has no manifest.json (the chroot could not
be made: not root, no network), the tests skip with the reason the fixture step left in
SKIP_REASON."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from kilnd_process import KilndProcess  # noqa: E402

BIN = os.environ.get("KILN_BIN", "")
FIXTURES = os.environ.get("KILN_PT2_FIXTURES", "")


def load_manifest(directory=FIXTURES):
    path = os.path.join(directory, "manifest.json")
    if not os.path.exists(path):
        reason_file = os.path.join(directory, "SKIP_REASON")
        reason = open(reason_file).read().strip() if os.path.exists(reason_file) else \
            f"no {path}"
        return None, reason
    with open(path) as f:
        return json.load(f), None


MANIFEST, SKIP = load_manifest()
LEGACY_FIXTURES = os.path.join(FIXTURES, "legacy")
LEGACY_MANIFEST, LEGACY_SKIP = load_manifest(LEGACY_FIXTURES)


def kiln(server, *args, timeout=600):
    return subprocess.run([os.path.join(BIN, "kiln"), "--server", server, *args],
                          capture_output=True, text=True, timeout=timeout)


@unittest.skipIf(MANIFEST is None, f"no .pt2 fixtures: {SKIP}")
class Pt2ParityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-pt2-")
        cls.server = KilndProcess(BIN, ["--host", "127.0.0.1", "--port", "0",
                                        "--model-repository", os.path.join(cls.tmp, "models"),
                                        "--threads", "2"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def check_model(self, model, fixtures=FIXTURES):
        name = model["name"]
        up = kiln(self.server.address, "upload", os.path.join(fixtures, model["file"]),
                  "--name", name, "--no-progress")
        self.assertEqual(up.returncode, 0, f"upload {name}:\n{up.stdout}\n{up.stderr}\n"
                         + self.server.text()[-3000:])
        # Stored under the name its format asks for, in the repository layout.
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "models", name, "1", "model.pt2")))
        tol = model["tolerance"]
        for k, case in enumerate(model["cases"]):
            out_dir = os.path.join(self.tmp, f"{name}.{k}")
            args = ["infer", name, "-o", out_dir]
            for input_name, file in case["inputs"].items():
                args += ["-i", f"{input_name}={os.path.join(fixtures, file)}"]
            res = kiln(self.server.address, *args)
            self.assertEqual(res.returncode, 0, f"infer {name} case {k}:\n{res.stdout}\n{res.stderr}")
            for out_name, file in case["outputs"].items():
                want = np.load(os.path.join(fixtures, file))
                got = np.load(os.path.join(out_dir, f"{out_name}.npy"))
                self.assertEqual(got.shape, want.shape, f"{name} case {k} {out_name}")
                self.assertEqual(got.dtype, want.dtype, f"{name} case {k} {out_name}")
                if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
                    np.testing.assert_array_equal(got, want, f"{name} case {k} {out_name}")
                else:
                    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
                    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale,
                                               err_msg=f"{name} case {k} {out_name}")

    def served(self, name):
        """The manifest entry of model `name`, uploaded and matched against torch."""
        model = next(m for m in MANIFEST["models"] if m["name"] == name)
        self.check_model(model)
        return model

    def metadata(self, name):
        res = kiln(self.server.address, "metadata", name)
        self.assertEqual(res.returncode, 0, res.stderr)
        return res.stdout

    def inspect(self, model):
        res = subprocess.run([os.path.join(BIN, "kiln"), "inspect",
                              os.path.join(FIXTURES, model["file"])],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        return res.stdout

    def assert_dynamic_ids(self, metadata):
        """input_ids as exported with Dim("batch", min=1, max=64) and Dim("seq", min=2, max=64):
        -1 in the metadata, the ranges in its properties."""
        self.assertRegex(metadata, r"input\s+input_ids INT64 \[-1, -1\]")
        self.assertRegex(metadata, r"input\.input_ids\.dim_ranges = dim 0: \[1, 64\] \(\w+\); "
                                   r"dim 1: \[2, 64\] \(\w+\)")

    def test_ops_kiln_lacks_run_through_the_libtorch_fallback(self):
        # logcumsumexp has no row in Kiln's table: a Fallback node, run by libtorch in the
        # worker, with its arguments by name; the rest of the graph is native.
        model = self.served("fallback_ops")
        printed = self.inspect(model)
        self.assertRegex(printed, r"= Fallback\(")
        self.assertIn("aten::logcumsumexp", printed)
        self.assertIn("arg_names=\"self;dim\"", printed)
        self.assertIn("aten::logcumsumexp", self.metadata("fallback_ops"))

    def test_verified_import_evaluates_the_program_through_libtorch(self):
        # The reference of a .pt2: the program evaluated node by node through libtorch 1.13's
        # operators (control flow, in-place writes through views and the fallback included).
        # scaled_dot_product_attention, rms_norm and _safe_softmax, newer than libtorch 1.13, are
        # written out in its ops. (Where a node has no reference at all, verification is skipped naming it;
        # test_kilnd_without_libtorch_serves_pt2 shows the skip without a worker.)
        for name in ["resnet18", "cond_model", "while_model", "inplace_views", "fallback_ops",
                     "bert_encoder", "sdpa_attention", "rms_norm", "safe_softmax"]:
            with self.subTest(model=name):
                self.served(name)
                self.assertRegex(self.metadata(name),
                                 r"verify = passed on .*\(reference: the ExportedProgram evaluated "
                                 r"node by node through libtorch 1\.13's operators\)")
        # On the archive's own sample inputs (the example the program was exported with), in
        # both layouts: real token ids and masks rather than samples made from the contract.
        self.assertRegex(self.metadata("bert_encoder"),
                         r"verify = passed on the archive's sample inputs input_ids=INT64\[2, 8\], "
                         r"attention_mask=FP32\[2, 8\]")

    def test_verified_import_refuses_a_diverging_translation(self):
        # KILN_TEST_PERTURB_OP (a test-only fault-injection hook) adds 0.5 to the native conv2d:
        # the reference catches it, names the node, and the load fails; kilnd keeps serving.
        perturbed = KilndProcess(BIN, ["--host", "127.0.0.1", "--port", "0", "--model-repository",
                                       os.path.join(self.tmp, "perturbed-models"), "--threads", "2"],
                                 env={"KILN_TEST_PERTURB_OP": "aten::conv2d"})
        try:
            model = next(m for m in MANIFEST["models"] if m["name"] == "resnet18")
            up = kiln(perturbed.address, "upload", os.path.join(FIXTURES, model["file"]),
                      "--name", "r18", "--no-progress")
            self.assertNotEqual(up.returncode, 0, up.stdout)
            self.assertIn("verified import failed", up.stdout + up.stderr)
            # The trace names the first node whose values diverge (the program's own names).
            self.assertRegex(up.stdout + up.stderr,
                             r"first divergence: node 0 \(aten::conv2d\) output %conv2d: max \|diff\| 0\.5")
            self.assertEqual(kiln(perturbed.address, "health").returncode, 0)
            # on_mismatch "fallback": the diverging op runs through libtorch, and the model loads.
            config = os.path.join(self.tmp, "on_mismatch.json")
            with open(config, "w") as f:
                json.dump({"verify": {"on_mismatch": "fallback"}}, f)
            up = kiln(perturbed.address, "upload", os.path.join(FIXTURES, model["file"]),
                      "--name", "r18", "--config", config, "--no-progress")
            self.assertEqual(up.returncode, 0, up.stdout + up.stderr)
            meta = kiln(perturbed.address, "metadata", "r18").stdout
            self.assertRegex(meta, r"verify = passed on .*served through the fallback: aten::conv2d")
        finally:
            perturbed.stop()

    def test_every_fixture_matches_torch(self):
        for model in MANIFEST["models"]:
            with self.subTest(model=model["name"]):
                self.check_model(model)

    @unittest.skipIf(LEGACY_MANIFEST is None, f"no legacy .pt2 fixtures: {LEGACY_SKIP}")
    def test_legacy_layout_of_torch_2_6_matches_torch(self):
        # torch.export.save of torch 2.6: serialized_exported_program.json and the weights in
        # torch.save pickles, read without Python or libtorch.
        self.assertTrue(LEGACY_MANIFEST["torch"].startswith("2.6"), LEGACY_MANIFEST["torch"])
        self.assertGreaterEqual(len(LEGACY_MANIFEST["models"]), 3)
        for model in LEGACY_MANIFEST["models"]:
            with self.subTest(model=model["name"]):
                self.check_model(model, LEGACY_FIXTURES)
        self.assertRegex(self.metadata("legacy_mlp"), r"input\.input\.dim_ranges = dim 0: \[1, 32\]")
        # serialized_example_inputs.pt is read as the newer layout's sample inputs are.
        self.assertRegex(self.metadata("legacy_mlp"),
                         r"verify = passed on the archive's sample inputs input=FP32\[2, 10\]")

    def test_metadata_names_inputs_after_forward_and_dynamic_dims(self):
        self.served("bert_encoder")
        metadata = self.metadata("bert_encoder")
        self.assertIn("input_ids", metadata)
        self.assertIn("attention_mask", metadata)
        self.assertIn("-1", metadata)

    def test_gpt_decoder_is_causal_at_any_batch_and_length(self):
        # The GPT-shaped decoder (causal mask from torch.triu over the run-time length): its
        # cases are two batch sizes and two lengths, matched above; here, the dims are dynamic
        # and a prefix of the ids gives the prefix of the logits (no position sees a later one).
        model = self.served("gpt_decoder")
        self.assert_dynamic_ids(self.metadata("gpt_decoder"))
        case = model["cases"][1]
        ids = np.load(os.path.join(FIXTURES, case["inputs"]["input_ids"]))
        full = np.load(os.path.join(FIXTURES, case["outputs"]["output0"]))
        work = os.path.join(self.tmp, "causal")
        os.makedirs(work, exist_ok=True)
        prefix = os.path.join(work, "prefix.npy")
        np.save(prefix, ids[:, :7])
        res = kiln(self.server.address, "infer", "gpt_decoder", "-o", work,
                   "-i", f"input_ids={prefix}")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        got = np.load(os.path.join(work, "output0.npy"))
        self.assertEqual(got.shape, (ids.shape[0], 7, full.shape[-1]))
        np.testing.assert_allclose(got, full[:, :7], rtol=1e-4, atol=1e-4)

    def test_dict_outputs_take_their_keys(self):
        self.served("dict_heads")
        metadata = self.metadata("dict_heads")
        self.assertIn("logits", metadata)
        self.assertIn("box", metadata)

    def test_cond_imports_as_an_if_and_takes_both_branches(self):
        # torch.cond becomes an If with both branches: the cases have inputs with a positive
        # sum (the Linear + ReLU branch) and a negative one (the affine branch), each matched
        # against torch above; here, the structure.
        model = self.served("cond_model")
        printed = self.inspect(model)
        self.assertRegex(printed, r"= If\b")
        self.assertIn("higher_order::cond", printed)
        outs = [np.load(os.path.join(FIXTURES, c["outputs"]["output0"])) for c in model["cases"]]
        ins = [np.load(os.path.join(FIXTURES, c["inputs"]["x"])) for c in model["cases"]]
        # Both branches were exercised: a positive sum gives relu(...) >= 0, a negative one
        # gives 2x - 1 < -1.
        self.assertTrue(any(i.sum() > 0 and (o >= 0).all() for i, o in zip(ins, outs)))
        self.assertTrue(any(i.sum() < 0 and (o < -1).all() for i, o in zip(ins, outs)))

    def test_while_loop_imports_as_a_loop(self):
        model = self.served("while_model")
        self.assertRegex(self.inspect(model), r"= Loop\b")
        steps = sorted(int(np.load(os.path.join(FIXTURES, c["inputs"]["steps"])))
                       for c in model["cases"])
        self.assertEqual(steps[0], 0)  # one case never enters the loop
        self.assertGreater(steps[-1], 1)

    def test_dynamic_dim_ranges_are_published_and_enforced(self):
        # bert_encoder was exported with Dim("batch", min=1, max=64) and Dim("seq", min=2,
        # max=64): -1 in the metadata, the ranges in its properties, a request outside them
        # refused with INVALID_ARGUMENT naming the input, the dim and the range.
        self.served("bert_encoder")
        metadata = self.metadata("bert_encoder")
        self.assert_dynamic_ids(metadata)
        self.assertRegex(metadata, r"input\.attention_mask\.dim_ranges = dim 0: \[1, 64\]")
        bad = os.path.join(self.tmp, "range")
        os.makedirs(bad, exist_ok=True)

        def infer(batch, seq, mask_batch=None):
            ids = os.path.join(bad, f"ids.{batch}.{seq}.npy")
            mask = os.path.join(bad, f"mask.{mask_batch or batch}.{seq}.npy")
            np.save(ids, np.ones((batch, seq), dtype=np.int64))
            np.save(mask, np.ones((mask_batch or batch, seq), dtype=np.float32))
            return kiln(self.server.address, "infer", "bert_encoder", "-o",
                        os.path.join(bad, "out"), "-i", f"input_ids={ids}",
                        "-i", f"attention_mask={mask}")

        ok = infer(64, 2)  # both ends of the ranges are inside
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        for batch, seq, dim, size, rng in [(65, 8, 0, 65, "[1, 64]"), (2, 1, 1, 1, "[2, 64]"),
                                           (2, 65, 1, 65, "[2, 64]")]:
            res = infer(batch, seq)
            self.assertEqual(res.returncode, 3, f"{batch}x{seq}: " + res.stdout + res.stderr)
            text = res.stdout + res.stderr
            self.assertIn("INVALID_ARGUMENT", text)
            self.assertIn(f"input 'input_ids': dim {dim} is {size}, outside the range {rng}", text)
        # Dims sharing torch's symbol must be equal: the mask's batch follows the ids'.
        res = infer(2, 8, mask_batch=3)
        self.assertEqual(res.returncode, 3, res.stdout + res.stderr)
        self.assertIn("the model declares them equal", res.stdout + res.stderr)
        # The daemon is still up and serving.
        again = infer(3, 4)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)

    def test_core_aten_programs_import_natively(self):
        # ExportedProgram.run_decompositions() writes the core ATen opset (native_layer_norm,
        # native_group_norm, _adaptive_avg_pool2d, convolution, addmm, the scatters, isinf,
        # attention's bmm and _safe_softmax's masking...), as edge toolchains and torch < 2.5's
        # export did; grid_sample and masks, exported plain, have grid_sampler, affine_grid and
        # boolean-mask indexing and nonzero with the range checks of their data-dependent sizes.
        # Every op has a native translation (`kiln inspect --strict` lists none without one),
        # and the answers match torch's.
        for name in ["bert_encoder_core", "norms_core", "core_ops", "core_ops_core",
                     "sdpa_attention_core", "safe_softmax_core", "grid_sample", "masks"]:
            with self.subTest(model=name):
                model = self.served(name)
                res = subprocess.run([os.path.join(BIN, "kiln"), "inspect", "--strict",
                                      os.path.join(FIXTURES, model["file"])],
                                     capture_output=True, text=True, timeout=300)
                self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
                self.assertIn("fallback ops (0): none", res.stdout)
        printed = self.inspect(next(m for m in MANIFEST["models"] if m["name"] == "norms_core"))
        for op in ["aten::native_group_norm", "aten::native_layer_norm", "aten::_adaptive_avg_pool2d"]:
            self.assertIn(op, printed)

    def test_programs_kiln_cannot_serve_are_refused(self):
        # A program that mutates a buffer keeps state between calls: the upload is refused
        # with INVALID_ARGUMENT naming the buffer. One with an op that neither Kiln nor
        # libtorch 1.13's fallback has is UNIMPLEMENTED naming the op. kilnd goes on serving.
        self.assertTrue(MANIFEST.get("refused"), "the fixtures include refused programs")
        for model in MANIFEST["refused"]:
            with self.subTest(model=model["name"]):
                up = kiln(self.server.address, "upload", os.path.join(FIXTURES, model["file"]),
                          "--name", model["name"], "--no-progress")
                text = up.stdout + up.stderr
                self.assertNotEqual(up.returncode, 0, text)  # the CLI's exit code per status
                self.assertIn(model["code"], text)
                self.assertIn(model["says"], text)
        self.assertEqual(kiln(self.server.address, "health").returncode, 0)

    def test_kilnd_without_libtorch_serves_pt2(self):
        # kilnd and kiln copied without kiln-torch-worker beside them: what a build with
        # -DKILN_WITH_TORCH=OFF ships. A .pt2 imports natively; TorchScript would need the worker.
        bare = os.path.join(self.tmp, "bare-bin")
        os.makedirs(bare)
        for b in ("kilnd", "kiln"):
            shutil.copy2(os.path.join(BIN, b), bare)
        model = next(m for m in MANIFEST["models"] if m["name"] == "bert_encoder")
        server = KilndProcess(bare, ["--host", "127.0.0.1", "--port", "0", "--model-repository",
                                     os.path.join(self.tmp, "bare-models"), "--threads", "2"])
        try:
            up = subprocess.run([os.path.join(bare, "kiln"), "--server", server.address, "upload",
                                 os.path.join(FIXTURES, model["file"]), "--name", "bert",
                                 "--no-progress"], capture_output=True, text=True, timeout=600)
            self.assertEqual(up.returncode, 0, up.stdout + up.stderr + server.text()[-2000:])
            case = model["cases"][1]
            out_dir = os.path.join(self.tmp, "bare-out")
            args = [os.path.join(bare, "kiln"), "--server", server.address, "infer", "bert",
                    "-o", out_dir]
            for input_name, file in case["inputs"].items():
                args += ["-i", f"{input_name}={os.path.join(FIXTURES, file)}"]
            res = subprocess.run(args, capture_output=True, text=True, timeout=600)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            want = np.load(os.path.join(FIXTURES, case["outputs"]["output0"]))
            got = np.load(os.path.join(out_dir, "output0.npy"))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            # The verified import's reference runs in libtorch, which is not here: skipped,
            # saying so; the model serves all the same.
            meta = subprocess.run([os.path.join(bare, "kiln"), "--server", server.address,
                                   "metadata", "bert"], capture_output=True, text=True, timeout=60)
            self.assertRegex(meta.stdout, r"verify = skipped: no reference to compare with: it "
                                          r"runs in libtorch, which this kilnd cannot run")
            # An op that would run through libtorch's fallback: refused, naming it.
            fallback = next(m for m in MANIFEST["models"] if m["name"] == "fallback_ops")
            up = subprocess.run([os.path.join(bare, "kiln"), "--server", server.address, "upload",
                                 os.path.join(FIXTURES, fallback["file"]), "--name", "fb",
                                 "--no-progress"], capture_output=True, text=True, timeout=600)
            self.assertEqual(up.returncode, 7, up.stdout + up.stderr)
            self.assertIn("UNIMPLEMENTED", up.stdout + up.stderr)
            self.assertIn("aten::logcumsumexp", up.stdout + up.stderr)
            self.assertIn("kiln-torch-worker", up.stdout + up.stderr)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
