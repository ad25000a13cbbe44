"""Sweep cases of the neural-network ops: convolution, pooling, normalization, softmax,
embedding, resampling, recurrent layers and attention (sweep_lib.py says what each variant
means). Weights are inputs (functional forms, so every dtype can be asked for) or module
parameters in the case's float dtype (constant weights, as models have them)."""
from sweep_lib import ALL, FLOAT, RANK, T, add  # noqa: F401

S = "small"
F = ["f32"]
F32_I64 = ["f32", "i64"]

# ---------------------------------------------------------------- convolution

CONV = {1: ((1, 4, 7), (6, 4, 3)), 2: ((1, 4, 6, 5), (6, 4, 3, 3)),
        3: ((1, 4, 4, 5, 3), (6, 4, 3, 3, 2))}
for n, (x, w) in CONV.items():
    fn = f"F.conv{n}d"
    ins = [T(x, S), T(w, S), T((6,), S)]
    # Traced functional convolutions record aten::_convolution; scripted ones aten::convN d.
    add("aten::_convolution", f"{n}d", f"{fn}(x0, x1, x2)", ins, ALL)
    add(f"aten::conv{n}d", "dtypes", f"{fn}(x0, x1, x2)", ins, FLOAT + ["i64"], ("script",))
    add("aten::_convolution", f"{n}d_kw", f"{fn}(x0, x1, None, stride=2, padding=1, dilation=1)",
        ins[:2], F)
    add("aten::_convolution", f"{n}d_groups", f"{fn}(x0, x1, x2, groups=2, dilation=2, padding=2)",
        [T(x, S), T((6, 2) + w[2:], S), T((6,), S)], ["f32", "f64"])
    add("aten::_convolution", f"{n}d_batchless", f"{fn}(x0, x1, x2)",
        [T(x[1:], S), T(w, S), T((6,), S)], F)
    add("aten::_convolution_mode", f"{n}d_same", f"{fn}(x0, x1, x2, padding='same')", ins, F)
    add("aten::_convolution_mode", f"{n}d_valid", f"{fn}(x0, x1, padding='valid', stride=1)",
        ins[:2], F)
    add("aten::_convolution", f"{n}d_module", "self.m(x0)", [T(x, S)], FLOAT,
        init=[f"self.m = nn.Conv{n}d(4, 6, 3, padding=1).to({{dt}})"])
    add(f"aten::conv{n}d", "module", "self.m(x0)", [T(x, S)], F, ("script",),
        init=[f"self.m = nn.Conv{n}d(4, 6, 3, padding=1).to({{dt}})"])
    add(f"aten::conv{n}d", "same", f"{fn}(x0, x1, x2, padding='same')", ins, F, ("script",))
    add(f"aten::conv_transpose{n}d", "dtypes", f"F.conv_transpose{n}d(x0, x1, x2)",
        [T(x, S), T((4, 3) + w[2:], S), T((3,), S)], FLOAT + ["i64"], ("script",))
    add(f"aten::conv_transpose{n}d", "kw", f"F.conv_transpose{n}d(x0, x1, None, 2, 1, 1)",
        [T(x, S), T((4, 3) + w[2:], S)], F, ("script",))
    add("aten::_convolution", f"{n}d_transposed",
        f"F.conv_transpose{n}d(x0, x1, x2, stride=2, padding=1, output_padding=1, groups=2)",
        [T(x, S), T((4, 2) + w[2:], S), T((4,), S)], FLOAT)
add("aten::_convolution", "2d_empty", "F.conv2d(x0, x1)", [T((0, 4, 6, 5), S), T((6, 4, 3, 3), S)])
add("aten::_convolution", "2d_noncontig", "F.conv2d(x0.transpose(2, 3), x1)",
    [T((1, 4, 6, 5), S), T((6, 4, 3, 3), S)])
add("aten::convolution", "2d", "torch.ops.aten.convolution(x0, x1, x2, [1, 1], [1, 0], [1, 1], False, [0, 0], 1)",
    [T((1, 4, 6, 5), S), T((6, 4, 3, 3), S), T((6,), S)], FLOAT, ("script",))
add("aten::convolution", "2d_transposed",
    "torch.ops.aten.convolution(x0, x1, None, [2, 2], [0, 0], [1, 1], True, [1, 1], 1)",
    [T((1, 4, 6, 5), S), T((4, 3, 3, 3), S)], F, ("script",))

# ---------------------------------------------------------------- pooling

POOL_X = {1: (1, 3, 9), 2: (1, 3, 7, 6), 3: (1, 2, 5, 6, 4)}
for n, x in POOL_X.items():
    for name, variant, expr, dtypes in [
            (f"max_pool{n}d", "dtypes", f"F.max_pool{n}d(x0, 2)", ALL),
            (f"max_pool{n}d", "kw", f"F.max_pool{n}d(x0, 3, stride=2, padding=1, ceil_mode=True)", F),
            (f"max_pool{n}d_with_indices", "dtypes", f"F.max_pool{n}d(x0, 2, return_indices=True)", FLOAT),
            (f"avg_pool{n}d", "dtypes", f"F.avg_pool{n}d(x0, 2)", ALL),
            (f"avg_pool{n}d", "kw_exclude_pad", f"F.avg_pool{n}d(x0, 3, 2, 1, count_include_pad=False)", F),
            (f"avg_pool{n}d", "kw_ceil", f"F.avg_pool{n}d(x0, 3, 2, 1, ceil_mode=True)", F),
            (f"adaptive_avg_pool{n}d", "dtypes", f"F.adaptive_avg_pool{n}d(x0, 1)", ALL),
            (f"adaptive_avg_pool{n}d", "uneven", f"F.adaptive_avg_pool{n}d(x0, 3)", F),
            (f"adaptive_max_pool{n}d", "dtypes", f"F.adaptive_max_pool{n}d(x0, 2)", ALL),
            (f"adaptive_max_pool{n}d", "indices", f"F.adaptive_max_pool{n}d(x0, 3, return_indices=True)", F)]:
        dom = "distinct" if "max" in name else "any"
        add(f"aten::{name}", variant, expr, [T(x, dom)], dtypes)
        if dtypes is ALL:
            add(f"aten::{name}", "batchless", expr, [T(x[1:], dom)])
            add(f"aten::{name}", "dtypes", expr, [T(x, dom)], F, ("script",))
add("aten::max_pool2d", "noncontig", "F.max_pool2d(x0.transpose(2, 3), 2)", [T((1, 3, 7, 6), "distinct")])
add("aten::max_pool2d", "empty", "F.max_pool2d(x0, 2)", [T((0, 3, 4, 4))])
add("aten::avg_pool2d", "divisor", "F.avg_pool2d(x0, 2, divisor_override=3)", [T((1, 3, 7, 6))])
add("aten::adaptive_avg_pool2d", "tuple", "F.adaptive_avg_pool2d(x0, (2, None))", [T((1, 3, 7, 6))])
add("aten::_adaptive_avg_pool2d", "dtypes", "torch.ops.aten._adaptive_avg_pool2d(x0, [2, 3])",
    [T((1, 3, 7, 6))], ["f32", "f64"])
add("aten::_adaptive_avg_pool3d", "dtypes", "torch.ops.aten._adaptive_avg_pool3d(x0, [2, 2, 3])",
    [T((1, 2, 5, 4, 6))], ["f32", "f64"])
add("aten::adaptive_avg_pool2d", "module", "self.m(x0)", [T((2, 3, 7, 6))], FLOAT,
    init=["self.m = nn.AdaptiveAvgPool2d((1, 1))"])

# ---------------------------------------------------------------- normalization, softmax

for variant, shape in [("dtypes", (2, 3, 4)), ("rank2", (4, 3)), ("rank4", (2, 3, 4, 2)),
                       ("rank5", (1, 3, 2, 2, 2))]:
    add("aten::batch_norm", variant, "F.batch_norm(x0, x1, x2, x3, x4, False, 0.1, 1e-5)",
        [T(shape, S), T((3,), S), T((3,), "pos"), T((3,), S), T((3,), S)],
        ALL if variant == "dtypes" else F)
add("aten::batch_norm", "module", "self.m(x0)", [T((2, 3, 4, 5))], FLOAT,
    init=["self.m = nn.BatchNorm2d(3).to({dt})",
          "self.m.running_mean.uniform_(-1, 1)", "self.m.running_var.uniform_(0.5, 2)"])
add("aten::batch_norm", "module", "self.m(x0)", [T((2, 3, 4, 5))], F, ("script",),
    init=["self.m = nn.BatchNorm2d(3).to({dt}).eval()"])
add("aten::batch_norm", "no_affine", "F.batch_norm(x0, x1, x2, None, None, False, 0.1, 1e-3)",
    [T((2, 3, 4)), T((3,), S), T((3,), "pos")], ["f32", "f64"])
add("aten::batch_norm", "mixed_params", "F.batch_norm(x0, x1, x2, None, None, False, 0.1, 1e-5)",
    [T((2, 3, 4)), T((3,), S, "f32"), T((3,), "pos", "f32")], ["f16", "bf16"])
for variant, expr, ins, dtypes in [
        ("dtypes", "F.layer_norm(x0, [4], x1, x2)", [T((2, 3, 4)), T((4,), S), T((4,), S)], ALL),
        ("two_dims", "F.layer_norm(x0, [3, 4], eps=1e-3)", [T((2, 3, 4))], ["f32", "f64"]),
        ("rank1", "F.layer_norm(x0, [5])", [T((5,))], F),
        ("rank5", "F.layer_norm(x0, [2])", [T(RANK[5])], F),
        ("empty", "F.layer_norm(x0, [3])", [T((0, 3))], F),
        ("mixed_params", "F.layer_norm(x0, [4], x1, x2)", [T((2, 3, 4)), T((4,), S, "f32"), T((4,), S, "f32")], ["f16", "bf16"])]:
    add("aten::layer_norm", variant, expr, ins, dtypes)
add("aten::layer_norm", "module", "self.m(x0)", [T((2, 3, 4))], FLOAT, init=["self.m = nn.LayerNorm(4).to({dt})"])
add("aten::layer_norm", "module", "self.m(x0)", [T((2, 3, 4))], F, ("script",), init=["self.m = nn.LayerNorm(4)"])
add("aten::group_norm", "dtypes", "F.group_norm(x0, 2, x1, x2)", [T((2, 4, 3)), T((4,), S), T((4,), S)], ALL)
add("aten::group_norm", "rank4", "F.group_norm(x0, 1, eps=1e-3)", [T((2, 4, 3, 2))], ["f32", "f64"])
add("aten::group_norm", "module", "self.m(x0)", [T((2, 4, 3, 3))], FLOAT, init=["self.m = nn.GroupNorm(2, 4).to({dt})"])
add("aten::group_norm", "module", "self.m(x0)", [T((2, 4, 3, 3))], F, ("script",), init=["self.m = nn.GroupNorm(2, 4)"])
# The core ATen forms: (y, mean, rstd), the statistics compared too.
add("aten::native_layer_norm", "dtypes", "torch.native_layer_norm(x0, [4], x1, x2, 1e-5)",
    [T((2, 3, 4)), T((4,), S), T((4,), S)], ["f32", "f64"])
add("aten::native_layer_norm", "two_dims", "torch.native_layer_norm(x0, [3, 4], None, None, 1e-3)",
    [T((2, 3, 4))], ["f32", "f64"])
add("aten::native_layer_norm", "y_only", "torch.native_layer_norm(x0, [4], x1, x2, 1e-5)[0]",
    [T((2, 3, 4)), T((4,), S), T((4,), S)], ["f16", "bf16"])
add("aten::native_group_norm", "dtypes", "torch.native_group_norm(x0, x1, x2, 2, 4, 3, 2, 1e-5)",
    [T((2, 4, 3)), T((4,), S), T((4,), S)], ["f32", "f64"])
add("aten::native_group_norm", "rank4", "torch.native_group_norm(x0, None, None, 2, 4, 6, 1, 1e-3)",
    [T((2, 4, 3, 2))], ["f32", "f64"])
add("aten::instance_norm", "dtypes", "F.instance_norm(x0, weight=x1, bias=x2)",
    [T((2, 3, 5)), T((3,), S), T((3,), S)], ALL)
add("aten::instance_norm", "rank4", "F.instance_norm(x0)", [T((2, 3, 4, 5))], ["f32", "f64"])
add("aten::instance_norm", "module", "self.m(x0)", [T((2, 3, 4, 5))], F, ("trace", "script"),
    init=["self.m = nn.InstanceNorm2d(3, affine=True)"])
for name, fn in [("softmax", "F.softmax"), ("log_softmax", "F.log_softmax")]:
    op = f"aten::{name}"
    add(op, "dtypes", f"{fn}(x0, 1)", [T((2, 3, 4))], ALL)
    add(op, "dtypes", f"{fn}(x0, -1)", [T((2, 3, 4))], F32_I64, ("script",))
    for r in (0, 1, 5):
        add(op, f"rank{r}", f"{fn}(x0, -1)", [T(RANK[r])])
    add(op, "kw_dtype", f"{fn}(x0, 0, dtype=torch.float64)", [T((2, 3, 4))], ["f32", "f16", "i64"])
    add(op, "empty", f"{fn}(x0, 1)", [T((0, 3))])
    add(op, "noncontig", f"{fn}(x0.transpose(0, 2), 1)", [T((2, 3, 4))])
    add(f"aten::_{name}", "dtypes", f"torch._{name}(x0, 1, False)", [T((2, 3, 4))], FLOAT)
add("aten::embedding", "dtypes", "F.embedding(x1, x0)", [T((10, 4)), T((2, 3), "idx10", "i64")], ALL)
add("aten::embedding", "int32_index", "F.embedding(x1, x0)", [T((10, 4)), T((5,), "idx10", "i32")])
add("aten::embedding", "module", "self.m(x0)", [T((2, 5), "idx10", "i64")], FLOAT,
    init=["self.m = nn.Embedding(10, 3).to({dt})"])
add("aten::embedding", "module", "self.m(x0)", [T((2, 5), "idx10", "i64")], F, ("script",),
    init=["self.m = nn.Embedding(10, 3, padding_idx=0)"])
add("aten::embedding", "rank0", "F.embedding(x1, x0)", [T((10, 4)), T((), "idx10", "i64")])

# ---------------------------------------------------------------- resampling

for variant, expr, x, dtypes in [
        ("nearest1d", "F.interpolate(x0, scale_factor=2.0)", (1, 2, 5), ALL),
        ("nearest2d", "F.interpolate(x0, size=(5, 7))", (1, 2, 3, 4), ALL),
        ("nearest3d", "F.interpolate(x0, scale_factor=2.0)", (1, 2, 2, 3, 2), F),
        ("linear1d", "F.interpolate(x0, size=7, mode='linear')", (1, 2, 5), FLOAT),
        ("linear1d_ac", "F.interpolate(x0, scale_factor=1.5, mode='linear', align_corners=True)", (1, 2, 5), F),
        ("bilinear2d", "F.interpolate(x0, scale_factor=2.0, mode='bilinear')", (1, 2, 3, 4), ALL),
        ("bilinear2d_ac", "F.interpolate(x0, size=(5, 7), mode='bilinear', align_corners=True)", (1, 2, 3, 4), F),
        ("bilinear2d_down", "F.interpolate(x0, size=(2, 3), mode='bilinear')", (2, 1, 5, 7), F),
        ("bicubic2d", "F.interpolate(x0, size=(5, 6), mode='bicubic')", (1, 2, 3, 4), FLOAT),
        ("bicubic2d_ac", "F.interpolate(x0, scale_factor=2.0, mode='bicubic', align_corners=True)", (1, 2, 3, 4), F),
        ("trilinear3d", "F.interpolate(x0, scale_factor=2.0, mode='trilinear')", (1, 2, 2, 3, 2), FLOAT),
        ("nearest_exact1d", "F.interpolate(x0, size=7, mode='nearest-exact')", (1, 2, 5), F),
        ("nearest_exact2d", "F.interpolate(x0, size=(5, 7), mode='nearest-exact')", (1, 2, 3, 4), FLOAT + ["u8"]),
        ("nearest_exact3d", "F.interpolate(x0, scale_factor=2.0, mode='nearest-exact')", (1, 2, 2, 3, 2), F)]:
    kind = {"nearest1d": "upsample_nearest1d", "nearest2d": "upsample_nearest2d",
            "nearest3d": "upsample_nearest3d", "linear1d": "upsample_linear1d",
            "bilinear2d": "upsample_bilinear2d", "bicubic2d": "upsample_bicubic2d",
            "trilinear3d": "upsample_trilinear3d", "nearest_exact1d": "_upsample_nearest_exact1d",
            "nearest_exact2d": "_upsample_nearest_exact2d",
            "nearest_exact3d": "_upsample_nearest_exact3d"}
    op = kind[variant.replace("_ac", "").replace("_down", "")]
    add(f"aten::{op}", variant, expr, [T(x)], dtypes)
    if dtypes is ALL:
        add(f"aten::{op}", variant, expr, [T(x)], F, ("script",))

# F.grid_sample on 4-D input (aten::grid_sampler): every mode, padding and corner rule, with
# grid coordinates partly outside [-1, 1]; float64 too; a 5-D input runs on the fallback.
for mode in ["bilinear", "nearest", "bicubic"]:
    for pad in ["zeros", "border", "reflection"]:
        for ac in [False, True]:
            add("aten::grid_sampler", f"{mode}_{pad}{'_ac' if ac else ''}",
                f"F.grid_sample(x0, x1, mode='{mode}', padding_mode='{pad}', align_corners={ac})",
                [T((2, 3, 5, 6)), T((2, 4, 3, 2))], ["f32", "f64"] if mode == "bilinear" else F)
for ac in [False, True]:
    add("aten::affine_grid_generator", f"2d{'_ac' if ac else ''}",
        f"F.affine_grid(x0, [2, 3, 5, 7], align_corners={ac})", [T((2, 2, 3))], ["f32", "f64"])
    add("aten::affine_grid_generator", f"3d{'_ac' if ac else ''}",
        f"F.affine_grid(x0, [2, 1, 3, 4, 5], align_corners={ac})", [T((2, 3, 4))], F)
add("aten::affine_grid_generator", "one_pixel", "F.affine_grid(x0, [1, 1, 1, 4], align_corners=False)",
    [T((1, 2, 3))], F)
# A spatial transformer: the grid of x's own size (a size computed at run time).
add("aten::affine_grid_generator", "stn", "F.grid_sample(x1, F.affine_grid(x0, x1.size(), "
    "align_corners=False), align_corners=False)", [T((2, 2, 3), "small"), T((2, 3, 6, 5))], F)
add("aten::grid_sampler", "volumetric", "F.grid_sample(x0, x1, align_corners=False)",
    [T((1, 2, 3, 4, 5)), T((1, 2, 3, 2, 3))], F)

# ---------------------------------------------------------------- recurrent layers, attention

for name, cls in [("lstm", "LSTM"), ("gru", "GRU"), ("rnn_tanh", "RNN"),
                  ("rnn_relu", "RNN")]:
    extra = ", nonlinearity='relu'" if name == "rnn_relu" else ""
    op = f"aten::{name}"
    add(op, "dtypes", "self.m(x0)[0]", [T((2, 5, 3), S)], FLOAT,
        init=[f"self.m = nn.{cls}(3, 4, batch_first=True{extra}).to({{dt}})"])
    add(op, "bidir_2layer", "self.m(x0)", [T((5, 2, 3), S)], F,
        init=[f"self.m = nn.{cls}(3, 4, num_layers=2, bidirectional=True{extra})"])
    add(op, "no_bias", "self.m(x0)[0]", [T((5, 2, 3), S)], F,
        init=[f"self.m = nn.{cls}(3, 4, bias=False{extra})"])
    add(op, "batchless", "self.m(x0)[0]", [T((5, 3), S)], F,
        init=[f"self.m = nn.{cls}(3, 4{extra})"])
    add(op, "dtypes", "self.m(x0)[0]", [T((2, 5, 3), S)], F, ("script",),
        init=[f"self.m = nn.{cls}(3, 4, batch_first=True{extra})"])
    state = "(x1, x1)" if name == "lstm" else "x1"
    add(op, "state", f"self.m(x0, {state})", [T((2, 5, 3), S), T((1, 2, 4), S)], F,
        init=[f"self.m = nn.{cls}(3, 4, batch_first=True{extra})"])
for variant, expr, ins in [
        ("self", "self.m(x0, x0, x0, need_weights=False)[0]", [T((2, 5, 8), S)]),
        ("weights", "self.m(x0, x0, x0)", [T((2, 5, 8), S)]),
        ("key_padding", "self.m(x0, x0, x0, key_padding_mask=x1, need_weights=False)[0]",
         [T((2, 5, 8), S), T((2, 5), "mask", "b")])]:
    add("aten::_native_multi_head_attention", variant, expr, ins, F,
        init=["self.m = nn.MultiheadAttention(8, 2, batch_first=True)"])
add("aten::_native_multi_head_attention", "dtypes", "self.m(x0, x0, x0, need_weights=False)[0]",
    [T((2, 5, 8), S)], ["f64"], init=["self.m = nn.MultiheadAttention(8, 2, batch_first=True).to({dt})"])
for variant, extra in [("relu", ""), ("gelu_norm_first", ", activation='gelu', norm_first=True")]:
    add("aten::_transformer_encoder_layer_fwd", variant, "self.m(x0)", [T((2, 5, 8), S)], F,
        init=[f"self.m = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True{extra}).eval()"])
add("aten::_transformer_encoder_layer_fwd", "mask", "self.m(x0, src_key_padding_mask=x1)",
    [T((2, 5, 8), S), T((2, 5), "mask", "b")], F,
    init=["self.m = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()"])
