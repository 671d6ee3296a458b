"""Derivatives of the indexing ops (``index_select gather`` and advanced ``x[idx]``; core ops:
``core/ops/index.py``, kernels: ``triton_kernels/index.py``).

Each backward scatters the incoming gradient into zeros with accumulation (``index_add``,
``scatter_add``, ``index_put`` with accumulate), so duplicate indices sum their gradients. The
scatters are ops too, whose own backward is the gather again: double backward works. On GPU the
accumulation uses atomics, so the order of a sum over duplicates (and its last bits) varies from
run to run, as in PyTorch.
"""
from __future__ import annotations

from ...runtime import dtype as dt
from ...core.ops import index as _ix
from ...core.tensor import Tensor
from .elementwise import Op
from .views import Index


def _zeros(shape, d, dev):
    z = Tensor._empty(shape, dt.float32 if d in (dt.float16, dt.bfloat16) else d, dev)
    z.fill_(0)
    return z


class IndexSelect(Op):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, index.reshape(-1)
        return _ix.index_select(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        return IndexAddIntoZeros.apply(g, ctx.shape, ctx.dim, ctx.index), None, None


class IndexAddIntoZeros(Op):
    @staticmethod
    def forward(ctx, g, shape, dim, index):
        ctx.dim, ctx.index = dim, index
        return _ix.index_add(_zeros(shape, g.dtype, g.device), dim, index, g).to(g.dtype)

    @staticmethod
    def backward(ctx, gg):
        return IndexSelect.apply(gg, ctx.dim, ctx.index), None, None, None


class Gather(Op):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, index
        return _ix.gather(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        return ScatterAddIntoZeros.apply(g, ctx.shape, ctx.dim, ctx.index), None, None


class ScatterAddIntoZeros(Op):
    @staticmethod
    def forward(ctx, g, shape, dim, index):
        ctx.dim, ctx.index = dim, index
        if len(shape) == 0:  # gather from a 0-d input
            return _ix.index_add(_zeros((1,), g.dtype, g.device), 0, index.reshape(-1), g.reshape(-1)
                                 ).to(g.dtype).reshape(())
        return _ix.scatter_add(_zeros(shape, g.dtype, g.device), dim, index, g).to(g.dtype)

    @staticmethod
    def backward(ctx, gg):
        return Gather.apply(gg, ctx.dim, ctx.index), None, None, None


class AdvancedIndex(Op):
    """``x[idx]`` with index tensors / lists / masks. The checked plan (index buffer, layout) is
    kept, so backward neither re-checks bounds nor syncs with the host again."""

    @staticmethod
    def forward(ctx, x, index):
        p = _ix.plan(x, index)
        ctx.shape, ctx.plan = x.shape, p
        return _ix.getitem_planned(x, p)

    @staticmethod
    def backward(ctx, g):
        return IndexPutAccumulateIntoZeros.apply(g, ctx.shape, ctx.plan), None


class IndexPutAccumulateIntoZeros(Op):
    @staticmethod
    def forward(ctx, g, shape, plan):
        ctx.plan = plan
        z = _zeros(shape, g.dtype, g.device)
        plan.run("add", z, g)
        return z.to(g.dtype)

    @staticmethod
    def backward(ctx, gg):
        return _ReIndex.apply(gg, ctx.plan), None, None


class _ReIndex(Op):
    """``x[idx]`` from an already checked plan (the double backward of advanced indexing)."""

    @staticmethod
    def forward(ctx, x, plan):
        ctx.shape, ctx.plan = x.shape, plan
        return _ix.getitem_planned(x, plan)

    @staticmethod
    def backward(ctx, g):
        return IndexPutAccumulateIntoZeros.apply(g, ctx.shape, ctx.plan), None


def index_select(input, dim, index):
    return IndexSelect.apply(input, dim, index)


def gather(input, dim, index):
    return Gather.apply(input, dim, index)


def getitem(self, index):
    """``x[index]`` on a tensor that requires grad: advanced indices copy (AdvancedIndex), basic
    ones are a recorded view (``views.Index``)."""
    if _ix.is_advanced(index):
        return AdvancedIndex.apply(self, index)
    return Index.apply(self, index)


def setitem(self, index, value):
    """``x[idx] = v`` records nothing: with advanced indices on a tensor autograd must protect it
    raises instead of giving wrong grads; basic indices write through a recorded view (copy_)."""
    if _ix.is_advanced(index):
        raise RuntimeError("x[index] = value with advanced (tensor/list/mask) indices is not differentiable "
                           "in tritensor yet: on a tensor that requires grad, use it under no_grad()")
    return _ix.setitem_any(self, index, value)


RECORD = {"index_select": index_select, "gather": gather, "getitem": getitem, "setitem": setitem}
