#!/usr/bin/env python3
"""Talks to kilnd with stock grpcio and stubs generated from Kiln's own proto.

    python3 client/python/kiln_client_example.py --server 127.0.0.1:8001 \
        --model resnet18 [--upload model.pt] [--input x=input.npy]

Uploads a model (optional), prints its metadata, runs one inference on the
given .npy inputs (or zeros of the advertised shape, -1 dims taken as 1) and
prints each output's name, datatype, shape and first values.
"""
import argparse
import os
import sys
import tempfile

import grpc
import numpy as np
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "..", "proto")

NP_OF = {"FP32": np.float32, "FP64": np.float64, "FP16": np.float16, "INT64": np.int64,
         "INT32": np.int32, "INT16": np.int16, "INT8": np.int8, "UINT8": np.uint8,
         "BOOL": np.bool_}
NAME_OF = {np.dtype(v): k for k, v in NP_OF.items()}


def load_stubs():
    """Generates the Python stubs into a temporary directory and imports them."""
    out = tempfile.mkdtemp(prefix="kiln-stubs-")
    rc = protoc.main(["protoc", f"-I{PROTO_ROOT}", f"--python_out={out}",
                      f"--grpc_python_out={out}", "inference/grpc_service.proto"])
    if rc != 0:
        sys.exit("protoc failed")
    sys.path.insert(0, out)
    from inference import grpc_service_pb2, grpc_service_pb2_grpc  # noqa: E402
    return grpc_service_pb2, grpc_service_pb2_grpc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.environ.get("KILN_SERVER", "127.0.0.1:8001"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--upload", help="TorchScript file to upload first")
    ap.add_argument("--input", action="append", default=[], help="NAME=FILE.npy")
    ap.add_argument("--expect", help="an .npy the first output must match (rtol 1e-4)")
    args = ap.parse_args()

    pb, pb_grpc = load_stubs()
    opts = [("grpc.max_send_message_length", 1 << 30), ("grpc.max_receive_message_length", 1 << 30)]
    stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(args.server, options=opts))

    if args.upload:
        with open(args.upload, "rb") as f:
            req = pb.RepositoryModelLoadRequest(model_name=args.model)
            req.parameters["file:1/model.pt"].bytes_param = f.read()
            req.parameters["config"].string_param = "{}"
        stub.RepositoryModelLoad(req)

    meta = stub.ModelMetadata(pb.ModelMetadataRequest(name=args.model))
    for t in meta.inputs:
        print(f"input  {t.name} {t.datatype} {list(t.shape)}")
    for t in meta.outputs:
        print(f"output {t.name} {t.datatype} {list(t.shape)}")

    given = dict(kv.split("=", 1) for kv in args.input)
    req = pb.ModelInferRequest(model_name=args.model, id="python-example")
    for t in meta.inputs:
        if t.name in given:
            arr = np.load(given[t.name])
        else:
            # An "ANY" datatype is open: the model compiles for what the request
            # brings, so zeros of float32 are as good a guess as any.
            arr = np.zeros([d if d > 0 else 1 for d in t.shape],
                           dtype=NP_OF.get(t.datatype, np.float32))
        arr = np.ascontiguousarray(arr)
        tensor = req.inputs.add(name=t.name, datatype=NAME_OF[arr.dtype], shape=list(arr.shape))
        req.raw_input_contents.append(arr.tobytes())
    resp = stub.ModelInfer(req)
    first = None
    for out, raw in zip(resp.outputs, resp.raw_output_contents):
        arr = np.frombuffer(raw, dtype=NP_OF[out.datatype]).reshape(list(out.shape))
        first = arr if first is None else first
        print(f"result {out.name} {out.datatype} {list(arr.shape)} {arr.ravel()[:5]}")
    if args.expect:
        want = np.load(args.expect)
        if not np.allclose(first, want, rtol=1e-4, atol=1e-5):
            print(f"MISMATCH: max abs diff {np.abs(first - want).max()}")
            return 1
        print("matches expected output")
    return 0


if __name__ == "__main__":
    sys.exit(main())
