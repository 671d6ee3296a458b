"""Derivatives of the kernel-backed math ops (core entries: ``core/ops/math_ops.py``).

``round`` (and ``round_``) is piecewise constant: a zero gradient (as PyTorch's). ``nan_to_num`` passes the
gradient where the input was finite and zero where it was replaced. ``dot``: d(a.b)/da = g*b.
The composites of that module (logsumexp, outer, trace, the norms) and einsum are recorded as
the ops they are made of and need nothing here.
"""
from __future__ import annotations

from ...core.ops import math_ops as _m
from ..function import BuiltinFunction, check_inplace


class Round(BuiltinFunction):
    """round's derivative: zero everywhere (piecewise constant), as torch's."""
    @staticmethod
    def forward(ctx, x, decimals=0, inplace=False):
        if inplace:
            ctx.mark_dirty(x)
            return _m.round_(x, decimals=decimals)
        return _m.round(x, decimals=decimals)

    @staticmethod
    def backward(ctx, g):
        return g * 0


class NanToNum(BuiltinFunction):
    """nan_to_num's derivative: the gradient where the input was finite, 0 where it was NaN or inf."""
    @staticmethod
    def forward(ctx, x, nan=0.0, posinf=None, neginf=None, inplace=False):
        ctx.save_for_backward(_m.isfinite(x))  # before an in-place form overwrites x
        if inplace:
            ctx.mark_dirty(x)
            return _m.nan_to_num_(x, nan, posinf, neginf)
        return _m.nan_to_num(x, nan, posinf, neginf)

    @staticmethod
    def backward(ctx, g):
        (finite,) = ctx.saved_tensors
        return g * finite  # a recorded mul: differentiable again


class Dot(BuiltinFunction):
    """dot's derivative: g * other and g * input."""
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _m.dot(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


def _round_(input, decimals):
    check_inplace(input)
    return Round.apply(input, decimals, True)


def _nan_to_num_(input, nan, posinf, neginf):
    check_inplace(input)
    return NanToNum.apply(input, nan, posinf, neginf, True)


RECORD = {
    "round": lambda input, *, decimals=0: Round.apply(input, decimals),
    "round_": lambda input, *, decimals=0: _round_(input, decimals),
    "nan_to_num": lambda input, nan=0.0, posinf=None, neginf=None: NanToNum.apply(input, nan, posinf, neginf),
    "nan_to_num_": lambda input, nan=0.0, posinf=None, neginf=None: _nan_to_num_(input, nan, posinf, neginf),
    "dot": lambda input, other: Dot.apply(input, other),
}
