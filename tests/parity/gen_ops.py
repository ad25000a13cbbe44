#!/usr/bin/python3
"""Writes the single-op parity cases into the directory given as argv[1].

Each case is a tiny module around one aten op (or one idiom that real models
write, such as `x[:, idx]` or `F.normalize`), traced or scripted, saved as
<case>.pt next to its sample inputs <case>.input.<i>.npy and the outputs that
libtorch computes for the saved file, <case>.output<i>.npy. manifest.json lists
every case with its family, the input dtypes and shapes (so the runner can
declare them in the load config) and the number of outputs.

Cases are seeded and deterministic. Inputs are chosen inside each op's domain
(positive values for log and sqrt, distinct values for sort and topk) so that
the comparison measures Kiln's arithmetic, not NaN placement.
"""
import json
import os
import sys

import numpy as np
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from torch_fixtures import flatten_outputs, save_and_run  # noqa: E402

CASES = []  # (family, name, module factory, inputs factory, mode)
# The modules below are built as the table is read: seeded, so their weights (and the
# expected outputs) are the same on every run.
torch.manual_seed(0)


class Fn(nn.Module):
    """Wraps a function of tensors so that it can be traced."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def case(family, name, fn, *inputs, mode="trace"):
    """Registers a traced case for `fn` (a function or an nn.Module) on `inputs` (callables)."""
    CASES.append((family, name, fn, inputs, mode))


def scripted(family, name, module_cls, *inputs):
    CASES.append((family, name, module_cls, inputs, "script"))


def cases(family, rows):
    """Registers traced cases given as (name, fn, *inputs) rows."""
    for name, fn, *inputs in rows:
        case(family, name, fn, *inputs)


# ---------------------------------------------------------------- input makers


def randn(*shape):
    return lambda: torch.randn(*shape)


def pos(*shape, lo=0.1, hi=3.0):
    return lambda: torch.rand(*shape) * (hi - lo) + lo


def distinct(*shape):
    """A random permutation of distinct values (no ties for sort, topk, argmax)."""
    return lambda: (torch.randperm(int(np.prod(shape))).float() / 7.0 - 3.0).reshape(*shape)


def ints(*shape, lo=0, hi=10):
    return lambda: torch.randint(lo, hi, shape, dtype=torch.int64)


def typed(dtype, *shape, lo=0, hi=10):
    return lambda: torch.randint(lo, hi, shape).to(dtype)


def mask(*shape, p=0.5):
    return lambda: torch.rand(*shape) < p


# ---------------------------------------------------------------- elementwise

X = (2, 3, 4, 5)
cases("elementwise", [
    ("neg", torch.neg, randn(*X)),
    ("abs", torch.abs, randn(*X)),
    ("sqrt", torch.sqrt, pos(*X)),
    ("rsqrt", torch.rsqrt, pos(*X)),
    ("exp", torch.exp, randn(*X)),
    ("log", torch.log, pos(*X)),
    ("log2", torch.log2, pos(*X)),
    ("log10", torch.log10, pos(*X)),
    ("log1p", torch.log1p, pos(*X)),
    ("expm1", torch.expm1, randn(*X)),
    ("reciprocal", torch.reciprocal, pos(*X)),
    ("floor", lambda x: torch.floor(x * 3), randn(*X)),
    ("ceil", lambda x: torch.ceil(x * 3), randn(*X)),
    ("round", lambda x: torch.round(x * 3), randn(*X)),
    ("trunc", lambda x: torch.trunc(x * 3), randn(*X)),
    ("erf", torch.erf, randn(*X)),
    ("sign", torch.sign, randn(*X)),
    ("sign_bool", torch.sign, mask(*X)),
    ("sin", torch.sin, randn(*X)),
    ("cos", torch.cos, randn(*X)),
    ("square", torch.square, randn(*X)),
    ("pow_scalar2", lambda x: x ** 2, randn(*X)),
    ("pow_scalar_half", lambda x: torch.pow(x, 0.5), pos(*X)),
    ("pow_scalar3", lambda x: x.pow(3), randn(*X)),
    ("pow_tensor", torch.pow, pos(*X), randn(1, 3, 1, 5)),
    ("pow_scalar_base", lambda x: 2.0 ** x, randn(*X)),
    ("rsub", lambda x: 1 - x, randn(*X)),
    ("rsub_tensor", lambda x, y: torch.rsub(x, y, alpha=2), randn(*X), randn(5)),
    ("clamp", lambda x: torch.clamp(x, -0.5, 0.7), randn(*X)),
    ("clamp_min", lambda x: x.clamp(min=0.1), randn(*X)),
    ("clamp_max", lambda x: torch.clamp_max(x, 0.2), randn(*X)),
    ("clamp_inplace", lambda x: (x * 1).clamp_(-1, 1), randn(*X)),
    ("add_broadcast", lambda x, y: x + y, randn(*X), randn(3, 1, 5)),
    ("add_alpha", lambda x, y: torch.add(x, y, alpha=0.5), randn(*X), randn(*X)),
    ("sub_alpha_inplace", lambda x, y: (x * 1).sub_(y, alpha=2), randn(*X), randn(4, 5)),
    ("mul_scalar", lambda x: x * 2.5, randn(*X)),
    ("div_broadcast", lambda x, y: x / y, randn(*X), pos(4, 1)),
    ("div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor"), randn(*X), pos(*X)),
    ("div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc"), randn(*X), pos(*X)),
    # Integers stay integers, rounded toward zero (negative numerators included).
    ("div_trunc_int64", lambda x, y: torch.div(x - 5, y, rounding_mode="trunc"), ints(3, 4),
     ints(3, 4, lo=1, hi=4)),
    # Integer tensors through the unary float ops compute in float32 (PyTorch's promotion);
    # rounding ops and relu keep them integers.
    ("sqrt_int64", lambda x: torch.sqrt(x), ints(3, 4, hi=50)),
    ("exp_int32", lambda x: torch.exp(x.int() - 3), ints(3, 4, hi=6)),
    ("sigmoid_bool", lambda x: torch.sigmoid(x > 4), ints(3, 4)),
    ("floor_int64", lambda x: torch.floor(x - 5) * 2, ints(3, 4)),
    ("relu_int64", lambda x: torch.relu(x - 5), ints(3, 4)),
    # Integer powers stay integers (int32 wraps on overflow, as in PyTorch); a float
    # exponent gives float32.
    ("pow_int64", lambda x, y: (x - 5) ** 2 + x ** y, ints(3, 4), ints(3, 4, hi=4)),
    ("pow_int32_wraps", lambda x: (x.int() + 20) ** 9, ints(3, 4)),
    ("pow_int64_float_exponent", lambda x: x ** 0.5, ints(3, 4)),
    # clamp of token ids: integer bounds keep int64, a float bound gives float32.
    ("clamp_int64", lambda x: torch.clamp(x - 5, 0, 3) + x.clamp(max=4), ints(3, 4)),
    ("clamp_int64_float_bound", lambda x: torch.clamp(x, 0.5, 6.5), ints(3, 4)),
    # isnan of integers is all False; float64 isnan in double; neg wraps on uint8.
    ("isnan_int64_f64", lambda x: torch.isnan(x) | torch.isnan(torch.log(x.double() - 5)),
     ints(3, 4)),
    ("neg_abs_sign_uint8", lambda x: torch.neg(x.to(torch.uint8)) + torch.abs(x.to(torch.uint8))
     * torch.sign(x.to(torch.uint8)), ints(3, 4)),
    ("div_floor_int64", lambda x, y: torch.div(x - 5, y, rounding_mode="floor"), ints(3, 4),
     ints(3, 4, lo=1, hi=4)),
    ("floor_divide", lambda x: torch.floor_divide(x * 5, 2.0), randn(*X)),
    ("remainder_scalar", lambda x: torch.remainder(x * 5, 1.5), randn(*X)),
    ("remainder_tensor", lambda x, y: x % y, randn(*X), pos(*X)),
    ("fmod", lambda x: torch.fmod(x * 5, 1.5), randn(*X)),
    ("maximum", torch.maximum, randn(*X), randn(4, 5)),
    ("minimum", torch.minimum, randn(*X), randn(*X)),
    ("max_other", lambda x, y: torch.max(x, y), randn(*X), randn(*X)),
    ("addcmul", lambda x, y, z: torch.addcmul(x, y, z, value=0.5), randn(*X), randn(*X),
     randn(*X)),
    ("addcdiv", lambda x, y, z: torch.addcdiv(x, y, z, value=2), randn(*X), randn(*X),
     pos(*X)),
    ("lerp", lambda x, y: torch.lerp(x, y, 0.3), randn(*X), randn(*X)),
    ("exp_inplace", lambda x: (x * 1).exp_(), randn(*X)),
    ("add_int64", lambda x, y: x + y * 2, ints(3, 4), ints(4)),
    ("mul_int64", lambda x: x * 3 - 1, ints(3, 4)),
    ("atan2", torch.atan2, randn(*X), randn(*X)),
    ("tan", lambda x: torch.tan(x * 0.5), randn(*X)),
    ("asin", lambda x: torch.asin(x * 0.3), randn(*X)),
    ("atan", torch.atan, randn(*X)),
    ("sinh", torch.sinh, randn(*X)),
    ("frac", lambda x: torch.frac(x * 3), randn(*X)),
])

# ---------------------------------------------------------------- comparison and selection

cases("comparison", [
    ("eq", lambda x, y: x == y, lambda: torch.randint(0, 3, X).float(),
     lambda: torch.randint(0, 3, (4, 5)).float()),
    ("ne_scalar", lambda x: x != 1.0, lambda: torch.randint(0, 3, X).float()),
    ("lt", torch.lt, randn(*X), randn(*X)),
    ("le_scalar", lambda x: x <= 0.25, randn(*X)),
    ("gt", lambda x, y: x > y, randn(*X), randn(5)),
    ("ge_scalar", lambda x: x >= -0.1, randn(*X)),
    ("eq_int64", lambda x, y: x == y, ints(3, 4, hi=3), ints(3, 4, hi=3)),
    ("where", torch.where, mask(*X), randn(*X), randn(*X)),
    ("where_broadcast", torch.where, mask(4, 5), randn(*X), randn(1, 5)),
    ("where_scalar", lambda m, x: torch.where(m, x, torch.zeros_like(x)), mask(*X), randn(*X)),
    ("where_from_compare", lambda x: torch.where(x > 0, x, x * 0.1), randn(*X)),
    ("masked_fill", lambda x, m: x.masked_fill(m, -1e4), randn(*X), mask(*X)),
    ("masked_fill_broadcast", lambda x, m: x.masked_fill(m, 3.0), randn(*X), mask(4, 5)),
    ("masked_fill_inplace", lambda x: (x * 1).masked_fill_(x > 0.5, 0.0), randn(*X)),
    ("logical_not", lambda m: torch.logical_not(m), mask(*X)),
    ("logical_and", lambda a, b: a & b, mask(*X), mask(*X)),
    ("logical_or", lambda a, b: torch.logical_or(a, b), mask(*X), mask(4, 5)),
    ("logical_xor", lambda a, b: a ^ b, mask(*X), mask(*X)),
    ("isnan", lambda x: torch.isnan(torch.log(x)), randn(*X)),
    ("mask_to_float", lambda x: (x > 0).float() * x, randn(*X)),
])

# ---------------------------------------------------------------- activations

cases("activation", [
    ("relu", F.relu, randn(*X)),
    ("relu6", nn.ReLU6(), lambda: torch.randn(*X) * 5),
    ("leaky_relu", nn.LeakyReLU(0.2), randn(*X)),
    ("leaky_relu_inplace", nn.Sequential(nn.Identity(), nn.LeakyReLU(0.1, inplace=True)),
     randn(*X)),
    ("elu", nn.ELU(alpha=0.7), randn(*X)),
    ("selu", nn.SELU(), randn(*X)),
    ("celu", nn.CELU(alpha=1.5), randn(*X)),
    ("gelu", nn.GELU(), randn(*X)),
    ("gelu_tanh", nn.GELU(approximate="tanh"), randn(*X)),
    ("silu", nn.SiLU(), randn(*X)),
    ("mish", nn.Mish(), randn(*X)),
    ("hardswish", nn.Hardswish(), lambda: torch.randn(*X) * 4),
    ("hardsigmoid", nn.Hardsigmoid(), lambda: torch.randn(*X) * 4),
    ("hardtanh", nn.Hardtanh(-2.0, 1.5), lambda: torch.randn(*X) * 3),
    ("softplus", nn.Softplus(), randn(*X)),
    # float64 through the rarer activations (double functors, as PyTorch computes them).
    ("hardswish_f64", lambda x: nn.functional.hardswish(x.double() * 4), randn(*X)),
    ("elu_mish_f64", lambda x: nn.functional.mish(nn.functional.elu(x.double(), 0.7)), randn(*X)),
    ("softplus_shrink_f64",
     lambda x: nn.functional.softshrink(nn.functional.softplus(x.double(), 2.0), 0.3), randn(*X)),
    ("softplus_beta", nn.Softplus(beta=2.0, threshold=3.0), lambda: torch.randn(*X) * 3),
    ("sigmoid", torch.sigmoid, randn(*X)),
    ("tanh", torch.tanh, randn(*X)),
    ("logsigmoid", nn.LogSigmoid(), lambda: torch.randn(*X) * 5),
    ("softsign", nn.Softsign(), randn(*X)),
    ("tanhshrink", nn.Tanhshrink(), randn(*X)),
    ("hardshrink", nn.Hardshrink(0.3), randn(*X)),
    ("softshrink", nn.Softshrink(0.3), randn(*X)),
    ("threshold", nn.Threshold(0.1, -2.0), randn(*X)),
    ("prelu", nn.PReLU(3), randn(*X)),
    ("prelu_single", nn.PReLU(), randn(*X)),
    ("glu", nn.GLU(dim=1), randn(2, 6, 4)),
    ("softmin", nn.Softmin(dim=1), randn(*X)),
])

# ---------------------------------------------------------------- reductions

cases("reduction", [
    ("sum_all", torch.sum, randn(*X)),
    ("sum_dim", lambda x: x.sum(1), randn(*X)),
    ("sum_dims_keepdim", lambda x: x.sum((1, 3), keepdim=True), randn(*X)),
    ("sum_neg_dim", lambda x: torch.sum(x, -1), randn(*X)),
    ("mean_all", torch.mean, randn(*X)),
    ("mean_dims", lambda x: x.mean((0, 2)), randn(*X)),
    ("amax", lambda x: torch.amax(x, dim=(1, 2)), randn(*X)),
    ("amin_keepdim", lambda x: torch.amin(x, dim=-1, keepdim=True), randn(*X)),
    ("max_all", torch.max, randn(*X)),
    ("min_all", torch.min, randn(*X)),
    ("max_dim", lambda x: torch.max(x, 1), distinct(*X)),
    ("max_dim_keepdim", lambda x: x.max(dim=-1, keepdim=True)[0], distinct(*X)),
    ("min_dim", lambda x: torch.min(x, 2), distinct(*X)),
    ("prod_dim", lambda x: torch.prod(x, 1), pos(*X, lo=0.5, hi=1.5)),
    ("prod_all", torch.prod, pos(2, 3, 4, lo=0.8, hi=1.2)),
    ("argmax", lambda x: torch.argmax(x, 1), distinct(*X)),
    ("argmax_all", torch.argmax, distinct(*X)),
    ("argmin_keepdim", lambda x: x.argmin(-1, keepdim=True), distinct(*X)),
    ("std_dim", lambda x: x.std(1), randn(*X)),
    ("std_all", torch.std, randn(*X)),
    ("var_unbiased_false", lambda x: x.var((2, 3), unbiased=False, keepdim=True), randn(*X)),
    ("var_correction", lambda x: torch.var(x, 1, correction=0), randn(*X)),
    ("norm_p2_dim", lambda x: x.norm(dim=1), randn(*X)),
    ("norm_p1", lambda x: torch.norm(x, p=1, dim=(2, 3)), randn(*X)),
    ("norm_all", torch.norm, randn(*X)),
    ("norm_inf", lambda x: torch.norm(x, p=float("inf"), dim=-1), randn(*X)),
    ("vector_norm", lambda x: torch.linalg.vector_norm(x, 3, dim=-1, keepdim=True), randn(*X)),
    ("logsumexp", lambda x: torch.logsumexp(x, 1), lambda: torch.randn(*X) * 10),
    ("cumsum", lambda x: torch.cumsum(x, 1), randn(*X)),
    ("cumsum_last", lambda x: x.cumsum(-1), randn(*X)),
    ("cumprod", lambda x: torch.cumprod(x, 2), pos(*X, lo=0.5, hi=1.5)),
    ("all", lambda m: torch.all(m, 1), mask(*X, p=0.9)),
    ("any", lambda m: m.any(-1), mask(*X, p=0.1)),
    ("sum_int64", lambda x: x.sum(1), ints(3, 4, 5)),
    # PyTorch 1.13's result dtypes: any/all of uint8 stay uint8, of other types give
    # bool; sum/prod of integers and bools give int64; amax/amin keep the dtype.
    ("any_uint8", lambda x: x.any(-1), typed(torch.uint8, 3, 4, 5, hi=2)),
    ("all_uint8_all", torch.all, typed(torch.uint8, 3, 4, 5, lo=1, hi=3)),
    ("any_int32", lambda x: torch.any(x, 1), typed(torch.int32, 3, 4, 5, hi=2)),
    ("sum_uint8", lambda x: x.sum(-1), typed(torch.uint8, 3, 4, 5, hi=200)),
    ("prod_bool", lambda m: torch.prod(m, 1), mask(3, 4, 5, p=0.7)),
    ("sum_int32_all", torch.sum, typed(torch.int32, 3, 4, 5)),
    ("amax_uint8", lambda x: torch.amax(x, dim=1), typed(torch.uint8, 3, 4, 5, hi=250)),
    ("amin_bool", lambda m: torch.amin(m, dim=-1), mask(3, 4, 5, p=0.7)),
    ("count_nonzero_like", lambda x: (x > 0).sum(-1), randn(*X)),
])

# ---------------------------------------------------------------- shape and indexing

cases("shape", [
    ("permute", lambda x: x.permute(0, 2, 3, 1), randn(*X)),
    ("permute_contiguous", lambda x: x.permute(3, 1, 0, 2).contiguous() * 2, randn(*X)),
    ("transpose", lambda x: x.transpose(1, 3), randn(*X)),
    ("t", lambda x: x.t(), randn(3, 4)),
    ("mT", lambda x: x.transpose(-2, -1), randn(2, 3, 4)),
    ("movedim", lambda x: torch.movedim(x, 1, -1), randn(*X)),
    ("squeeze", lambda x: x.squeeze(), randn(2, 1, 3, 1)),
    ("squeeze_dim", lambda x: x.squeeze(1), randn(2, 1, 3, 1)),
    ("unsqueeze", lambda x: x.unsqueeze(-1), randn(2, 3)),
    ("none_index", lambda x: x[:, None] * 2, randn(2, 3)),
    ("expand", lambda x: x.expand(2, 3, 4), randn(3, 1)),
    ("expand_neg", lambda x: x.expand(4, -1, -1), randn(1, 3, 5)),
    ("expand_as", lambda x, y: x.expand_as(y) + y, randn(1, 5), randn(3, 5)),
    ("repeat", lambda x: x.repeat(2, 1, 3), randn(2, 3)),
    ("stack", lambda x, y: torch.stack([x, y], 1), randn(2, 3), randn(2, 3)),
    ("stack_neg", lambda x, y: torch.stack((x, y, x), dim=-1), randn(2, 3), randn(2, 3)),
    ("cat_neg", lambda x, y: torch.cat([x, y], -1), randn(2, 3), randn(2, 4)),
    ("split", lambda x: x.split(2, 1), randn(2, 5, 3)),
    ("split_sizes", lambda x: torch.split(x, [1, 3, 1], dim=1), randn(2, 5, 3)),
    ("chunk", lambda x: x.chunk(3, -1), randn(2, 3, 8)),
    ("chunk_add", lambda x: sum(x.chunk(2, 1)), randn(2, 6, 3)),
    ("unbind", lambda x: x.unbind(1), randn(2, 3, 4)),
    ("unflatten", lambda x: x.unflatten(1, (2, 3)), randn(4, 6)),
    ("flatten_mid", lambda x: torch.flatten(x, 1, 2), randn(*X)),
    ("view", lambda x: x.view(6, -1), randn(*X)),
    ("reshape", lambda x: x.reshape(-1, 5), randn(*X)),
    ("view_as", lambda x, y: x.view_as(y), randn(2, 6), randn(3, 4)),
    ("narrow", lambda x: x.narrow(1, 1, 2), randn(*X)),
    ("slice", lambda x: x[:, 1:3], randn(*X)),
    ("slice_step", lambda x: x[..., ::2], randn(*X)),
    ("slice_neg", lambda x: x[:, -2:, 1:-1], randn(*X)),
    ("select", lambda x: x[:, 1], randn(*X)),
    ("select_neg", lambda x: x[..., -1], randn(*X)),
    ("select_first", lambda x: x[0], randn(*X)),
    ("index_select", lambda x, i: torch.index_select(x, 1, i), randn(*X),
     lambda: torch.tensor([2, 0, 2])),
    ("gather", lambda x, i: torch.gather(x, 1, i), randn(3, 4), ints(3, 2, hi=4)),
    ("gather_3d", lambda x, i: x.gather(-1, i), randn(2, 3, 4), ints(2, 3, 5, hi=4)),
    ("index_tensor", lambda x, i: x[i], randn(5, 3), ints(4, hi=5)),
    ("index_tensor_2d", lambda x, i: x[i], randn(5, 3), ints(2, 2, hi=5)),
    ("index_dim1", lambda x, i: x[:, i], randn(3, 5, 2), ints(4, hi=5)),
    ("index_two", lambda x, i, j: x[i, j], randn(4, 5), ints(3, hi=4), ints(3, hi=5)),
    ("index_neg", lambda x, i: x[i - 5], randn(5, 3), ints(4, hi=5)),
    ("index_bool_mask", lambda x: x[x > 0] * 2, randn(4, 5)),
    ("index_bool_mask_rows", lambda x: x[x[:, 0] > 0].sum(0), randn(6, 3)),
    ("index_bool_mask_inner", lambda x: x[:, x[0] > 0] + 1, randn(3, 5, 2)),
    ("index_bool_mask_mixed", lambda x, i: x[i, x[0, :, 0] > 0], randn(3, 5, 2),
     lambda: torch.tensor([2, 0])),
    ("nonzero", lambda x: torch.nonzero(x > 0.3), randn(3, 4)),
    ("where_indices", lambda x: torch.where(x > 0)[1] * 2, randn(3, 4)),
    ("roll", lambda x: torch.roll(x, 1, 2), randn(*X)),
    ("roll_multi", lambda x: torch.roll(x, shifts=(-2, 3), dims=(1, 3)), randn(*X)),
    ("roll_flat", lambda x: torch.roll(x, 5), randn(*X)),
    ("flip", lambda x: torch.flip(x, [0, 2]), randn(*X)),
    ("fliplr", torch.fliplr, randn(3, 4)),
    ("tril", torch.tril, randn(4, 5)),
    ("triu_diag", lambda x: torch.triu(x, 1), randn(2, 4, 5)),
    ("tril_neg", lambda x: x.tril(-1), randn(5, 4)),
    ("pad_constant", lambda x: F.pad(x, (1, 2), value=0.5), randn(*X)),
    ("pad_constant_2d", lambda x: F.pad(x, (1, 0, 2, 1)), randn(*X)),
    ("pad_constant_neg", lambda x: F.pad(x, (-1, 2)), randn(*X)),
    ("pad_reflect_1d", lambda x: F.pad(x, (2, 1), mode="reflect"), randn(2, 3, 6)),
    ("pad_reflect_2d", lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), randn(*X)),
    ("pad_replicate_2d", lambda x: F.pad(x, (1, 2, 3, 0), mode="replicate"), randn(*X)),
    ("pad_replicate_3d", lambda x: F.pad(x, (1, 1, 0, 2, 1, 0), mode="replicate"),
     randn(1, 2, 3, 4, 5)),
    ("pad_circular_2d", lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"), randn(*X)),
    ("pad_circular_1d", lambda x: F.pad(x, (2, 1), mode="circular"), randn(2, 3, 6)),
    ("pad_replicate_1d", lambda x: F.pad(x, (0, 3), mode="replicate"), randn(2, 3, 6)),
    ("pad_reflect_3d", lambda x: F.pad(x, (1, 2, 0, 1, 2, 1), mode="reflect"),
     randn(1, 2, 4, 5, 6)),
    ("pad_constant_value", lambda x: F.pad(x, (1, 1, 2, 0), value=-1.5), randn(*X)),
    ("zero_pad_module", nn.ZeroPad2d((1, 1, 2, 0)), randn(*X)),
    ("reflection_pad_module", nn.ReflectionPad2d(2), randn(*X)),
    ("pixel_shuffle", nn.PixelShuffle(2), randn(1, 8, 3, 3)),
    ("channel_shuffle_const", lambda x: x.view(2, 2, 3, 4, 5).transpose(1, 2).reshape(2, 6, 4, 5),
     randn(2, 6, 4, 5)),
])



def setitem_fill(x):
    y = x.clone()
    y[:, 1:3] = 0.5
    return y


def setitem_copy(x, v):
    y = x.clone()
    y[0] = v
    return y


def setitem_mask(x):
    m = x.new_zeros((4, 5))
    m[0:2, 0:3] = 1.0
    m[2:, 3:] = 2.0
    m[-1, :] = 3.0
    return x + m


def setitem_step(x):
    y = x.clone()
    y[..., ::2] = y[..., 1::2] * 2
    return y


# In-place ops on views write into the tensor the view was taken from, and
# every other view of that tensor sees the write.
def inplace_through_views(x):
    y = x.clone()
    y[:, 0] += 1.0                   # select, add_, then copy_ back
    y[:, 1:3].relu_()                # relu_ on a slice
    y.narrow(2, 0, 2).mul_(2.0)      # mul_ on a narrow
    return y


def inplace_sibling_views(x):
    y = x.clone()
    a = y[:, 0]                      # taken before the write
    y[:, :2].mul_(3.0)               # writes y, and so a
    return a + 1.0, y


def inplace_reshaped_views(x):
    y = x.clone()                    # (2, 3, 4, 5)
    y.view(2, -1)[:, -1] = 0.0       # through a view
    y.transpose(0, 1)[0].zero_()     # through a transpose: y[:, 0]
    y.unsqueeze(0)[0, 1].fill_(7.0)  # through an unsqueeze
    return y


def inplace_base_then_view(x):
    y = x.clone()
    v = y[1]
    y.mul_(2.0)                      # v shows it
    return v


def inplace_pieces(x):
    y = x * 1.0                      # (2, 3, 4, 5)
    q, k = y.chunk(2, dim=2)         # q *= s after q, k = qkv.chunk(2)
    q.mul_(2.0)
    a, b = y.split([1, 2], dim=1)
    b.add_(1.0)
    y.unbind(3)[0].sub_(5.0)
    return y, k


cases("shape", [
    ("inplace_through_views", inplace_through_views, randn(*X)),
    ("inplace_pieces", inplace_pieces, randn(*X)),
    ("inplace_sibling_views", inplace_sibling_views, randn(*X)),
    ("inplace_reshaped_views", inplace_reshaped_views, randn(*X)),
    ("inplace_base_then_view", inplace_base_then_view, randn(*X)),
    ("setitem_fill", setitem_fill, randn(*X)),
    ("setitem_copy_broadcast", setitem_copy, randn(3, 4, 5), randn(5)),
    ("setitem_nested_mask", setitem_mask, randn(*X)),
    ("setitem_step", setitem_step, randn(3, 6)),
    ("slice_scatter", lambda x, v: torch.slice_scatter(x, v, 1, 2, 4, 1), randn(3, 4), randn(3, 2)),
    ("select_scatter", lambda x, v: torch.select_scatter(x, v, dim=0, index=1), randn(3, 4), randn(4)),
])

# ---------------------------------------------------------------- linear algebra

cases("linalg", [
    ("matmul_1d_1d", torch.matmul, randn(5), randn(5)),
    ("matmul_2d_1d", torch.matmul, randn(3, 5), randn(5)),
    ("matmul_1d_3d", torch.matmul, randn(5), randn(2, 5, 4)),
    ("matmul_batch_broadcast", torch.matmul, randn(2, 1, 3, 5), randn(4, 5, 6)),
    ("mm", torch.mm, randn(3, 5), randn(5, 4)),
    ("mv", torch.mv, randn(3, 5), randn(5)),
    ("bmm", torch.bmm, randn(2, 3, 5), randn(2, 5, 4)),
    ("baddbmm", lambda a, b, c: torch.baddbmm(a, b, c, beta=0.5, alpha=2.0), randn(2, 3, 4),
     randn(2, 3, 5), randn(2, 5, 4)),
    ("addmm", lambda a, b, c: torch.addmm(a, b, c, beta=0.3), randn(4), randn(3, 5),
     randn(5, 4)),
    ("linear", nn.Linear(5, 7), randn(2, 3, 5)),
    ("linear_nobias", nn.Linear(5, 7, bias=False), randn(3, 5)),
    ("bilinear_matmul_t", lambda x, y: x @ y.transpose(-1, -2), randn(2, 4, 8), randn(2, 6, 8)),
    ("einsum_bmm", lambda a, b: torch.einsum("bij,bjk->bik", a, b), randn(2, 3, 5),
     randn(2, 5, 4)),
    ("einsum_transpose", lambda a: torch.einsum("ij->ji", a), randn(3, 4)),
    # Integer products, exact; int32 and uint8 sums wrap as in PyTorch.
    ("matmul_int64", torch.matmul, ints(2, 3, 5, lo=-1000, hi=1000), ints(5, 4, lo=-1000, hi=1000)),
    ("matmul_int32_wraps", lambda a, b: (a.int() * 50000) @ (b.int() * 50000),
     ints(2, 3, 5, lo=-9, hi=9), ints(2, 5, 4, lo=-9, hi=9)),
    ("matmul_uint8_wraps", lambda a, b: a.to(torch.uint8) @ b.to(torch.uint8),
     ints(3, 5, lo=0, hi=255), ints(5, 2, lo=0, hi=255)),
    ("matmul_int8_1d", lambda a, b: a.to(torch.int8) @ b.to(torch.int8), ints(5, lo=-100, hi=100),
     ints(5, 3, lo=-100, hi=100)),
    ("einsum_attention", lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k), randn(2, 3, 4, 8),
     randn(2, 3, 6, 8)),
    ("einsum_outer", lambda a, b: torch.einsum("i,j->ij", a, b), randn(4), randn(5)),
    ("einsum_sum", lambda a: torch.einsum("bij->b", a), randn(2, 3, 4)),
    ("einsum_bilinear", lambda a, w, b: torch.einsum("bi,oij,bj->bo", a, w, b), randn(2, 3),
     randn(4, 3, 5), randn(2, 5)),
    ("einsum_dot", lambda a, b: torch.einsum("i,i->", a, b), randn(6), randn(6)),
    ("outer", torch.outer, randn(4), randn(5)),
    ("dot", torch.dot, randn(6), randn(6)),
])

# ---------------------------------------------------------------- convolution

cases("conv", [
    ("conv1d", nn.Conv1d(3, 4, 3, padding=1), randn(2, 3, 10)),
    ("conv1d_stride_dilation", nn.Conv1d(4, 6, 3, stride=2, dilation=2, groups=2),
     randn(1, 4, 17)),
    ("conv2d", nn.Conv2d(3, 8, 3, stride=2, padding=1), randn(1, 3, 12, 12)),
    ("conv2d_grouped_dilated", nn.Conv2d(6, 9, (3, 2), padding=(2, 1), dilation=2, groups=3),
     randn(2, 6, 11, 9)),
    ("conv2d_depthwise", nn.Conv2d(8, 8, 5, padding=2, groups=8), randn(1, 8, 10, 10)),
    ("conv2d_nobias", nn.Conv2d(3, 4, 1, bias=False), randn(1, 3, 5, 5)),
    ("conv2d_reflect", nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
     randn(1, 3, 7, 7)),
    ("conv2d_circular", nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"),
     randn(1, 3, 7, 7)),
    ("conv3d", nn.Conv3d(2, 4, 3, padding=1), randn(1, 2, 5, 6, 7)),
    ("conv3d_stride_groups", nn.Conv3d(4, 4, (1, 3, 3), stride=(1, 2, 2), groups=2),
     randn(2, 4, 3, 8, 8)),
    ("conv_transpose1d", nn.ConvTranspose1d(3, 5, 4, stride=2, padding=1), randn(2, 3, 7)),
    ("conv_transpose2d", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1),
     randn(1, 4, 5, 6)),
    ("conv_transpose2d_groups", nn.ConvTranspose2d(4, 6, (2, 3), stride=(2, 1), groups=2,
                                                   dilation=(1, 2)), randn(2, 4, 5, 5)),
    ("conv_transpose3d", nn.ConvTranspose3d(2, 3, 2, stride=2), randn(1, 2, 3, 4, 5)),
    ("conv2d_same", nn.Conv2d(3, 4, (3, 4), padding="same", dilation=(1, 2)), randn(1, 3, 7, 8)),
    ("conv2d_same_even_kernel", nn.Conv2d(3, 4, (4, 2), padding="same"), randn(1, 3, 7, 8)),
    ("conv1d_same_functional", lambda x, w=torch.randn(4, 3, 4): F.conv1d(x, w, padding="same"),
     randn(2, 3, 9)),
    ("conv1d_replicate", nn.Conv1d(3, 4, 5, padding=2, padding_mode="replicate"), randn(2, 3, 9)),
    ("conv_transpose1d_groups_dilation", nn.ConvTranspose1d(4, 6, 3, stride=2, dilation=2, groups=2,
                                                            output_padding=1), randn(1, 4, 6)),
])

# ---------------------------------------------------------------- pooling

cases("pool", [
    ("max_pool1d", nn.MaxPool1d(3, 2, padding=1), randn(2, 3, 11)),
    ("max_pool1d_ceil", nn.MaxPool1d(2, 3, ceil_mode=True), randn(2, 3, 11)),
    ("avg_pool1d_ceil", nn.AvgPool1d(3, 2, padding=1, ceil_mode=True), randn(2, 3, 10)),
    ("avg_pool3d_ceil", nn.AvgPool3d(3, 2, padding=1, ceil_mode=True, count_include_pad=False),
     randn(1, 2, 6, 7, 5)),
    ("max_pool2d_ceil", nn.MaxPool2d(3, 2, ceil_mode=True), randn(1, 3, 10, 11)),
    ("max_pool2d_dilation", nn.MaxPool2d(2, 1, dilation=2), randn(1, 2, 7, 7)),
    ("max_pool3d", nn.MaxPool3d(2, 2), randn(1, 2, 6, 5, 4)),
    ("max_pool3d_pad_ceil", nn.MaxPool3d(3, 2, padding=1, ceil_mode=True), randn(1, 2, 6, 7, 5)),
    ("avg_pool1d", nn.AvgPool1d(3, 2, padding=1, count_include_pad=False), randn(2, 3, 11)),
    ("avg_pool2d_ceil", nn.AvgPool2d(3, 2, padding=1, ceil_mode=True), randn(1, 3, 10, 11)),
    ("avg_pool3d", nn.AvgPool3d(2, (1, 2, 2)), randn(1, 2, 4, 6, 6)),
    ("adaptive_avg_pool1d", nn.AdaptiveAvgPool1d(4), randn(2, 3, 10)),
    ("adaptive_avg_pool2d_uneven", nn.AdaptiveAvgPool2d((3, 5)), randn(1, 3, 10, 11)),
    ("adaptive_avg_pool3d", nn.AdaptiveAvgPool3d((2, 3, 1)), randn(1, 2, 5, 7, 4)),
    ("adaptive_max_pool1d", nn.AdaptiveMaxPool1d(3), randn(2, 3, 10)),
    ("adaptive_max_pool2d", nn.AdaptiveMaxPool2d((3, 2)), randn(1, 3, 10, 7)),
    ("adaptive_max_pool2d_global", nn.AdaptiveMaxPool2d(1), randn(1, 3, 10, 7)),
    ("adaptive_max_pool3d", nn.AdaptiveMaxPool3d(2), randn(1, 2, 5, 6, 4)),
    ("max_pool2d_indices", nn.MaxPool2d(2, return_indices=True), distinct(1, 2, 6, 6)),
    ("lp_pool2d", nn.LPPool2d(2, 2), pos(1, 3, 6, 6)),
])

# ---------------------------------------------------------------- normalization

def bn(cls, c):
    m = cls(c)
    m.running_mean.uniform_(-1, 1)
    m.running_var.uniform_(0.5, 2)
    m.weight.data.uniform_(0.5, 1.5)
    m.bias.data.uniform_(-0.5, 0.5)
    return m


cases("norm", [
    ("batch_norm1d", bn(nn.BatchNorm1d, 4), randn(3, 4, 5)),
    ("batch_norm2d", bn(nn.BatchNorm2d, 3), randn(2, 3, 4, 5)),
    ("batch_norm3d", bn(nn.BatchNorm3d, 2), randn(1, 2, 3, 4, 5)),
    ("layer_norm", nn.LayerNorm(5), randn(*X)),
    ("layer_norm_2d", nn.LayerNorm((4, 5), elementwise_affine=False), randn(*X)),
    ("group_norm", nn.GroupNorm(2, 6), randn(2, 6, 4, 5)),
    ("group_norm_noaffine", nn.GroupNorm(3, 6, affine=False), randn(2, 6, 7)),
    ("instance_norm2d", nn.InstanceNorm2d(3), randn(2, 3, 5, 6)),
    ("instance_norm2d_affine", nn.InstanceNorm2d(3, affine=True), randn(2, 3, 5, 6)),
    ("instance_norm1d", nn.InstanceNorm1d(4), randn(2, 4, 9)),
    ("normalize", lambda x: F.normalize(x, dim=1), randn(*X)),
    ("local_response_norm", nn.LocalResponseNorm(3), randn(1, 6, 5, 5)),
])

cases("softmax", [
    ("softmax", nn.Softmax(dim=1), randn(*X)),
    ("softmax_last", lambda x: x.softmax(-1), lambda: torch.randn(*X) * 5),
    ("log_softmax", nn.LogSoftmax(dim=2), randn(*X)),
    ("log_softmax_last", lambda x: F.log_softmax(x, -1), lambda: torch.randn(*X) * 5),
])

cases("embedding", [
    ("embedding", nn.Embedding(10, 6), ints(2, 5, hi=10)),
    ("embedding_padding", nn.Embedding(10, 4, padding_idx=0), ints(7, hi=10)),
    ("embedding_functional", lambda i, w: F.embedding(i, w), ints(3, 4, hi=6), randn(6, 5)),
])

# ---------------------------------------------------------------- interpolation

cases("interpolate", [
    ("nearest_scale2", nn.Upsample(scale_factor=2, mode="nearest"), randn(1, 2, 4, 5)),
    ("nearest_size", lambda x: F.interpolate(x, size=(7, 3), mode="nearest"), randn(1, 2, 4, 5)),
    ("nearest_1d", lambda x: F.interpolate(x, scale_factor=3, mode="nearest"), randn(2, 3, 4)),
    ("nearest_3d", lambda x: F.interpolate(x, size=(4, 6, 3), mode="nearest"),
     randn(1, 2, 2, 3, 5)),
    ("nearest_exact", lambda x: F.interpolate(x, size=(7, 3), mode="nearest-exact"),
     randn(1, 2, 4, 5)),
    ("bilinear", lambda x: F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=False),
     randn(1, 2, 4, 5)),
    ("bilinear_align", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear",
                                                align_corners=True), randn(1, 2, 4, 5)),
    ("bilinear_down", lambda x: F.interpolate(x, size=(3, 2), mode="bilinear",
                                               align_corners=False), randn(1, 2, 8, 7)),
    ("bilinear_scale_frac", lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear",
                                                     align_corners=False), randn(1, 2, 4, 5)),
    ("bicubic", lambda x: F.interpolate(x, size=(9, 7), mode="bicubic", align_corners=False),
     randn(1, 2, 4, 5)),
    ("bicubic_align", lambda x: F.interpolate(x, scale_factor=2, mode="bicubic",
                                               align_corners=True), randn(1, 2, 4, 5)),
    ("linear_1d", lambda x: F.interpolate(x, size=9, mode="linear", align_corners=False),
     randn(2, 3, 4)),
    ("trilinear", lambda x: F.interpolate(x, scale_factor=2, mode="trilinear",
                                           align_corners=False), randn(1, 2, 2, 3, 4)),
    ("trilinear_align", lambda x: F.interpolate(x, size=(3, 5, 4), mode="trilinear",
                                                 align_corners=True), randn(1, 2, 2, 3, 4)),
    ("area", lambda x: F.interpolate(x, size=(3, 4), mode="area"), randn(1, 2, 7, 9)),
    ("linear_1d_align", lambda x: F.interpolate(x, scale_factor=2.5, mode="linear",
                                                 align_corners=True), randn(2, 3, 4)),
    # F.grid_sample (aten::grid_sampler): a sampling grid partly outside [-1, 1].
    ("grid_sample_bilinear", lambda x, g: F.grid_sample(x, g, align_corners=False),
     randn(2, 3, 9, 11), lambda: torch.rand(2, 6, 7, 2) * 2.6 - 1.3),
    ("grid_sample_nearest_border", lambda x, g: F.grid_sample(
        x, g, mode="nearest", padding_mode="border", align_corners=True),
     randn(1, 4, 8, 8), lambda: torch.rand(1, 5, 5, 2) * 3 - 1.5),
    ("grid_sample_bicubic_reflection", lambda x, g: F.grid_sample(
        x, g, mode="bicubic", padding_mode="reflection", align_corners=False),
     randn(1, 2, 7, 6), lambda: torch.rand(1, 9, 4, 2) * 4 - 2),
    ("affine_grid_stn", lambda theta, x: F.grid_sample(
        x, F.affine_grid(theta, x.size(), align_corners=False), align_corners=False),
     lambda: torch.eye(2, 3).repeat(2, 1, 1) + torch.randn(2, 2, 3) * 0.2, randn(2, 3, 8, 10)),
    ("affine_grid_3d_align", lambda theta: F.affine_grid(theta, [1, 2, 3, 4, 5], align_corners=True),
     randn(1, 3, 4)),
    ("grid_sample_f64", lambda x, g: F.grid_sample(x.double(), g.double(), padding_mode="reflection",
                                                   align_corners=True),
     randn(2, 2, 5, 5), lambda: torch.rand(2, 3, 3, 2) * 3 - 1.5),
])

# ---------------------------------------------------------------- sort and top-k

cases("sort", [
    ("topk", lambda x: torch.topk(x, 3), distinct(*X)),
    ("topk_smallest_dim", lambda x: torch.topk(x, 2, dim=1, largest=False), distinct(*X)),
    ("sort", lambda x: torch.sort(x, 1), distinct(*X)),
    ("sort_descending", lambda x: x.sort(descending=True), distinct(*X)),
    ("argsort", lambda x: torch.argsort(x, -1, descending=True), distinct(*X)),
    ("kthvalue", lambda x: torch.kthvalue(x, 2, -1), distinct(*X)),
])

# ---------------------------------------------------------------- creation and casts

cases("creation", [
    ("arange", lambda x: x + torch.arange(5), randn(*X)),
    ("arange_step", lambda x: x * torch.arange(1, 3, 0.5), randn(4)),
    ("zeros", lambda x: x + torch.zeros(4, 5), randn(*X)),
    ("ones", lambda x: x * torch.ones(5), randn(*X)),
    ("full", lambda x: x - torch.full((1, 5), 2.5), randn(*X)),
    ("linspace", lambda x: x + torch.linspace(-1, 1, 5), randn(*X)),
    ("zeros_like", lambda x: torch.zeros_like(x) + 1, randn(*X)),
    ("ones_like", torch.ones_like, randn(*X)),
    ("full_like", lambda x: torch.full_like(x, 7.0), randn(*X)),
    ("new_zeros", lambda x: x.new_zeros((2, 3)) + 2, randn(*X)),
    ("new_full", lambda x: x.new_full((3,), 4.0), randn(*X)),
    ("eye", lambda x: x @ torch.eye(5), randn(3, 5)),
])

cases("cast", [
    ("to_int64", lambda x: (x * 3).to(torch.int64), randn(*X)),
    ("long", lambda x: (x * 3).long(), randn(*X)),
    ("int32", lambda x: (x * 3).int(), randn(*X)),
    ("float_from_int", lambda x: x.float() / 2, ints(3, 4)),
    ("bool", lambda x: (x * 2).round().bool(), randn(*X)),
    ("mask_float", lambda m: m.float(), mask(*X)),
    ("type_as", lambda x, y: x.type_as(y), ints(3, 4), randn(3, 4)),
    ("to_same", lambda x: x.to(torch.float32) * 2, randn(*X)),
    ("to_double", lambda x: x.double(), randn(*X)),
])

# ---------------------------------------------------------------- recurrent and attention


class RnnOut(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        out, _ = self.rnn(x)
        return out


cases("recurrent", [
    ("lstm", RnnOut(nn.LSTM(4, 5)), randn(6, 2, 4)),
    ("lstm_batch_first_2layer", RnnOut(nn.LSTM(4, 5, num_layers=2, batch_first=True)),
     randn(2, 6, 4)),
    ("lstm_bidirectional", RnnOut(nn.LSTM(4, 3, bidirectional=True)), randn(5, 2, 4)),
    ("gru", RnnOut(nn.GRU(4, 5, batch_first=True)), randn(2, 6, 4)),
    ("gru_bidirectional", RnnOut(nn.GRU(3, 4, num_layers=2, bidirectional=True)),
     randn(5, 1, 3)),
    ("rnn_tanh", RnnOut(nn.RNN(4, 5)), randn(6, 2, 4)),
    ("rnn_relu", RnnOut(nn.RNN(4, 5, nonlinearity="relu")), randn(6, 2, 4)),
    ("lstm_states", nn.LSTM(3, 4), randn(5, 1, 3)),
])


class SelfAttention(nn.Module):
    def __init__(self, batch_first, need_weights=False):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=batch_first)
        self.need_weights = need_weights

    def forward(self, x):
        out, w = self.mha(x, x, x, need_weights=self.need_weights)
        return out if not self.need_weights else (out, w)


cases("attention", [
    ("mha_batch_first", SelfAttention(True), randn(2, 5, 16)),
    ("mha_seq_first", SelfAttention(False), randn(5, 2, 16)),
    ("mha_weights", SelfAttention(True, need_weights=True), randn(2, 5, 16)),
    ("encoder_layer", nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
     randn(2, 5, 16)),
    # BERT-like: sequence-first, so no fast path; head_dim is a trunc div of sizes.
    ("encoder_seq_first",
     nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0), 2),
     randn(5, 2, 16)),
])



# Traced under no_grad (as every case here): nn.TransformerEncoder with a src_key_padding_mask
# records PyTorch's fast path, _transformer_encoder_layer_fwd on a nested tensor made by
# _nested_tensor_from_mask and padded back by to_padded_tensor (norm_first=False, an even
# number of heads); with norm_first=True the layers get the padding mask themselves.
class Encoder(nn.Module):
    def __init__(self, norm_first, activation="relu", layers=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                           norm_first=norm_first, activation=activation)
        self.encoder = nn.TransformerEncoder(layer, layers)

    def forward(self, x, mask: Optional[torch.Tensor] = None):
        return self.encoder(x, src_key_padding_mask=mask)


def padding_mask(lengths, steps):
    """A left-aligned key padding mask [len(lengths), steps]: True past each length."""
    return lambda: torch.arange(steps)[None, :] >= torch.tensor(lengths)[:, None]


cases("attention", [
    ("encoder_post_norm", Encoder(False), randn(2, 5, 16)),
    ("encoder_pre_norm", Encoder(True), randn(2, 5, 16)),
    ("encoder_post_norm_gelu", Encoder(False, "gelu"), randn(3, 4, 16)),
    # Nested: the longest sequence fills the batch, so the output keeps every position.
    ("encoder_nested_mask", Encoder(False), randn(3, 7, 16), padding_mask([7, 4, 2], 7)),
    # Nested, every sequence padded: PyTorch's output keeps only the longest length (5 of 7).
    ("encoder_nested_mask_trimmed", Encoder(False, "gelu"), randn(3, 7, 16),
     padding_mask([5, 1, 3], 7)),
    # Nested, one sequence empty (all padding): its positions come back as zeros.
    ("encoder_nested_mask_empty_row", Encoder(False), randn(3, 5, 16), padding_mask([3, 0, 2], 5)),
    ("encoder_pre_norm_mask", Encoder(True), randn(3, 6, 16), padding_mask([6, 2, 4], 6)),
])

# ---------------------------------------------------------------- torchvision's operators


def boxes(n, extent=12.0, dtype=torch.float32):
    """Boxes (x1, y1, x2, y2) crowded into a small area, so that many overlap."""
    def make():
        xy = torch.rand(n, 2) * extent
        return torch.cat([xy, xy + 1 + torch.rand(n, 2) * extent / 2], 1).to(dtype)
    return make


def tied_scores(n, levels=5, dtype=torch.float32):
    """Scores taking `levels` values: ties, which torchvision breaks by index (stable sort)."""
    return lambda: (torch.randint(0, levels, (n,)).float() / levels).to(dtype)


def rois(k, images=2, extent=24.0, dtype=torch.float32):
    """Regions [k, 5]: batch index, then a box in image coordinates (some off the map)."""
    def make():
        index = torch.randint(0, images, (k, 1)).float()
        return torch.cat([index, boxes(k, extent)() - 2], 1).to(dtype)
    return make


def roi_align(output_size, scale, ratio, aligned):
    return lambda x, r: torchvision.ops.roi_align(x, r, output_size, spatial_scale=scale,
                                                  sampling_ratio=ratio, aligned=aligned)


class DetectionHead(nn.Module):
    """A two-stage detector's second stage, MultiScaleRoIAlign-free: a small backbone,
    roi_align of the proposals on its stride-4 map, a box head, per-class softmax, box
    decoding, batched_nms per class, and the kept detections."""

    def __init__(self, classes=3):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 5 * 5, 32), nn.ReLU())
        self.cls = nn.Linear(32, classes + 1)
        self.reg = nn.Linear(32, 4)

    def forward(self, images, proposals):
        features = self.backbone(images)
        pooled = torchvision.ops.roi_align(features, proposals, (5, 5), spatial_scale=0.25,
                                           sampling_ratio=2, aligned=True)
        h = self.head(pooled)
        probs = F.softmax(self.cls(h), -1)
        scores, labels = probs[:, 1:].max(1)
        detections = proposals[:, 1:] + self.reg(h) * 2.0
        keep = torchvision.ops.batched_nms(detections, scores, labels, 0.3)
        return detections[keep], scores[keep], labels[keep]


cases("vision", [
    ("nms", lambda b, s: torchvision.ops.nms(b, s, 0.5), boxes(40), randn(40)),
    ("nms_ties", lambda b, s: torchvision.ops.nms(b, s, 0.3), boxes(60), tied_scores(60)),
    ("nms_f64", lambda b, s: torchvision.ops.nms(b, s, 0.7),
     boxes(30, dtype=torch.float64), tied_scores(30, dtype=torch.float64)),
    ("nms_empty", lambda b, s: torchvision.ops.nms(b, s, 0.5), boxes(0), randn(0)),
    ("batched_nms", lambda b, s, i: torchvision.ops.batched_nms(b, s, i, 0.4),
     boxes(50), tied_scores(50), ints(50, hi=3)),
    ("roi_align_aligned_ratio2", roi_align((3, 3), 0.5, 2, True), randn(2, 4, 12, 12), rois(6)),
    ("roi_align_aligned_adaptive", roi_align((2, 4), 0.5, 0, True), randn(2, 4, 12, 12), rois(6)),
    ("roi_align_ratio1", roi_align((3, 3), 0.5, 1, False), randn(2, 4, 12, 12), rois(6)),
    ("roi_align_adaptive", roi_align((3, 2), 0.5, -1, False), randn(2, 4, 12, 12), rois(6)),
    ("roi_align_ratio3_scale1", roi_align(4, 1.0, 3, False), randn(2, 3, 10, 14),
     rois(5, extent=10.0)),
    ("roi_align_f64", roi_align((3, 3), 0.25, 0, True), lambda: torch.randn(2, 3, 8, 8).double(),
     rois(4, extent=32.0, dtype=torch.float64)),
    ("detection_head", DetectionHead(), randn(2, 3, 20, 20), rois(12, extent=16.0)),
])

# ---------------------------------------------------------------- the core ATen opset's remaining ops
# What torch.export's run_decompositions() writes (native_layer_norm, native_group_norm,
# _adaptive_avg_pool2d, scalar_tensor, the scatters, isinf) and ops models call directly
# (nan_to_num, var_mean, tile, repeat_interleave, the inverse hyperbolic functions).


def with_inf(*shape):
    """Normal values with +inf, -inf and NaN planted at fixed places."""
    def make():
        x = torch.randn(*shape)
        flat = x.view(-1)
        flat[::7] = float("inf")
        flat[3::11] = float("-inf")
        flat[5::13] = float("nan")
        return x
    return make


def distinct_rows(rows, k, n):
    """[rows, k] INT64: each row k distinct values of range(n) (a scatter with no ties)."""
    return lambda: torch.stack([torch.randperm(n)[:k] for _ in range(rows)])


def put_mask_scalar(x):
    y = x.clone()
    y[y > 0.5] = 0.0
    return y


def put_mask_rows(x, m, v):
    y = x * 1
    y[m] = v  # m over the leading dims [2, 3] of y [2, 3, 4]; v [4] for every chosen row
    return y


def put_rows(x, i, v):
    y = x * 1
    y[i] = v
    return y


def put_middle(x, i):
    y = x * 1
    y[:, i] = -1.0
    return y


def put_pairs(x, i, j):
    y = x * 1
    y[i[:, None], j] = 2.0  # broadcast [3, 1] against [2]
    return y


cases("core_aten", [
    ("asinh", torch.asinh, randn(*X)),
    ("acosh", torch.acosh, pos(*X, lo=1.0, hi=5.0)),
    ("atanh", torch.atanh, pos(*X, lo=-0.9, hi=0.9)),
    ("arcsinh_f64", lambda x: torch.arcsinh(x.double()), randn(*X)),
    ("isinf", torch.isinf, with_inf(*X)),
    ("isposinf", torch.isposinf, with_inf(*X)),
    ("isneginf", torch.isneginf, with_inf(*X)),
    ("isfinite", torch.isfinite, with_inf(*X)),
    ("isinf_int64", lambda i: torch.isinf(i) | (i > 5), ints(3, 4)),
    ("nan_to_num", torch.nan_to_num, with_inf(*X)),
    ("nan_to_num_values", lambda x: torch.nan_to_num(x, nan=-1.5, posinf=7.0, neginf=-8.0), with_inf(*X)),
    ("nan_to_num_f64", lambda x: torch.nan_to_num(x.double(), posinf=1e300), with_inf(*X)),
    ("nan_to_num_f16", lambda x: torch.nan_to_num(x.half()).float(), with_inf(*X)),
    ("var_mean", lambda x: torch.var_mean(x, 1), randn(*X)),
    ("std_mean_keepdim", lambda x: torch.std_mean(x, (1, 2), unbiased=False, keepdim=True), randn(*X)),
    ("var_mean_all", lambda x: torch.var_mean(x), randn(*X)),
    ("tile", lambda x: x.tile((2,)), randn(2, 3)),
    ("tile_more_dims", lambda x: torch.tile(x, (2, 1, 3)), randn(2, 3)),
    ("repeat_interleave", lambda x: x.repeat_interleave(2, dim=1), randn(2, 3, 4)),
    ("repeat_interleave_flat", lambda x: torch.repeat_interleave(x, 3), randn(2, 3)),
    ("repeat_interleave_neg_dim", lambda i: i.repeat_interleave(2, dim=-1), ints(2, 3)),
    ("repeat_interleave_counts", lambda x: x.repeat_interleave(torch.tensor([1, 0, 2]), dim=0), randn(3, 4)),
    ("scatter_src", lambda x, i, v: x.scatter(1, i, v), randn(3, 5), distinct_rows(3, 2, 5), randn(3, 4)),
    ("scatter_value", lambda x, i: x.scatter(1, i, 2.5), randn(3, 5), distinct_rows(3, 2, 5)),
    ("scatter_add", lambda x, i, v: x.scatter_add(0, i, v), randn(4, 3), ints(6, 3, hi=4), randn(6, 3)),
    ("scatter_add_small_index", lambda x, i, v: torch.scatter_add(x, 0, i, v), randn(4, 5),
     ints(3, 2, hi=4), randn(3, 4)),
    ("scatter_add_inplace", lambda x, i, v: (x * 1).scatter_add_(1, i, v), randn(2, 6), ints(2, 9, hi=6),
     randn(2, 9)),
    ("scatter_add_int64", lambda x, i, v: x.scatter_add(1, i, v), ints(3, 4), ints(3, 5, hi=4), ints(3, 5)),
    ("scatter_reduce_sum", lambda x, i, v: x.scatter_reduce(1, i, v, "sum"), randn(3, 4), ints(3, 6, hi=4),
     randn(3, 6)),
    ("scatter_reduce_amax", lambda x, i, v: x.scatter_reduce(1, i, v, "amax", include_self=False),
     randn(3, 4), ints(3, 6, hi=4), randn(3, 6)),
    ("scatter_reduce_amin", lambda x, i, v: x.scatter_reduce(0, i, v, "amin"), randn(4, 3),
     ints(5, 3, hi=4), randn(5, 3)),
    ("scatter_reduce_mean", lambda x, i, v: x.scatter_reduce(1, i, v, "mean"), randn(3, 4),
     ints(3, 6, hi=4), randn(3, 6)),
    ("scatter_reduce_mean_exclude", lambda x, i, v: x.scatter_reduce(1, i, v, "mean", include_self=False),
     randn(3, 4), ints(3, 6, hi=4), randn(3, 6)),
    ("scatter_reduce_mean_int64", lambda x, i, v: x.scatter_reduce(1, i, v, "mean"), ints(3, 4, lo=-9),
     ints(3, 6, hi=4), ints(3, 6, lo=-9)),
    ("scatter_reduce_prod", lambda x, i, v: x.scatter_reduce(1, i, v, "prod", include_self=False),
     randn(3, 4), ints(3, 6, hi=4), randn(3, 6)),
    ("scatter_multiply", lambda x, i, v: x.scatter(1, i, v, reduce="multiply"), randn(3, 5),
     ints(3, 4, hi=5), randn(3, 4)),
    ("native_layer_norm", lambda x, w, b: torch.native_layer_norm(x, [5], w, b, 1e-5), randn(*X),
     randn(5), randn(5)),
    ("native_layer_norm_2d", lambda x: torch.native_layer_norm(x, [4, 5], None, None, 1e-6), randn(*X)),
    ("native_group_norm", lambda x, w, b: torch.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5),
     randn(2, 6, 3, 4), randn(6), randn(6)),
    ("native_group_norm_used_stats", lambda x: sum(torch.native_group_norm(x, None, None, 2, 4, 5, 2, 1e-5)[1:]),
     randn(2, 4, 5)),
    ("adaptive_avg_pool2d_core", lambda x: torch.ops.aten._adaptive_avg_pool2d(x, [2, 3]), randn(1, 3, 7, 8)),
    ("scalar_tensor", lambda x: x + torch.scalar_tensor(3), randn(*X)),
    ("index_put_mask_scalar", put_mask_scalar, randn(*X)),
    ("index_put_mask_rows", put_mask_rows, randn(2, 3, 4), mask(2, 3), randn(4)),
    ("index_put_rows", put_rows, randn(5, 3), distinct_rows(1, 2, 5), randn(2, 3)),
    ("index_put_middle", put_middle, randn(2, 5, 3), ints(3, hi=5)),
    ("index_put_pairs", put_pairs, randn(4, 6), ints(3, hi=4), ints(2, hi=6)),
    ("index_put_accumulate", lambda x, i, j, v: torch.index_put(x, (i, j), v, accumulate=True),
     randn(3, 4), ints(8, hi=3), ints(8, hi=4), randn(8)),
    ("index_put_accumulate_int64", lambda x, i, v: x.index_put((i,), v, accumulate=True),
     ints(5), ints(9, hi=5), ints(9)),
])

# ---------------------------------------------------------------- scripted (not traced)


class ScriptedConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding="same")
        self.bn = bn(nn.BatchNorm2d, 4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))).flatten(1)


class ScriptedFunctional(nn.Module):
    def forward(self, x, y):
        z = torch.cat([x, y], dim=1).transpose(0, 1)
        z = torch.clamp(z, min=-1.0) * torch.sigmoid(z)
        return F.softmax(z.sum(dim=-1, keepdim=True) + z.mean(), dim=0)


class ScriptedIndexing(nn.Module):
    def forward(self, x, idx):
        a, b = x.chunk(2, dim=1)
        return torch.gather(a * b, 0, idx).permute(1, 0)


class ScriptedConv1dPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool1d(2)

    def forward(self, x):
        return F.adaptive_avg_pool1d(self.pool(F.gelu(self.conv(x))), 3)


class ScriptedReductions(nn.Module):
    def forward(self, x):
        a = x.sum(dim=[1, 2], keepdim=True)
        b = x.std(dim=1, unbiased=False)
        c = torch.norm(x, p=2, dim=-1)
        d = torch.amax(x, dim=(0, 1))
        values, indices = torch.max(x, dim=2)
        return a.flatten() + b.sum(), c, d, values * 2, indices


class ScriptedSelection(nn.Module):
    def forward(self, x, idx):
        y = torch.where(x > 0, x, torch.zeros_like(x))
        top, at = torch.topk(x[:, 1:3].reshape(-1), 3)
        return y[idx], top, at, x.argsort(dim=-1, descending=True)


class ScriptedEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.norm = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 4)

    def forward(self, tokens):
        h = self.norm(self.embed(tokens))
        return torch.einsum("bsd,od->bso", h, self.proj.weight) + self.proj.bias


class ScriptedCasts(nn.Module):
    def forward(self, x):
        mask = x > 0.25
        counts = mask.to(torch.int64).sum(dim=1)
        return mask.float() * x, counts, (x * 4).round().long() % 3


class ScriptedInterpolate(nn.Module):
    def forward(self, x):
        y = F.interpolate(x, scale_factor=2.0, mode="nearest")
        return F.interpolate(y, size=[5, 7], mode="bilinear", align_corners=False)


class ScriptedPositions(nn.Module):
    """Transformer-style position ids from the sequence length (arange of a size)."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Embedding(16, 6)

    def forward(self, x):
        positions = torch.arange(x.size(1))
        return x + self.pos(positions).unsqueeze(0)


class ScriptedLoopIndexCat(nn.Module):
    """x[i] with a run-time index (also negative); cat and stack of a list built in a loop."""

    def forward(self, x):
        parts: List[torch.Tensor] = []
        for i in range(x.size(0)):
            parts.append(x[i] * float(i + 1) + x[i - x.size(0)])
        return torch.cat(parts, 1), torch.stack(parts, -1), torch.stack(parts)


class ScriptedGroupNormPad(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(2, 4)
        self.conv = nn.ConvTranspose2d(4, 2, 3, stride=2)

    def forward(self, x):
        y = F.pad(self.norm(x), [1, 1, 2, 0], mode="reflect")
        return self.conv(F.silu(y))


class ScriptedViewWrites(nn.Module):
    """Writes through views inside the branches of an If and a loop: the tensor
    the view was taken from, and its views taken before, leave with the writes."""

    def forward(self, x):
        y = x.clone()
        v = y[0]
        if bool(x.sum() > 0):
            y[:, 1] = 2.0
        else:
            v.fill_(-1.0)
        for i in range(2):
            y[i, 2:].add_(1.0)
        return y, v


for name, module, inputs in [
    ("view_writes_in_blocks", ScriptedViewWrites(), (randn(3, 4, 5),)),
    ("view_writes_in_blocks_neg", ScriptedViewWrites(), (lambda: -torch.rand(3, 4, 5),)),
    ("conv1d_pool", ScriptedConv1dPool(), (randn(2, 3, 12),)),
    ("reductions", ScriptedReductions(), (distinct(3, 4, 5),)),
    ("selection", ScriptedSelection(), (distinct(4, 5), ints(3, hi=4))),
    ("embedding_einsum", ScriptedEmbedding(), (ints(2, 5, hi=20),)),
    ("casts", ScriptedCasts(), (randn(3, 6),)),
    ("interpolate", ScriptedInterpolate(), (randn(1, 2, 3, 4),)),
    ("positions", ScriptedPositions(), (randn(2, 7, 6),)),
    ("groupnorm_pad_convtranspose", ScriptedGroupNormPad(), (randn(1, 4, 5, 6),)),
    ("loop_index_cat", ScriptedLoopIndexCat(), (randn(4, 3, 2),)),
]:
    CASES.append(("scripted", name, module, inputs, "script"))

CASES.append(("scripted", "conv_bn_relu", ScriptedConv(), (randn(1, 3, 6, 6),), "script"))
CASES.append(("scripted", "functional", ScriptedFunctional(), (randn(3, 4), randn(3, 2)),
              "script"))
CASES.append(("scripted", "indexing", ScriptedIndexing(), (randn(4, 6), ints(2, 3, hi=4)),
              "script"))


# ---------------------------------------------------------------- driver

DTYPES = {torch.float32: "FP32", torch.int64: "INT64", torch.bool: "BOOL", torch.int32: "INT32",
          torch.float64: "FP64", torch.uint8: "UINT8", torch.int8: "INT8", torch.int16: "INT16",
          torch.float16: "FP16", torch.bfloat16: "BF16"}


def main():
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} OUTPUT_DIR [CASE_SUBSTRING]")
    out_dir = sys.argv[1]
    only = sys.argv[2] if len(sys.argv) > 2 else None
    os.makedirs(out_dir, exist_ok=True)
    manifest = []
    for index, (family, name, fn, makers, mode) in enumerate(CASES):
        case_name = f"{family}.{name}"
        if only and only not in case_name:
            continue
        torch.manual_seed(1000 + index)
        module = fn if isinstance(fn, nn.Module) else Fn(fn)
        module.eval()
        inputs = [make() for make in makers]
        # Cases may mutate their inputs in place: trace and run on copies.
        with torch.no_grad():
            if mode == "script":
                saved = torch.jit.script(module)
            else:
                saved = torch.jit.trace(module, tuple(t.clone() for t in inputs), check_trace=False)
        outputs = flatten_outputs(
            save_and_run(saved, os.path.join(out_dir, f"{case_name}.pt"), inputs))
        entry = {"name": case_name, "family": family, "inputs": [], "outputs": []}
        for i, t in enumerate(inputs):
            np.save(os.path.join(out_dir, f"{case_name}.input.{i}.npy"), t.numpy())
            entry["inputs"].append({"dtype": DTYPES[t.dtype], "dims": list(t.shape)})
        for i, t in enumerate(outputs):
            np.save(os.path.join(out_dir, f"{case_name}.output{i}.npy"), t.contiguous().numpy())
            entry["outputs"].append({"dtype": DTYPES.get(t.dtype, str(t.dtype)),
                                     "dims": list(t.shape)})
        manifest.append(entry)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote {len(manifest)} cases to {out_dir}")


if __name__ == "__main__":
    main()
