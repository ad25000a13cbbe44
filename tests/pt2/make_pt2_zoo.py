"""Writes the torchvision zoo as torch.export (.pt2) archives with a dynamic batch, run by torch
2.14 in the Debian sid chroot (scripts/make-pt2-fixtures.sh with KILN_PT2_GENERATOR naming this
file; `make test-zoo-pt2`). The models are gen_zoo.py's: every CLASSIFIERS builder and the
SEGMENTATION models (their dict result as it is: the output is named "out"), random seeded
weights, BatchNorm calibrated as gen_zoo.py does.

    python3 make_pt2_zoo.py OUT_DIR [NAME ...]

Per model: OUT_DIR/NAME.pt2, exported with Dim("batch") on the image, and at batch 1 and 2
OUT_DIR/NAME/case<k>/in.<input>.npy, out.<output>.npy (torch's float32 outputs of the eager
module, which torch.export traced) and out.<output>.f64.npy (the same module in float64, the
arbiter run_zoo.py uses when two float32 implementations differ by rounding). A model
torch.export refuses is listed in the manifest with the error. The manifest is rewritten after
every model, and a model already written (OUT_DIR/NAME.json, its entry) is skipped: an
interrupted run resumes; delete NAME.json to write NAME again."""
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
from torch.export import Dim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gen_zoo.py, torch_fixtures.py
for extra in (("..", "parity"), ("..", "support")):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), *extra))
from gen_zoo import CLASSIFIERS, SEGMENTATION, build  # noqa: E402

BATCHES = (1, 2)


def flat_outputs(result):
    if isinstance(result, torch.Tensor):
        return [("output0", result)]
    if isinstance(result, dict):
        return [(k, v) for k, v in result.items()]
    return [(f"output{i}", v) for i, v in enumerate(result)]


def write(out_dir, name, index):
    torch.manual_seed(index)
    model, shape, _ = build(name)
    if name in SEGMENTATION:
        model = model.model  # the torchvision module itself: a dict result
    model.eval()
    size = shape[-1]
    entry = {"name": name, "file": name + ".pt2", "cases": []}
    start = time.time()
    with torch.no_grad():
        example = torch.randn(2, 3, size, size)
        ep = torch.export.export(model, (example,),
                                 dynamic_shapes=({0: Dim("batch", min=1, max=64)},))
        torch.export.save(ep, os.path.join(out_dir, name + ".pt2"))
        entry["export_s"] = round(time.time() - start, 1)
        arg = model.forward.__code__.co_varnames[1]
        cases = [torch.randn(b, 3, size, size) for b in BATCHES]
        outs = [flat_outputs(model(x)) for x in cases]
        model64 = model.double()
        outs64 = [flat_outputs(model64(x.double())) for x in cases]
    for k, (x, out, out64) in enumerate(zip(cases, outs, outs64)):
        case_dir = os.path.join(out_dir, name, f"case{k}")
        os.makedirs(case_dir, exist_ok=True)
        np.save(os.path.join(case_dir, f"in.{arg}.npy"), x.numpy())
        case = {"inputs": {arg: f"{name}/case{k}/in.{arg}.npy"}, "outputs": {}, "float64": {}}
        for (o, t), (_, t64) in zip(out, out64):
            np.save(os.path.join(case_dir, f"out.{o}.npy"), t.numpy())
            np.save(os.path.join(case_dir, f"out.{o}.f64.npy"), t64.numpy())
            case["outputs"][o] = f"{name}/case{k}/out.{o}.npy"
            case["float64"][o] = f"{name}/case{k}/out.{o}.f64.npy"
        entry["cases"].append(case)
    return entry


def main():
    out_dir = sys.argv[1]
    only = sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "manifest.json")
    done = {}  # NAME.json: the manifest entry of a model written by an earlier run
    for name in CLASSIFIERS + SEGMENTATION:
        if os.path.exists(os.path.join(out_dir, name + ".json")):
            done[name] = json.load(open(os.path.join(out_dir, name + ".json")))
    names = only or CLASSIFIERS + SEGMENTATION
    manifest = {"torch": torch.__version__, "models": []}
    for index, name in enumerate(CLASSIFIERS + SEGMENTATION):
        if name not in names:
            if name in done:  # written by an earlier run: kept in the manifest
                manifest["models"].append(done[name])
            continue
        start = time.time()
        entry = done.get(name)
        if entry is None or "export_error" in entry:
            try:
                entry = write(out_dir, name, index)
            except Exception as e:  # torch.export refuses it (or the model cannot be built)
                entry = {"name": name, "export_error": f"{type(e).__name__}: {str(e)[:400]}"}
                traceback.print_exc()
            with open(os.path.join(out_dir, name + ".json"), "w") as f:
                json.dump(entry, f, indent=1)
        manifest["models"].append(entry)
        with open(path + ".partial", "w") as f:
            json.dump(manifest, f, indent=1)
        state = "refused by torch.export" if "export_error" in entry else "wrote"
        print(f"{name}: {state} ({time.time() - start:.1f} s)", flush=True)
    with open(path + ".partial", "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(path + ".partial", path)


if __name__ == "__main__":
    main()
