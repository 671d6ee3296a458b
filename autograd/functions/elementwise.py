"""Derivatives of the elementwise ops (kernels: ``triton_kernels/elementwise.py``; core entries:
``core/ops/elementwise.py``).

The unary and binary ops are data: one row per op in :data:`UNARY_FORMULAS` and
:data:`BINARY_FORMULAS` (what backward keeps, and each input's gradient as a formula of the
incoming gradient ``g`` and what was kept), run by one generic Function per kind, :class:`Unary`
and :class:`Binary`. ``functions_from_table`` makes a class per row, so each op's nodes keep its
name (``ExpBackward0``, ``MulBackward0``). Formulas use tritensor's own tensor ops, so they are
recorded in turn and differentiable again (``create_graph=True``). The activations torch gives a fused
``*_backward`` (gelu, gelu_tanh, silu, sigmoid, tanh, relu, logit) take it when backward records
nothing: one launch computed in fp32, where their formula is a chain of launches each rounding to
the input's dtype (bf16 under autocast); under ``create_graph=True`` they take the formula
(:func:`_fused`). Gradients of broadcast operands
come back in the broadcast shape; the engine sums them down to each input's shape
(``engine._sum_to``). ``where`` (three operands) and ``clamp`` (optional bounds) keep classes.

In-place forms (``x.mul_(y)``) are the same Functions with ``inplace=True``: the kernel writes
into ``x``, the version counter is bumped, and if backward needs ``x``'s old value a copy is
saved first.
"""
from __future__ import annotations

import math

from ...core.ops import elementwise as _ew
from ...core.tensor import Tensor
from ..function import BuiltinFunction, check_inplace, functions_from_table
from ..grad_mode import _state


# ----- unary -------------------------------------------------------------------------------
class Unary(BuiltinFunction):
    """``op(x)`` and ``op_(x)`` for a row of :data:`UNARY_FORMULAS`: ``saves`` names what the
    formula gets besides ``g``: the input ``"x"``, the output ``"y"``, or nothing (None)."""

    op = saves = formula = None

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
        elif cls.saves == "y":
            ctx.save_for_backward(out)
        return out

    @classmethod
    def backward(cls, ctx, g):
        return cls.formula(g, ctx.saved_tensors[0] if cls.saves else None)


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu(g, x):
    """Exact GELU, x * Phi(x): d/dx = Phi(x) + x * phi(x)."""
    cdf = ((x * (1 / math.sqrt(2.0))).erf() + 1) * 0.5
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


def _gelu_tanh(g, x):
    """GELU's tanh approximation, 0.5 x (1 + tanh(k (x + 0.044715 x^3))), differentiated."""
    k = math.sqrt(2.0 / math.pi)
    t = ((x + x * x * x * 0.044715) * k).tanh()
    dinner = (x * x * (3 * 0.044715) + 1) * k
    return g * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * dinner)


def _silu(g, x):
    s = x.sigmoid()
    return g * s * (x * (1 - s) + 1)


def _fused(op, composite):
    """``op``'s formula: its fused kernel (``core/ops/elementwise.py: activation_backward``, aten's
    ``*_backward``), one launch in fp32, when backward records nothing; under ``create_graph=True``
    (grad mode on in backward) the ``composite`` of recorded ops instead, so the gradient is itself
    differentiable. The fused ops have no derivative of their own."""
    def formula(g, saved):
        return composite(g, saved) if _state.enabled else _ew.activation_backward(op, g, saved)

    formula.__name__ = op + "_backward"
    return formula


def _nonzero_or_one(x):
    """``x`` with its zeros replaced by 1: a formula's removable singularity at 0 is then evaluated
    away from it (and selected out), so neither it nor its own derivative is ever NaN there."""
    return _ew_where(x == 0, 1.0, x)


def _sinc_grad(x):
    """d/dx sin(pi x) / (pi x) = (cos(pi x) pi x - sin(pi x)) / (pi x^2), 0 at x = 0."""
    xs = _nonzero_or_one(x)
    px = xs * math.pi
    return _ew_where(x == 0, 0.0, (px.cos() * px - px.sin()) / (px * xs))


class I1(BuiltinFunction):
    """I_1, i0's derivative (torch.special.i1; no public op here): d/dx I_1 = I_0 - I_1 / x (1/2 at 0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _ew.i1(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xs = _nonzero_or_one(x)
        return g * _ew_where(x == 0, 0.5, x.i0() - I1.apply(xs) / xs)


def _flat(g, *_):
    """Piecewise constant (floor, ceil, trunc, sign, floor_divide): a zero gradient, as in PyTorch."""
    return g * 0


# op: (what backward keeps, dL/dx from g and it)
UNARY_FORMULAS = {
    "neg": (None, lambda g, _: -g),
    "abs": ("x", lambda g, x: g * x.sign()),
    "exp": ("y", lambda g, y: g * y),
    "exp2": ("y", lambda g, y: g * y * math.log(2.0)),
    "expm1": ("y", lambda g, y: g * (y + 1)),
    "log": ("x", lambda g, x: g / x),
    "log2": ("x", lambda g, x: g / (x * math.log(2.0))),
    "log1p": ("x", lambda g, x: g / (x + 1)),
    "sqrt": ("y", lambda g, y: g / (y * 2)),
    "rsqrt": ("y", lambda g, y: g * y * y * y * -0.5),
    "sin": ("x", lambda g, x: g * x.cos()),
    "cos": ("x", lambda g, x: -g * x.sin()),
    "tanh": ("y", _fused("tanh", lambda g, y: g * (1 - y * y))),
    "sigmoid": ("y", _fused("sigmoid", lambda g, y: g * y * (1 - y))),
    "relu": ("y", _fused("relu", lambda g, y: g * (y > 0))),
    "gelu": ("x", _fused("gelu", _gelu)),
    "gelu_tanh": ("x", _fused("gelu_tanh", _gelu_tanh)),
    "silu": ("x", _fused("silu", _silu)),
    "erf": ("x", lambda g, x: g * (x * x * -1).exp() * (2 / math.sqrt(math.pi))),
    "reciprocal": ("y", lambda g, y: -g * y * y),
    "square": ("x", lambda g, x: g * x * 2),
    "floor": (None, _flat),
    "ceil": (None, _flat),
    "trunc": (None, _flat),
    "sign": (None, _flat),
    "tan": ("y", lambda g, y: g * (y * y + 1)),
    "atan": ("x", lambda g, x: g / (x * x + 1)),
    "asin": ("x", lambda g, x: g * (1 - x * x).rsqrt()),
    "acos": ("x", lambda g, x: -g * (1 - x * x).rsqrt()),
    "sinh": ("x", lambda g, x: g * x.cosh()),
    "cosh": ("x", lambda g, x: g * x.sinh()),
    "asinh": ("x", lambda g, x: g * (x * x + 1).rsqrt()),
    "acosh": ("x", lambda g, x: g * ((x - 1) * (x + 1)).rsqrt()),
    "atanh": ("x", lambda g, x: g / (1 - x * x)),
    "log10": ("x", lambda g, x: g / (x * math.log(10.0))),
    "erfinv": ("y", lambda g, y: g * (y * y).exp() * (math.sqrt(math.pi) / 2)),
    "lgamma": ("x", lambda g, x: g * x.digamma()),
    "digamma": ("x", lambda g, x: g * x.polygamma(1)),
    "erfc": ("x", lambda g, x: g * (x * x * -1).exp() * (-2 / math.sqrt(math.pi))),
    "deg2rad": (None, lambda g, _: g * (math.pi / 180)),
    "rad2deg": (None, lambda g, _: g * (180 / math.pi)),
    "frac": (None, lambda g, _: g),  # x - trunc(x): trunc is flat
    "sinc": ("x", lambda g, x: g * _sinc_grad(x)),
    "i0": ("x", lambda g, x: g * I1.apply(x)),
    "logit": ("x", _fused("logit", lambda g, x: g / (x * (1 - x)))),
}
UNARY = functions_from_table(Unary, UNARY_FORMULAS, ("saves", "formula"))


# ----- binary ------------------------------------------------------------------------------
class Binary(BuiltinFunction):
    """``a op b`` and ``a.op_(b)`` for a row of :data:`BINARY_FORMULAS`; either side may be a
    Python number (kept on ctx, never differentiated). ``saves``: whether the formulas read the
    operands; ``da``/``db`` run only for an operand that needs a gradient."""

    op = saves = da = db = None

    @classmethod
    def forward(cls, ctx, a, b, inplace=False, alpha=1):
        keep_a = a
        if inplace and cls.saves and any(ctx.needs_input_grad):
            keep_a = a.clone()
        out = _ew.binary(cls.op, a, b, out=a if inplace else None, alpha=alpha)
        ctx.alpha = alpha  # add/sub: a + alpha * b, so dL/db is alpha times the formula's
        if inplace:
            a._bump_version()
            ctx.mark_dirty(a)
        if cls.saves:
            a_tensor, b_tensor = isinstance(a, Tensor), isinstance(b, Tensor)
            ctx.a = None if a_tensor else a
            ctx.b = None if b_tensor else b
            ctx.save_for_backward(keep_a if a_tensor else None, b if b_tensor else None)
        return out

    @classmethod
    def backward(cls, ctx, g):
        a = b = None
        if cls.saves:
            a, b = ctx.saved_tensors
            a, b = (ctx.a if a is None else a), (ctx.b if b is None else b)
        needs = ctx.needs_input_grad
        gb = None
        if needs[1]:
            gb = cls.db(g, a, b) if ctx.alpha == 1 else cls.db(g, a, b) * ctx.alpha
        return (cls.da(g, a, b) if needs[0] else None), gb


def _pow_da(g, a, b):
    """d(a^b)/da = b a^(b-1) (zero for a Python exponent 0)."""
    return g * b * a ** (b - 1) if isinstance(b, Tensor) or b != 0 else g * 0


def _pow_db(g, a, b):
    """d(a^b)/db = a^b log(a), taken as 0 where a == 0 and b >= 0 (0 ** b is flat in b there)."""
    y = a ** b
    if isinstance(a, Tensor):
        log_a = _ew_where((a == 0) & (b >= 0), 1.0, a).log()
    else:
        log_a = math.log(a) if a > 0 else (0.0 if a == 0 else float("nan"))
    return g * y * log_a


def _zero(g, *_):
    return g * 0


def _not_implemented(what, error=RuntimeError):
    """A derivative torch does not implement: its error, raised when backward reaches it."""
    def formula(g, a, b):
        raise error(f"the derivative for '{what}' is not implemented.")
    return formula


def _copysign_ratio(a, b):
    """d copysign(a, b) / da: +-1 as the result's sign over a's, 0 at a = 0 (torch's)."""
    safe = _nonzero_or_one(a)
    return _ew_where(a == 0, 0.0, safe.copysign(b) / safe)


def _fmax_self(a, b, wins):
    """Where fmax/fmin's result is input: it wins (ties included), or other is NaN."""
    return wins | b.isnan()


def _gamma_density(a, x):
    """x^(a-1) e^-x / Gamma(a), the density of Gamma(a, 1) at x."""
    return ((a - 1) * x.log() - x - a.lgamma()).exp()


def _share(wins, a, b, g):
    """maximum/minimum: the chosen side's share of the gradient, split evenly on ties (PyTorch)."""
    return wins.to(g.dtype) + (a == b).to(g.dtype) * 0.5


# op: (whether the formulas read a and b, dL/da, dL/db), each from g, a, b
BINARY_FORMULAS = {
    "add": (False, lambda g, a, b: g, lambda g, a, b: g),
    "sub": (False, lambda g, a, b: g, lambda g, a, b: -g),
    "mul": (True, lambda g, a, b: g * b, lambda g, a, b: g * a),
    "div": (True, lambda g, a, b: g / b, lambda g, a, b: -g * a / (b * b)),
    "pow": (True, _pow_da, _pow_db),
    "maximum": (True, lambda g, a, b: g * _share(a > b, a, b, g), lambda g, a, b: g * (1 - _share(a > b, a, b, g))),
    "minimum": (True, lambda g, a, b: g * _share(a < b, a, b, g), lambda g, a, b: g * (1 - _share(a < b, a, b, g))),
    "remainder": (True, lambda g, a, b: g, lambda g, a, b: -g * (a / b).floor()),  # a - floor(a / b) * b
    "floor_divide": (False, _flat, _flat),
    "atan2": (True, lambda g, a, b: g * b / (a * a + b * b), lambda g, a, b: -g * a / (a * a + b * b)),
    "hypot": (True, lambda g, a, b: g * a / a.hypot(b), lambda g, a, b: g * b / a.hypot(b)),
    "fmod": (True, lambda g, a, b: g, lambda g, a, b: -g * a.div(b, rounding_mode="trunc")),  # a - trunc(a/b) b
    "copysign": (True, lambda g, a, b: g * _copysign_ratio(a, b), _zero),
    # fmax/fmin: all of it to the side taken, a tie to input, as torch's
    "fmax": (True, lambda g, a, b: g * _fmax_self(a, b, a >= b), lambda g, a, b: g * ~_fmax_self(a, b, a >= b)),
    "fmin": (True, lambda g, a, b: g * _fmax_self(a, b, a <= b), lambda g, a, b: g * ~_fmax_self(a, b, a <= b)),
    "heaviside": (False, _not_implemented("heaviside"), _not_implemented("heaviside")),
    "logaddexp": (True, lambda g, a, b: g / ((b - a).exp() + 1), lambda g, a, b: g / ((a - b).exp() + 1)),
    "logaddexp2": (True, lambda g, a, b: g / ((b - a).exp2() + 1), lambda g, a, b: g / ((a - b).exp2() + 1)),
    # xlogy: log(other), but 0 where both are 0 (torch 2.13's); nextafter: 1 where it moves input, else 0 (torch's)
    "xlogy": (True, lambda g, a, b: g * ((a != 0) | (b != 0)).xlogy(b), lambda g, a, b: g * a / b),
    "nextafter": (True, lambda g, a, b: g * (a != b), _zero),
    # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a); torch has no derivative in a either
    "igamma": (True, _not_implemented("igamma: input", NotImplementedError), lambda g, a, b: g * _gamma_density(a, b)),
    "igammac": (True, _not_implemented("igammac: input", NotImplementedError),
                lambda g, a, b: -g * _gamma_density(a, b)),
}
BINARY = functions_from_table(Binary, BINARY_FORMULAS, ("saves", "da", "db"))


def unary(op: str, x, inplace=False):
    """Record the unary elementwise op ``op`` on ``x`` through its table-made Function (in place when
    ``inplace``, after torch's leaf and version checks)."""
    if inplace and isinstance(x, Tensor) and x._requires_grad:
        check_inplace(x)
    return UNARY[op].apply(x, inplace) if inplace else UNARY[op].apply(x)


def binary(op: str, a, b, inplace=False, alpha=1):
    """Record the binary elementwise op ``op`` on ``a`` and ``b`` through its table-made Function (in place
    into ``a`` when ``inplace``)."""
    if inplace:
        if not isinstance(a, Tensor):
            raise TypeError(f"{op}_(): self must be a Tensor, got {type(a).__name__}")
        check_inplace(a)
        return BINARY[op].apply(a, b, True, alpha)
    return BINARY[op].apply(a, b, False, alpha)


# ----- where and clamp ---------------------------------------------------------------------
class Where(BuiltinFunction):
    """where's derivative: the gradient goes to ``input`` where the condition holds, to ``other`` where it
    does not."""
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


def _recorders(op, run, fn):
    """``op`` and ``op_`` for a unary (``run`` = :func:`unary`) or binary (:func:`binary`) op;
    ``alpha`` (add/sub's keyword) reaches the core entry, which refuses it for any other op."""

    def record(*args, out=None, **alpha):
        if out is not None:
            _no_out(op, out)
        return fn.apply(*args, False, *alpha.values()) if alpha else fn.apply(*args)

    def record_(*args, **alpha):
        return run(op, *args, inplace=True, **alpha)

    record.__name__, record_.__name__ = op, op + "_"
    return {op: record, op + "_": record_}


def where(condition, input=None, other=None, *, out=None):
    """The recorder of where: runs it as Where, so autograd records it (torch's where; where(condition) alone
    gives coordinates and records nothing)."""
    _no_out("where", out)
    if input is None and other is None:  # where(condition): its nonzero coordinates, no gradient
        return _ew.where(condition)
    return Where.apply(condition, input, other)


def clamp_(input, min=None, max=None):
    """The recorder of clamp_: runs it as Clamp in place, so autograd records it (torch's clamp_)."""
    check_inplace(input)
    return Clamp.apply(input, min, max, True)


# ----- div's rounding modes, polygamma, lerp, addcmul, addcdiv --------------------------------
class RoundedDiv(BuiltinFunction):
    """div(a, b, rounding_mode="trunc"|"floor"): piecewise constant, so a zero gradient (PyTorch)."""

    @staticmethod
    def forward(ctx, a, b, rounding_mode, inplace=False):
        out = _ew.div_(a, b, rounding_mode=rounding_mode) if inplace else _ew.div(a, b, rounding_mode=rounding_mode)
        if inplace:
            ctx.mark_dirty(a)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * 0, (g * 0 if ctx.needs_input_grad[1] else None)


def div(input, other, *, rounding_mode=None, out=None):
    """The recorder of div: runs it as the table's div, or RoundedDiv with a rounding mode (zero gradient), so
    autograd records it (torch's div)."""
    _no_out("div", out)
    if rounding_mode is None:
        return BINARY["div"].apply(input, other)
    return RoundedDiv.apply(input, other, rounding_mode)


def div_(input, other, *, rounding_mode=None):
    """The recorder of div_: runs it as div in place, so autograd records it (torch's div_)."""
    if rounding_mode is None:
        return binary("div", input, other, inplace=True)
    check_inplace(input)
    return RoundedDiv.apply(input, other, rounding_mode, True)


class Polygamma(BuiltinFunction):
    """polygamma(n, x): d/dx is polygamma(n + 1, x), itself recorded."""

    @staticmethod
    def forward(ctx, n, x, inplace=False):
        keep = x.clone() if inplace else x
        out = _ew.polygamma_(x, n) if inplace else _ew.polygamma(n, x)
        if inplace:
            ctx.mark_dirty(x)
        ctx.n = n
        ctx.save_for_backward(keep)
        return out

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return None, g * x.polygamma(ctx.n + 1)


def polygamma(n, input, *, out=None):
    """The recorder of polygamma: runs it as Polygamma, so autograd records it (torch's polygamma: the
    derivative is polygamma of order n + 1)."""
    _no_out("polygamma", out)
    return Polygamma.apply(n, input)


def polygamma_(input, n):
    """The recorder of polygamma_: runs it as Polygamma in place, so autograd records it (torch's polygamma_)."""
    check_inplace(input)
    return Polygamma.apply(n, input, True)


class Lerp(BuiltinFunction):
    """input + weight (end - input): (1 - w) g, w g, and (end - input) g for a tensor weight."""

    @staticmethod
    def forward(ctx, input, end, weight, inplace=False):
        w_tensor = isinstance(weight, Tensor)
        keep = input.clone() if inplace and w_tensor and ctx.needs_input_grad[2] else input
        out = _ew.lerp_(input, end, weight) if inplace else _ew.lerp(input, end, weight)
        if inplace:
            ctx.mark_dirty(input)
        ctx.weight = None if w_tensor else weight
        ctx.save_for_backward(keep, end, weight if w_tensor else None)
        return out

    @staticmethod
    def backward(ctx, g):
        input, end, tw = ctx.saved_tensors
        w = ctx.weight if tw is None else tw
        needs = ctx.needs_input_grad
        return (g * (1 - w) if needs[0] else None, g * w if needs[1] else None,
                g * (end - input) if tw is not None and needs[2] else None)


class _AddcOp(BuiltinFunction):
    """addcmul/addcdiv(input, t1, t2, value): input + value * t1 (* or /) t2."""

    op = None

    @classmethod
    def forward(cls, ctx, input, t1, t2, value, inplace=False):
        fn = getattr(_ew, cls.op + ("_" if inplace else ""))
        out = fn(input, t1, t2, value=value)
        if inplace:
            ctx.mark_dirty(input)
        ctx.value = value
        ctx.save_for_backward(t1, t2)
        return out

    @classmethod
    def backward(cls, ctx, g):
        t1, t2 = ctx.saved_tensors
        v, needs = ctx.value, ctx.needs_input_grad
        if cls.op == "addcmul":
            g1 = g * t2 * v if needs[1] else None
            g2 = g * t1 * v if needs[2] else None
        else:
            g1 = g * v / t2 if needs[1] else None
            g2 = -g * v * t1 / (t2 * t2) if needs[2] else None
        return (g if needs[0] else None), g1, g2


class Addcmul(_AddcOp):
    """addcmul's derivative (input + value * t1 * t2): g, value * g * t2 and value * g * t1."""
    op = "addcmul"


class Addcdiv(_AddcOp):
    """addcdiv's derivative (input + value * t1 / t2): g, value * g / t2 and -value * g * t1 / t2**2."""
    op = "addcdiv"


def _addc_recorders(fn):
    def record(input, tensor1, tensor2, *, value=1, out=None):
        _no_out(fn.op, out)
        return fn.apply(input, tensor1, tensor2, value)

    def record_(input, tensor1, tensor2, *, value=1):
        check_inplace(input)
        return fn.apply(input, tensor1, tensor2, value, True)

    return {fn.op: record, fn.op + "_": record_}


def _lerp(input, end, weight, *, out=None):
    _no_out("lerp", out)
    return Lerp.apply(input, end, weight)


def _lerp_(input, end, weight):
    check_inplace(input)
    return Lerp.apply(input, end, weight, True)


RECORD = {"where": where, "clamp_": clamp_,
          "clamp": lambda input, min=None, max=None: Clamp.apply(input, min, max),
          "clamp_min": lambda input, min: Clamp.apply(input, _ew.clamp_bound("clamp_min", "min", min), None),
          "clamp_max": lambda input, max: Clamp.apply(input, None, _ew.clamp_bound("clamp_max", "max", max))}
for _op, _fn in UNARY.items():
    RECORD.update(_recorders(_op, unary, _fn))
for _op, _fn in BINARY.items():
    RECORD.update(_recorders(_op, binary, _fn))
RECORD.update({"div": div, "div_": div_, "polygamma": polygamma, "polygamma_": polygamma_, "lerp": _lerp,
               "lerp_": _lerp_, **_addc_recorders(Addcmul), **_addc_recorders(Addcdiv)})


# ----- logit's eps, the checks of the two-tensor ops, clamp_min_/clamp_max_, frexp --------------------
def logit(input, eps=None, *, out=None):
    """The recorder of logit: runs it as the table's logit, so autograd records it (torch's logit; with eps
    the clamp is recorded first, so the gradient is 0 outside [eps, 1 - eps])."""
    _no_out("logit", out)
    if eps is not None:  # the clamp recorded on its own: gradient 0 outside [eps, 1 - eps], as torch's
        input = _ew._logit_clamp(input, eps)
    return UNARY["logit"].apply(input)


def logit_(input, eps=None):
    """The recorder of logit_: runs it as logit in place, so autograd records it (torch's logit_)."""
    check_inplace(input)
    if eps is not None:
        _ew._logit_clamp(input, eps, inplace=True)
    return unary("logit", input, inplace=True)


def _checked(op, check, has_inplace=True):
    """``op`` and ``op_``'s recorders, running the core entry's operand checks first (the generic
    Binary goes straight to the kernel's entry)."""
    plain, inplace = RECORD[op], RECORD.pop(op + "_")

    def record(input, other, *, out=None):
        check(input, other)
        return plain(input, other, out=out)

    def record_(input, other):
        check(input, other)
        return inplace(input, other)

    return {op: record, op + "_": record_} if has_inplace else {op: record}


def _two_tensors(op):
    return lambda input, other: _ew._tensor_operands(op, input, other)


class Frexp(BuiltinFunction):
    """frexp(x) -> (mantissa, exponent): the mantissa is x / 2^e, so its gradient is g / 2^e."""

    @staticmethod
    def forward(ctx, x):
        m, e = _ew.frexp(x)
        ctx.mark_non_differentiable(e)
        ctx.save_for_backward(e)
        return m, e

    @staticmethod
    def backward(ctx, g, _g_exponent):
        (e,) = ctx.saved_tensors
        return g * (-e.to(g.dtype)).exp2()


def frexp(input, *, out=None):
    """The recorder of frexp: runs it as Frexp, so autograd records it (torch's frexp; the mantissa's gradient
    is g / 2**exponent, the exponent has none)."""
    _no_out("frexp", out)
    return _ew.frexp_result(*Frexp.apply(input))


RECORD.update(logit=logit, logit_=logit_, frexp=frexp, **_checked("heaviside", _ew._heaviside_checks),
              clamp_min_=lambda input, min: clamp_(input, _ew.clamp_bound("clamp_min_", "min", min), None),
              clamp_max_=lambda input, max: clamp_(input, None, _ew.clamp_bound("clamp_max_", "max", max)))
for _op in ("nextafter", "igamma", "igammac"):
    RECORD.update(_checked(_op, _two_tensors(_op)))
for _op in ("fmax", "fmin", "logaddexp", "logaddexp2"):  # torch has no in-place form of these
    RECORD.update(_checked(_op, _two_tensors(_op), has_inplace=False))
