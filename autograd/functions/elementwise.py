"""Derivatives of the elementwise ops (kernels: ``triton_kernels/elementwise.py``).

One class per op. ``forward`` runs the core op (``core/ops/elementwise.py``); ``backward``
is written with tritensor's own tensor ops, so it is itself differentiable
(``create_graph=True``). Gradients of broadcast operands come back in the broadcast shape;
the engine sums them down to each input's shape (``engine._sum_to``).

In-place variants (``x.mul_(y)``) are the same classes with ``inplace=True``: the kernel
writes into ``x``, the version counter is bumped, and if backward needs ``x``'s old value a
copy is saved first.
"""
from __future__ import annotations

import math

from ...core.ops import elementwise as _ew
from ...core.tensor import Tensor
from ..function import BuiltinFunction, check_inplace


# ----- unary -------------------------------------------------------------------------------
class _Unary(BuiltinFunction):
    op = ""  # the kernel's op name
    saves = "x"  # what backward needs: the input "x", the output "out", or nothing (None)

    @classmethod
    def forward(cls, ctx, x, inplace=False):
        keep = x
        if inplace and cls.saves == "x" and ctx.needs_input_grad and ctx.needs_input_grad[0]:
            keep = x.clone()
        out = _ew.unary(cls.op, x, out=x if inplace else None)
        if inplace:
            x._bump_version()
            ctx.mark_dirty(x)
        if cls.saves == "x":
            ctx.save_for_backward(keep)
        elif cls.saves == "out":
            ctx.save_for_backward(out)
        return out


class Neg(_Unary):
    op, saves = "neg", None

    @staticmethod
    def backward(ctx, g):
        return -g


class Abs(_Unary):
    op = "abs"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.sign()


class Exp(_Unary):
    op, saves = "exp", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class Exp2(_Unary):
    op, saves = "exp2", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * math.log(2.0)


class Expm1(_Unary):
    op, saves = "expm1", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (y + 1)


class Log(_Unary):
    op = "log"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / x


class Log2(_Unary):
    op = "log2"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / (x * math.log(2.0))


class Log1p(_Unary):
    op = "log1p"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / (x + 1)


class Sqrt(_Unary):
    op, saves = "sqrt", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / (y * 2)


class Rsqrt(_Unary):
    op, saves = "rsqrt", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * y * y * -0.5


class Sin(_Unary):
    op = "sin"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class Cos(_Unary):
    op = "cos"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -g * x.sin()


class Tanh(_Unary):
    op, saves = "tanh", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


class Sigmoid(_Unary):
    op, saves = "sigmoid", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * (1 - y)


class Relu(_Unary):
    op, saves = "relu", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (y > 0)


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class Gelu(_Unary):
    """Exact GELU, x * Phi(x): d/dx = Phi(x) + x * phi(x)."""

    op = "gelu"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        cdf = ((x * (1 / math.sqrt(2.0))).erf() + 1) * 0.5
        pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
        return g * (cdf + x * pdf)


class GeluTanh(_Unary):
    """GELU's tanh approximation: 0.5 x (1 + tanh(k (x + 0.044715 x^3)))."""

    op = "gelu_tanh"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        k = math.sqrt(2.0 / math.pi)
        t = ((x + x * x * x * 0.044715) * k).tanh()
        dinner = (x * x * (3 * 0.044715) + 1) * k
        return g * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * dinner)


class Silu(_Unary):
    op = "silu"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = x.sigmoid()
        return g * s * (x * (1 - s) + 1)


class Erf(_Unary):
    op = "erf"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x * x * -1).exp() * (2 / math.sqrt(math.pi))


class Reciprocal(_Unary):
    op, saves = "reciprocal", "out"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return -g * y * y


class Square(_Unary):
    op = "square"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x * 2


class _Piecewise(_Unary):
    """floor/ceil/trunc/sign: piecewise constant, so the gradient is zero (as in PyTorch)."""

    saves = None

    @staticmethod
    def backward(ctx, g):
        return g * 0


class Floor(_Piecewise):
    op = "floor"


class Ceil(_Piecewise):
    op = "ceil"


class Trunc(_Piecewise):
    op = "trunc"


class Sign(_Piecewise):
    op = "sign"


UNARY = {c.op: c for c in (Neg, Abs, Exp, Exp2, Expm1, Log, Log2, Log1p, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid,
                           Relu, Gelu, GeluTanh, Silu, Erf, Reciprocal, Square, Floor, Ceil, Trunc, Sign)}


# ----- binary ------------------------------------------------------------------------------
class _Binary(BuiltinFunction):
    """``a op b``; either side may be a Python number (kept on ctx, never differentiated)."""

    op = ""
    saves = (False, False)  # (backward needs a, backward needs b)

    @classmethod
    def forward(cls, ctx, a, b, inplace=False):
        need_a, need_b = cls.saves
        needs = ctx.needs_input_grad or (False, False)
        keep_a = a
        if inplace and need_a and any(needs):
            keep_a = a.clone()
        out = _ew.binary(cls.op, a, b, out=a if inplace else None)
        if inplace:
            a._bump_version()
            ctx.mark_dirty(a)
        if need_a or need_b:
            ctx.a = None if isinstance(a, Tensor) else a
            ctx.b = None if isinstance(b, Tensor) else b
            ctx.save_for_backward(keep_a if need_a and isinstance(a, Tensor) else None,
                                  b if need_b and isinstance(b, Tensor) else None)
        return out

    @staticmethod
    def operands(ctx):
        a, b = ctx.saved_tensors
        return (ctx.a if a is None else a), (ctx.b if b is None else b)


class Add(_Binary):
    op = "add"

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(_Binary):
    op = "sub"

    @staticmethod
    def backward(ctx, g):
        return g, (-g if ctx.needs_input_grad[1] else None)


class Mul(_Binary):
    op, saves = "mul", (True, True)

    @staticmethod
    def backward(ctx, g):
        a, b = _Binary.operands(ctx)
        return (g * b if ctx.needs_input_grad[0] else None), (g * a if ctx.needs_input_grad[1] else None)


class Div(_Binary):
    op, saves = "div", (True, True)

    @staticmethod
    def backward(ctx, g):
        a, b = _Binary.operands(ctx)
        ga = g / b if ctx.needs_input_grad[0] else None
        gb = -g * a / (b * b) if ctx.needs_input_grad[1] else None
        return ga, gb


class Pow(_Binary):
    """d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log(a), taken as 0 where a == 0 and b >= 0."""

    op, saves = "pow", (True, True)

    @staticmethod
    def backward(ctx, g):
        a, b = _Binary.operands(ctx)
        ga = gb = None
        if ctx.needs_input_grad[0]:
            if isinstance(b, Tensor):
                ga = g * b * a ** (b - 1)
            else:
                ga = g * b * a ** (b - 1) if b != 0 else g * 0
        if ctx.needs_input_grad[1]:
            y = a ** b
            if isinstance(a, Tensor):  # 0 ** b is flat in b for b >= 0: use log(1) = 0 there
                at_zero = (a == 0) & (b >= 0) if isinstance(b, Tensor) else (a == 0) & (b >= 0)
                log_a = Where.apply(at_zero, 1.0, a).log()
            else:
                log_a = math.log(a) if a > 0 else (0.0 if a == 0 else float("nan"))
            gb = g * y * log_a
        return ga, gb


class _Extremum(_Binary):
    """maximum/minimum: the gradient goes to the chosen side, split evenly on ties (PyTorch)."""

    saves = (True, True)

    @classmethod
    def backward(cls, ctx, g):
        a, b = _Binary.operands(ctx)
        wins = (a > b) if cls.op == "maximum" else (a < b)
        share = wins.to(g.dtype) + (a == b).to(g.dtype) * 0.5
        ga = g * share if ctx.needs_input_grad[0] else None
        gb = g * (1 - share) if ctx.needs_input_grad[1] else None
        return ga, gb


class Maximum(_Extremum):
    op = "maximum"


class Minimum(_Extremum):
    op = "minimum"


class Remainder(_Binary):
    """a - floor(a / b) * b: d/da = 1, d/db = -floor(a / b)."""

    op, saves = "remainder", (True, True)

    @staticmethod
    def backward(ctx, g):
        a, b = _Binary.operands(ctx)
        return g, (-g * (a / b).floor() if ctx.needs_input_grad[1] else None)


class FloorDivide(_Binary):
    op = "floor_divide"

    @staticmethod
    def backward(ctx, g):
        return g * 0, g * 0


BINARY = {c.op: c for c in (Add, Sub, Mul, Div, Pow, Maximum, Minimum, Remainder, FloorDivide)}


def unary(op: str, x, inplace=False):
    if inplace and isinstance(x, Tensor) and x._requires_grad:
        check_inplace(x)
    return UNARY[op].apply(x, inplace) if inplace else UNARY[op].apply(x)


def binary(op: str, a, b, inplace=False):
    if inplace:
        if not isinstance(a, Tensor):
            raise TypeError(f"{op}_(): self must be a Tensor, got {type(a).__name__}")
        check_inplace(a)
        return BINARY[op].apply(a, b, True)
    return BINARY[op].apply(a, b)


# ----- where and clamp ---------------------------------------------------------------------
class Where(BuiltinFunction):
    @staticmethod
    def forward(ctx, cond, x, y):
        ctx.save_for_backward(cond)
        return _ew.where(cond, x, y)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        gx = _ew_where(cond, g, 0.0) if ctx.needs_input_grad[1] else None
        gy = _ew_where(cond, 0.0, g) if ctx.needs_input_grad[2] else None
        return None, gx, gy


def _ew_where(cond, x, y):
    return Where.apply(cond, x, y)


class Clamp(BuiltinFunction):
    """clamp(x, min, max): gradient 1 inside [min, max] (ends included), 0 outside."""

    @staticmethod
    def forward(ctx, x, lo, hi, inplace=False):
        if lo is None and hi is None:
            raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
        keep = x.clone() if inplace and ctx.needs_input_grad and any(ctx.needs_input_grad) else x
        out = x
        if lo is not None:
            out = _ew.binary("maximum", out, lo, out=x if inplace else None)
        if hi is not None:
            out = _ew.binary("minimum", out, hi, out=x if inplace else None)
        if inplace:
            x._bump_version()
            ctx.mark_dirty(x)
        ctx.save_for_backward(keep, lo if isinstance(lo, Tensor) else None, hi if isinstance(hi, Tensor) else None)
        ctx.lo, ctx.hi = lo, hi
        return out

    @staticmethod
    def backward(ctx, g):
        x, tlo, thi = ctx.saved_tensors
        lo = ctx.lo if tlo is None else tlo
        hi = ctx.hi if thi is None else thi
        gx = None
        if ctx.needs_input_grad[0]:
            gx = g * (x >= lo) if lo is not None else g
            gx = gx * (x <= hi) if hi is not None else gx
        glo = g * (x < lo) if isinstance(lo, Tensor) and ctx.needs_input_grad[1] else None
        ghi = g * (x > hi) if isinstance(hi, Tensor) and ctx.needs_input_grad[2] else None
        return gx, glo, ghi


# ----- the recorders the autograd layer calls, by op name -----------------------------------
def _no_out(name, out):
    if out is not None:
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")


def _recorders(op, n_args):
    """``op`` and ``op_`` for a unary (n_args=1) or binary (2) elementwise op."""
    run = unary if n_args == 1 else binary

    def record(*args, out=None):
        _no_out(op, out)
        return run(op, *args)

    def record_(*args):
        return run(op, *args, inplace=True)

    record.__name__, record_.__name__ = op, op + "_"
    return {op: record, op + "_": record_}


def where(condition, input=None, other=None, *, out=None):
    _no_out("where", out)
    if input is None and other is None:  # where(condition): its nonzero coordinates, no gradient
        return _ew.where(condition)
    return Where.apply(condition, input, other)


def clamp_(input, min=None, max=None):
    check_inplace(input)
    return Clamp.apply(input, min, max, True)


RECORD = {"where": where, "clamp_": clamp_,
          "clamp": lambda input, min=None, max=None: Clamp.apply(input, min, max),
          "clamp_min": lambda input, min: Clamp.apply(input, min, None),
          "clamp_max": lambda input, max: Clamp.apply(input, None, max)}
for _op in UNARY:
    RECORD.update(_recorders(_op, 1))
for _op in BINARY:
    RECORD.update(_recorders(_op, 2))
