"""Joining and reshaping copies: ``cat``/``concat``, ``stack``, ``hstack``, ``vstack``, ``flip``,
``roll``, ``repeat``, ``tile``, ``movedim``, ``tril``, ``triu``, ``diag``, and the ``diagonal`` view.

PyTorch's argument checks and messages come first, before any kernel runs. ``cat``/``stack``/
``diag`` copy each input into a view of the output (narrow / select / the diagonal) with the
strided copy of ``triton_kernels/cast.py`` (one launch per input, casting to the promoted dtype on
the way); ``flip``/``roll``/``repeat``/``tile``/``tril``/``triu`` are one launch of the remapping
kernel of ``triton_kernels/join.py``, which reads the input through its own strides.
``movedim`` and ``diagonal`` are views. Derivatives: ``autograd/functions/join.py``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import functools

import numpy as np

from ...triton_kernels import join as _k
from ...runtime import dtype as dt
from .. import dispatch
from ..shape import normalize_dim
from ..tensor_base import TensorBase
from . import copy_into, fill, float8_bytes

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _tensor_list(tensors, op: str) -> list:
    if isinstance(tensors, TensorBase) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, TensorBase):
            raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, but found element "
                            f"of type {type(t).__name__} at pos {i}")
    if not tensors:
        raise ValueError(f"{op}(): expected a non-empty list of Tensors") if op != "stack" else \
            RuntimeError("stack expects a non-empty TensorList")
    devs = {t.device for t in tensors}
    if len(devs) > 1:
        a, b = sorted(devs, key=str)[:2]
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!")
    return list(tensors)


def _int(v, name: str, op: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(v).__name__}")
    return int(v)


def _ints(v, name: str, op: str) -> tuple:
    seq = v if isinstance(v, (tuple, list)) else (v,)
    return tuple(_int(s, name, op) for s in seq)


# ----- cat / stack ---------------------------------------------------------------------------------
def cat(tensors, dim=0) -> Tensor:
    """Concatenate along an existing ``dim``; dtypes promote. 1-D empty tensors are skipped (torch's legacy rule)."""
    tensors = _tensor_list(tensors, "cat")
    _int(dim, "dim", "cat")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    result = functools.reduce(dt.promote_types, (t.dtype for t in tensors))
    live = [(i, t) for i, t in enumerate(tensors) if not (t.ndim == 1 and t.shape[0] == 0)]
    if not live:
        return TensorBase._empty((0,), result, tensors[0].device)
    first = live[0][1]
    d = normalize_dim(dim, first.ndim)
    for i, t in live:
        if t.ndim != first.ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {first.ndim} and {t.ndim}")
        for k in range(first.ndim):
            if k != d and t.shape[k] != first.shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{first.shape[k]} but got size {t.shape[k]} for tensor number {i} in the list.")
    shape = list(first.shape)
    shape[d] = sum(t.shape[d] for _, t in live)
    out = TensorBase._empty(shape, result, first.device)
    start = 0
    for _, t in live:
        n = t.shape[d]
        if n:
            copy_into(out.narrow(d, start, n), t)
        start += n
    return out


def stack(tensors, dim=0) -> Tensor:
    """Join equally shaped tensors along a new ``dim``; dtypes promote."""
    tensors = _tensor_list(tensors, "stack")
    _int(dim, "dim", "stack")
    first = tensors[0]
    for i, t in enumerate(tensors):
        if t.shape != first.shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(first.shape)} at entry 0 "
                               f"and {list(t.shape)} at entry {i}")
    d = normalize_dim(dim, first.ndim + 1)
    result = functools.reduce(dt.promote_types, (t.dtype for t in tensors))
    shape = list(first.shape)
    shape.insert(d, len(tensors))
    out = TensorBase._empty(shape, result, first.device)
    for i, t in enumerate(tensors):
        copy_into(out.select(d, i), t)
    return out


def hstack_dim(tensors) -> int:
    """The dim ``hstack`` joins along: 0 when every tensor is (at most) 1-D, else 1."""
    return 0 if all(t.ndim <= 1 for t in tensors) else 1


def atleast(t, nd: int):
    """``atleast_1d``/``atleast_2d`` as views: a 0-d tensor becomes (1,), a 1-D one (1, n)."""
    if t.ndim >= nd:
        return t
    shape = (1,) * (nd - t.ndim) + tuple(t.shape)
    return t._view(shape, (0,) * (nd - t.ndim) + tuple(t.stride()))


def hstack(tensors) -> Tensor:
    """``cat`` along dim 0 for 1-D (and 0-d) inputs, else along dim 1."""
    tensors = _tensor_list(tensors, "hstack")
    tensors = [atleast(t, 1) for t in tensors]
    return cat(tensors, hstack_dim(tensors))


def vstack(tensors) -> Tensor:
    """``cat`` along dim 0 of the inputs made at least 2-D (a 1-D tensor of n becomes (1, n))."""
    tensors = _tensor_list(tensors, "vstack")
    return cat([atleast(t, 2) for t in tensors], 0)


# ----- flip / roll / repeat / tile -----------------------------------------------------------------
def _check(input, op: str) -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def _identity_map(shape):
    return [1] * len(shape), [0] * len(shape), [max(n, 1) for n in shape]


def flip(input, *args, dims=None) -> Tensor:
    """Reverse the order of elements along ``dims`` (a copy, as in PyTorch): ``x.flip(0, 1)``,
    ``flip(x, (0, 1))`` or ``flip(x, dims=(0, 1))``."""
    _check(input, "flip")
    dt.refuse_barebones(input.dtype, f"flip_{input.device.type}")
    if dims is not None and args:
        raise TypeError("flip() got multiple values for argument 'dims'")
    dims = args if dims is None else (dims,)
    dims = _ints(dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims, "dims", "flip")
    nd = [normalize_dim(d, input.ndim) for d in dims]
    if len(set(nd)) != len(nd):
        raise RuntimeError(f"dims has duplicates, original flip dims size={len(dims)}, but unique flip dims "
                           f"size={len(set(nd))}")
    a, b, m = _identity_map(input.shape)
    for d in nd if input.ndim else ():
        a[d], b[d] = -1, input.shape[d] - 1
    out = TensorBase._empty(input.shape, input.dtype, input.device)
    _k.remap(out, input, a, b, m)
    return out


def roll(input, shifts, dims=None) -> Tensor:
    """Shift elements along ``dims`` by ``shifts``, wrapping around; without dims, over the flattened tensor."""
    _check(input, "roll")
    shifts = _ints(shifts, "shifts", "roll")
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll(): shifts and dimensions must align. shifts: {len(shifts)}, dims: 0")
        flat = TensorBase._empty((input.numel(),), input.dtype, input.device)
        copy_into(flat.view(input.shape), input)
        return roll(flat, shifts, 0).view(input.shape)
    dims = _ints(dims, "dims", "roll")
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll(): shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}")
    a, b, m = _identity_map(input.shape)
    for s, d in zip(shifts, dims):
        d = normalize_dim(d, input.ndim)
        if input.ndim and input.shape[d]:
            b[d] = (b[d] - s) % input.shape[d]
    out = TensorBase._empty(input.shape, input.dtype, input.device)
    _k.remap(float8_bytes(out), float8_bytes(input), a, b, m)  # (float8: its bytes move)
    return out


def repeat(input, *sizes) -> Tensor:
    """Tile ``input`` ``sizes[d]`` times along each dim (leading sizes add new dims)."""
    _check(input, "repeat")
    sizes = _ints(sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes, "repeats", "repeat")
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {list(sizes)}")
    lead = len(sizes) - input.ndim
    src = atleast(input, len(sizes)) if lead else input
    out_shape = [r * n for r, n in zip(sizes, src.shape)]
    out = TensorBase._empty(out_shape, input.dtype, input.device)
    _k.remap(float8_bytes(out), float8_bytes(src), *_identity_map(src.shape))  # (float8: its bytes move)
    return out


def tile(input, dims) -> Tensor:
    """``repeat`` with ``dims`` padded with leading ones when shorter than ``input.ndim``."""
    _check(input, "tile")
    dims = _ints(dims, "dims", "tile")
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def movedim_perm(ndim: int, source, destination) -> tuple:
    """The permutation ``movedim(source, destination)`` applies (PyTorch's checks and messages)."""
    src, dst = _ints(source, "source", "movedim"), _ints(destination, "destination", "movedim")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain "
                           f"the same number of dims as destination ({list(dst)} dims)")
    src = [normalize_dim(d, ndim) for d in src]
    dst = [normalize_dim(d, ndim) for d in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(source) if isinstance(source, (list, tuple)) else [source]})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(destination) if isinstance(destination, (list, tuple)) else [destination]})")
    perm = [-1] * max(ndim, 1)
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(k for k in range(ndim) if k not in src)
    return tuple(p if p >= 0 else next(rest) for p in perm)[:ndim]


def movedim(input, source, destination) -> Tensor:
    """A view with the dims ``source`` moved to the positions ``destination`` (alias: moveaxis)."""
    _check(input, "movedim")
    perm = movedim_perm(input.ndim, source, destination)
    return input._view([input.shape[p] for p in perm], [input.stride(p) for p in perm])


# ----- tril / triu / diag --------------------------------------------------------------------------
def _triangle(input, diagonal, tri: int, op: str) -> Tensor:
    _check(input, op)
    dt.refuse_barebones(input.dtype, op)
    k = _int(diagonal, "diagonal", op)
    if input.ndim < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions")
    out = TensorBase._empty(input.shape, input.dtype, input.device)
    _k.remap(out, input, *_identity_map(input.shape), tri=tri, k=k)
    return out


def tril(input, diagonal=0) -> Tensor:
    """The lower triangle of the last two dims (``col - row <= diagonal``); the rest zero."""
    return _triangle(input, diagonal, 1, "tril")


def triu(input, diagonal=0) -> Tensor:
    """The upper triangle of the last two dims (``col - row >= diagonal``); the rest zero."""
    return _triangle(input, diagonal, 2, "triu")


def diagonal_view(x, k: int):
    """The ``k``-th diagonal of a 2-D tensor as a 1-D strided view (possibly empty)."""
    rows, cols = x.shape
    n = max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))
    off = x.storage_offset() + (k * x.stride(1) if k >= 0 else -k * x.stride(0))
    return x._view((n,), (x.stride(0) + x.stride(1),), off if n else x.storage_offset())


def diagonal(input, offset=0, dim1=0, dim2=1) -> Tensor:
    """The view of the ``offset``-th diagonal of the (dim1, dim2) planes: those dims are removed and
    the diagonal becomes the last dim (PyTorch's ``torch.diagonal``)."""
    _check(input, "diagonal")
    k = _int(offset, "offset", "diagonal")
    if input.ndim < 2:
        raise RuntimeError(f"diagonal dimensions requires ndim larger than 2, got {input.ndim}")
    d1, d2 = normalize_dim(dim1, input.ndim, "dim1"), normalize_dim(dim2, input.ndim, "dim2")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rows, cols = input.shape[d1], input.shape[d2]
    n = max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))
    off = input.storage_offset()
    if n:
        off += k * input.stride(d2) if k >= 0 else -k * input.stride(d1)
    keep = [d for d in range(input.ndim) if d not in (d1, d2)]
    return input._view([input.shape[d] for d in keep] + [n],
                       [input.stride(d) for d in keep] + [input.stride(d1) + input.stride(d2)], off)


def diag(input, diagonal=0) -> Tensor:
    """1-D input: a square matrix with ``input`` on its ``diagonal``-th diagonal. 2-D: that diagonal, copied."""
    _check(input, "diag")
    k = _int(diagonal, "diagonal", "diag")
    if input.ndim == 1:
        n = input.shape[0] + abs(k)
        out = TensorBase._empty((n, n), input.dtype, input.device)
        fill(out, 0)
        if input.shape[0]:
            copy_into(diagonal_view(out, k), input)
        return out
    if input.ndim == 2:
        view = diagonal_view(input, k)
        out = TensorBase._empty(view.shape, input.dtype, input.device)
        copy_into(out, view)
        return out
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def diag_embed(input, offset=0, dim1=-2, dim2=-1) -> Tensor:
    """Each last-dim vector of ``input`` on the ``offset``-th diagonal of a new (dim1, dim2) plane of zeros
    (the inverse of ``diagonal``): zeros, then one strided copy into that diagonal's view."""
    _check(input, "diag_embed")
    k = _int(offset, "offset", "diag_embed")
    nd = input.ndim + 1
    d1, d2 = normalize_dim(dim1, nd, "dim1"), normalize_dim(dim2, nd, "dim2")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] if input.ndim else 1
    m = n + abs(k)
    batch = list(input.shape[:-1])
    shape = []
    for d in range(nd):
        shape.append(m if d in (d1, d2) else batch.pop(0))
    out = TensorBase._empty(tuple(shape), input.dtype, input.device)
    fill(out, 0)
    copy_into(diagonal(out, k, d1, d2), input.reshape(1) if input.ndim == 0 else input)
    return out


def stack_columns(tensors) -> list:
    """column_stack's operands: 0-d and 1-D tensors as (n, 1) columns (views), the rest as they are."""
    if isinstance(tensors, (list, tuple)) and not tensors:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    tensors = _tensor_list(tensors, "column_stack")
    return [t._view((t.numel(), 1), (t.stride(0) if t.ndim else 0, 0)) if t.ndim <= 1 else t for t in tensors]


def column_stack(tensors) -> Tensor:
    """The tensors side by side as columns: ``hstack`` of 1-D (and 0-d) tensors made (n, 1)."""
    return cat(stack_columns(tensors), 1)


# ----- composites: Tensor methods written with dispatched ops (views, ``index_select``,
# ``index_add``, ``cumsum``, ``flip``, ``cat``, subtraction), so autograd records each piece and
# they need no derivative of their own. The op table lists them (``COMPOSITE_METHODS``);
# core/tensor.py puts them on Tensor, core/functional.py has the free functions.
def repeat_interleave(self, repeats, dim=None, *, output_size=None) -> "Tensor":
    """Each slice along ``dim`` (each element of the flattened tensor without one) ``repeats``
    times: an expand and a reshape for an int, an ``index_select`` for a tensor of repeats."""
    tensor = self
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


def rot90(self, k: int = 1, dims=(0, 1)) -> "Tensor":
    """Rotated by 90 degrees ``k`` times from the first towards the second of ``dims`` (a flip
    and a transposed view, as torch)."""
    tensor = self
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


def diff_method(cat_op):
    """``Tensor.diff``, given the table's record of ``cat``: diff joins ``prepend``, the tensor and
    ``append`` with a dispatched ``cat`` (so autograd records the join), and this module, which the
    table imports, cannot import the table to find that record itself."""
    def diff(self, n: int = 1, dim: int = -1, prepend=None, append=None) -> "Tensor":
        """The ``n``-th forward difference along ``dim`` (``!=`` for bool), of ``prepend``, the
        tensor and ``append`` joined along ``dim``."""
        tensor = self
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
        x = dispatch.call(cat_op, parts, d) if len(parts) > 1 else tensor
        for _ in range(int(n)):
            m = x._shape[d]
            if m == 0:
                break
            hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
            x = hi.ne(lo) if x.dtype is dt.bool_ else hi - lo
        return x
    return diff
