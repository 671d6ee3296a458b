"""Selecting by mask and counting: ``nonzero``/``argwhere``, ``masked_fill``/``masked_fill_``,
``masked_select``, ``bincount``.

The family has no kernel file of its own: it runs other families' kernels through their core
entries. ``nonzero`` is the index family's two-kernel stream compaction (``index.nonzero_coords``:
block counts, one host sync for the size, then the coordinates); ``masked_fill`` is the elementwise
``where`` kernel with the value cast to the input's dtype; ``masked_select`` is ``input[mask]``
after broadcasting (recorded as that indexing op); ``bincount`` is the index family's
``index_add`` (atomic adds) into a zero-filled output sized by one ``amax``. Derivative of
masked_fill: ``autograd/functions/select.py``; tests: ``tests/test_select.py``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numbers

import numpy as np

from ...runtime import dtype as dt
from ..shape import broadcast_shapes, broadcasts_to
from ..tensor_base import TensorBase
from . import _check_writable, fill
from . import elementwise as _ew
from . import index
from .reduce import amax, amin

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check(input, op: str, name="input") -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def nonzero(input, *, as_tuple=False):
    """The coordinates of the nonzero elements, row-major: int64 (count, ndim), or one 1-D tensor per dim."""
    _check(input, "nonzero")
    dt.refuse_barebones(input.dtype, f"nonzero_count_{input.device.type}")
    x = input.reshape(1) if input.ndim == 0 else input
    coords = index.nonzero_coords(x)  # (ndim, count)
    if as_tuple:
        return tuple(coords[d] for d in range(x.ndim))
    out = coords.T.contiguous()
    return out[:, :0] if input.ndim == 0 else out


def argwhere(input) -> Tensor:
    """``nonzero(input)``: int64 (count, ndim)."""
    _check(input, "argwhere")
    return nonzero(input)


def _mask_value(input, mask, value, op: str):
    _check(input, op)
    _check(mask, op, "mask")
    if mask.dtype is not dt.bool_:
        raise RuntimeError(f"{op} only supports boolean masks, but got mask with dtype {mask.dtype.name}")
    if isinstance(value, TensorBase):
        if value.ndim != 0:
            raise RuntimeError(f"{op} only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        value = value.item()
    if isinstance(value, complex) or not isinstance(value, (numbers.Number, np.number, np.bool_)):
        raise TypeError(f"{op}(): argument 'value' must be a number or a 0-d Tensor, not {type(value).__name__}")
    if not broadcasts_to(mask.shape, input.shape):
        raise RuntimeError(f"The size of the mask {list(mask.shape)} must be broadcastable to the size of the input "
                           f"{list(input.shape)}")
    if mask.device != input.device:
        raise RuntimeError(f"expected mask and input on the same device, got {mask.device} and {input.device}")
    if input.dtype is dt.bool_:
        value = bool(value)
    elif not input.dtype.is_floating_point:
        value = int(value)  # truncates, as the cast to an integer dtype does
    else:
        value = float(value)
    return mask.expand(input.shape), value


def masked_fill(input, mask, value) -> Tensor:
    """A copy of ``input`` with ``value`` where ``mask`` (broadcast to input's shape) is True."""
    mask, value = _mask_value(input, mask, value, "masked_fill")
    dt.refuse_barebones(input.dtype, "masked_fill")
    out = TensorBase._empty(input.shape, input.dtype, input.device)
    return _ew.where(mask, value, input, out=out)


def masked_fill_(input, mask, value) -> Tensor:
    """``Tensor.masked_fill_``: ``value`` where ``mask`` (bool, broadcast to self) is True, in place."""
    mask, value = _mask_value(input, mask, value, "masked_fill_")
    dt.refuse_barebones(input.dtype, "masked_fill")
    _check_writable(input, "masked_fill_")
    _ew.where(mask, value, input, out=input)  # lane-wise: reading and writing the same element is safe
    input._bump_version()
    return input


def masked_select(input, mask) -> Tensor:
    """The elements of ``input`` where ``mask`` is True, as a 1-D tensor (both broadcast first)."""
    _check(input, "masked_select")
    _check(mask, "masked_select", "mask")
    dt.refuse_barebones(input.dtype, "masked_select")
    if mask.dtype is not dt.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(input.shape, mask.shape)
    return input.expand(shape)[mask.expand(shape)]


def bincount(input, weights=None, minlength=0) -> Tensor:
    """How often each value 0..max(input) occurs in a 1-D non-negative integer tensor (summing
    ``weights`` instead of ones when given); at least ``minlength`` bins."""
    _check(input, "bincount")
    dt.refuse_barebones(input.dtype, f"bincount_{input.device.type}")
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)):
        raise TypeError(f"bincount(): argument 'minlength' must be int, not {type(minlength).__name__}")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.ndim != 1 or input.dtype.is_floating_point or input.dtype is dt.bool_:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None:
        _check(weights, "bincount", "weights")
        if weights.ndim != 1 or weights.shape[0] != input.shape[0]:
            raise RuntimeError("weights should be 1-d and have the same length as input")
    if input.numel() and int(amin(input).item()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    size = max(int(minlength), int(amax(input).item()) + 1 if input.numel() else 0)
    if weights is None:
        result, src = dt.int64, None
    else:
        result = dt.float32 if weights.dtype is dt.float32 else dt.float64  # PyTorch's rule
        src = weights if weights.dtype is result else weights.to(result)
    out = TensorBase._empty((size,), result, input.device)
    fill(out, 0)
    if input.numel() == 0:
        return out
    if src is None:
        src = TensorBase._empty(input.shape, dt.int64, input.device)
        fill(src, 1)
    bins = input if input.dtype in (dt.int64, dt.int32) else input.to(dt.int64)
    return index.index_add(out, 0, bins, src, out=out)

