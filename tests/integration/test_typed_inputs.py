"""Named, typed inputs end to end: the real kilnd on a loopback port, the real `kiln` CLI
with .npy files of many dtypes, and stock grpcio. Models come from typed_models.py
(float64, int64 token ids, bool masks, uint8 images, integer/bool outputs, PyTorch's
promotion rules, tuple/list/dict results); every result is compared with libtorch's
output for the same file: integer and bool bit-identical, float64 within 1e-6 and
float32 within 1e-4 (relative to the largest expected value)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np

import test_end_to_end as e2e

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(e2e.SOURCE, "client", "python"))
import kiln_client_example  # noqa: E402  (stub generation, dtype tables)

NP_OF = kiln_client_example.NP_OF
NAME_OF = kiln_client_example.NAME_OF
INVALID = grpc.StatusCode.INVALID_ARGUMENT


class TypedInputsTest(unittest.TestCase):
    kiln = e2e.EndToEndTest.kiln  # the CLI runner of the end-to-end test

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-typed-")
        cls.models = os.path.join(cls.tmp, "typed")
        subprocess.run([sys.executable, os.path.join(HERE, "typed_models.py"), cls.models],
                       check=True, capture_output=True, timeout=600)
        with open(os.path.join(cls.models, "manifest.json")) as f:
            cls.manifest = json.load(f)
        cls.repo = os.path.join(cls.tmp, "models")
        os.makedirs(cls.repo)
        cls.server = e2e.Kilnd(cls.repo)
        cls.pb, pb_grpc = kiln_client_example.load_stubs()
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)
        cls.uploaded = set()

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def path(self, name):
        return os.path.join(self.models, name)

    def sample(self, model, arg):
        return np.load(self.path(f"{model}.input.{arg}.npy"))

    def expected(self, model, output):
        return np.load(self.path(f"{model}.output.{output}.npy"))

    def upload(self, model, name=None, config=None):
        """Uploads through the CLI (streamed upload RPC); returns its stdout."""
        name = name or model
        args = ["upload", self.path(f"{model}.pt"), "--name", name]
        if config is not None:
            cfg = os.path.join(self.tmp, f"{name}.config.json")
            with open(cfg, "w") as f:
                json.dump(config, f)
            args += ["--config", cfg]
        out = self.kiln(*args).stdout
        self.uploaded.add(name)
        return out

    def ensure(self, model):
        if model not in self.uploaded:
            self.upload(model)

    def metadata(self, name):
        return self.stub.ModelMetadata(self.pb.ModelMetadataRequest(name=name))

    def infer_cli(self, name, inputs, outputs=()):
        """`kiln infer` with one .npy per input; returns {output name: array}."""
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        args = ["infer", name, "--output-dir", out_dir]
        for arg, file in inputs.items():
            args += ["--input", f"{arg}={file}"]
        for o in outputs:
            args += ["--output", o]
        self.kiln(*args)
        return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)}

    def request(self, name, inputs, outputs=()):
        req = self.pb.ModelInferRequest(model_name=name)
        for arg, value in inputs.items():
            t = req.inputs.add(name=arg, datatype=NAME_OF[value.dtype], shape=list(value.shape))
            req.raw_input_contents.append(np.ascontiguousarray(value).tobytes())
        for o in outputs:
            req.outputs.add(name=o)
        return req

    def infer_grpc(self, name, inputs, outputs=()):
        """ModelInfer with raw contents; returns {output name: array} in response order."""
        resp = self.stub.ModelInfer(self.request(name, inputs, outputs))
        result = {}
        for out, raw in zip(resp.outputs, resp.raw_output_contents):
            result[out.name] = np.frombuffer(raw, NP_OF[out.datatype]).reshape(list(out.shape))
        return result

    def assert_matches(self, got, want):
        """Integer and bool bit-identical; float64 1e-6, float32 1e-4 relative."""
        self.assertEqual(got.dtype, want.dtype)
        self.assertEqual(got.shape, want.shape)
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want)
        else:
            e2e.assert_close(self, got, want, rtol=1e-6 if want.dtype == np.float64 else 1e-4)

    def assert_invalid(self, req, *fragments):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.ModelInfer(req)
        self.assertEqual(ctx.exception.code(), INVALID, ctx.exception.details())
        for fragment in fragments:
            self.assertIn(fragment, ctx.exception.details())

    def check_names(self, model, name=None):
        """Metadata names are forward()'s parameters and the structure's output names."""
        meta = self.metadata(name or model)
        self.assertEqual([t.name for t in meta.inputs], self.manifest[model]["inputs"])
        self.assertEqual([t.name for t in meta.outputs], self.manifest[model]["outputs"])
        return meta

    def check_all_outputs(self, model, got):
        self.assertEqual(sorted(got), sorted(self.manifest[model]["outputs"]))
        for out, value in got.items():
            with self.subTest(model=model, output=out):
                self.assert_matches(value, self.expected(model, out))

    # ------------------------------------------------------------------ through the CLI

    def test_float64_model_cli(self):
        self.ensure("float64_mlp")
        meta = self.check_names("float64_mlp")
        self.assertEqual(meta.inputs[0].datatype, "FP64")
        self.assertEqual(meta.properties["input.x.datatype"], "fixed (implied)")
        # A Linear takes any leading dims: shown [-1, 8], checked on the last dim.
        self.assertEqual(list(meta.inputs[0].shape), [-1, 8])
        self.assertEqual(meta.properties["input.x.shape"], "any leading dims, then [8]")
        self.assertEqual(meta.outputs[0].datatype, "FP64")
        got = self.infer_cli("float64_mlp", {"x": self.path("float64_mlp.input.x.npy")})
        self.check_all_outputs("float64_mlp", got)
        # A float32 request is refused, not cast.
        x32 = os.path.join(self.tmp, "x32.npy")
        np.save(x32, self.sample("float64_mlp", "x").astype(np.float32))
        r = self.kiln("infer", "float64_mlp", "--input", f"x={x32}", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("input 'x': expected datatype FP64, got FP32 (FP64 is implied", r.stderr + r.stdout)

    def assert_within_storage_rounding(self, got, want, ulps):
        """FP16/BF16 results: within `ulps` units in the last place of the storage type."""
        self.assertEqual(got.shape, want.shape)
        bits = 10 if want.dtype == np.float16 else 7  # mantissa bits (BF16 arrives as float32)
        w = want.astype(np.float64)
        ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(w), 1e-30))) - bits)
        diff = np.abs(got.astype(np.float64) - w)
        self.assertTrue(np.all(diff <= ulps * ulp), f"max diff in ulps {np.max(diff / ulp)}")

    def test_float16_model_cli_and_grpc(self):
        self.ensure("half_mix")
        self.check_names("half_mix")
        inputs = {"h": self.path("half_mix.input.h.npy"), "f": self.path("half_mix.input.f.npy")}
        got = self.infer_cli("half_mix", inputs)
        self.assertEqual(got["output0"].dtype, np.float16)
        self.assertEqual(got["output1"].dtype, np.float32)  # FP16 + FP32 promotes
        self.assertEqual(got["output2"].dtype, np.float16)
        for out in ("output0", "output2"):
            # Computed in float32 and rounded once per op, as libtorch does on CPU.
            np.testing.assert_array_equal(got[out], self.expected("half_mix", out), out)
        self.assert_matches(got["output1"], self.expected("half_mix", "output1"))
        raw = self.infer_grpc("half_mix", {"h": self.sample("half_mix", "h"),
                                           "f": self.sample("half_mix", "f")})
        np.testing.assert_array_equal(raw["output0"], got["output0"])

    def test_bfloat16_model_cli(self):
        # A traced model records no input dtype; the config declares BF16, and the CLI rounds
        # a float32 .npy to it (NumPy has no bfloat16) and writes BF16 results widened.
        self.upload("bf16_head", config={"inputs": [{"name": "x", "datatype": "BF16",
                                                      "dims": [-1, 8]}]})
        meta = self.check_names("bf16_head")
        self.assertEqual(meta.inputs[0].datatype, "BF16")
        got = self.infer_cli("bf16_head", {"x": self.path("bf16_head.input.x.npy")})
        self.assertEqual(got["output0"].dtype, np.float32)
        # Every value is a bfloat16: its low 16 bits are zero.
        self.assertFalse(np.any(got["output0"].view(np.uint32) & 0xFFFF))
        # linear, gelu, layer norm and softmax, each computed in float32 and rounded to bfloat16,
        # as libtorch does; libtorch's BF16 linear (oneDNN) sums in another order, and a one-unit
        # difference going into layer norm and softmax moves their result by a few (3 measured).
        self.assert_within_storage_rounding(got["output0"], self.expected("bf16_head", "output0"),
                                            ulps=4)
        # Inline values work too, rounded the same way.
        r = self.kiln("infer", "bf16_head", "-i", "x=" + ",".join(["0.5"] * 8) + ":BF16:1x8")
        self.assertIn("BF16", r.stdout)

    def test_bfloat16_cnn_cli(self):
        self.upload("bf16_cnn", config={"inputs": [{"name": "x", "datatype": "BF16",
                                                     "dims": [-1, 3, 16, 16]}]})
        meta = self.metadata("bf16_cnn")
        self.assertEqual(meta.outputs[0].datatype, "BF16")
        got = self.infer_cli("bf16_cnn", {"x": self.path("bf16_cnn.input.x.npy")})
        self.assertFalse(np.any(got["output0"].view(np.uint32) & 0xFFFF))
        # Nine ops each rounding to bfloat16 (libtorch's oneDNN convolution sums in another
        # order): a few units in the last place of the result. libtorch's own BF16 output differs
        # from its FP32 output rounded to BF16 by up to 4 units on these small models
        # (docs/dtypes.md), so 4 is the spread of libtorch itself.
        self.assert_within_storage_rounding(got["output0"], self.expected("bf16_cnn", "output0"),
                                            ulps=4)

    def test_bert_like_encoder_cli(self):
        self.ensure("tiny_bert")
        meta = self.check_names("tiny_bert")
        self.assertEqual(meta.inputs[0].datatype, "INT64")  # embedding indices
        self.assertEqual(meta.properties["input.input_ids.datatype"],
                         "fixed (implied); INT32 also accepted")
        # The mask is only compared with 0: any dtype works, each compiled for.
        self.assertEqual(meta.inputs[1].datatype, "ANY")
        self.assertEqual(meta.properties["input.attention_mask.datatype"], "open")
        files = {a: self.path(f"tiny_bert.input.{a}.npy") for a in ("input_ids", "attention_mask")}
        got = self.infer_cli("tiny_bert", files)
        self.check_all_outputs("tiny_bert", got)
        # The same mask as bool gives the same result (mask == 0 is the same test).
        ids = self.sample("tiny_bert", "input_ids")
        mask = self.sample("tiny_bert", "attention_mask")
        got = self.infer_grpc("tiny_bert", {"input_ids": ids, "attention_mask": mask.astype(bool)})
        self.assert_matches(got["output0"], self.expected("tiny_bert", "output0"))
        # Token ids as INT32 (as many Triton clients send them) run as they are: embedding
        # takes INT32 indices, as PyTorch's does.
        got = self.infer_grpc("tiny_bert", {"input_ids": ids.astype(np.int32),
                                            "attention_mask": mask})
        self.assert_matches(got["output0"], self.expected("tiny_bert", "output0"))
        # Token ids as float are refused, never cast.
        self.assert_invalid(self.request("tiny_bert", {"input_ids": ids.astype(np.float32),
                                                       "attention_mask": mask}),
                            "input 'input_ids': expected datatype INT64 or INT32", "got FP32")

    def test_uint8_image_normalised_inside_cli(self):
        self.ensure("uint8_image")
        meta = self.check_names("uint8_image")
        self.assertEqual(meta.properties["input.image.datatype"], "open")
        got = self.infer_cli("uint8_image", {"image": self.path("uint8_image.input.image.npy")})
        self.check_all_outputs("uint8_image", got)

    def test_bool_mask_cli(self):
        self.ensure("bool_mask")
        meta = self.check_names("bool_mask")
        self.assertEqual(meta.inputs[1].datatype, "BOOL")  # masked_fill's mask
        self.assertEqual(meta.properties["input.mask.datatype"], "fixed (implied)")
        got = self.infer_cli("bool_mask", {a: self.path(f"bool_mask.input.{a}.npy")
                                           for a in ("values", "mask")})
        self.check_all_outputs("bool_mask", got)

    def test_int64_and_bool_outputs_cli(self):
        self.ensure("argmax_sign")
        meta = self.check_names("argmax_sign")
        # Nothing fixes x's dtype or rank, so no output can be compiled ahead: open.
        self.assertEqual(meta.properties["output.output0.datatype"], "open")
        # Declared, the outputs' dtypes and shapes are known at load.
        self.upload("argmax_sign", name="argmax_sign_declared",
                    config={"inputs": [{"datatype": "FP32", "dims": [-1, 6]}]})
        meta = self.metadata("argmax_sign_declared")
        self.assertEqual([(o.datatype, list(o.shape)) for o in meta.outputs],
                         [("INT64", [-1]), ("BOOL", [-1, 6])])
        got = self.infer_cli("argmax_sign", {"x": self.path("argmax_sign.input.x.npy")})
        self.check_all_outputs("argmax_sign", got)
        # `outputs` in the request limits what comes back.
        got = self.infer_cli("argmax_sign", {"x": self.path("argmax_sign.input.x.npy")},
                             outputs=["output1"])
        self.assertEqual(list(got), ["output1"])
        self.assert_matches(got["output1"], self.expected("argmax_sign", "output1"))

    # ------------------------------------------------------------------ through grpcio

    def test_mixed_promotion_grpc(self):
        self.ensure("promotion")
        self.check_names("promotion")
        inputs = {a: self.sample("promotion", a) for a in ("a", "b", "m", "f")}
        got = self.infer_grpc("promotion", inputs)
        # int32 + int64 -> int64; int64 * 2.5 -> float32; bool * float -> float32;
        # int / int -> float32 (true division).
        self.assertEqual([got[o].dtype for o in ("output0", "output1", "output2", "output3")],
                         [np.int64, np.float32, np.float32, np.float32])
        self.check_all_outputs("promotion", got)

    def test_integer_trunc_division_grpc(self):
        self.ensure("int_division")
        self.check_names("int_division")
        inputs = {a: self.sample("int_division", a) for a in ("a", "b")}
        got = self.infer_grpc("int_division", inputs)
        # int64 out, rounded toward zero (trunc) and down (floor): -7 / 2 is -3 and -4.
        self.assertEqual([got[o].dtype for o in ("output0", "output1")], [np.int64, np.int64])
        self.assertEqual(got["output0"][0, 0], -3)
        self.assertEqual(got["output1"][0, 0], -4)
        self.check_all_outputs("int_division", got)

    def test_dict_result_grpc(self):
        self.ensure("dict_out")
        meta = self.check_names("dict_out")
        self.assertEqual(meta.properties["output.logits.path"], "result['logits']")
        self.assertEqual(meta.properties["output.probs.alias"], "OUTPUT__1")
        x = self.sample("dict_out", "x")
        self.check_all_outputs("dict_out", self.infer_grpc("dict_out", {"x": x}))
        got = self.infer_grpc("dict_out", {"x": x}, outputs=["probs"])
        self.assertEqual(list(got), ["probs"])
        # Triton's positional names work for inputs and outputs; the reply uses the
        # name the output was requested by.
        got = self.infer_grpc("dict_out", {"INPUT__0": x}, outputs=["OUTPUT__0"])
        self.assertEqual(list(got), ["OUTPUT__0"])
        self.assert_matches(got["OUTPUT__0"], self.expected("dict_out", "logits"))

    def test_nested_tuple_and_list_results_grpc(self):
        for model in ("nested_tuple_out", "list_out"):
            self.ensure(model)
            self.check_names(model)
            got = self.infer_grpc(model, {"x": self.sample(model, "x")})
            self.check_all_outputs(model, got)
        meta = self.metadata("nested_tuple_out")
        self.assertEqual([o.name for o in meta.outputs], ["output0", "output1.0", "output1.1"])
        self.assertEqual(meta.properties["output.output1.0.path"], "result[1][0]")

    def test_nested_tuple_from_both_branches_grpc(self):
        self.ensure("nested_branches")
        meta = self.check_names("nested_branches")
        self.assertEqual([o.name for o in meta.outputs], ["output0", "output1.0", "output1.1"])
        x = self.sample("nested_branches", "x")
        self.check_all_outputs("nested_branches", self.infer_grpc("nested_branches", {"x": x}))
        # The else branch (sum < 0): x - 1, (x, x * x).
        got = self.infer_grpc("nested_branches", {"x": -x})
        for name, want in (("output0", -x - np.float32(1)), ("output1.0", -x),
                           ("output1.1", x * x)):
            np.testing.assert_array_equal(got[name], want, name)

    def test_tuple_parameter_grpc(self):
        self.ensure("tuple_input")
        meta = self.check_names("tuple_input")
        self.assertEqual(meta.properties["input.pair.1.path"], "pair[1]")
        inputs = {"pair.0": np.load(self.path("tuple_input.input.pair.0.npy")),
                  "pair.1": np.load(self.path("tuple_input.input.pair.1.npy")),
                  "scale": self.sample("tuple_input", "scale")}
        self.check_all_outputs("tuple_input", self.infer_grpc("tuple_input", inputs))

    def test_list_parameter_grpc(self):
        # forward(xs: List[Tensor], scale): the list travels as xs.0, xs.1, ...
        self.ensure("list_input")
        meta = self.check_names("list_input")
        self.assertEqual(meta.properties["input.xs.0.path"], "xs[0]")
        self.assertIn("xs: List[Tensor], sent as xs.0, xs.1", meta.properties["input.xs.0.list"])
        xs = [np.load(self.path(f"list_input.input.xs.{i}.npy")) for i in range(3)]
        scale = self.sample("list_input", "scale")
        inputs = {"scale": scale}
        inputs.update({f"xs.{i}": x for i, x in enumerate(xs)})
        self.check_all_outputs("list_input", self.infer_grpc("list_input", inputs))
        # Another length compiles its own plan; checked against the same saved elements.
        got = self.infer_grpc("list_input", {"xs.0": xs[0], "xs.1": xs[1], "scale": scale})
        self.assert_matches(got["output0"], np.concatenate(xs[:2]) * scale)
        self.assert_matches(got["output1"], xs[0] + xs[1])
        del inputs["xs.1"]
        self.assert_invalid(self.request("list_input", inputs), "missing input 'xs.1'",
                            "xs.0 ... xs.2")

    def test_optional_and_empty_list_parameter_grpc_and_cli(self):
        # forward(x, extra: Optional[List[Tensor]] = None) -> (x + sum(extra), len(extra)),
        # or (x * 2, -1) when extra is None.
        self.ensure("optional_list")
        meta = self.check_names("optional_list")
        self.assertIn("extra: Optional[List[Tensor]], sent as extra.0, extra.1",
                      meta.properties["input.extra.0.list"])
        self.assertIn("or whole as extra", meta.properties["input.extra.0.list"])
        self.assertEqual(meta.properties["input.extra.0.optional"], "true")
        x = self.sample("optional_list", "x")
        extra = [np.load(self.path(f"optional_list.input.extra.{i}.npy")) for i in range(3)]
        # Element by element, and the same list whole: both give libtorch's outputs.
        elements = {"x": x, **{f"extra.{i}": e for i, e in enumerate(extra)}}
        self.check_all_outputs("optional_list", self.infer_grpc("optional_list", elements))
        self.check_all_outputs("optional_list",
                               self.infer_grpc("optional_list", {"x": x, "extra": np.stack(extra)}))
        x_file = self.path("optional_list.input.x.npy")
        stacked = os.path.join(self.tmp, "extra_stacked.npy")
        np.save(stacked, np.stack(extra))
        self.check_all_outputs("optional_list",
                               self.infer_cli("optional_list", {"x": x_file, "extra": stacked}))
        # Left out: None.
        got = self.infer_grpc("optional_list", {"x": x})
        self.assert_matches(got["output0"], x * np.float32(2))
        self.assertEqual(int(got["output1"]), -1)
        # An empty list, sent whole with a zero first dim: the loop runs no iteration.
        for empty in (np.zeros((0, 2, 3), np.float32), np.zeros((0,), np.float32)):
            got = self.infer_grpc("optional_list", {"x": x, "extra": empty})
            self.assert_matches(got["output0"], x)
            self.assertEqual(int(got["output1"]), 0)
        out = self.kiln("infer", "optional_list", "--input", f"x={x_file}",
                        "--input", "extra=[]").stdout
        self.assertRegex(out, r"output1\s+INT64\s+\[\]\s+0\b")
        # Whole and as elements at once, and a 0-dim "list", are refused.
        self.assert_invalid(self.request("optional_list", {"x": x, "extra": np.stack(extra),
                                                           "extra.0": extra[0]}),
                            "given both whole ('extra') and as elements")
        self.assert_invalid(self.request("optional_list", {"x": x, "extra": np.float32(1)}),
                            "new first dim")
        # Empty elements cost no payload: a huge list of them is refused, and kilnd lives on.
        self.assert_invalid(self.request("optional_list",
                                         {"x": x, "extra": np.zeros((4000000000, 0), np.float32)}),
                            "a list of 4000000000 elements; at most 4096")
        self.check_all_outputs("optional_list", self.infer_grpc("optional_list", elements))

    def test_parameters_with_defaults_may_be_left_out_grpc_and_cli(self):
        # forward(x, scale: float = 2.5, n: int = 3, flag: bool = True) -> x * scale + n - flag
        self.ensure("defaults")
        meta = self.check_names("defaults")
        for arg, default in (("scale", "2.5"), ("n", "3"), ("flag", "True")):
            self.assertEqual(meta.properties[f"input.{arg}.default"], default)
            self.assertEqual(meta.properties[f"input.{arg}.optional"], "true")
        x = self.sample("defaults", "x")
        # Left out: libtorch's own output with the defaults.
        self.check_all_outputs("defaults", self.infer_grpc("defaults", {"x": x}))
        self.check_all_outputs("defaults", self.infer_cli("defaults", {"x": self.path(
            "defaults.input.x.npy")}))
        # Given, they win over the defaults.
        got = self.infer_grpc("defaults", {"x": x, "scale": np.array(0.5), "n": np.array(-4),
                                           "flag": np.array(False)})
        self.assert_matches(got["output0"], x * np.float32(0.5) - np.float32(4))
        got = self.infer_grpc("defaults", {"x": x, "flag": np.array(False)})
        self.assert_matches(got["output0"], x * np.float32(2.5) + np.float32(3))
        # kiln upload says how each input may be sent.
        out = self.upload("defaults", name="defaults_cli")
        self.assertRegex(out, r"input  scale FP64 \[1\]  \(default 2\.5\)")
        self.assertRegex(out, r"input  flag BOOL \[1\]  \(default True\)")
        out = self.upload("optional_list", name="optional_list_cli")
        self.assertIn("(optional; extra: Optional[List[Tensor]])", out)
        # A wrong type is still refused, not replaced by the default.
        self.assert_invalid(self.request("defaults", {"x": x, "n": np.array(1.5)}),
                            "input 'n': expected one INT64 value")

    def test_scripted_model_reports_names_without_suffixes(self):
        self.ensure("renamed")
        meta = self.check_names("renamed")
        self.assertEqual([t.name for t in meta.inputs], ["x", "y"])
        inputs = {a: self.sample("renamed", a) for a in ("x", "y")}
        self.check_all_outputs("renamed", self.infer_grpc("renamed", inputs))

    def test_metadata_names_match_forward_for_every_model(self):
        for model in self.manifest:
            with self.subTest(model=model):
                self.ensure(model)
                self.check_names(model)

    def test_config_overrides_names_datatypes_and_dims(self):
        config = {"inputs": [{"name": "scores", "datatype": "FP32", "dims": [-1, 5]},
                             {"name": "keep"}],
                  "outputs": [{"name": "total"}]}
        self.upload("bool_mask", name="bool_mask_named", config=config)
        meta = self.metadata("bool_mask_named")
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in meta.inputs],
                         [("scores", "FP32", [-1, 5]), ("keep", "BOOL", [-1])])
        self.assertEqual(meta.properties["input.keep.shape"], "any rank")
        self.assertEqual(meta.properties["input.scores.datatype"], "fixed (declared)")
        self.assertEqual(meta.properties["input.scores.shape"], "dynamic dim 0")
        self.assertEqual([t.name for t in meta.outputs], ["total"])
        values, mask = self.sample("bool_mask", "values"), self.sample("bool_mask", "mask")
        got = self.infer_grpc("bool_mask_named", {"scores": values, "keep": mask})
        self.assert_matches(got["total"], self.expected("bool_mask", "output0"))
        self.assert_invalid(self.request("bool_mask_named", {"values": values, "keep": mask}),
                            "unknown input 'values'", "scores, keep")

    # ------------------------------------------------------------------ validation

    def test_every_validation_error_names_the_input(self):
        config = {"inputs": [{"datatype": "FP32", "dims": [-1, 5]}, {"datatype": "BOOL"}]}
        self.upload("bool_mask", name="bool_mask_checked", config=config)
        name = "bool_mask_checked"
        values, mask = self.sample("bool_mask", "values"), self.sample("bool_mask", "mask")
        self.assert_invalid(self.request(name, {"values": values, "mask": mask, "nope": mask}),
                            "unknown input 'nope'", "values, mask")
        self.assert_invalid(self.request(name, {"values": values}),
                            "missing input 'mask'", "BOOL")
        req = self.request(name, {"values": values, "mask": mask})
        req.inputs.add(name="values", datatype="FP32", shape=list(values.shape))
        req.raw_input_contents.append(values.tobytes())
        self.assert_invalid(req, "input 'values' given twice")
        self.assert_invalid(self.request(name, {"values": values.astype(np.float64), "mask": mask}),
                            "input 'values': expected datatype FP32, got FP64 (FP32 is declared")
        self.assert_invalid(self.request(name, {"values": values[None], "mask": mask}),
                            "input 'values': expected shape FP32[-1, 5], got [1, 3, 5]")
        self.assert_invalid(self.request(name, {"values": values[:, :4], "mask": mask}),
                            "input 'values': expected shape FP32[-1, 5], got [3, 4]")
        req = self.request(name, {"values": values, "mask": mask})
        req.raw_input_contents[0] = values.tobytes()[:-4]
        self.assert_invalid(req, "input 'values'", "holds 56 bytes, expected 60")
        req = self.request(name, {"values": values, "mask": mask})
        req.inputs[1].contents.bool_contents.extend(mask.ravel().tolist())
        self.assert_invalid(req, "input 'mask'",
                            "contents must not be set when raw_input_contents is used")
        self.assert_invalid(self.request(name, {"values": values, "mask": mask}, outputs=["nope"]),
                            "unknown output 'nope'", "output0")
        # Nothing above hurt the model.
        got = self.infer_grpc(name, {"values": values, "mask": mask})
        self.assert_matches(got["output0"], self.expected("bool_mask", "output0"))

    # ------------------------------------------------------------------ dry run

    def test_dry_run_cli_reports_contract_and_stores_nothing(self):
        r = self.kiln("upload", self.path("dict_out.pt"), "--name", "dry_cli", "--dry-run")
        self.assertIn("dry run", r.stdout)
        contract = json.loads(r.stdout[r.stdout.index("{"):])
        self.assertTrue(contract["dry_run"])
        self.assertEqual([t["name"] for t in contract["inputs"]], ["x"])
        self.assertEqual([t["name"] for t in contract["outputs"]], ["logits", "probs"])
        self.assertEqual(contract["outputs"][0]["path"], "result['logits']")
        self.assertEqual(contract["fallback_ops"], [])
        self.assertFalse(os.path.exists(os.path.join(self.repo, "dry_cli")))
        ready = self.stub.ModelReady(self.pb.ModelReadyRequest(name="dry_cli"))
        self.assertFalse(ready.ready)

    def test_dry_run_load_grpc(self):
        with open(self.path("tiny_bert.pt"), "rb") as f:
            req = self.pb.RepositoryModelLoadRequest(model_name="dry_grpc")
            req.parameters["file:1/model.pt"].bytes_param = f.read()
            req.parameters["config"].string_param = json.dumps({"dry_run": True})
        _, call = self.stub.RepositoryModelLoad.with_call(req)
        trailers = dict(call.trailing_metadata())
        contract = json.loads(trailers["kiln-contract"])
        self.assertTrue(contract["dry_run"])
        self.assertEqual([(t["name"], t["datatype"], t["datatype_fixed"]) for t in contract["inputs"]],
                         [("input_ids", "INT64", True), ("attention_mask", "ANY", False)])
        self.assertIn("fallback_ops", contract)
        self.assertFalse(os.path.exists(os.path.join(self.repo, "dry_grpc")))
        with self.assertRaises(grpc.RpcError) as ctx:
            self.metadata("dry_grpc")
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND)
        # A real load answers with the contract too.
        req.parameters["config"].string_param = "{}"
        _, call = self.stub.RepositoryModelLoad.with_call(req)
        contract = json.loads(dict(call.trailing_metadata())["kiln-contract"])
        self.assertFalse(contract["dry_run"])
        self.assertTrue(self.stub.ModelReady(self.pb.ModelReadyRequest(name="dry_grpc")).ready)

    def test_dry_run_of_a_broken_model_fails(self):
        r = self.kiln("upload", os.path.join(e2e.FIXTURES, "corrupt.pt"), "--name", "dry_broken",
                      "--dry-run", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(self.repo, "dry_broken")))
        self.assertTrue(self.server.alive())


if __name__ == "__main__":
    unittest.main()
