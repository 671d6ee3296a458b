"""Derivatives of the kernel-backed math ops (core entries: ``core/ops/math_ops.py``).

``round`` is piecewise constant: a zero gradient (as PyTorch's). ``nan_to_num`` passes the
gradient where the input was finite and zero where it was replaced. ``dot``: d(a.b)/da = g*b.
The composites of that module (logsumexp, outer, trace, the norms) and einsum are recorded as
the ops they are made of and need nothing here.
"""
from __future__ import annotations

from ...core.ops import math_ops as _m
from .elementwise import Op


class Round(Op):
    @staticmethod
    def forward(ctx, x, decimals=0):
        return _m.round(x, decimals=decimals)

    @staticmethod
    def backward(ctx, g):
        return g * 0


class NanToNum(Op):
    @staticmethod
    def forward(ctx, x, nan=0.0, posinf=None, neginf=None):
        ctx.save_for_backward(x)
        return _m.nan_to_num(x, nan, posinf, neginf)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _m.isfinite(x)  # a recorded mul: differentiable again


class Dot(Op):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _m.dot(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


RECORD = {
    "round": lambda input, *, decimals=0: Round.apply(input, decimals),
    "nan_to_num": lambda input, nan=0.0, posinf=None, neginf=None: NanToNum.apply(input, nan, posinf, neginf),
    "dot": lambda input, other: Dot.apply(input, other),
}
