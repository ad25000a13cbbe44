"""What every fixture generator does with python3-torch: save a module, run the saved archive.

The expected outputs of every test come from libtorch running exactly the file Kiln imports
(torch.jit.load of the saved archive), never from the eager module.
"""
import torch
import torch.nn as nn


def save_and_run(module, path, inputs):
    """Saves `module` (scripted or traced) to `path`, loads the archive back and runs it in eval
    mode without autograd on `inputs` (in forward() order; tensors are cloned, so a model that
    writes its inputs in place leaves the caller's alone). Returns libtorch's result."""
    module.save(path)
    loaded = torch.jit.load(path).eval()
    with torch.no_grad():
        return loaded(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])


def flatten_outputs(out):
    """A result's tensors in order, tuples and lists flattened; anything else is a TypeError."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        flat = []
        for o in out:
            flat.extend(flatten_outputs(o))
        return flat
    raise TypeError(f"output of type {type(out).__name__} is not a tensor")


def calibrate_batchnorm(model, shape, batches=2):
    """Sets BatchNorm running statistics from `batches` random batches of `shape`; returns the
    model in eval mode.

    With its initial statistics (mean 0, var 1) a randomly initialized mobilenet_v2 shrinks
    activations ~10x per block and its logits end near 1e-9, which would make any numeric
    comparison vacuous. Calibrated statistics keep activations O(1) all the way through, as in
    a trained network.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(*shape))
    return model.eval()
