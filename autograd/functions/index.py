"""Derivatives of the indexing ops (``index_select gather scatter_add index_add`` and their in-place
forms, advanced ``x[idx]``; core ops:
``core/ops/index.py``, kernels: ``triton_kernels/index.py``).

Each backward scatters the incoming gradient into zeros with accumulation (``index_add``,
``scatter_add``, ``index_put`` with accumulate), so duplicate indices sum their gradients. The
scatters are ops too, whose own backward is the gather again: double backward works. On GPU the
accumulation uses atomics, so the order of a sum over duplicates (and its last bits) varies from
run to run, as in PyTorch.
"""
from __future__ import annotations

from ...runtime.dtype_policy import widened
from ...core.ops import index as _ix
from ...core.functional import cat
from ...core.tensor import Tensor
from ..function import BuiltinFunction, check_inplace
from .views import Index


def _zeros(shape, d, dev):
    z = Tensor._empty(shape, widened(d), dev)
    z.fill_(0)
    return z


class IndexSelect(BuiltinFunction):
    """index_select's derivative: the gradient added into zeros at the selected positions (IndexAddIntoZeros)."""
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, index.reshape(-1)
        return _ix.index_select(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        return IndexAddIntoZeros.apply(g, ctx.shape, ctx.dim, ctx.index), None, None


class IndexAddIntoZeros(BuiltinFunction):
    """index_select's gradient as a recorded op (zeros with the gradient added at ``index``), so double
    backward is an index_select again."""
    @staticmethod
    def forward(ctx, g, shape, dim, index):
        ctx.dim, ctx.index = dim, index
        return _ix.index_add(_zeros(shape, g.dtype, g.device), dim, index, g).to(g.dtype)

    @staticmethod
    def backward(ctx, gg):
        return IndexSelect.apply(gg, ctx.dim, ctx.index), None, None, None


class Gather(BuiltinFunction):
    """gather's derivative: the gradient scatter-added into zeros at ``index`` (ScatterAddIntoZeros)."""
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, index
        return _ix.gather(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        return ScatterAddIntoZeros.apply(g, ctx.shape, ctx.dim, ctx.index), None, None


class ScatterAddIntoZeros(BuiltinFunction):
    """gather's gradient as a recorded op (zeros with the gradient scatter-added at ``index``), so double
    backward is a gather again."""
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


class AdvancedIndex(BuiltinFunction):
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


class IndexPutAccumulateIntoZeros(BuiltinFunction):
    """x[index]'s gradient as a recorded op: zeros with the gradient accumulated at the planned positions
    (repeated indices add up), so double backward reads x[index] again."""
    @staticmethod
    def forward(ctx, g, shape, plan):
        ctx.plan = plan
        z = _zeros(shape, g.dtype, g.device)
        plan.run("add", z, g)
        return z.to(g.dtype)

    @staticmethod
    def backward(ctx, gg):
        return _ReIndex.apply(gg, ctx.plan), None, None


class _ReIndex(BuiltinFunction):
    """``x[idx]`` from an already checked plan (the double backward of advanced indexing)."""

    @staticmethod
    def forward(ctx, x, plan):
        ctx.shape, ctx.plan = x.shape, plan
        return _ix.getitem_planned(x, plan)

    @staticmethod
    def backward(ctx, g):
        return IndexPutAccumulateIntoZeros.apply(g, ctx.shape, ctx.plan), None


class ScatterAdd(BuiltinFunction):
    """``input.scatter_add(dim, index, src)``: the gradient passes to ``input`` whole and reaches
    ``src`` gathered at ``index`` (zero where ``src`` is larger than ``index``)."""

    @staticmethod
    def forward(ctx, x, dim, index, src, inplace=False):
        ctx.dim, ctx.index, ctx.src_shape = dim, index, src.shape
        if inplace:
            _ix.scatter_add_(x, dim, index, src)
            ctx.mark_dirty(x)
            return x
        return _ix.scatter_add(x, dim, index, src)

    @staticmethod
    def backward(ctx, g):
        gs = None
        if ctx.needs_input_grad[3]:
            gs = _pad_to(Gather.apply(g, ctx.dim, ctx.index), ctx.src_shape)
        return g, None, None, gs, None


class IndexAdd(BuiltinFunction):
    """``input.index_add(dim, index, source, alpha=alpha)``: the gradient passes to ``input`` whole
    and reaches ``source`` as ``alpha * g.index_select(dim, index)``."""

    @staticmethod
    def forward(ctx, x, dim, index, source, alpha=1, inplace=False):
        ctx.dim, ctx.index, ctx.alpha, ctx.source_dtype = dim, index.reshape(-1), alpha, source.dtype
        if inplace:
            _ix.index_add_(x, dim, index, source, alpha=alpha)
            ctx.mark_dirty(x)
            return x
        return _ix.index_add(x, dim, index, source, alpha=alpha)

    @staticmethod
    def backward(ctx, g):
        gs = None
        if ctx.needs_input_grad[3]:
            gs = IndexSelect.apply(g, ctx.dim, ctx.index)
            gs = gs * ctx.alpha if ctx.alpha != 1 else gs
            gs = gs.to(ctx.source_dtype) if gs.dtype is not ctx.source_dtype else gs
        return g, None, None, gs, None, None


def _pad_to(t, shape):
    """``t`` zero-padded at the end of each dim to ``shape`` (recorded: ``cat`` with zeros)."""
    for d, (have, want) in enumerate(zip(t.shape, shape)):
        if have < want:
            pad = list(t.shape)
            pad[d] = want - have
            t = cat([t, Tensor._empty(tuple(pad), t.dtype, t.device).fill_(0)], d)
    return t


def scatter_add_(input, dim, index, src):
    """The recorder of scatter_add_: runs it as ScatterAdd in place, so autograd records it (torch's
    scatter_add_)."""
    check_inplace(input)
    return ScatterAdd.apply(input, dim, index, src, True)


def index_add_(input, dim, index, source, *, alpha=1):
    """The recorder of index_add_: runs it as IndexAdd in place, so autograd records it (torch's index_add_)."""
    check_inplace(input)
    return IndexAdd.apply(input, dim, index, source, alpha, True)


def index_select(input, dim, index):
    """The recorder of index_select: runs it as IndexSelect, so autograd records it (torch's index_select)."""
    return IndexSelect.apply(input, dim, index)


def gather(input, dim, index):
    """The recorder of gather: runs it as Gather, so autograd records it (torch's gather)."""
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


RECORD = {"index_select": index_select, "gather": gather, "getitem": getitem, "setitem": setitem,
          "scatter_add": lambda input, dim, index, src: ScatterAdd.apply(input, dim, index, src),
          "scatter_add_": scatter_add_,
          "index_add": lambda input, dim, index, source, *, alpha=1: IndexAdd.apply(input, dim, index, source, alpha),
          "index_add_": index_add_}
