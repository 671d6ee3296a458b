"""Derivatives of the reductions: ``sum mean prod amax amin max min var std`` (kernels:
``triton_kernels/reduce.py``; checks and shapes: ``core/ops/reduce.py``).

Backward formulas use tensor ops, so they are differentiable again.
"""
from __future__ import annotations

import builtins
import math

from ...core.factories import arange
from ...core.ops import reduce as _red
from ...core.tensor import Tensor
from ..function import BuiltinFunction
from . import elementwise as _e
from .elementwise import _ew_where


def _keep(g: Tensor, x_shape, dims, keepdim: bool) -> Tensor:
    """Put the reduced dims back as size 1 so ``g`` broadcasts against the input."""
    if keepdim or not dims:
        return g
    return g.reshape(tuple(1 if d in dims else n for d, n in enumerate(x_shape)))


class Sum(BuiltinFunction):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, dtype=None):
        out = _red.sum(x, dim, keepdim, dtype=dtype)  # checks the arguments first
        ctx.shape, ctx.dims, ctx.keepdim = x.shape, _red.reduced_dims(x, dim, "sum"), keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        return _keep(g, ctx.shape, ctx.dims, ctx.keepdim).expand(ctx.shape), None, None, None


class Mean(BuiltinFunction):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, dtype=None):
        out = _red.mean(x, dim, keepdim, dtype=dtype)
        ctx.shape, ctx.dims, ctx.keepdim = x.shape, _red.reduced_dims(x, dim, "mean"), keepdim
        ctx.n = math.prod(x.shape[d] for d in ctx.dims)
        return out

    @staticmethod
    def backward(ctx, g):
        return (_keep(g, ctx.shape, ctx.dims, ctx.keepdim) / ctx.n).expand(ctx.shape), None, None, None


class _Extreme(BuiltinFunction):
    """amax/amin and max()/min() over all elements: the gradient is shared evenly among the
    elements that attain the extreme (PyTorch's rule)."""

    op = ""

    @classmethod
    def forward(cls, ctx, x, dim=(), keepdim=False):
        if dim is None:
            out = getattr(_red, cls.op[1:])(x)
            ctx.dims, ctx.keepdim = tuple(range(x.ndim)), False
        else:
            out = getattr(_red, cls.op)(x, dim, keepdim)
            ctx.dims, ctx.keepdim = _red.reduced_dims(x, dim, cls.op), keepdim
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        hit = x == _keep(out, x.shape, ctx.dims, ctx.keepdim)
        count = hit.sum(ctx.dims, keepdim=True)
        return _keep(g, x.shape, ctx.dims, ctx.keepdim) * hit / count, None, None


class Amax(_Extreme):
    op = "amax"


class Amin(_Extreme):
    op = "amin"


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
    op = "min"


def _extreme(op, x, dim=None, keepdim=False, *, other=None):
    """``max``/``min`` in all three of PyTorch's forms."""
    if isinstance(dim, Tensor) or other is not None:
        return _e.binary("maximum" if op == "max" else "minimum", x, dim if other is None else other)
    if dim is None:
        if keepdim:
            raise TypeError(f"{op}(): keepdim=True needs a 'dim'")
        return (Amax if op == "max" else Amin).apply(x, None)
    values, indices = (MaxDim if op == "max" else MinDim).apply(x, dim, keepdim)
    return (_red.max_result if op == "max" else _red.min_result)(values, indices)


class Prod(BuiltinFunction):
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

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, dtype=None):
        out = _red.prod(x, dim, keepdim, dtype=dtype)
        ctx.dims, ctx.keepdim = _red.reduced_dims(x, dim, "prod"), keepdim
        ctx.save_for_backward(x)
        return out

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        g = _keep(g, x.shape, ctx.dims, ctx.keepdim)
        if not ctx.dims:  # nothing reduced (0-d input): prod is the identity
            return g, None, None, None
        z = x == 0
        nz = z.sum(ctx.dims, keepdim=True)
        xs = _ew_where(z, 1.0, x)
        if len(ctx.dims) == 1:
            P = xs.prod(ctx.dims[0], keepdim=True)
        else:  # prod reduces one dim or all of them
            P = xs.prod().reshape((1,) * x.ndim)
        Zs = _ew_where(z, x, 0.0).sum(ctx.dims, keepdim=True)
        others = P / xs
        one = _ew_where(z, P, others * Zs)
        two = _ew_where(z, P * (Zs - x), 0.0)
        local = _ew_where(nz == 0, others, _ew_where(nz == 1, one, _ew_where(nz == 2, two, 0.0)))
        return g * local, None, None, None


class _Variance(BuiltinFunction):
    op = ""

    @classmethod
    def forward(cls, ctx, x, dim=None, unbiased=None, keepdim=False, correction=None):
        out = getattr(_red, cls.op)(x, dim, unbiased, keepdim, correction=correction)
        d, corr = _red._correction(cls.op, dim, unbiased, correction)
        ctx.dims, ctx.keepdim = _red.reduced_dims(x, d, cls.op), keepdim
        ctx.denom = builtins.max(math.prod(x.shape[i] for i in ctx.dims) - corr, 0)
        ctx.save_for_backward(x, out)
        return out


class Var(_Variance):
    """d var / dx = 2 (x - mean) / (N - correction)."""

    op = "var"

    @staticmethod
    def backward(ctx, g):
        x, _ = ctx.saved_tensors
        centered = x - x.mean(ctx.dims, keepdim=True)
        return _keep(g, x.shape, ctx.dims, ctx.keepdim) * centered * (2.0 / ctx.denom), None, None, None, None


class Std(_Variance):
    """d std / dx = (x - mean) / ((N - correction) std)."""

    op = "std"

    @staticmethod
    def backward(ctx, g):
        x, std = ctx.saved_tensors
        centered = x - x.mean(ctx.dims, keepdim=True)
        scale = _keep(g / (std * ctx.denom), x.shape, ctx.dims, ctx.keepdim)
        return scale * centered, None, None, None, None


# The free functions / methods. Like torch's, these names shadow Python's builtins below here.
def sum(input, dim=None, keepdim=False, *, dtype=None):
    return Sum.apply(input, dim, keepdim, dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    return Mean.apply(input, dim, keepdim, dtype)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    return Prod.apply(input, dim, keepdim, dtype)


def amax(input, dim=(), keepdim=False):
    return Amax.apply(input, dim, keepdim)


def amin(input, dim=(), keepdim=False):
    return Amin.apply(input, dim, keepdim)


def max(input, dim=None, keepdim=False, *, other=None):
    return _extreme("max", input, dim, keepdim, other=other)


def min(input, dim=None, keepdim=False, *, other=None):
    return _extreme("min", input, dim, keepdim, other=other)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return Var.apply(input, dim, unbiased, keepdim, correction)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return Std.apply(input, dim, unbiased, keepdim, correction)


RECORD = {"sum": sum, "mean": mean, "prod": prod, "amax": amax, "amin": amin, "max": max, "min": min, "var": var,
          "std": std}  # op name -> recorder; argmax argmin all any: nothing to record
