"""Elementwise kernels: unary math, binary arithmetic and comparisons, ``where``.

One kernel serves every op and arity: the op is a compile-time string, so each (op, dtypes,
rank) pair compiles to straight-line code. Operands are read in place through their own
strides (broadcast operands have stride 0); a layout that is contiguous everywhere takes a
flat path with no index math. Low-precision values are loaded, computed in fp32 (fp64 stays
fp64, integers stay integers) and cast on store.
"""
from __future__ import annotations

from typing import NamedTuple

import triton
import triton.language as tl

from ..runtime.launch import Site, launch
# by name, not the module: tools/sm90_compile.py makes JIT functions of the helpers a kernel's globals hold
from ._math import (acos as _acos, acosh as _acosh, asin as _asin, asinh as _asinh, atan as _atan, atan2 as _atan2,
                    atanh as _atanh, cosh as _cosh, digamma as _digamma, erfinv as _erfinv, expm1 as _expm1,
                    lgamma as _lgamma, log1p as _log1p, polygamma as _polygamma, sinh as _sinh)
from ._math import erfc as _erfc, i0 as _i0, i1 as _i1, igamma as _igamma, signbit as _signbit
from ._common import (collapse, elementwise_block, f64_bits, grid_1d, linear_index, load_f64_scalar, needs_int64,
                      strided_offset4)

class Spec(NamedTuple):
    """One elementwise op of the kernel below whose core entries are made from this record (the
    forms with arguments of their own, listed after :data:`SPECS`, are written by hand). Its kernel
    expression is its ``OP == name`` branch of ``_elementwise_kernel``, in this file; its derivative,
    which lives above the kernels, is its row of ``autograd/functions/elementwise.py``'s
    ``UNARY_FORMULAS``/``BINARY_FORMULAS`` (every record whose result is not bool, of the
    elementwise family, has one: ``tests/test_op_table.py`` checks it)."""

    name: str
    arity: int  # operands: 1 or 2
    autocast: str = "none"  # PyTorch's CUDA autocast category ("fp32", "promote", "none")
    ints: str = "float"  # an integer input gives: "float" (the default dtype), "keep" (its own, or the
    #                      promoted one), "bool" (a bool result for every input), "refuse" (NotImplementedError),
    #                      "only" (its own; a float or bool is refused: gcd, lcm)
    swappable: bool = False  # op(a, b) == op(b, a): a scalar first operand is swapped in as the second
    dunder: str = ""  # Python's operator: "add" gives __add__
    reflected: bool = False  # ... and __radd__, __iadd__
    aliases: tuple = ()
    family: str = "elementwise"  # the core module whose entries it has (core/ops/<family>.py)
    torch_kernel: str = ""  # PyTorch's kernel name, which its "not implemented for" errors quote
    inplace: str = "method"  # its in-place form ``name_``: "method" (Tensor's only), "function" (a
    #                          tritensor.* function too, as torch.exp_), "" (none: torch has none)


_U, _B, F = 1, 2, "function"
SPECS = (
    # F: torch has the in-place form as a function too (torch.exp_), not only as a Tensor method
    Spec("neg", _U, ints="keep", dunder="neg", aliases=("negative",), inplace=F),
    Spec("abs", _U, ints="keep", dunder="abs", aliases=("absolute",), inplace=F),
    Spec("exp", _U, "fp32", inplace=F), Spec("exp2", _U, "fp32", inplace=F), Spec("log", _U, "fp32", inplace=F),
    Spec("log2", _U, "fp32", inplace=F), Spec("log1p", _U, "fp32", inplace=F), Spec("expm1", _U, "fp32", inplace=F),
    Spec("sqrt", _U, inplace=F), Spec("rsqrt", _U, "fp32", inplace=F), Spec("sin", _U, inplace=F),
    Spec("cos", _U, inplace=F), Spec("tanh", _U, inplace=F), Spec("sigmoid", _U, inplace=F),
    Spec("relu", _U, ints="keep", inplace=F),
    Spec("gelu", _U), Spec("gelu_tanh", _U), Spec("silu", _U), Spec("erf", _U, inplace=F),
    Spec("reciprocal", _U, "fp32", inplace=F), Spec("square", _U, ints="keep", inplace=F),
    Spec("floor", _U, ints="keep", inplace=F), Spec("ceil", _U, ints="keep", inplace=F),
    Spec("trunc", _U, ints="keep", aliases=("fix",), inplace=F), Spec("sign", _U, ints="keep", aliases=("sgn",)),
    Spec("logical_not", _U, ints="bool"),
    Spec("tan", _U, "fp32", inplace=F), Spec("atan", _U, aliases=("arctan",), inplace=F),
    Spec("asin", _U, "fp32", aliases=("arcsin",), inplace=F), Spec("acos", _U, "fp32", aliases=("arccos",), inplace=F),
    Spec("sinh", _U, "fp32", inplace=F), Spec("cosh", _U, "fp32", inplace=F),
    Spec("asinh", _U, aliases=("arcsinh",), inplace=F), Spec("acosh", _U, aliases=("arccosh",), inplace=F),
    Spec("atanh", _U, aliases=("arctanh",), inplace=F), Spec("log10", _U, "fp32", inplace=F),
    Spec("erfinv", _U, "fp32"), Spec("lgamma", _U), Spec("digamma", _U),
    Spec("erfc", _U, inplace=F), Spec("deg2rad", _U, inplace=F), Spec("rad2deg", _U, inplace=F),
    Spec("frac", _U, ints="refuse", inplace=F), Spec("sinc", _U, inplace=F), Spec("i0", _U, inplace=F),
    Spec("logit", _U, inplace=F),  # its eps= clamps first (core/ops/elementwise.py: logit)
    Spec("signbit", _U, ints="bool", inplace=""), Spec("isposinf", _U, ints="bool", inplace=""),
    Spec("isneginf", _U, ints="bool", inplace=""),
    Spec("add", _B, "promote", "keep", True, "add", True), Spec("sub", _B, "promote", "keep", False, "sub", True,
                                                              ("subtract",)),
    Spec("mul", _B, "promote", "keep", True, "mul", True, ("multiply",)),
    Spec("div", _B, "promote", "float", False, "truediv", True, ("divide", "true_divide")),
    Spec("pow", _B, "fp32", "keep", False, "pow", True), Spec("maximum", _B, "promote", "keep", True),
    Spec("minimum", _B, "promote", "keep", True), Spec("floor_divide", _B, "promote", "keep", False, "floordiv", True),
    Spec("remainder", _B, "promote", "keep", False, "mod", True),
    Spec("eq", _B, ints="bool", swappable=True, dunder="eq"),
    Spec("ne", _B, ints="bool", swappable=True, dunder="ne", aliases=("not_equal",)),
    Spec("lt", _B, ints="bool", dunder="lt", aliases=("less",)),
    Spec("le", _B, ints="bool", dunder="le", aliases=("less_equal",)),
    Spec("gt", _B, ints="bool", dunder="gt", aliases=("greater",)),
    Spec("ge", _B, ints="bool", dunder="ge", aliases=("greater_equal",)),
    Spec("logical_and", _B, ints="bool", swappable=True), Spec("logical_or", _B, ints="bool", swappable=True),
    Spec("atan2", _B, "promote", "float", aliases=("arctan2",)),
    Spec("hypot", _B, ints="refuse"),  # PyTorch's CUDA lists name neither hypot nor fmod
    Spec("fmod", _B, ints="keep"),
    Spec("copysign", _B), Spec("fmax", _B, ints="keep", inplace=""), Spec("fmin", _B, ints="keep", inplace=""),
    Spec("gcd", _B, ints="only", inplace=F), Spec("lcm", _B, ints="only", inplace=F),
    Spec("heaviside", _B, ints="keep"),  # its operands of one dtype (core/ops/elementwise.py: heaviside)
    Spec("logaddexp", _B, ints="refuse", inplace=""), Spec("logaddexp2", _B, ints="refuse", inplace=""),
    Spec("xlogy", _B, inplace=F), Spec("nextafter", _B, ints="refuse"),
    Spec("igamma", _B, ints="refuse"), Spec("igammac", _B, ints="refuse"),
    # The bitwise family's ops (core/ops/bitwise.py), run by this kernel: integers and bools only (a
    # shift integers only), and logical_xor. bitwise_not of a bool is logical_not (the core entry picks it).
    Spec("bitwise_not", _U, ints="keep", family="bitwise", torch_kernel="bitwise_not"),
    Spec("bitwise_and", _B, ints="keep", swappable=True, dunder="and", reflected=True, family="bitwise",
         torch_kernel="bitwise_and"),
    Spec("bitwise_or", _B, ints="keep", swappable=True, dunder="or", reflected=True, family="bitwise",
         torch_kernel="bitwise_or"),
    Spec("bitwise_xor", _B, ints="keep", swappable=True, dunder="xor", reflected=True, family="bitwise",
         torch_kernel="bitwise_xor"),
    Spec("bitwise_left_shift", _B, ints="keep", dunder="lshift", reflected=True, family="bitwise",
         torch_kernel="lshift"),
    Spec("bitwise_right_shift", _B, ints="keep", dunder="rshift", reflected=True, family="bitwise",
         torch_kernel="rshift"),
    Spec("logical_xor", _B, ints="bool", swappable=True, family="bitwise"),
)
SPEC = {s.name: s for s in SPECS}
# The views the layers above iterate, in SPECS' order (the op table's, and so the stubs')
UNARY = tuple(s.name for s in SPECS if s.arity == 1 and s.family == "elementwise")
BINARY = tuple(s.name for s in SPECS if s.arity == 2 and s.family == "elementwise")
BITWISE_UNARY = tuple(s.name for s in SPECS if s.arity == 1 and s.family == "bitwise")
BITWISE_BINARY = tuple(s.name for s in SPECS if s.arity == 2 and s.family == "bitwise")
COMPARISONS = tuple(s.name for s in SPECS if s.ints == "bool")
# Kernel ops with core entries of their own (not made from the records above): div's rounding_mode="trunc";
# polygamma(n, x), n passed as the integer scalar; the three-operand ops, whose third operand may be a
# scalar (lerp's weight) and whose scalar is addcmul/addcdiv's value.
DIV_TRUNC, POLYGAMMA = "div_trunc", "polygamma"
# Unary kernel ops no record makes public: i0's derivative (I_1), and frexp's two results, each a pass
FREXP_MANTISSA, FREXP_EXPONENT, I1 = "frexp_mantissa", "frexp_exponent", "i1"
HIDDEN_UNARY = (FREXP_MANTISSA, FREXP_EXPONENT, I1)
# Binary kernel ops no record makes public: the fused derivatives of activations, aten's ``*_backward``
# ops (gelu_backward, silu_backward, sigmoid_backward, tanh_backward, threshold_backward for relu,
# logit_backward). Each is (g, saved) -> dL/dx in one launch, computed in fp32 (fp64 for fp64) as torch's:
# the chain of tensor ops it replaces (still the derivative under create_graph=True) launched once per op
# and rounded to the input's dtype, bf16 under autocast, between ops.
# forward op -> (kernel op, what the second operand is: the forward's input "x" or its output "y")
ACTIVATION_BACKWARD = {
    "gelu": ("gelu_backward", "x"), "gelu_tanh": ("gelu_tanh_backward", "x"), "silu": ("silu_backward", "x"),
    "sigmoid": ("sigmoid_backward", "y"), "tanh": ("tanh_backward", "y"), "relu": ("relu_backward", "y"),
    "logit": ("logit_backward", "x"),
}
HIDDEN_BINARY = tuple(k for k, _ in ACTIVATION_BACKWARD.values())
TERNARY = ("lerp", "addcmul", "addcdiv")


@triton.jit
def _sigmoid(x):
    e = tl.exp(-tl.abs(x))  # never overflows
    return tl.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@triton.jit
def _tanh(x):
    m = _expm1(-2.0 * tl.abs(x))
    t = -m / (2.0 + m)
    return tl.where(x < 0, -t, t)


@triton.jit
def _frexp(x, EXPONENT: tl.constexpr):
    """x = m 2^e with 0.5 <= |m| < 1 (C's frexp), from the bits: the exponent field less its bias,
    the mantissa the same bits under the exponent of 0.5; a subnormal is scaled by 2^64 first.
    0, inf and NaN are their own mantissa, with exponent 0."""
    if x.dtype == tl.float64:
        sub = (x != 0) & (tl.abs(x) < 2.2250738585072014e-308)
        xs = tl.where(sub, x * 18446744073709551616.0, x)
        bits = xs.to(tl.int64, bitcast=True)
        e = ((bits >> 52) & 0x7FF) - 1022 - tl.where(sub, 64, 0)
        m = ((bits & -9218868437227405313) | 0x3FE0000000000000).to(tl.float64, bitcast=True)
    else:
        sub = (x != 0) & (tl.abs(x) < 1.1754943508222875e-38)
        xs = tl.where(sub, x * 18446744073709551616.0, x)
        bits = xs.to(tl.int32, bitcast=True)
        e = ((bits >> 23) & 0xFF) - 126 - tl.where(sub, 64, 0)
        m = ((bits & -2139095041) | 0x3F000000).to(tl.float32, bitcast=True)
    special = (x == 0) | (tl.abs(x) == float("inf")) | (x != x)
    if EXPONENT:
        r = tl.where(special, 0, e)
    else:
        r = tl.where(special, x, m)
    return r


@triton.jit
def _nextafter(x, y, T: tl.constexpr):
    """The next value of dtype T after x toward y: the bits of x one step away from zero (or toward
    it); from 0 the least subnormal with y's sign. Stepped in T itself, so fp16 and bf16 (computed in
    fp32) step by their own ulp."""
    xv = x.to(T)
    if T.primitive_bitwidth == 16:
        bits = xv.to(tl.int16, bitcast=True)
    elif T.primitive_bitwidth == 32:
        bits = xv.to(tl.int32, bitcast=True)
    else:
        bits = xv.to(tl.int64, bitcast=True)
    away = (y > x) == (x > 0)
    stepped = (bits + tl.where(away, 1, -1).to(bits.dtype)).to(T, bitcast=True).to(x.dtype)
    least = (bits * 0 + 1).to(T, bitcast=True).to(x.dtype)
    r = tl.where(x == 0, tl.where(y > 0, least, -least), stepped)
    r = tl.where(x == y, y, r)
    return tl.where((x != x) | (y != y), x + y, r)


@triton.jit
def _unary(x, OP: tl.constexpr):
    if OP == "neg":
        r = -x
    elif OP == "abs":
        r = tl.abs(x)
    elif OP == "exp":
        r = tl.exp(x)
    elif OP == "exp2":
        r = tl.exp2(x)
    elif OP == "log":
        r = tl.log(x)
    elif OP == "log2":
        r = tl.log2(x)
    elif OP == "log1p":
        r = _log1p(x)
    elif OP == "expm1":
        r = _expm1(x)
    elif OP == "sqrt":
        r = tl.sqrt(x)
    elif OP == "rsqrt":
        r = 1.0 / tl.sqrt(x)
    elif OP == "sin":
        r = tl.sin(x)
    elif OP == "cos":
        r = tl.cos(x)
    elif OP == "tanh":
        r = _tanh(x)
    elif OP == "sigmoid":
        r = _sigmoid(x)
    elif OP == "relu":
        r = tl.where(x < 0, 0, x)
    elif OP == "gelu":
        r = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif OP == "gelu_tanh":
        r = 0.5 * x * (1.0 + _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    elif OP == "silu":
        r = x * _sigmoid(x)
    elif OP == "erf":
        r = tl.erf(x)
    elif OP == "reciprocal":
        r = 1.0 / x
    elif OP == "square":
        r = x * x
    elif OP == "floor" or OP == "ceil" or OP == "trunc":
        if not x.dtype.is_floating():  # an integer is whole already (tl.floor takes floats only)
            r = x
        elif OP == "floor":
            r = tl.floor(x)
        elif OP == "ceil":
            r = tl.ceil(x)
        else:
            r = tl.where(x < 0, tl.ceil(x), tl.floor(x))
    elif OP == "sign":  # torch's (0 < x) - (x < 0): NaN and -0.0 give +0
        r = tl.where(x > 0, 1, tl.where(x < 0, -1, 0)).to(x.dtype)
    elif OP == "tan":
        r = tl.sin(x) / tl.cos(x)
    elif OP == "atan":
        r = _atan(x)
    elif OP == "asin":
        r = _asin(x)
    elif OP == "acos":
        r = _acos(x)
    elif OP == "sinh":
        r = _sinh(x)
    elif OP == "cosh":
        r = _cosh(x)
    elif OP == "asinh":
        r = _asinh(x)
    elif OP == "acosh":
        r = _acosh(x)
    elif OP == "atanh":
        r = _atanh(x)
    elif OP == "log10":
        r = tl.log(x) * 0.4342944819032518
    elif OP == "erfinv":
        r = _erfinv(x)
    elif OP == "lgamma":
        r = _lgamma(x)
    elif OP == "digamma":
        r = _digamma(x)
    elif OP == "erfc":
        r = _erfc(x)
    elif OP == "deg2rad":
        r = x * 0.017453292519943295
    elif OP == "rad2deg":
        r = x * 57.29577951308232
    elif OP == "frac":
        r = x - tl.where(x < 0, tl.ceil(x), tl.floor(x))
    elif OP == "sinc":
        px = x * 3.141592653589793
        r = tl.where(x == 0, 1.0, tl.sin(px) / px)
    elif OP == "i0":
        r = _i0(x)
    elif OP == "i1":
        r = _i1(x)
    elif OP == "logit":
        r = tl.log(x / (1.0 - x))
    elif OP == "signbit":
        if x.dtype.is_floating():
            r = _signbit(x)
        else:
            r = x < 0
    elif OP == "isposinf":
        r = x == float("inf")
    elif OP == "isneginf":
        r = x == float("-inf")
    elif OP == "frexp_mantissa" or OP == "frexp_exponent":
        r = _frexp(x, OP == "frexp_exponent")
    elif OP == "bitwise_not":
        r = ~x
    else:  # logical_not
        tl.static_assert(OP == "logical_not")
        r = x == 0
    return r


@triton.jit
def _pow(x, y):
    # |x|**y through exp2/log2, then the sign and IEEE special cases pow() defines.
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    y_int = y == tl.floor(y)
    half = y * 0.5
    y_odd = tl.where(y_int, tl.floor(half) != half, False)
    r = tl.where(x < 0, tl.where(y_int, tl.where(y_odd, -r, r), float("nan")), r)
    r = tl.where(y == 0, 1.0, r)
    return tl.where(x == 1.0, 1.0, r)


@triton.jit
def _binary(x, y, OP: tl.constexpr, IS_FLOAT: tl.constexpr):
    if OP == "add":
        r = x + y
    elif OP == "sub":
        r = x - y
    elif OP == "mul":
        r = x * y
    elif OP == "div":
        r = x / y
    elif OP == "pow":
        r = _pow(x, y)
    elif OP == "maximum":
        r = tl.where((x != x) | (y != y), x + y, tl.maximum(x, y))
    elif OP == "minimum":
        r = tl.where((x != x) | (y != y), x + y, tl.minimum(x, y))
    elif OP == "floor_divide":
        if IS_FLOAT:
            r = tl.floor(x / y)
        else:
            q = x // y
            r = tl.where((x % y != 0) & ((x < 0) != (y < 0)), q - 1, q)
    elif OP == "remainder":
        m = x % y  # C semantics (sign of x); Python's takes the sign of y
        r = tl.where((m != 0) & ((m < 0) != (y < 0)), m + y, m)
    elif OP == "eq":
        r = x == y
    elif OP == "ne":
        r = x != y
    elif OP == "lt":
        r = x < y
    elif OP == "le":
        r = x <= y
    elif OP == "gt":
        r = x > y
    elif OP == "ge":
        r = x >= y
    elif OP == "logical_and":
        r = (x != 0) & (y != 0)
    elif OP == "atan2":
        r = _atan2(x, y)
    elif OP == "hypot":
        ax = tl.abs(x)
        ay = tl.abs(y)
        big = tl.maximum(ax, ay)
        ratio = tl.minimum(ax, ay) / big  # scaled: x*x + y*y would overflow (or underflow) first
        r = tl.where(big == 0, big, big * tl.sqrt(1.0 + ratio * ratio))
        r = tl.where((ax == float("inf")) | (ay == float("inf")), float("inf"), r)  # even beside a NaN (C's hypot)
    elif OP == "fmod":
        r = x % y  # Triton's % is C's: the sign of x
    elif OP == "copysign":
        r = tl.where(_signbit(y), -tl.abs(x), tl.abs(x))
    elif OP == "fmax":
        r = tl.where(x != x, y, tl.where(y != y, x, tl.maximum(x, y)))
    elif OP == "fmin":
        r = tl.where(x != x, y, tl.where(y != y, x, tl.minimum(x, y)))
    elif OP == "gcd" or OP == "lcm":
        # Euclid's steps, 93 of them: enough for any int64 pair (consecutive Fibonacci numbers, the worst
        # case, pass 2^63 at the 93rd); a finished lane (b == 0) stays put
        a = tl.abs(x)
        b = tl.abs(y)
        for _ in range(93):
            nz = b != 0
            m = a % tl.where(nz, b, 1)
            a = tl.where(nz, b, a)
            b = tl.where(nz, m, b)
        if OP == "gcd":
            r = a
        else:
            r = tl.where(a == 0, 0, tl.abs(x // tl.where(a == 0, 1, a) * y))
    elif OP == "heaviside":
        r = tl.where(x == 0, y, (x > 0).to(y.dtype))
    elif OP == "logaddexp" or OP == "logaddexp2":
        m = tl.maximum(x, y)
        if OP == "logaddexp":
            s = m + _log1p(tl.exp(-tl.abs(x - y)))
        else:
            s = m + _log1p(tl.exp2(-tl.abs(x - y))) * 1.4426950408889634
        r = tl.where((x == y) & (tl.abs(x) == float("inf")), x, s)  # inf - inf is no NaN here
        r = tl.where((x != x) | (y != y), x + y, r)
    elif OP == "xlogy":
        r = tl.where(y != y, y, tl.where(x == 0, 0.0, x * tl.log(y)))
    elif OP == "igamma":
        r = _igamma(x, y, False)
    elif OP == "igammac":
        r = _igamma(x, y, True)
    elif OP == "gelu_backward":  # d/dx x Phi(x) = Phi(x) + x phi(x)
        cdf = 0.5 * (1.0 + tl.erf(y * 0.7071067811865476))
        pdf = tl.exp(-0.5 * y * y) * 0.3989422804014327
        r = x * (cdf + y * pdf)
    elif OP == "gelu_tanh_backward":  # 0.5 y (1 + tanh(k (y + c y^3))) differentiated, as torch's
        t = _tanh(0.7978845608028654 * (y + 0.044715 * y * y * y))
        dinner = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * y * y)
        r = x * (0.5 * (1.0 + t) + 0.5 * y * (1.0 - t * t) * dinner)
    elif OP == "silu_backward":
        s = _sigmoid(y)
        r = x * s * (1.0 + y * (1.0 - s))
    elif OP == "sigmoid_backward":  # y = sigmoid(input)
        r = x * (1.0 - y) * y
    elif OP == "tanh_backward":  # y = tanh(input)
        r = x * (1.0 - y * y)
    elif OP == "relu_backward":  # torch's threshold_backward(g, y, 0): nothing where y <= 0
        r = tl.where(y <= 0, 0.0, x)
    elif OP == "logit_backward":  # NaN outside [0, 1], where logit has no derivative (torch's)
        r = tl.where((y < 0) | (y > 1), float("nan"), x / (y * (1.0 - y)))
    elif OP == "div_trunc":
        if IS_FLOAT:
            q = x / y
            r = tl.where(q < 0, tl.ceil(q), tl.floor(q))
        else:
            r = x // y  # C's integer division truncates
    elif OP == "logical_xor":
        r = (x != 0) != (y != 0)
    elif OP == "bitwise_and":
        r = x & y
    elif OP == "bitwise_or":
        r = x | y
    elif OP == "bitwise_xor":
        r = x ^ y
    elif OP == "bitwise_left_shift" or OP == "bitwise_right_shift":
        # A shift by a negative amount or by the width or more is undefined in C, LLVM and NumPy alike;
        # PyTorch defines it: 0 to the left, the sign (0 or -1) to the right. The kernel computes small
        # integers in int32, where a shift by their own width or more already leaves 0 or the sign.
        out_of_range = (y < 0) | (y >= x.dtype.primitive_bitwidth)
        amount = tl.where(out_of_range, 0, y)
        if OP == "bitwise_left_shift":
            r = tl.where(out_of_range, 0, x << amount)
        else:
            r = tl.where(out_of_range, tl.where(x < 0, -1, 0), x >> amount)
    else:
        tl.static_assert(OP == "logical_or")
        r = (x != 0) | (y != 0)
    return r


@triton.jit(do_not_specialize=["scalar_bits", "scalar_int"])
def _elementwise_kernel(a, b, c, out, n, scalar_bits, scalar_int, OP: tl.constexpr, NARGS: tl.constexpr,
                        B_SCALAR: tl.constexpr, COMPUTE: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    # Every operand contiguous and of the output's shape (the common case): one flat index, and
    # the fewest launch arguments; an operand the op does not read (b, c) is None.
    lin = linear_index(BLOCK, INT64)
    _elementwise_body(a, b, c, out, lin, lin, lin, lin, lin < n, scalar_bits, scalar_int, OP, NARGS, B_SCALAR,
                      COMPUTE)


@triton.jit(do_not_specialize=["scalar_bits", "scalar_int"])
def _elementwise_strided_kernel(a, b, c, out, n, shape, sa, sb, sc, so, scalar_bits, scalar_int,
                                OP: tl.constexpr, NARGS: tl.constexpr, B_SCALAR: tl.constexpr,
                                COMPUTE: tl.constexpr, NDIM: tl.constexpr, INT64: tl.constexpr,
                                BLOCK: tl.constexpr):
    # Any other layout (broadcast, transposed, sliced operands): each operand's offset from the
    # collapsed shape and its strides.
    lin = linear_index(BLOCK, INT64)
    oa, ob, oc, oo = strided_offset4(lin, shape, sa, sb, sc, so, NDIM)
    _elementwise_body(a, b, c, out, oa, ob, oc, oo, lin < n, scalar_bits, scalar_int, OP, NARGS, B_SCALAR, COMPUTE)


@triton.jit
def _elementwise_body(a, b, c, out, oa, ob, oc, oo, mask, scalar_bits, scalar_int, OP: tl.constexpr,
                      NARGS: tl.constexpr, B_SCALAR: tl.constexpr, COMPUTE: tl.constexpr):
    IS_FLOAT: tl.constexpr = COMPUTE.is_floating()
    if OP == "where":
        cond = tl.load(a + oa, mask=mask) != 0
        x = tl.load(b + ob, mask=mask).to(COMPUTE)
        y = tl.load(c + oc, mask=mask).to(COMPUTE)
        r = tl.where(cond, x, y)
    elif OP == "polygamma":
        x = tl.load(a + oa, mask=mask, other=1.0).to(COMPUTE)  # masked lanes: no extra series terms
        r = _polygamma(x, scalar_int)
    elif OP == "lerp" or OP == "addcmul" or OP == "addcdiv":
        x = tl.load(a + oa, mask=mask).to(COMPUTE)
        y = tl.load(b + ob, mask=mask).to(COMPUTE)
        if B_SCALAR == 1:
            s = load_f64_scalar(scalar_bits).to(COMPUTE)
        else:
            s = scalar_int.to(COMPUTE)
        if NARGS == 3:
            z = tl.load(c + oc, mask=mask).to(COMPUTE)
        else:
            z = s + tl.zeros_like(x)
        if OP == "lerp":  # torch's two-sided form: exact at both ends, monotone in the weight
            d = y - x
            r = tl.where(tl.abs(z) < 0.5, x + z * d, y - d * (1.0 - z))
        elif OP == "addcmul":
            r = x + s * y * z
        else:
            r = x + s * y / z
    elif NARGS == 1:
        x = tl.load(a + oa, mask=mask).to(COMPUTE)
        r = _unary(x, OP)
    else:
        x = tl.load(a + oa, mask=mask).to(COMPUTE)
        if B_SCALAR == 1:  # broadcast the scalar: the interpreter can't `|` a 0-d bool with a block
            y = load_f64_scalar(scalar_bits).to(COMPUTE) + tl.zeros_like(x)
        elif B_SCALAR == 2:
            y = scalar_int.to(COMPUTE) + tl.zeros_like(x)
        else:
            y = tl.load(b + ob, mask=mask).to(COMPUTE)
            if B_SCALAR == 3:  # add/sub's alpha: other scaled by the scalar (torch's a + alpha * b)
                y = y * load_f64_scalar(scalar_bits).to(COMPUTE)
            elif B_SCALAR == 4:
                y = y * scalar_int.to(COMPUTE)
        if OP == "nextafter":  # stepped in the output's own dtype
            r = _nextafter(x, y, out.dtype.element_ty)
        else:
            r = _binary(x, y, OP, IS_FLOAT)
        if OP == "pow" and IS_FLOAT and not out.dtype.element_ty.is_floating():
            # Integer pow runs in float64: round, don't truncate 8.999... to 8. A negative exponent
            # gives 0 unless |x| == 1, as torch's integer pow (0 ** -1 is 0 there, not inf -> INT_MIN).
            r = tl.where((y < 0) & (tl.abs(x) != 1.0), 0.0, tl.floor(r + 0.5))
            if out.dtype.element_ty.primitive_bitwidth < 32:
                r = r.to(tl.int64)  # then wrap into uint8/int8/int16 as torch (a float past their range is UB)
    if out.dtype.element_ty == tl.int1:
        r = r != 0
    tl.store(out + oo, r.to(out.dtype.element_ty), mask=mask)


_layouts: dict = {}  # (n-d shape, strides per operand) -> _Layout
_LAYOUTS_KEPT = 4096


def _layout(key) -> _Layout:
    """The layout of ``key`` (output shape, then each operand's strides, the output's last), kept."""
    if len(_layouts) >= _LAYOUTS_KEPT:
        _layouts.clear()
    lay = _layouts[key] = _Layout(key[0], key[1:])
    return lay


def elementwise(op: str, out, a, b=None, c=None, scalar=None, compute=None, alpha=None) -> None:
    """out = op(a[, b or scalar][, c]); every tensor already has ``out``'s shape (stride-0 broadcast).

    ``compute`` names the dtype arithmetic happens in ("float32", "float64", "int32" or
    "int64"); ``scalar`` (a Python number) replaces ``b`` for binary ops; ``alpha`` (a Python
    number, with a tensor ``b``) scales ``b`` first: add/sub's ``alpha=``. The layout's geometry
    (collapsed shape and strides, grid, block) is computed once per layout and kept, with the
    launch sites (``runtime/launch.py: Site``) of the ops met on it: a repeated op finds its
    kernel, constexprs and plans with one lookup. Operands that are all contiguous launch the flat
    kernel: three pointers and a size for an add.
    """
    so = out._stride
    if b is None:
        key = (out._shape, a._stride, so) if c is None else (out._shape, a._stride, c._stride, so)
    else:
        key = (out._shape, a._stride, b._stride, so) if c is None else (out._shape, a._stride, b._stride, c._stride,
                                                                         so)
    lay = _layouts.get(key)
    if lay is None:
        lay = _layout(key)
    if lay.n == 0:
        return
    b_kind, bits, ival = 0, 0, 0
    if scalar is not None:
        if isinstance(scalar, float):
            b_kind, bits = 1, f64_bits(scalar)
        else:
            b_kind, ival = 2, int(scalar)
    elif alpha is not None:
        if isinstance(alpha, float):
            b_kind, bits = 3, f64_bits(alpha)
        else:
            b_kind, ival = 4, int(alpha)
    skey = (op, b_kind, compute, c is not None)
    site = lay.sites.get(skey)
    if site is None:
        site = lay.site(skey)
    if lay.contig:
        launch(site, lay.grid, a, b, c, out, lay.n, bits, ival)
    else:
        launch(site, lay.grid, a, b if b is not None else out, c if c is not None else out, out, lay.n, lay.shape,
               lay.sa, lay.sb, lay.sc, lay.so, bits, ival)


class _Layout:
    """The launch geometry of one layout (output shape and every operand's strides), computed
    once: the element count, grid, block, collapsed shape and strides, and the launch sites of the
    ops met on it, by (op, scalar kind, compute dtype, three operands)."""

    __slots__ = ("n", "grid", "block", "shape", "sa", "sb", "sc", "so", "contig", "int64", "sites")

    def __init__(self, shape, strides):
        n = 1
        for d in shape:
            n *= d
        cshape, cstrides, contig = collapse(shape, *strides)
        so = cstrides[-1]
        padded = list(cstrides[:-1]) + [so] * (4 - len(cstrides))  # absent operands read the output's strides
        self.n, self.block = n, elementwise_block(n)
        self.grid = grid_1d(n, self.block)
        self.shape, self.sa, self.sb, self.sc, self.so = cshape, padded[0], padded[1], padded[2], so
        self.contig, self.int64 = contig, needs_int64(cshape, *cstrides)
        self.sites: dict = {}

    def site(self, skey) -> Site:
        op, b_kind, compute, three = skey
        nargs = 1 if op in _UNARY_SET else (3 if three else 2)
        if self.contig:
            site = Site(_elementwise_kernel, OP=op, NARGS=nargs, B_SCALAR=b_kind, COMPUTE=_TL_DTYPES[compute],
                        INT64=self.int64, BLOCK=self.block)
        else:
            site = Site(_elementwise_strided_kernel, OP=op, NARGS=nargs, B_SCALAR=b_kind,
                        COMPUTE=_TL_DTYPES[compute], NDIM=len(self.shape), INT64=self.int64, BLOCK=self.block)
        self.sites[skey] = site
        return site


_UNARY_SET = frozenset(UNARY + BITWISE_UNARY + HIDDEN_UNARY)
_TL_DTYPES = {name: getattr(tl, name) for name in ("float32", "float64", "int32", "int64")}
