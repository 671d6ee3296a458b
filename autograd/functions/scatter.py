"""Derivatives of ``scatter``, ``scatter_reduce`` and ``index_put`` and their in-place forms (core
entries: ``core/ops/scatter.py``). The family's composites (``index_fill``, ``index_copy``,
``masked_scatter``, ``take_along_dim``) need none: they are recorded as the scatters, puts and
gathers they are made of.

Each backward is PyTorch's formula (``FunctionsManual.cpp: scatter_reduce_backward``) written with
dispatched ops, so it is recorded again under ``create_graph`` (double backward). Two departures:
a ``src`` larger than ``index`` gets zeros beyond it (torch raises), and with ``include_self=False``
``amax``/``amin`` do not count ``self`` at the positions that receive elements when splitting the
gradient among ties (torch does, and then drops that share).
"""
from __future__ import annotations

from ...runtime import dtype as dt
from ...core.factories import arange
from ...core.functional import where
from ...core.ops import scatter as _sc
from ...core.tensor import Tensor
from ..function import BuiltinFunction, check_inplace
from .index import _pad_to


def _long(index):
    """The index as backward's gathers take it (int64)."""
    return index if index.dtype is dt.int64 else index.to(dt.int64)


def _forward(ctx, x, inplace, run):
    out = run(x)
    if inplace:
        ctx.mark_dirty(x)
    return out


class Scatter(BuiltinFunction):
    """``input.scatter(dim, index, src | value)``: ``input`` keeps the gradient where nothing was
    written; ``src`` gets it gathered at ``index``, where it was written: of repeated indices only
    the last along ``dim``, the one the forward kept (torch gives it to every repeat)."""

    @staticmethod
    def forward(ctx, x, dim, index, src, inplace=False):
        ctx.dim, ctx.index = dim, _long(index)
        ctx.src_shape = src.shape if isinstance(src, Tensor) else None
        if inplace:
            return _forward(ctx, x, True, lambda t: _sc.scatter_(t, dim, index, src))
        return _sc.scatter(x, dim, index, src)

    @staticmethod
    def backward(ctx, g):
        gx = g.scatter(ctx.dim, ctx.index, 0) if ctx.needs_input_grad[0] else None
        gs = None
        if ctx.src_shape is not None and ctx.needs_input_grad[3]:
            gs = g.gather(ctx.dim, ctx.index)
            if ctx.index.ndim and ctx.index.shape[ctx.dim] > 1:
                gs = gs * _written(ctx.index, ctx.dim, g.shape)
            gs = _pad_to(gs, ctx.src_shape)
        return gx, None, None, gs, None


def _written(index, d, shape):
    """Which elements of ``index`` a scatter writes: the last along ``d`` of each repeated target."""
    k = index.shape[d]
    view = [1] * index.ndim
    view[d] = k
    pos = arange(k, dtype=index.dtype, device=index.device).reshape(view).expand(index.shape)
    return index.new_zeros(tuple(shape)).scatter(d, index, pos).gather(d, index) == pos


class ScatterReduce(BuiltinFunction):
    """``input.scatter_reduce(dim, index, src, reduce, include_self=...)`` (and ``scatter`` with
    ``reduce='add'|'multiply'``: sum and prod with ``self`` included)."""

    @staticmethod
    def forward(ctx, x, dim, index, src, reduce, include_self=True, inplace=False):
        ctx.dim, ctx.index, ctx.reduce, ctx.include_self = dim, _long(index), reduce, include_self
        ctx.src_shape = src.shape
        keep = None  # what backward reads of input: its values before the op (prod, amax, amin)
        if reduce in ("prod", "amax", "amin"):
            keep = x.clone() if inplace else x
        if inplace:
            out = _forward(ctx, x, True, lambda t: _sc.scatter_reduce_(t, dim, index, src, reduce,
                                                                      include_self=include_self))
        else:
            out = _sc.scatter_reduce(x, dim, index, src, reduce, include_self=include_self)
        ctx.save_for_backward(keep, src, out if reduce in ("prod", "amax", "amin") else None)
        return out

    @staticmethod
    def backward(ctx, g):
        x, src, result = ctx.saved_tensors
        d, index, reduce, include_self = ctx.dim, ctx.index, ctx.reduce, ctx.include_self
        if tuple(src.shape) != tuple(index.shape):  # the part of src that was read
            src = src[tuple(slice(0, n) for n in index.shape)]
        if reduce == "sum":
            gx, gs = g, g.gather(d, index)
        elif reduce == "mean":
            n = (g.new_ones(g.shape) if include_self else g.new_zeros(g.shape)).scatter_add(d, index,
                                                                                           g.new_ones(index.shape))
            n = n.masked_fill(n == 0, 1)
            gx, gs = g / n, g.gather(d, index) / n.gather(d, index)
        elif reduce == "prod":
            gx, gs = _prod_grads(g, x, src, result, d, index, include_self)
        else:  # amax / amin: split evenly among the elements equal to the result
            value = result.gather(d, index)
            self_hit = x == result
            if not include_self:
                self_hit = self_hit.scatter(d, index, False)
            src_hit = src == value
            n = self_hit.to(g.dtype).scatter_add(d, index, src_hit.to(g.dtype))
            share = g / n.masked_fill(n == 0, 1)
            gx, gs = share * self_hit, share.gather(d, index) * src_hit
        if not include_self:
            gx = gx.scatter(d, index, 0)
        gs = _pad_to(gs, ctx.src_shape)
        return (gx if ctx.needs_input_grad[0] else None), None, None, gs, None, None, None


def _prod_grads(g, x, src, result, d, index, include_self):
    """The product's gradients, exact where one factor is 0 (torch's masked products)."""
    masked_x = x.masked_fill(x == 0, 1)
    gx = g * masked_x.scatter_reduce(d, index, src, "prod", include_self=include_self) / masked_x
    src_zero = src == 0
    zeros_per_target = x.new_zeros(x.shape).scatter_add(d, index, src_zero.to(x.dtype)).gather(d, index)
    single_zero = src_zero & (zeros_per_target == 1)
    others = x.scatter_reduce(d, index, src.masked_fill(single_zero, 1), "prod", include_self=include_self)
    gs = where(single_zero, (g * others).gather(d, index),
               (g * result).gather(d, index) / src.masked_fill(src_zero, 1))
    return gx, gs


class IndexPut(BuiltinFunction):
    """``input.index_put(indices, values, accumulate)``: ``input`` keeps the gradient where nothing
    was put (all of it when accumulating); ``values`` get ``g[indices]`` (summed to their shape by
    the engine where they were broadcast), without accumulating only where they were written: of
    repeated index rows the last, the one the forward kept (torch gives it to every repeat)."""

    @staticmethod
    def forward(ctx, x, indices, values, accumulate=False, inplace=False):
        ctx.indices, ctx.accumulate = tuple(indices), accumulate
        if inplace:
            return _forward(ctx, x, True, lambda t: _sc.index_put_(t, indices, values, accumulate))
        return _sc.index_put(x, indices, values, accumulate)

    @staticmethod
    def backward(ctx, g):
        gx = None
        if ctx.needs_input_grad[0]:
            gx = g if ctx.accumulate else g.index_put(ctx.indices, g.new_zeros(()))
        gv = None
        if ctx.needs_input_grad[2]:
            index = tuple(slice(None) if i is None else i for i in ctx.indices)
            gv = g[index]
            if not ctx.accumulate and gv.numel() > 1:
                ids = arange(gv.numel(), device=g.device).reshape(gv.shape)
                gv = gv * (g.new_zeros(g.shape, dtype=dt.int64).index_put(ctx.indices, ids)[index] == ids)
        return gx, None, gv, None, None


def _scatter(inplace):
    def record(input, dim, index, src=None, *, value=None, reduce=None):
        if inplace:
            check_inplace(input)
        s = value if src is None else src
        if reduce is not None and reduce not in ("add", "multiply"):
            _sc.scatter(input, dim, index, s, reduce=reduce)  # raises torch's error
        if reduce is not None and isinstance(s, Tensor):
            return ScatterReduce.apply(input, dim, index, s, {"add": "sum", "multiply": "prod"}[reduce], True,
                                       inplace)
        if reduce is not None:  # a scalar source: only input's gradient, through the reduced scatter
            return _scalar_reduce(input, dim, index, s, reduce, inplace)
        return Scatter.apply(input, dim, index, s, inplace)
    return record


def _scalar_reduce(input, dim, index, value, reduce, inplace):
    src = input.new_full(index.shape, value) if index.ndim else input.new_full((), value)
    return ScatterReduce.apply(input, dim, index, src, {"add": "sum", "multiply": "prod"}[reduce], True, inplace)


def _scatter_reduce(inplace):
    def record(input, dim, index, src, reduce, *, include_self=True):
        if inplace:
            check_inplace(input)
        return ScatterReduce.apply(input, dim, index, src, reduce, include_self, inplace)
    return record


def _index_put(inplace):
    def record(input, indices, values, accumulate=False):
        if inplace:
            check_inplace(input)
        return IndexPut.apply(input, indices, values, accumulate, inplace)
    return record


RECORD = {"scatter": _scatter(False), "scatter_": _scatter(True),
          "scatter_reduce": _scatter_reduce(False), "scatter_reduce_": _scatter_reduce(True),
          "index_put": _index_put(False), "index_put_": _index_put(True)}
