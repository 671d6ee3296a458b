"""Derivatives of the scans (core entries: ``core/ops/scan.py``; kernels: ``triton_kernels/scan.py``).

- ``cumsum``: y_n = x_0 + ... + x_n, so dL/dx_k = g_k + ... + g_{N-1}: the cumsum of the gradient
  taken from the end of the dim, the same kernel run in reverse and recorded again.
- ``cumprod``: dL/dx_k = sum_{j>=k} g_j prod_{i<=j, i!=k} x_i. Where x_k != 0 that is
  revcumsum(g * out)_k / x_k; at the first zero of a row it is revcumsum(g * cumprod(x with that
  zero set to 1))_k; after it, 0 (every product holds the first zero). Written with recorded ops.
- ``logcumsumexp``: dL/dx_i = sum_{j>=i} g_j exp(x_i - out_j), computed in log space for the
  positive and negative parts of g separately (no overflow), as PyTorch does.
- ``cummax``/``cummin``: the values are picked input elements: the gradient is scattered back to
  the returned indices (``sort.ScatterDim``).
"""
from __future__ import annotations

from ...core.ops import scan as _scan
from ..function import BuiltinFunction
from .sort import ScatterDim


def _revcumsum(t, d):
    return t.flip(d).cumsum(d).flip(d)


class CumSum(BuiltinFunction):
    @staticmethod
    def forward(ctx, x, dim, dtype=None, reverse=False):
        ctx.dim, ctx.reverse = dim, reverse
        return _scan.scan_sum(x, dim, dtype=dtype, reverse=reverse)

    @staticmethod
    def backward(ctx, g):
        return CumSum.apply(g, ctx.dim, None, not ctx.reverse), None, None, None


class CumProd(BuiltinFunction):
    @staticmethod
    def forward(ctx, x, dim, dtype=None):
        out = _scan.cumprod(x, dim, dtype=dtype)
        ctx.dim = dim % max(x.ndim, 1)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        d = ctx.dim
        zero = x == 0
        if not bool(zero.any()):
            return _revcumsum(g * out, d) / x, None, None
        first = zero & (zero.cumsum(d) == 1)
        simple = _revcumsum(g * out, d) / x.masked_fill(zero, 1)
        at_first = _revcumsum(g * x.masked_fill(first, 1).cumprod(d), d)
        return at_first.where(first, simple.masked_fill(zero, 0)), None, None


class LogCumSumExp(BuiltinFunction):
    @staticmethod
    def forward(ctx, x, dim):
        out = _scan.logcumsumexp(x, dim)
        ctx.dim = dim % max(x.ndim, 1)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        d = ctx.dim

        def part(w):  # exp(x_i + log sum_{j>=i} w_j exp(-out_j)) for w >= 0
            return (x + (w.log() - out).flip(d).logcumsumexp(d).flip(d)).exp()

        return part(g.clamp_min(0)) - part((-g).clamp_min(0)), None


class CumExtreme(BuiltinFunction):
    """cummax/cummin: the values are input elements at the returned indices, so the gradient goes
    back to them (scattered and summed, the backward of any pick by index); the indices have none."""

    @staticmethod
    def forward(ctx, x, dim, op):
        v, i = (_scan.cummax if op == "cummax" else _scan.cummin)(x, dim)
        ctx.shape, ctx.dim, ctx.index = x.shape, dim % max(x.ndim, 1), i
        ctx.mark_non_differentiable(i)
        return v, i

    @staticmethod
    def backward(ctx, gv, gi=None):
        return ScatterDim.apply(gv, ctx.shape, ctx.dim, ctx.index), None, None


RECORD = {
    "cumsum": lambda input, dim, *, dtype=None: CumSum.apply(input, dim, dtype),
    "cumprod": lambda input, dim, *, dtype=None: CumProd.apply(input, dim, dtype),
    "logcumsumexp": lambda input, dim: LogCumSumExp.apply(input, dim),
    "cummax": lambda input, dim: _scan.cummax_result(*CumExtreme.apply(input, dim, "cummax")),
    "cummin": lambda input, dim: _scan.cummin_result(*CumExtreme.apply(input, dim, "cummin")),
}
