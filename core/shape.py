"""Shape arithmetic shared by the Tensor and the ops: sizes, contiguous strides, dim checks,
view strides, broadcasting.

Pure Python on tuples of ints: nothing here touches memory or a kernel, so every layer of core
(the Tensor's base, the op entries in ``core/ops``) can import it without a cycle.
"""
from __future__ import annotations

import math

import numpy as np


class Size(tuple):
    """``tensor.shape``: a tuple that prints like PyTorch's."""

    def __repr__(self) -> str:
        return f"tritensor.Size({list(self)})"

    def numel(self) -> int:
        """torch.Size.numel: the number of elements a tensor of this shape holds."""
        return math.prod(self)


class memory_format:
    """How a 4-D tensor's elements are laid out (``torch.memory_format``): ``contiguous_format``
    (NCHW: row-major), ``channels_last`` (NHWC: the channels of one pixel side by side, what the
    convolution kernels read with 16-byte vectors), ``preserve_format`` (keep the input's)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"tritensor.{self.name}"


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
preserve_format = memory_format("preserve_format")


class layout:
    """How a tensor's elements are stored (``torch.layout``): tritensor has PyTorch's ``strided``
    only (dense, with strides); the factories take ``layout=strided`` as PyTorch's do."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"tritensor.{self.name}"


strided = layout("strided")


def check_layout(value, op: str) -> None:
    """A factory's ``layout=``: None or ``strided``; a sparse layout is not implemented."""
    if value is not None and value is not strided:
        if isinstance(value, layout):
            raise NotImplementedError(f"{op}(): layout={value} is not supported: tritensor tensors are strided")
        raise TypeError(f"{op}(): argument 'layout' must be tritensor.layout, not {type(value).__name__}")


def channels_last_strides(shape) -> tuple:
    """NHWC strides of a 4-D NCHW shape (channels innermost), PyTorch's for ``channels_last``."""
    n, c, h, w = shape
    c1, w1, h1 = max(c, 1), max(w, 1), max(h, 1)
    return (h1 * w1 * c1, 1, w1 * c1, c1)


def is_channels_last(shape, strides) -> bool:
    """Is a 4-D layout channels-last dense (size-1 dims' strides do not matter)?"""
    if len(shape) != 4:
        return False
    return all(n == 1 or s == e for n, s, e in zip(shape, strides, channels_last_strides(shape)))


def contiguous_strides(shape) -> tuple:
    """The row-major strides (in elements) of ``shape``."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def normalize_dim(d, ndim: int, argname: str = "dim") -> int:
    """``d`` as an index in [0, ndim), negative ones counted from the end; torch's IndexError naming
    ``argname`` when out of range."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise TypeError(f"{argname}: expected an int, got {type(d).__name__}")
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= d <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return int(d) % max(ndim, 1)


def _shape_arg(args, argname="size") -> tuple:
    """Accept f(2, 3) and f((2, 3)) and f([2, 3]) as PyTorch does."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, Size)):
        args = tuple(args[0])
    out = []
    for s in args:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{argname}: expected a sequence of ints, got {args!r}")
        out.append(int(s))
    return tuple(out)


def infer_size(shape, numel: int) -> tuple:
    """``shape`` with its one -1 (if any) made what the other sizes leave of ``numel``; torch's errors for a
    second -1 or sizes that cannot hold ``numel`` elements."""
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred (-1)")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    known = math.prod(s for s in shape if s != -1)
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def view_strides(oldshape, oldstride, newshape):
    """Strides that let ``newshape`` view memory laid out as (oldshape, oldstride), or None.

    PyTorch's ``computeStride``: walk both shapes from the right in chunks of dims that are
    contiguous with each other; a new dim may not straddle two chunks.
    """
    if math.prod(oldshape) == 0:
        return contiguous_strides(newshape)
    if not oldshape:
        oldshape, oldstride = (1,), (1,)
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base = oldstride[-1]
    tensor_numel, view_numel = 1, 1
    for td in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[td]
        if td == 0 or (oldshape[td - 1] != 1 and oldstride[td - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if td > 0:
                chunk_base = oldstride[td - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        return None
    return tuple(newstride)


def broadcast_shapes(*shapes) -> tuple:
    """torch.broadcast_shapes: the shape all of ``shapes`` broadcast to; torch's error naming the sizes that
    do not match."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise RuntimeError(
                    "shapes cannot be broadcast together: "
                    + " and ".join(str(list(x)) for x in shapes)
                    + f" (mismatch at dimension {j}: {out[j]} vs {n})"
                )
    return tuple(out)


def broadcasts_to(shape, target) -> bool:
    """Does ``shape`` broadcast to exactly ``target`` (a mask to the tensor it selects from)?"""
    try:
        return broadcast_shapes(shape, target) == tuple(target)
    except RuntimeError:
        return False

