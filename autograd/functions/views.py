"""Derivatives of the view ops (``view reshape transpose permute expand squeeze unsqueeze
narrow select __getitem__``).

The core entries (``core/ops/views.py``) compute each view's shape/strides/offset and record
nothing; the autograd layer calls :data:`RECORD` instead when the input requires grad, so the view
gets one of the nodes below. The rest of the view family (``flatten unflatten t T mT split chunk
unbind view_as expand_as broadcast_to ...``) is written in terms of these, so it is recorded too.

A view shares its base's version counter; when the base is changed in place after the view
was taken, the engine gives the view a fresh ``grad_fn`` (``graph.gradient_edge``).
"""
from __future__ import annotations

from ...core.ops import views as _views
from ...runtime import dtype as _dtype
from ...core.shape import normalize_dim
from ...core.tensor import Tensor
from ..engine import _sum_to
from ..function import BuiltinFunction
from ..grad_mode import is_grad_enabled
from .join import stack as _stack

CORE = {"view": _views.view, "reshape": _views.reshape, "transpose": _views.transpose, "permute": _views.permute,
        "expand": _views.expand, "squeeze": _views.squeeze, "unsqueeze": _views.unsqueeze,
        "narrow": _views.narrow, "select": _views.select, "getitem": _views.basic_getitem, "unfold": _views.unfold}


def _own(out: Tensor, x: Tensor) -> Tensor:
    """A reshape that had to copy returns a tensor of its own, not a view of the temporary copy."""
    if out._storage is x._storage:
        return out
    return Tensor(out._storage, out._shape, out._stride, out._offset, out.dtype)


class _View(BuiltinFunction):
    _is_view = True
    method = ""

    @classmethod
    def forward(cls, ctx, x, *args, **kwargs):
        ctx.in_shape, ctx.args, ctx.kwargs = x.shape, args, kwargs
        return _own(CORE[cls.method](x, *args, **kwargs), x)


class View(_View):
    """view's derivative: the gradient reshaped back to the input's shape (for view, reshape, squeeze and
    unsqueeze alike)."""
    method = "view"

    @staticmethod
    def backward(ctx, g):
        return (g.reshape(ctx.in_shape),) + (None,) * len(ctx.args)


class Reshape(View):
    """reshape's derivative: View's (the gradient reshaped back)."""
    method = "reshape"


class Squeeze(View):
    """squeeze's derivative: View's (the gradient reshaped back)."""
    method = "squeeze"


class Unsqueeze(View):
    """unsqueeze's derivative: View's (the gradient reshaped back)."""
    method = "unsqueeze"


class Transpose(_View):
    """transpose's derivative: the gradient transposed back over the same two dims."""
    method = "transpose"

    @staticmethod
    def backward(ctx, g):
        return (g.transpose(*ctx.args, **ctx.kwargs),) + (None,) * len(ctx.args)


class Permute(_View):
    """permute's derivative: the gradient permuted by the inverse permutation."""
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
    """expand's derivative: the gradient summed over the expanded dims, back to the input's shape."""
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
    """narrow's derivative: the gradient in the narrowed range, zero elsewhere."""
    method = "narrow"


class Select(_Slice):
    """select's derivative: the gradient at the selected index, zero elsewhere."""
    method = "select"


class Index(_Slice):
    """basic indexing's (x[1, :, None]) derivative: the gradient at the indexed elements, zero elsewhere."""
    method = "getitem"


class ScatterIntoZeros(BuiltinFunction):
    """zeros(shape) with ``zeros.<method>(*args)`` set to ``g``: the backward of a slicing view.
    Its own backward is that view again, so slicing supports double backward."""

    @staticmethod
    def forward(ctx, g, shape, method, args, kwargs):
        ctx.method, ctx.args, ctx.kwargs = method, args, kwargs
        z = Tensor._empty(shape, g.dtype, g.device)
        z.fill_(0)
        CORE[method](z, *args, **kwargs).copy_(g)
        return z

    @staticmethod
    def backward(ctx, gg):
        if ctx.method == "getitem":  # the op behind x[index]
            return gg[ctx.args[0]], None, None, None, None
        return getattr(gg, ctx.method)(*ctx.args, **ctx.kwargs), None, None, None, None


class Unbind(_View):
    """unbind's derivative: one node for all the slices (torch's UnbindBackward0), whose backward stacks
    their gradients (zeros for a slice that got none) into one new tensor: a copy per slice, where a
    select per slice cost a zeros tensor, a copy and a sum each. The stacked gradient takes the input's
    layout when that is dense, so the views that made the input (heads split off a packed projection)
    reshape it back without a copy. As in torch, the slices, outputs of a function that returns several
    views, may not be modified in place (``check_inplace``)."""
    method = "unbind"
    _multiple_views = True

    @classmethod
    def forward(cls, ctx, x, dim=0):
        ctx.in_shape, ctx.dim = x.shape, normalize_dim(dim, x.ndim)
        ctx.in_stride = _dense_strides(x._shape, x._stride)
        return _views.unbind(x, dim)

    @staticmethod
    def backward(ctx, *grads):
        like = next(g for g in grads if g is not None)
        if is_grad_enabled():  # double backward: a recorded stack
            slice_shape = ctx.in_shape[:ctx.dim] + ctx.in_shape[ctx.dim + 1:]
            return _stack([g if g is not None else like.new_zeros(slice_shape) for g in grads], ctx.dim), None
        out = like.new_empty_strided(ctx.in_shape, ctx.in_stride) if ctx.in_stride else like.new_empty(ctx.in_shape)
        for i, g in enumerate(grads):
            part = out.select(ctx.dim, i)
            if g is None:
                part.zero_()
            else:
                part.copy_(g)
        return out, None


def _dense_strides(shape, stride):
    """``stride`` when it lays ``shape`` out densely (every element once, no gaps: a permutation of a
    contiguous layout), else None."""
    expect = 1
    for st, n in sorted((st, n) for st, n in zip(stride, shape) if n != 1):
        if st != expect:
            return None
        expect *= n
    return tuple(stride)


class Unfold(_View):
    """x.unfold(d, size, step): overlapping windows, so each input element's gradient is the sum over
    the windows holding it (:class:`UnfoldBackward`)."""

    method = "unfold"

    @staticmethod
    def backward(ctx, g):
        return (UnfoldBackward.apply(g, ctx.in_shape, *ctx.args),) + (None,) * len(ctx.args)


class UnfoldBackward(BuiltinFunction):
    """zeros(shape) plus, for each window offset w, the gradient's w-th window column added at positions
    w, w + step, ... along d (distinct positions per w, so each add is one non-overlapping strided
    write); its own backward is unfold again."""

    @staticmethod
    def forward(ctx, g, shape, dimension, size, step):
        ctx.args = (dimension, size, step)
        z = Tensor._empty(shape, g.dtype, g.device)
        z.fill_(0)
        if not shape:
            return z.add_(g.reshape(()).detach()) if g.numel() else z
        d = dimension % len(shape)
        windows = g.shape[d]
        for w in range(size):
            if windows == 0:
                break
            part = _views.unfold(z.narrow(d, w, (windows - 1) * step + 1), d, 1, step).squeeze(-1)
            part.add_(g.select(-1, w))
        return z

    @staticmethod
    def backward(ctx, gg):
        return gg.unfold(*ctx.args), None, None, None, None


_CLASSES = {c.method: c for c in (View, Reshape, Squeeze, Unsqueeze, Transpose, Permute, Expand, Narrow, Select,
                                  Index, Unfold, Unbind)}


def _recording_view(cls):
    def record(self, *args, **kwargs):
        return cls.apply(self, *args, **kwargs)

    record.__name__ = cls.method
    return record


RECORD = {name: _recording_view(cls) for name, cls in _CLASSES.items() if name != "getitem"}  # op name -> recorder


def _record_view(self, *args, **kwargs):
    """view(shape) is recorded; view(dtype) reinterprets bytes, which torch never differentiates: no node."""
    if len(args) == 1 and isinstance(args[0], _dtype.dtype):
        return _views.view(self, *args)
    return View.apply(self, *args, **kwargs)


RECORD["view"] = _record_view
