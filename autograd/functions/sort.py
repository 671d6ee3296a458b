"""Derivatives of the scans, sorts and masked fills (core entries: ``core/ops/scan.py``,
``sort.py``, ``select.py``).

- ``sort``/``msort``/``topk``/``kthvalue``: the values are input elements picked by the indices,
  so the gradient is scattered back to those positions (:class:`ScatterDim`, whose own backward
  is ``gather``: double backward works); the indices have none.
- ``cumprod``: dL/dx_k = sum_{j>=k} g_j prod_{i<=j, i!=k} x_i. Where x_k != 0 that is
  revcumsum(g * out)_k / x_k; at the first zero of a row it is revcumsum(g * cumprod(x with that
  zero set to 1))_k; after it, 0 (every product holds the first zero). Written with recorded ops.
- ``logcumsumexp``: dL/dx_i = sum_{j>=i} g_j exp(x_i - out_j), computed in log space for the
  positive and negative parts of g separately (no overflow), as PyTorch does.
- ``masked_fill``/``masked_fill_``: the gradient passes where the mask is False; a 0-d tensor
  ``value`` gets the sum of the gradient where it is True.
"""
from __future__ import annotations

from ...core.ops import scan as _scan
from ...core.ops import select as _sel
from ...core.ops import sort as _sort
from ...core.ops.index import scatter_add
from ...core.tensor import Tensor
from ..function import check_inplace
from .elementwise import Op


class ScatterDim(Op):
    """zeros(shape) with ``g`` added at ``index`` along ``dim``: the backward of picking by index."""

    @staticmethod
    def forward(ctx, g, shape, dim, index):
        ctx.dim, ctx.index = dim, index
        if len(shape) == 0:
            return g.reshape(())
        z = Tensor._empty(shape, g.dtype, g.device)
        z.fill_(0)
        return scatter_add(z, dim, index, g.contiguous())

    @staticmethod
    def backward(ctx, gg):
        if ctx.index.ndim == 0:
            return gg.reshape(()), None, None, None
        return gg.gather(ctx.dim, ctx.index), None, None, None


class _Pick(Op):
    """An op whose values are input elements at returned int64 indices along ``dim``."""

    @classmethod
    def backward(cls, ctx, gv, gi=None):
        return ScatterDim.apply(gv, ctx.shape, ctx.dim, ctx.index)


class Sort(_Pick):
    @staticmethod
    def forward(ctx, x, dim=-1, descending=False, stable=False):
        v, i = _sort.sort(x, dim, descending, stable=stable)
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, i
        return v, i


class TopK(_Pick):
    @staticmethod
    def forward(ctx, x, k, dim=-1, largest=True, sorted=True):
        v, i = _sort.topk(x, k, dim, largest, sorted)
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, i
        return v, i


class KthValue(Op):
    @staticmethod
    def forward(ctx, x, k, dim=-1, keepdim=False):
        v, i = _sort.kthvalue(x, k, dim, keepdim)
        ctx.shape, ctx.dim, ctx.keepdim, ctx.index = x.shape, dim % max(x.ndim, 1), keepdim, i
        return v, i

    @staticmethod
    def backward(ctx, gv, gi=None):
        index = ctx.index
        if not ctx.keepdim and len(ctx.shape):
            gv, index = gv.unsqueeze(ctx.dim), index.unsqueeze(ctx.dim)
        return ScatterDim.apply(gv, ctx.shape, ctx.dim, index)


def _revcumsum(t, d):
    return t.flip(d).cumsum(d).flip(d)


class CumProd(Op):
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


class LogCumSumExp(Op):
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


class MaskedFill(Op):
    @staticmethod
    def forward(ctx, x, mask, value, inplace=False):
        ctx.save_for_backward(mask)
        ctx.value_is_tensor = isinstance(value, Tensor)
        if inplace:
            _sel.masked_fill_(x, mask, value)
            ctx.mark_dirty(x)
            return x
        return _sel.masked_fill(x, mask, value)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        gv = g.masked_fill(mask.logical_not(), 0).sum() if ctx.value_is_tensor else None
        return g.masked_fill(mask, 0), None, gv, None


def masked_fill_(input, mask, value):
    check_inplace(input)
    return MaskedFill.apply(input, mask, value, True)


def _sort_record(input, dim=-1, descending=False, *, stable=False):
    return _sort.sort_result(*Sort.apply(input, dim, descending, stable))


RECORD = {
    "sort": _sort_record,
    "msort": lambda input: Sort.apply(input, 0)[0],
    "topk": lambda input, k, dim=-1, largest=True, sorted=True: _sort.topk_result(
        *TopK.apply(input, k, dim, largest, sorted)),
    "kthvalue": lambda input, k, dim=-1, keepdim=False: _sort.kthvalue_result(*KthValue.apply(input, k, dim, keepdim)),
    "cumprod": lambda input, dim, *, dtype=None: CumProd.apply(input, dim, dtype),
    "logcumsumexp": lambda input, dim: LogCumSumExp.apply(input, dim),
    "masked_fill": lambda input, mask, value: MaskedFill.apply(input, mask, value),
    "masked_fill_": masked_fill_,
}
