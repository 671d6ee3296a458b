"""Derivatives of the sorts (core entries: ``core/ops/sort.py``; kernels: ``triton_kernels/sort.py``).

- ``sort``/``msort``/``topk``/``kthvalue``: the values are input elements picked by the indices,
  so the gradient is scattered back to those positions (:class:`ScatterDim`, whose own backward
  is ``gather``: double backward works); the indices have none.
"""
from __future__ import annotations

from ...core.ops import sort as _sort
from ...core.ops.index import scatter_add
from ...core.tensor import Tensor
from ..function import BuiltinFunction


class ScatterDim(BuiltinFunction):
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


class _Pick(BuiltinFunction):
    """An op whose values are input elements at returned int64 indices along ``dim``."""

    @classmethod
    def backward(cls, ctx, gv, gi=None):
        return ScatterDim.apply(gv, ctx.shape, ctx.dim, ctx.index)


class Sort(_Pick):
    """sort's derivative: the values' gradient scattered back to the positions the indices name."""
    @staticmethod
    def forward(ctx, x, dim=-1, descending=False, stable=False):
        v, i = _sort.sort(x, dim, descending, stable=stable)
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, i
        return v, i


class TopK(_Pick):
    """topk's derivative: the values' gradient scattered back to the positions the indices name (zero
    elsewhere)."""
    @staticmethod
    def forward(ctx, x, k, dim=-1, largest=True, sorted=True):
        v, i = _sort.topk(x, k, dim, largest, sorted)
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, i
        return v, i


class KthValue(BuiltinFunction):
    """kthvalue's derivative: the gradient goes to the position of the returned index only."""
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


def _sort_record(input, dim=-1, descending=False, *, stable=False):
    return _sort.sort_result(*Sort.apply(input, dim, descending, stable))


RECORD = {
    "sort": _sort_record,
    "msort": lambda input: Sort.apply(input, 0)[0],
    "topk": lambda input, k, dim=-1, largest=True, sorted=True: _sort.topk_result(
        *TopK.apply(input, k, dim, largest, sorted)),
    "kthvalue": lambda input, k, dim=-1, keepdim=False: _sort.kthvalue_result(*KthValue.apply(input, k, dim, keepdim)),
}
