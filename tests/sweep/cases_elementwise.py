"""Sweep cases of the elementwise ops: unary math, activations, binary arithmetic and
comparisons, ternary ops and clamps (sweep_lib.py says what each variant means)."""
from sweep_lib import ALL, BASE, FLOAT, INT, RANK, T, add, std_variants  # noqa: F401

# ---------------------------------------------------------------- elementwise unary

def unary(name, dom="any", inplace=True, fn=None, dtypes=ALL):
    op = f"aten::{name}"
    expr = fn or f"torch.{name}(x0)"
    std_variants(op, expr, [dom], dtypes)
    if inplace:
        ip = f"aten::{name}_"
        add(ip if ip in INPLACE_ROWS else op, "inplace", f"x0.clone().{name}_()",
            [T(BASE, dom)], ["f32", "i32"], kind=ip)


# In-place forms with a row of their own (TorchScript's table); the others count in the
# functional op's row, which translates them.
INPLACE_ROWS = {"aten::floor_divide_", "aten::t_", "aten::fill_", "aten::copy_"}

for name, dom in [("abs", "any"), ("neg", "any"), ("sign", "any"), ("sqrt", "pos"),
                  ("rsqrt", "pos"), ("exp", "small"), ("expm1", "small"), ("log", "pos"),
                  ("log2", "pos"), ("log10", "pos"), ("log1p", "pos"), ("reciprocal", "pos"),
                  ("floor", "any"), ("ceil", "any"), ("round", "any"), ("trunc", "any"),
                  ("fix", "any"), ("frac", "any"), ("erf", "any"), ("sin", "any"),
                  ("cos", "any"), ("tan", "unit"), ("asin", "unit"), ("acos", "unit"),
                  ("atan", "any"), ("sinh", "small"), ("cosh", "small"), ("tanh", "any"),
                  ("sigmoid", "any"), ("relu", "any"), ("square", "any"), ("isnan", "any"),
                  ("logical_not", "any"), ("bitwise_not", "any")]:
    unary(name, dom, inplace=name not in ("isnan",))
add("aten::isnan", "nan", "torch.isnan(torch.log(x0))", [T(BASE)], ["f32", "f64", "f16"])
# The inverse hyperbolic functions (the arc* names are aliases: sweep_lib.ALIASES).
for name, dom in [("asinh", "any"), ("atanh", "unit"), ("arcsin", "unit"), ("arccos", "unit"),
                  ("arctan", "any"), ("arcsinh", "any"), ("arctanh", "unit")]:
    unary(name, dom)
for name in ["acosh", "arccosh"]:  # defined from 1 up
    std_variants(f"aten::{name}", f"torch.{name}(x0 + 1)", ["pos"], FLOAT)
# Infinities: log(0) and log of a negative number give -inf and NaN; x / 0, +-inf.
for name in ["isinf", "isposinf", "isneginf", "isfinite"]:
    std_variants(f"aten::{name}", f"torch.{name}(x0)", ["any"], script=("f32",))
    add(f"aten::{name}", "inf", f"torch.{name}(torch.log(x0) * x1)",
        [T(BASE), T(BASE, "any", "f32")], ["f32", "f64", "f16", "i64"])
std_variants("aten::nan_to_num", "torch.nan_to_num(torch.log(x0) * x0)", ["any"], FLOAT, script=("f32",))
add("aten::nan_to_num", "kw", "torch.nan_to_num(torch.log(x0) * x1, nan=1.5, posinf=9.0, neginf=-9.0)",
    [T(BASE), T(BASE, "any", "f32")], FLOAT + ["i64"])
add("aten::nan_to_num", "ints", "torch.nan_to_num(x0)", [T(BASE)], INT + ["b"])
add("aten::nan_to_num", "inplace", "torch.log(x0).nan_to_num_()", [T(BASE)], ["f32", "f64"],
    kind="aten::nan_to_num_")
add("aten::round", "kw_decimals", "torch.round(x0, decimals=2)", [T(BASE)], FLOAT)
add("aten::round", "kw_decimals_neg", "torch.round(x0 * 100, decimals=-1)", [T(BASE)], FLOAT)
add("aten::round", "kw_decimals", "torch.round(x0, decimals=2)", [T(BASE)], ["f32"], ("script",))

# Activations (torch.nn.functional), with their keyword variants.
for name, expr, dom in [("silu", "F.silu(x0)", "any"), ("hardswish", "F.hardswish(x0)", "any"),
                        ("hardsigmoid", "F.hardsigmoid(x0)", "any"),
                        ("relu6", "F.relu6(x0)", "any"), ("mish", "F.mish(x0)", "any"),
                        ("log_sigmoid", "F.logsigmoid(x0)", "any"),
                        ("gelu", "F.gelu(x0)", "any"), ("hardtanh", "F.hardtanh(x0)", "any"),
                        ("leaky_relu", "F.leaky_relu(x0)", "any"), ("elu", "F.elu(x0)", "any"),
                        ("selu", "F.selu(x0)", "any"), ("celu", "F.celu(x0)", "any"),
                        ("softplus", "F.softplus(x0)", "any"),
                        ("hardshrink", "F.hardshrink(x0)", "any"),
                        ("softshrink", "F.softshrink(x0)", "any")]:
    std_variants(f"aten::{name}", expr, [dom])
for name, expr in [("gelu", "F.gelu(x0, approximate='tanh')"),
                   ("hardtanh", "F.hardtanh(x0, -0.5, 0.7)"),
                   ("leaky_relu", "F.leaky_relu(x0, negative_slope=0.2)"),
                   ("elu", "F.elu(x0, alpha=0.5)"), ("celu", "F.celu(x0, alpha=2.0)"),
                   ("softplus", "F.softplus(x0, beta=2.0, threshold=1.0)"),
                   ("hardshrink", "F.hardshrink(x0, lambd=0.3)"),
                   ("softshrink", "F.softshrink(x0, lambd=0.3)")]:
    add(f"aten::{name}", "kw", expr, [T(BASE)], FLOAT + ["i64"])
for name in ["leaky_relu", "elu", "selu", "celu"]:
    add(f"aten::{name}", "inplace", f"F.{name}(x0.clone(), inplace=True)", [T(BASE)],
        ["f32", "f64"], kind=f"aten::{name}_")
add("aten::hardtanh", "inplace", "F.hardtanh(x0.clone(), inplace=True)", [T(BASE)], ["f32"],
    kind="aten::hardtanh_")
std_variants("aten::threshold", "F.threshold(x0, 0.1, 20.0)", ["any"])
add("aten::threshold", "inplace", "F.threshold(x0.clone(), 0.1, 20.0, inplace=True)",
    [T(BASE)], ["f32", "i64"], kind="aten::threshold_")
add("aten::prelu", "dtypes", "F.prelu(x0, x1)", [T((2, 3, 4)), T((3,), "small")], ALL)
add("aten::prelu", "single", "F.prelu(x0, x1)", [T((2, 3, 4, 5)), T((1,), "small")], FLOAT)
add("aten::prelu", "module", "self.m(x0)", [T((2, 3, 4))], FLOAT,
    init=["self.m = nn.PReLU(3).to({dt})"])
add("aten::prelu", "rank1", "F.prelu(x0, x1)", [T((5,)), T((1,), "small")])
add("aten::prelu", "dtypes", "F.prelu(x0, x1)", [T((2, 3, 4)), T((3,), "small")], ["f32"],
    ("script",))
for variant, expr, shape in [("dtypes", "F.glu(x0)", (2, 3, 4)),
                             ("kw_dim", "F.glu(x0, dim=1)", (2, 4, 3)),
                             ("rank1", "F.glu(x0)", (6,)), ("rank5", "F.glu(x0, 2)", (2, 1, 4, 1, 2))]:
    add("aten::glu", variant, expr, [T(shape)], ALL if variant == "dtypes" else ["f32"])
add("aten::glu", "dtypes", "F.glu(x0)", [T((2, 3, 4))], ["f32"], ("script",))

# ---------------------------------------------------------------- elementwise binary

MIXES = [("f32", "i64"), ("i32", "f64"), ("u8", "i8"), ("b", "f32"), ("f16", "f32"),
         ("bf16", "f16"), ("i64", "b")]


def binary(name, expr, doms=("any", "any"), scalars=(), kw=(), inplace=None, dtypes=ALL):
    op = f"aten::{name}"
    std_variants(op, expr, list(doms), dtypes)
    for variant, shapes in [("bcast", [(2, 1, 4), (3, 1)]), ("bcast5", [RANK[5], (2,)]),
                            ("bcast0d", [(3, 4), ()]), ("bcast0d_first", [(), (3, 4)])]:
        add(op, variant, expr, [T(s, d) for s, d in zip(shapes, doms)], ["f32", "i64"])
    for a, b in MIXES:
        add(op, f"mix_{b}", expr, [T(BASE, doms[0], a), T(BASE, doms[1], b)], [a])
        add(op, f"mix0d_{b}", expr, [T(BASE, doms[0], a), T((), doms[1], b)], [a])
    for variant, sexpr in scalars:
        add(op, f"s_{variant}", sexpr, [T(BASE, doms[0])], ["f32", "i64", "u8", "b", "f16"])
    for variant, kexpr, kdtypes in kw:
        add(op, f"kw_{variant}", kexpr, [T(BASE, d) for d in doms], kdtypes)
    if inplace:
        ip, iexpr = inplace
        add(ip if ip in INPLACE_ROWS else op, "inplace", iexpr, [T(BASE, d) for d in doms],
            ["f32", "i64"], kind=ip)


POS = ("any", "pos")
binary("add", "torch.add(x0, x1)", scalars=[("int", "x0 + 2"), ("float", "x0 + 2.5"),
                                            ("radd", "3 + x0"), ("bool", "torch.add(x0, True)")],
       kw=[("alpha", "torch.add(x0, x1, alpha=2)", ["f32", "i64", "i32"]),
           ("alpha_float", "torch.add(x0, x1, alpha=0.5)", FLOAT)],
       inplace=("aten::add_", "x0.clone().add_(x1)"))
binary("sub", "torch.sub(x0, x1)", scalars=[("int", "x0 - 2"), ("float", "x0 - 2.5")],
       kw=[("alpha", "torch.sub(x0, x1, alpha=3)", ["f32", "i64"])],
       inplace=("aten::sub_", "x0.clone().sub_(x1)"), dtypes=FLOAT + INT)
add("aten::sub", "dtypes", "torch.sub(x0, x1)", [T(BASE), T(BASE)], ["b"])  # libtorch refuses
binary("mul", "torch.mul(x0, x1)", scalars=[("int", "x0 * 3"), ("float", "x0 * 0.5"),
                                            ("rmul", "2 * x0")],
       inplace=("aten::mul_", "x0.clone().mul_(x1)"))
binary("div", "torch.div(x0, x1)", POS, scalars=[("int", "x0 / 2"), ("float", "x0 / 0.5")],
       kw=[("floor", "torch.div(x0, x1, rounding_mode='floor')", ALL),
           ("trunc", "torch.div(x0, x1, rounding_mode='trunc')", ALL),
           ("floor_scalar", "torch.div(x0, 3, rounding_mode='floor')", ["f32", "i64", "i32"])],
       inplace=("aten::div_", "x0.clone().div_(x1)"))
binary("true_divide", "torch.true_divide(x0, x1)", POS,
       inplace=("aten::true_divide_", "x0.clone().true_divide_(x1)"))
binary("floor_divide", "torch.floor_divide(x0, x1)", POS,
       scalars=[("int", "torch.floor_divide(x0, 2)"), ("float", "torch.floor_divide(x0, 1.5)")],
       inplace=("aten::floor_divide_", "x0.clone().floor_divide_(x1)"))
# torch.rsub of two tensors records aten::sub (traced and scripted); with a number, aten::rsub.
std_variants("aten::rsub", "torch.rsub(x0, 2)", ["any"], FLOAT + INT)
add("aten::rsub", "s_float", "2.5 - x0", [T(BASE)], ["f32", "i64", "u8", "f16"])
add("aten::rsub", "s_int", "1 - x0", [T(BASE)], ALL)
add("aten::rsub", "kw_alpha", "torch.rsub(x0, 2, alpha=3)", [T(BASE)], ["f32", "i64"])
binary("pow", "torch.pow(x0, x1)", ("pos", "unit"),
       scalars=[("int", "x0 ** 2"), ("float", "torch.pow(x0, 0.5)"), ("neg", "x0 ** -1"),
                ("base", "2 ** x0"), ("base_float", "1.5 ** x0")],
       inplace=("aten::pow_", "x0.clone().pow_(x1)"))
binary("maximum", "torch.maximum(x0, x1)")
binary("minimum", "torch.minimum(x0, x1)")
binary("remainder", "torch.remainder(x0, x1)", POS,
       scalars=[("int", "x0 % 3"), ("float", "torch.remainder(x0, 1.5)"),
                ("neg", "torch.remainder(x0, -2)")],
       inplace=("aten::remainder_", "x0.clone().remainder_(x1)"))
binary("fmod", "torch.fmod(x0, x1)", POS,
       scalars=[("int", "torch.fmod(x0, 3)"), ("float", "torch.fmod(x0, 1.5)")])
binary("atan2", "torch.atan2(x0, x1)")
for name, sym in [("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                  ("ge", ">=")]:
    binary(name, f"torch.{name}(x0, x1)",
           scalars=[("int", f"x0 {sym} 1"), ("float", f"x0 {sym} 0.5")],
           inplace=(f"aten::{name}_", f"x0.clone().{name}_(x1)"))
for name in ["greater", "greater_equal", "less", "less_equal", "not_equal"]:
    std_variants(f"aten::{name}", f"torch.{name}(x0, x1)", ["any", "any"])
    add(f"aten::{name}", "s_float", f"torch.{name}(x0, 0.5)", [T(BASE)], ["f32", "i64"])
for name in ["logical_and", "logical_or", "logical_xor"]:
    binary(name, f"torch.{name}(x0, x1)")
for name, sym in [("__and__", "&"), ("__or__", "|"), ("__xor__", "^")]:
    binary(name, f"x0 {sym} x1", scalars=[("int", f"x0 {sym} 1")])
for name in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
    binary(name, f"torch.{name}(x0, x1)", scalars=[("int", f"torch.{name}(x0, 3)")],
           inplace=(f"aten::{name}_", f"x0.clone().{name}_(x1)"))

# max/min with a second tensor (the binary overload; reductions are below).
for name in ["max", "min"]:
    add(f"aten::{name}", "binary", f"torch.{name}(x0, x1)", [T(BASE), T(BASE)], ALL)
    add(f"aten::{name}", "binary_bcast", f"torch.{name}(x0, x1)", [T((2, 1, 4)), T((3, 1))])

# ---------------------------------------------------------------- ternary and clamp

std_variants("aten::where", "torch.where(x0, x1, x2)", ["mask", "any", "any"],
             script=("f32", "i64"))
add("aten::where", "bcast", "torch.where(x0, x1, x2)",
    [T((3, 1), "mask", "b"), T((2, 1, 4)), T((4,))], ["f32", "i64"])
add("aten::where", "mix", "torch.where(x0 > 0, x0, x1)", [T(BASE), T(BASE, dt="f64")],
    ["f32", "i32", "f16"])
add("aten::where", "s_scalar", "torch.where(x0 > 0, x0, 0.5)", [T(BASE)], ["f32", "i64", "f16"])
add("aten::where", "s_both", "torch.where(x0 > 0, 1.0, 0.0)", [T(BASE)], ["f32", "i64"])
add("aten::where", "cond_only", "torch.where(x0 > 0)", [T(BASE)], ["f32"])
std_variants("aten::masked_fill", "x0.masked_fill(x1, -2.5)", ["any", "mask"])
add("aten::masked_fill", "int_value", "x0.masked_fill(x1, 3)", [T(BASE), T(BASE, "mask")],
    ALL)
add("aten::masked_fill", "bcast", "x0.masked_fill(x1, 1.5)", [T(BASE), T((3, 1), "mask", "b")],
    ["f32", "i64"])
add("aten::masked_fill", "tensor_value", "x0.masked_fill(x1, x2)",
    [T(BASE), T(BASE, "mask", "b"), T((), "any")], ["f32", "i64"])
add("aten::masked_fill", "inplace", "x0.clone().masked_fill_(x1, 0.0)",
    [T(BASE), T(BASE, "mask", "b")], ["f32", "i64"], kind="aten::masked_fill_")
for name, expr in [("clamp", "torch.clamp(x0, -0.5, 0.7)"), ("clip", "torch.clip(x0, -1, 2)"),
                   ("clamp_min", "torch.clamp_min(x0, 0.25)"),
                   ("clamp_max", "torch.clamp_max(x0, 1)")]:
    std_variants(f"aten::{name}", expr, ["any"])
    add(f"aten::{name}", "inplace", expr.replace(f"torch.{name}(x0, ", f"x0.clone().{name}_("),
        [T(BASE)], ["f32", "i64"], kind=f"aten::{name}_")
add("aten::clamp", "kw_min", "torch.clamp(x0, min=1)", [T(BASE)], ALL)
add("aten::clamp", "kw_max", "torch.clamp(x0, max=0.5)", [T(BASE)], ["f32", "i64", "u8"])
add("aten::clamp", "tensor", "torch.clamp(x0, x1, x2)", [T(BASE), T((4,)), T((3, 1), "pos")],
    ["f32", "i64", "f64"])
add("aten::clamp", "tensor_min", "torch.clamp(x0, min=x1)", [T(BASE), T(BASE)], ["f32", "i32"])
for name, val in [("addcmul", "0.5"), ("addcdiv", "2")]:
    doms = ["any", "any", "pos"]
    std_variants(f"aten::{name}", f"torch.{name}(x0, x1, x2)", doms)
    add(f"aten::{name}", "kw_value", f"torch.{name}(x0, x1, x2, value={val})",
        [T(BASE, d) for d in doms], ["f32", "f64", "i64"])
    add(f"aten::{name}", "bcast", f"torch.{name}(x0, x1, x2)",
        [T((2, 1, 4)), T((3, 1)), T((4,), "pos")], ["f32"])
    add(f"aten::{name}", "inplace", f"x0.clone().{name}_(x1, x2)",
        [T(BASE, d) for d in doms], ["f32"], kind=f"aten::{name}_")
std_variants("aten::lerp", "torch.lerp(x0, x1, 0.3)", ["any", "any"])
add("aten::lerp", "tensor_weight", "torch.lerp(x0, x1, x2)", [T(BASE), T(BASE), T((4,), "unit")],
    FLOAT)
add("aten::lerp", "bcast", "torch.lerp(x0, x1, 0.75)", [T((2, 1, 4)), T((3, 1))], ["f32"])
add("aten::lerp", "inplace", "x0.clone().lerp_(x1, 0.3)", [T(BASE), T(BASE)], ["f32"],
    kind="aten::lerp_")
