"""Derivatives of ``softmax`` and ``log_softmax`` (kernel: ``triton_kernels/softmax.py``; checks:
``core/ops/softmax.py``). The forward's output is the saved tensor; the backward formulas use
tensor ops, so they are differentiable again.
"""
from __future__ import annotations

from ...core.ops import softmax as _sm
from ..function import BuiltinFunction


class Softmax(BuiltinFunction):
    """y = softmax(x): dx = y * (g - sum(g * y))."""

    @staticmethod
    def forward(ctx, x, dim, dtype=None):
        y = _sm.softmax(x, dim, dtype)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None, None


class LogSoftmax(BuiltinFunction):
    """y = log_softmax(x): dx = g - exp(y) * sum(g)."""

    @staticmethod
    def forward(ctx, x, dim, dtype=None):
        y = _sm.log_softmax(x, dim, dtype)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g - y.exp() * g.sum(ctx.dim, keepdim=True), None, None


def softmax(input, dim, dtype=None):
    return Softmax.apply(input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    return LogSoftmax.apply(input, dim, dtype)


RECORD = {"softmax": softmax, "log_softmax": log_softmax}  # op name -> recorder
