"""The benchmark's code that runs inside the Debian trixie chroot (Python 3.13, onnxruntime 1.21,
torch 2.6), started by peer_bench.py as `chroot DIR python3 chroot_worker.py ...`.

    chroot_worker.py ort MODEL.onnx THREADS
        A worker with kiln-bench's protocol (see bench.cc): prints "ready", then answers
        `input DTYPE D0,D1,... PATH`, `run` (prints the elapsed ms of one session.run) and
        `save PATH` (writes the first output as raw float32) on stdin. The session has
        intra_op_num_threads=THREADS, inter_op_num_threads=1 and session.intra_op.allow_spinning=0,
        so its idle threads sleep instead of taking the cores from the next engine timed.
    chroot_worker.py flops MODEL.pt DTYPE D0,D1,...
        Prints the FLOP count of one call of the TorchScript file on a zero input of that shape, as
        torch.utils.flop_counter.FlopCounterMode counts it (2 per multiply-add of convolution,
        mm/addmm/bmm and attention; elementwise ops, norms and pooling are not counted).
"""
import sys
import time

import numpy as np

DTYPES = {"f32": np.float32, "i64": np.int64}


def ort_worker(model, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    feed = None
    print("ready", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "input":
            dtype, dims, path = args
            shape = [int(d) for d in dims.split(",")]
            feed = {input_name: np.fromfile(path, dtype=DTYPES[dtype]).reshape(shape)}
            print("ok", flush=True)
        elif command == "run":
            t0 = time.perf_counter()
            session.run(None, feed)
            print(f"{(time.perf_counter() - t0) * 1e3:.4f}", flush=True)
        elif command == "save":
            session.run(None, feed)[0].astype(np.float32).tofile(args[0])
            print("ok", flush=True)
        else:
            print(f"error: unknown command: {line.strip()}", flush=True)
            return 1
    return 0


def flops(model, dtype, dims):
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    module = torch.jit.load(model).eval()
    shape = [int(d) for d in dims.split(",")]
    x = torch.zeros(shape, dtype=torch.int64 if dtype == "i64" else torch.float32)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        module(x)
    print(counter.get_total_flops())
    return 0


def main():
    mode, *args = sys.argv[1:]
    if mode == "ort":
        return ort_worker(args[0], int(args[1]))
    if mode == "flops":
        return flops(*args)
    sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main())
