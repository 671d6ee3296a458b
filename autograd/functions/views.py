"""Derivatives of the view ops (``view reshape transpose permute expand squeeze unsqueeze
narrow select __getitem__``).

The Tensor class body (``core/tensor.py``) computes each view's shape/strides/offset and records
nothing; :func:`install` wraps those methods so a view of a tensor that requires grad gets one
of the nodes below. The rest of the view family (``flatten unflatten t T mT split chunk unbind
view_as expand_as broadcast_to ...``) is written in terms of these, so it is recorded too.

A view shares its base's version counter; when the base is changed in place after the view
was taken, the engine gives the view a fresh ``grad_fn`` (``graph.gradient_edge``).
"""
from __future__ import annotations

from ...core.tensor import Tensor
from ..engine import _sum_to
from .elementwise import Op

RAW = {}  # method name -> the class body's non-recording implementation (filled by install)
VIEW_METHODS = ("view", "reshape", "transpose", "permute", "expand", "squeeze", "unsqueeze", "narrow", "select",
                "__getitem__")


def _own(out: Tensor, x: Tensor) -> Tensor:
    """A reshape that had to copy returns a tensor of its own, not a view of the temporary copy."""
    if out._storage is x._storage:
        return out
    return Tensor(out._storage, out._shape, out._stride, out._offset, out.dtype)


class _View(Op):
    _is_view = True
    method = ""

    @classmethod
    def forward(cls, ctx, x, *args, **kwargs):
        ctx.in_shape, ctx.args, ctx.kwargs = x.shape, args, kwargs
        return _own(RAW[cls.method](x, *args, **kwargs), x)


class View(_View):
    method = "view"

    @staticmethod
    def backward(ctx, g):
        return (g.reshape(ctx.in_shape),) + (None,) * len(ctx.args)


class Reshape(View):
    method = "reshape"


class Squeeze(View):
    method = "squeeze"


class Unsqueeze(View):
    method = "unsqueeze"


class Transpose(_View):
    method = "transpose"

    @staticmethod
    def backward(ctx, g):
        return (g.transpose(*ctx.args, **ctx.kwargs),) + (None,) * len(ctx.args)


class Permute(_View):
    method = "permute"

    @staticmethod
    def backward(ctx, g):
        dims = ctx.kwargs.get("dims", ctx.args)
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        nd = len(dims)
        inverse = [0] * nd
        for i, d in enumerate(dims):
            inverse[d % nd] = i
        return (g.permute(inverse),) + (None,) * len(ctx.args)


class Expand(_View):
    method = "expand"

    @staticmethod
    def backward(ctx, g):
        return (_sum_to(g, ctx.in_shape),) + (None,) * len(ctx.args)


class _Slice(_View):
    """A view that picks a subset of elements: its gradient is zero outside that subset."""

    @classmethod
    def backward(cls, ctx, g):
        return (ScatterIntoZeros.apply(g, ctx.in_shape, cls.method, ctx.args, ctx.kwargs),) + (None,) * len(ctx.args)


class Narrow(_Slice):
    method = "narrow"


class Select(_Slice):
    method = "select"


class Index(_Slice):
    method = "__getitem__"


class ScatterIntoZeros(Op):
    """zeros(shape) with ``zeros.<method>(*args)`` set to ``g``: the backward of a slicing view.
    Its own backward is that view again, so slicing supports double backward."""

    @staticmethod
    def forward(ctx, g, shape, method, args, kwargs):
        ctx.method, ctx.args, ctx.kwargs = method, args, kwargs
        z = Tensor._empty(shape, g.dtype, g.device)
        z.fill_(0)
        RAW[method](z, *args, **kwargs).copy_(g)
        return z

    @staticmethod
    def backward(ctx, gg):
        return getattr(gg, ctx.method)(*ctx.args, **ctx.kwargs), None, None, None, None


_CLASSES = {c.method: c for c in (View, Reshape, Squeeze, Unsqueeze, Transpose, Permute, Expand, Narrow, Select,
                                  Index)}


def _recording_view(name):
    raw, cls = RAW[name], _CLASSES[name]

    def method(self, *args, **kwargs):
        if self._requires_grad:
            return cls.apply(self, *args, **kwargs)
        return raw(self, *args, **kwargs)

    method.__name__, method.__doc__ = name, raw.__doc__
    return method


def install(Tensor) -> None:
    for name in VIEW_METHODS:
        RAW[name] = Tensor.__dict__[name]
        setattr(Tensor, name, _recording_view(name))
    Tensor.swapaxes = Tensor.transpose
