"""Composite shape ops (``Tensor.repeat_interleave``, ``tensor_split``, ``diff``,
``rot90`` and the free functions of ``core/functional.py``): written with dispatched ops only
(views, ``index_select``, ``index_add``, ``cumsum``, ``flip``, ``cat``, subtraction), so autograd
records each piece and they need no derivative of their own.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..runtime import dtype as dt
from . import dispatch
from .ops import table
from .shape import normalize_dim
from .tensor_base import TensorBase


def repeat_interleave(tensor, repeats, dim=None, output_size=None):
    """Each slice along ``dim`` (each element of the flattened tensor without one) ``repeats``
    times: an expand and a reshape for an int, an ``index_select`` for a tensor of repeats."""
    x = tensor.reshape(-1) if dim is None or tensor.ndim == 0 else tensor
    d = 0 if dim is None else normalize_dim(dim, x.ndim)
    n = x._shape[d]
    if isinstance(repeats, TensorBase) and repeats.ndim == 0:
        repeats = _int_repeats(repeats)
    if isinstance(repeats, TensorBase):
        if repeats.ndim != 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.numel() != n and repeats.numel() != 1:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{repeats.numel()} and input.size({d}) = {n}")
        if repeats.numel() != 1 or n == 1:
            return x.index_select(d, repeat_interleave_index(repeats, output_size))
        repeats = _int_repeats(repeats)
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)):
        raise TypeError(f"repeat_interleave(): argument 'repeats' must be int or Tensor, not "
                        f"{type(repeats).__name__}")
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    if output_size is not None and output_size != n * repeats:
        raise RuntimeError("allocated size does not match required size")
    wide = x._shape[: d + 1] + (int(repeats),) + x._shape[d + 1 :]
    return x.unsqueeze(d + 1).expand(wide).reshape(x._shape[:d] + (n * int(repeats),) + x._shape[d + 1 :])


def tensor_split(tensor, indices_or_sections, dim: int = 0):
    """Views along ``dim``: ``sections`` near-equal parts (the first ``n % sections`` one longer),
    or the parts between the given indices (Python slice rules)."""
    if tensor.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = normalize_dim(dim, tensor.ndim)
    n, ios = tensor._shape[d], indices_or_sections
    if isinstance(ios, TensorBase):
        if ios.dtype is not dt.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{ios.dtype.name}")
        if ios.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {ios.ndim} dims")
        ios = int(ios.item()) if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, (int, np.integer)) and not isinstance(ios, bool):
        if ios <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {ios}")
        q, r = divmod(n, int(ios))
        bounds = list(itertools.accumulate([0] + [q + 1] * r + [q] * (int(ios) - r)))
    elif isinstance(ios, (list, tuple)) and all(isinstance(i, (int, np.integer)) for i in ios):
        bounds = [0] + [min(max(i + n if i < 0 else i, 0), n) for i in ios] + [n]
    else:
        raise TypeError(f"tensor_split(): argument 'indices_or_sections' must be int, a sequence of ints or a "
                        f"Tensor, not {type(ios).__name__}")
    return tuple(tensor.narrow(d, a, max(b - a, 0)) for a, b in zip(bounds, bounds[1:]))


def diff(tensor, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (``!=`` for bool), of ``prepend``, the
    tensor and ``append`` joined along ``dim``."""
    if tensor.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = normalize_dim(dim, tensor.ndim)
    parts = []
    for name, t in (("prepend", prepend), ("input", tensor), ("append", append)):
        if t is None:
            continue
        if not isinstance(t, TensorBase):
            raise TypeError(f"diff(): argument '{name}' must be Tensor, not {type(t).__name__}")
        if t.ndim != tensor.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        parts.append(t)
    x = dispatch.call(table.OPS["cat"], parts, d) if len(parts) > 1 else tensor
    for _ in range(int(n)):
        m = x._shape[d]
        if m == 0:
            break
        hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
        x = hi.ne(lo) if x.dtype is dt.bool_ else hi - lo
    return x


def rot90(tensor, k: int = 1, dims=(0, 1)):
    """Rotated by 90 degrees ``k`` times from the first towards the second of ``dims`` (a flip
    and a transposed view, as torch)."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if tensor.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {tensor.ndim}")
    d0, d1 = normalize_dim(dims[0], tensor.ndim), normalize_dim(dims[1], tensor.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    k = int(k) % 4
    if k == 1:
        return tensor.flip(d1).transpose(d0, d1)
    if k == 2:
        return tensor.flip(d0, d1)
    return tensor.flip(d0).transpose(d0, d1) if k == 3 else tensor.clone()


def _int_repeats(t) -> int:
    if t.dtype not in (dt.int32, dt.int64):
        raise RuntimeError(f"repeat_interleave(): repeats must be an integer tensor, got {t.dtype.name}")
    return int(t.item())


def repeat_interleave_index(repeats, output_size=None):
    """``arange(len(repeats))`` with element i repeated ``repeats[i]`` times (int64): the start of
    each run marked by an ``index_add``, then a ``cumsum`` (one host sync for the total)."""
    if repeats.dtype not in (dt.int32, dt.int64) or repeats.ndim != 1:
        raise RuntimeError(f"repeat_interleave(): repeats must be a 0-dim or 1-dim integer tensor, got "
                           f"{repeats.ndim}-dim {repeats.dtype.name}")
    reps = repeats.long()
    if reps.numel() and int(reps.min().item()) < 0:
        raise RuntimeError("repeats can not be negative")
    total = int(reps.sum().item())
    if output_size is not None and output_size != total:
        raise RuntimeError("allocated size does not match required size")
    marks = reps.new_zeros(total + 1).index_add(0, reps.cumsum(0) - reps, reps.new_ones(reps.shape))
    return marks.narrow(0, 0, total).cumsum(0) - 1
