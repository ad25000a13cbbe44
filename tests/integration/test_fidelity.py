"""Fidelity (issue 17) end to end: the real kilnd on a loopback port, models uploaded with
the real `kiln` CLI, requests over stock grpcio. Models from fidelity_models.py, generated
at test time; every input of every model is fed at other legal datatypes and ranks than
the model was traced with, and Kiln must answer as libtorch does for the same file (the
output's datatype, then its shape, then its values), or refuse where libtorch refuses.

  - The input contract states only what the model fixes: a softmax, matmul or reduction
    of the inputs themselves takes float64, float16 and integer inputs; a Linear any
    leading dims; attention and a transformer layer sequence-first; x[m] a bool mask.
  - A kernel that refuses a signature at compile time (a functional linear with a 1-D
    weight, bitwise ops on integer dtypes its kernel lacks, a bool mask index) sends that
    node to the libtorch fallback for that signature; the metadata counts it.
  - Reductions give PyTorch's datatypes (any/all of uint8 are UINT8).
  - torchvision's operators import and run: nms and roi_align on Kiln's kernels (not in
    the model's fallback_ops), deform_conv2d through the fallback.
  - A TransformerEncoder traced under no_grad with a padding mask (fused layers on nested
    tensors) runs natively, including PyTorch's trimming of the output to the longest
    sequence.
"""
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


class FidelityTest(unittest.TestCase):
    kiln = e2e.EndToEndTest.kiln  # the CLI runner of the end-to-end test

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-fidelity-")
        cls.models = os.path.join(cls.tmp, "fidelity")
        subprocess.run([sys.executable, os.path.join(HERE, "fidelity_models.py"), cls.models],
                       check=True, capture_output=True, timeout=600)
        with open(os.path.join(cls.models, "manifest.json")) as f:
            cls.manifest = json.load(f)
        cls.repo = os.path.join(cls.tmp, "models")
        os.makedirs(cls.repo)
        cls.server = e2e.Kilnd(cls.repo)
        cls.pb, pb_grpc = kiln_client_example.load_stubs()
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def upload(self, model):
        self.kiln("upload", os.path.join(self.models, f"{model}.pt"), "--name", model)

    def infer(self, model, inputs):
        req = self.pb.ModelInferRequest(model_name=model)
        for arg, value in inputs.items():
            req.inputs.add(name=arg, datatype=NAME_OF[value.dtype], shape=list(value.shape))
            req.raw_input_contents.append(np.ascontiguousarray(value).tobytes())
        resp = self.stub.ModelInfer(req)
        return [(out.datatype, list(out.shape),
                 np.frombuffer(raw, NP_OF[out.datatype]).reshape(list(out.shape)))
                for out, raw in zip(resp.outputs, resp.raw_output_contents)]

    def assert_like_libtorch(self, where, got, want):
        """Datatype, then shape, then values: integers and bools equal, floats close."""
        datatype, shape, value = got
        self.assertEqual(datatype, NAME_OF[want.dtype], f"{where}: datatype")
        self.assertEqual(shape, list(want.shape), f"{where}: shape")
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(value, want, err_msg=where)
        else:
            tol = {np.dtype(np.float64): 1e-6, np.dtype(np.float16): 4e-3}.get(want.dtype, 1e-4)
            w = want.astype(np.float64)
            scale = max(float(np.max(np.abs(w))) if w.size else 0.0, 1e-12)
            err = float(np.max(np.abs(value.astype(np.float64) - w))) if w.size else 0.0
            self.assertLessEqual(err / scale, tol, f"{where}: relative error")

    def check_model(self, model):
        """Every variant answered as libtorch answers it, or refused as libtorch refuses it."""
        self.upload(model)
        entry = self.manifest[model]
        self.assertTrue(entry["variants"])
        for k, variant in enumerate(entry["variants"]):
            where = f"{model} variant {k} ({variant['signature']})"
            inputs = {arg: np.load(os.path.join(self.models, file))
                      for arg, file in variant["inputs"].items()}
            if variant["error"] is not None:
                with self.assertRaises(grpc.RpcError, msg=f"{where}: libtorch refuses it") as ctx:
                    self.infer(model, inputs)
                self.assertIn(ctx.exception.code(),
                              (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED),
                              f"{where}: {ctx.exception.details()}")
                self.assertTrue(ctx.exception.details(), where)
                continue
            try:
                got = self.infer(model, inputs)
            except grpc.RpcError as e:
                self.fail(f"{where}: libtorch answers it, Kiln says {e.code()}: {e.details()}")
            wants = [np.load(os.path.join(self.models, f)) for f in variant["outputs"]]
            self.assertEqual(len(got), len(wants), where)
            for j, (g, w) in enumerate(zip(got, wants)):
                self.assert_like_libtorch(f"{where} output {j}", g, w)
        # kilnd is still up and serving.
        self.assertTrue(self.stub.ServerLive(self.pb.ServerLiveRequest()).live)

    def metadata(self, model):
        return self.stub.ModelMetadata(self.pb.ModelMetadataRequest(name=model))

    # ------------------------------------------------------------------ the contract

    def test_softmax_of_the_input_takes_any_float_and_refuses_int64_like_libtorch(self):
        self.check_model("softmax_of_input")
        meta = self.metadata("softmax_of_input")
        self.assertEqual(meta.properties["input.x.datatype"], "open")
        self.assertEqual(meta.properties["input.x.shape"], "any rank")

    def test_matmul_of_inputs_at_float64_and_integer_dtypes(self):
        self.check_model("matmul_of_inputs")

    def test_mean_and_sum_at_float64_float16_and_int64(self):
        self.check_model("mean_and_sum")

    def test_reductions_give_pytorch_datatypes(self):
        self.check_model("reductions_of_uint8")

    def test_linear_takes_any_leading_dims_and_its_weight_fixes_the_dtype(self):
        self.check_model("linear_any_leading_dims")
        meta = self.metadata("linear_any_leading_dims")
        self.assertEqual(meta.properties["input.input.datatype"], "fixed (implied)")
        self.assertEqual(meta.inputs[0].datatype, "FP32")
        self.assertEqual(meta.properties["input.input.shape"], "any leading dims, then [4]")
        self.assertEqual(list(meta.inputs[0].shape), [-1, 4])

    def test_attention_sequence_first(self):
        self.check_model("attention_sequence_first")

    def test_transformer_layer_sequence_first(self):
        self.check_model("transformer_layer_sequence_first")

    def test_bool_mask_index_is_not_taken_for_integer_indices(self):
        self.check_model("mask_index")
        self.assertEqual(self.metadata("mask_index").properties["input.m.datatype"], "open")

    # ------------------------------------------------------------------ compile-time fallback

    def test_prepare_refusal_runs_through_libtorch_and_is_counted(self):
        self.check_model("linear_1d_weight")
        props = self.metadata("linear_1d_weight").properties
        self.assertIn("aten::linear (", props.get("fallback_ops.per_signature", ""), props)

    def test_bitwise_and_on_every_integer_dtype(self):
        self.check_model("bitwise_and_integers")

    # ------------------------------------------------------------------ torchvision's operators

    def fallback_ops(self, model):
        """The ops the model runs through libtorch (the metadata's fallback_ops property)."""
        ops = self.metadata(model).properties.get("fallback_ops", "")
        return set(filter(None, ops.split(",")))

    def test_torchvision_nms(self):
        self.check_model("torchvision_nms")
        self.assertEqual(self.fallback_ops("torchvision_nms"), set())

    def test_torchvision_roi_align(self):
        self.check_model("torchvision_roi_align")
        self.assertEqual(self.fallback_ops("torchvision_roi_align"), set())

    def test_torchvision_deform_conv2d(self):
        self.check_model("torchvision_deform_conv2d")
        self.assertIn("torchvision::deform_conv2d", self.fallback_ops("torchvision_deform_conv2d"))

    # ------------------------------------------------------------------ PyTorch's fast paths

    def test_encoder_fast_path_on_nested_tensors_runs_natively(self):
        self.check_model("encoder_fast_path_norm_first_false")
        self.assertEqual(self.fallback_ops("encoder_fast_path_norm_first_false"), set())

    def test_encoder_fast_path_norm_first_runs_natively(self):
        self.check_model("encoder_fast_path_norm_first_true")
        self.assertEqual(self.fallback_ops("encoder_fast_path_norm_first_true"), set())


if __name__ == "__main__":
    unittest.main()
