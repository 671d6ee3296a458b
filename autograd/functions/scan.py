"""Derivatives of the scans (core entries: ``core/ops/scan.py``; kernels: ``triton_kernels/scan.py``).

``cumsum``, ``cumprod`` and ``logcumsumexp`` are data: a row per op in :data:`SCAN_FORMULAS` (its
core entry, whether backward keeps the input and output, and the gradient as a formula), run by
one generic Function, :class:`Scan`. Formulas use recorded ops, so they are differentiable again.

- ``cumsum``: y_n = x_0 + ... + x_n, so dL/dx_k = g_k + ... + g_{N-1}: the cumsum of the gradient
  taken from the end of the dim, the same kernel run in reverse (``reverse=True``) and recorded.
- ``cumprod``: dL/dx_k = sum_{j>=k} g_j prod_{i<=j, i!=k} x_i. Where x_k != 0 that is
  revcumsum(g * out)_k / x_k; at the first zero of a row it is revcumsum(g * cumprod(x with that
  zero set to 1))_k; after it, 0 (every product holds the first zero).
- ``logcumsumexp``: dL/dx_i = sum_{j>=i} g_j exp(x_i - out_j), computed in log space for the
  positive and negative parts of g separately (no overflow), as PyTorch does.
- ``cummax``/``cummin`` return indices too and keep a class: the values are picked input
  elements, so the gradient is scattered back to the returned indices (``sort.ScatterDim``).
"""
from __future__ import annotations

from ...core.ops import scan as _scan
from ..function import BuiltinFunction, functions_from_table
from .sort import ScatterDim


class Scan(BuiltinFunction):
    """``op(x, dim, **options)`` for a row of :data:`SCAN_FORMULAS`; the formula gets the node
    (``dim``, normalized, and ``options``), the gradient, and the input and output if ``saves``."""

    op = entry = saves = formula = None

    @classmethod
    def forward(cls, ctx, x, dim, **options):
        out = cls.entry(x, dim, **options)  # checks the arguments first
        ctx.dim, ctx.options = dim % max(x.ndim, 1), options
        if cls.saves:
            ctx.save_for_backward(x, out)
        return out

    @classmethod
    def backward(cls, ctx, g):
        x, y = ctx.saved_tensors if cls.saves else (None, None)
        return cls.formula(ctx, g, x, y), None  # none for dim


def _revcumsum(t, d):
    return t.flip(d).cumsum(d).flip(d)


def _cumsum_grad(c, g, x, y):
    """The reversed cumsum of g (of a reversed cumsum: the cumsum), the same kernel, recorded."""
    return SCANS["cumsum"].apply(g, c.dim, reverse=not c.options.get("reverse", False))


def _cumprod_grad(c, g, x, y):
    d, zero = c.dim, x == 0
    if not bool(zero.any()):
        return _revcumsum(g * y, d) / x
    first = zero & (zero.cumsum(d) == 1)
    simple = _revcumsum(g * y, d) / x.masked_fill(zero, 1)
    at_first = _revcumsum(g * x.masked_fill(first, 1).cumprod(d), d)
    return at_first.where(first, simple.masked_fill(zero, 0))


def _logcumsumexp_grad(c, g, x, y):
    d = c.dim

    def part(w):  # exp(x_i + log sum_{j>=i} w_j exp(-out_j)) for w >= 0
        return (x + (w.log() - y).flip(d).logcumsumexp(d).flip(d)).exp()

    return part(g.clamp_min(0)) - part((-g).clamp_min(0))


# op: (core entry, whether backward keeps x and y, dL/dx from the node c, g, x and y)
SCAN_FORMULAS = {
    "cumsum": (_scan.scan_sum, False, _cumsum_grad),
    "cumprod": (_scan.cumprod, True, _cumprod_grad),
    "logcumsumexp": (_scan.logcumsumexp, True, _logcumsumexp_grad),
}
SCANS = functions_from_table(Scan, SCAN_FORMULAS, ("entry", "saves", "formula"),
                             {"cumsum": "CumSum", "cumprod": "CumProd", "logcumsumexp": "LogCumSumExp"})


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
    "cumsum": lambda input, dim, *, dtype=None: SCANS["cumsum"].apply(input, dim, dtype=dtype),
    "cumprod": lambda input, dim, *, dtype=None: SCANS["cumprod"].apply(input, dim, dtype=dtype),
    "logcumsumexp": lambda input, dim: SCANS["logcumsumexp"].apply(input, dim),
    "cummax": lambda input, dim: _scan.cummax_result(*CumExtreme.apply(input, dim, "cummax")),
    "cummin": lambda input, dim: _scan.cummin_result(*CumExtreme.apply(input, dim, "cummin")),
}
