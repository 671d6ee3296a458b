"""Derivative of ``cumsum`` (core entry: ``core/ops/cumsum.py``; kernel: ``triton_kernels/cumsum.py``).

y_n = x_0 + ... + x_n, so dL/dx_k = g_k + ... + g_{N-1}: the cumsum of the gradient taken from
the end of the dim. That is the same kernel run in reverse, recorded again, so the derivative is
itself differentiable.
"""
from __future__ import annotations

from ...core.ops import cumsum as _cs
from .elementwise import Op


class CumSum(Op):
    @staticmethod
    def forward(ctx, x, dim, dtype=None, reverse=False):
        ctx.dim, ctx.reverse = dim, reverse
        return _cs.scan(x, dim, dtype=dtype, reverse=reverse)

    @staticmethod
    def backward(ctx, g):
        return CumSum.apply(g, ctx.dim, None, not ctx.reverse), None, None, None


def cumsum(input, dim, *, dtype=None):
    return CumSum.apply(input, dim, dtype)


RECORD = {"cumsum": cumsum}
