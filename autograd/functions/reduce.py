"""Derivatives of the reductions: ``sum mean prod amax amin max min var std`` (kernels:
``triton_kernels/reduce.py``; checks and shapes: ``core/ops/reduce.py``).

The reductions to one value per slice are data: a row per op in :data:`REDUCTION_FORMULAS` (its
core entry, what backward keeps, and the gradient as a formula), run by one generic Function,
:class:`Reduction`, whose forward is the row's core entry and whose backward hands the formula the
gradient and the kept output with the reduced dims put back (size 1, so they broadcast against
the input).
``max``/``min`` along a dim also return indices: they keep a class, :class:`MaxDim`. Formulas use
tensor ops, so they are differentiable again.
"""
from __future__ import annotations

import builtins
import math

from ...core.factories import arange
from ...core.ops import reduce as _red
from ...core.tensor import Tensor
from ..function import BuiltinFunction, functions_from_table
from . import elementwise as _e
from .elementwise import _ew_where


def _keep(g: Tensor, x_shape, dims, keepdim: bool) -> Tensor:
    """Put the reduced dims back as size 1 so ``g`` broadcasts against the input."""
    if keepdim or not dims:
        return g
    return g.reshape(tuple(1 if d in dims else n for d, n in enumerate(x_shape)))


class Reduction(BuiltinFunction):
    """``op(x, dim, keepdim, **options)`` for a row of :data:`REDUCTION_FORMULAS`: forward is the
    row's core entry; ``saves`` is what the formula gets besides the node (``shape``, ``dims``,
    ``options``) and the gradient: nothing (None), the input ``"x"``, or the input and the output
    ``"xy"``."""

    op = entry = saves = formula = None

    @classmethod
    def forward(cls, ctx, x, dim, keepdim, **options):
        out = cls.entry(x, dim, keepdim=keepdim, **options)  # checks the arguments first
        ctx.shape, ctx.dims, ctx.keepdim, ctx.options = x.shape, _red.reduced_dims(x, dim, cls.op), keepdim, options
        if cls.saves == "x":
            ctx.save_for_backward(x)
        elif cls.saves == "xy":
            ctx.save_for_backward(x, out)
        return out

    @classmethod
    def backward(cls, ctx, g):
        shape, dims, keepdim = ctx.shape, ctx.dims, ctx.keepdim
        x = y = None
        if cls.saves:
            saved = ctx.saved_tensors
            x = saved[0]
            if cls.saves == "xy":
                y = _keep(saved[1], shape, dims, keepdim)
        return cls.formula(ctx, _keep(g, shape, dims, keepdim), x, y), None, None  # none for dim, keepdim


def _extreme(c, g, x, y):
    """amax/amin, and max()/min() of all elements: the gradient is shared evenly among the
    elements that attain the extreme (PyTorch's rule)."""
    hit = x == y
    count = hit.sum(c.dims, keepdim=True)
    return g * hit / count


def _prod(c, g, x, y):
    """d prod / dx_i = product of the other entries of x_i's slice (torch's rule at zeros): with no
    zero in the slice, prod / x_i; with one zero, the zero's position gets the product of the
    others and the rest 0; with two or more, all 0. Written with tensor ops and no host sync, and
    so that it is differentiable again exactly, zeros included: with ``xs`` = x with zeros set to
    1, ``P = prod(xs)`` and ``Zs`` = sum of the slice's zero entries (value 0, gradient 1 to each):

        no zero:   P / xs_i
        one zero:  zero's position P;                 others P / xs_i * Zs
        two zeros: zero's positions P * (Zs - x_i);   others 0
        more:      0
    """
    if not c.dims:  # nothing reduced (0-d input): prod is the identity
        return g
    z = x == 0
    nz = z.sum(c.dims, keepdim=True)
    xs = _ew_where(z, 1.0, x)
    if len(c.dims) == 1:
        P = xs.prod(c.dims[0], keepdim=True)
    else:  # prod reduces one dim or all of them
        P = xs.prod().reshape((1,) * x.ndim)
    Zs = _ew_where(z, x, 0.0).sum(c.dims, keepdim=True)
    others = P / xs
    one = _ew_where(z, P, others * Zs)
    two = _ew_where(z, P * (Zs - x), 0.0)
    local = _ew_where(nz == 0, others, _ew_where(nz == 1, one, _ew_where(nz == 2, two, 0.0)))
    return g * local


def _denom(c):
    """var/std: N - correction (not below 0)."""
    return builtins.max(math.prod(c.shape[i] for i in c.dims) - c.options["correction"], 0)


# op: (core entry, what backward keeps, dL/dx from the node c, g and the kept x and y)
REDUCTION_FORMULAS = {
    "sum": (_red.sum, None, lambda c, g, x, y: g.expand(c.shape)),
    "mean": (_red.mean, None, lambda c, g, x, y: (g / math.prod(c.shape[d] for d in c.dims)).expand(c.shape)),
    "prod": (_red.prod, "x", _prod),
    "amax": (_red.amax, "xy", _extreme),
    "amin": (_red.amin, "xy", _extreme),
    "max": (_red.max, "xy", _extreme),  # max(x): all elements (max(x, dim) is MaxDim)
    "min": (_red.min, "xy", _extreme),
    # d var / dx = 2 (x - mean) / (N - correction); d std / dx = (x - mean) / ((N - correction) std)
    "var": (_red.var, "x", lambda c, g, x, y: g * (x - x.mean(c.dims, keepdim=True)) * (2.0 / _denom(c))),
    "std": (_red.std, "xy", lambda c, g, x, y: g / (y * _denom(c)) * (x - x.mean(c.dims, keepdim=True))),
}
# max(x)/min(x) keep the node names they have always had (AmaxBackward0)
REDUCTIONS = functions_from_table(Reduction, REDUCTION_FORMULAS, ("entry", "saves", "formula"),
                                  {"max": "Amax", "min": "Amin"})


class MaxDim(BuiltinFunction):
    """``max(x, dim)`` -> (values, indices): the gradient goes to the returned index only."""

    op = "max"

    @classmethod
    def forward(cls, ctx, x, dim, keepdim=False):
        values, indices = getattr(_red, cls.op)(x, dim, keepdim)
        ctx.mark_non_differentiable(indices)
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, _red.reduced_dims(x, dim, cls.op), keepdim
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, g, _g_indices):
        (indices,) = ctx.saved_tensors
        dims = ctx.dim
        d = dims[0] if dims else 0
        idx = _keep(indices, ctx.shape, dims, ctx.keepdim)
        pos_shape = [1] * len(ctx.shape)
        if ctx.shape:
            pos_shape[d] = ctx.shape[d]
        positions = arange(ctx.shape[d] if ctx.shape else 1, device=g.device).reshape(pos_shape)
        return _keep(g, ctx.shape, dims, ctx.keepdim) * (positions == idx), None, None


class MinDim(MaxDim):
    """min(x, dim)'s derivative: the gradient goes to the returned index only (MaxDim's, for min)."""
    op = "min"


def _max_or_min(op, x, dim=None, keepdim=False, *, other=None):
    """``max``/``min`` in all three of PyTorch's forms."""
    if isinstance(dim, Tensor) or other is not None:
        return _e.binary("maximum" if op == "max" else "minimum", x, dim if other is None else other)
    if dim is None:
        if keepdim:
            raise TypeError(f"{op}(): keepdim=True needs a 'dim'")
        return REDUCTIONS[op].apply(x, None, False)
    values, indices = (MaxDim if op == "max" else MinDim).apply(x, dim, keepdim)
    return (_red.max_result if op == "max" else _red.min_result)(values, indices)


# The free functions / methods. Like torch's, these names shadow Python's builtins below here.
def sum(input, dim=None, keepdim=False, *, dtype=None):
    """The recorder of sum: runs it as the table's Reduction, so autograd records it (torch's sum)."""
    return REDUCTIONS["sum"].apply(input, dim, keepdim, dtype=dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """The recorder of mean: runs it as the table's Reduction, so autograd records it (torch's mean)."""
    return REDUCTIONS["mean"].apply(input, dim, keepdim, dtype=dtype)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The recorder of prod: runs it as the table's Reduction, so autograd records it (torch's prod)."""
    return REDUCTIONS["prod"].apply(input, dim, keepdim, dtype=dtype)


def amax(input, dim=(), keepdim=False):
    """The recorder of amax: runs it as the table's Reduction, so autograd records it (torch's amax: the
    gradient is shared evenly among tied maxima)."""
    return REDUCTIONS["amax"].apply(input, dim, keepdim)


def amin(input, dim=(), keepdim=False):
    """The recorder of amin: runs it as the table's Reduction, so autograd records it (torch's amin: the
    gradient is shared evenly among tied minima)."""
    return REDUCTIONS["amin"].apply(input, dim, keepdim)


def max(input, dim=None, keepdim=False, *, other=None):
    """The recorder of max: runs it as a Reduction (no dim), MaxDim (dim) or maximum (other=), so autograd
    records it (torch's max)."""
    return _max_or_min("max", input, dim, keepdim, other=other)


def min(input, dim=None, keepdim=False, *, other=None):
    """The recorder of min: runs it as a Reduction (no dim), MinDim (dim) or minimum (other=), so autograd
    records it (torch's min)."""
    return _max_or_min("min", input, dim, keepdim, other=other)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The recorder of var: runs it as the table's Reduction, so autograd records it (torch's var, with
    correction or the legacy unbiased)."""
    dim, correction = _red._correction("var", dim, unbiased, correction)  # var(x, False): the legacy unbiased
    return REDUCTIONS["var"].apply(input, dim, keepdim, correction=correction)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The recorder of std: runs it as the table's Reduction, so autograd records it (torch's std, with
    correction or the legacy unbiased)."""
    dim, correction = _red._correction("std", dim, unbiased, correction)
    return REDUCTIONS["std"].apply(input, dim, keepdim, correction=correction)


RECORD = {"sum": sum, "mean": mean, "prod": prod, "amax": amax, "amin": amin, "max": max, "min": min, "var": var,
          "std": std}  # op name -> recorder; argmax argmin all any: nothing to record
