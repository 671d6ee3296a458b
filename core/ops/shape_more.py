"""torch's shape functions beyond the basic views: the splits and stacks by axis (``hsplit vsplit
dsplit dstack row_stack``), the flips by axis (``fliplr flipud``), ``ravel``, the in-place forms
(``tril_ triu_``, and ``t_ transpose_ squeeze_ unsqueeze_`` which change a tensor's own layout),
flat indexing (``take put put_``), the block builders (``diagflat block_diag vander combinations``),
``unravel_index``, the scatters into a view (``select_scatter slice_scatter diagonal_scatter``),
the ``*_copy`` forms of the views and ``split_with_sizes`` with the ``unsafe_*`` splits, and
``sum_to_size``.

Why no kernel: every one of them is a view, a copy, or a short chain of ops that already have
kernels (flip, cat, index_select, index_put, index_copy, copy_, sum), each dispatched, so autograd
records them piece by piece and none needs a derivative of its own. Index tensors they need
(``combinations``) are computed on the host from the shape alone, which is all they depend on,
and moved to the input's device once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import itertools
import numbers

import numpy as np

from ...runtime import dtype as dt
from ..shape import Size, _shape_arg, contiguous_format, normalize_dim
from ..tensor_base import TensorBase
from . import copy_into, host_tensor

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check(input, op: str, name: str = "input") -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def _check_index(index, op: str, name: str = "index") -> None:
    _check(index, op, name)
    if index.dtype is not dt.int64:
        raise RuntimeError(f"{op}(): Expected a long tensor for {name}, but got {_torch_name(index.dtype)}")


def _torch_name(d) -> str:
    """torch's scalar-type name in messages (Float, Long ...)."""
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}[d.name]


# ----- splits and stacks by axis -------------------------------------------------------------------
def _split_by_axis(input, indices_or_sections, op: str, dim: int, need: int):
    _check(input, op)
    if input.ndim < need:
        raise RuntimeError(f"torch.{op} requires a tensor with at least {need} dimension, but got a tensor with "
                           f"{input.ndim} dimensions!")
    if isinstance(indices_or_sections, numbers.Integral) and not isinstance(indices_or_sections, bool):
        size = input.shape[dim]
        if indices_or_sections == 0 or size % indices_or_sections != 0:
            raise RuntimeError(f"torch.{op} attempted to split along dimension {dim}, but the size of the dimension "
                               f"{size} is not divisible by the split_size {indices_or_sections}!")
    return input.tensor_split(indices_or_sections, dim)


def hsplit(input, indices_or_sections) -> tuple:
    """Split along dim 1 (dim 0 of a 1-D tensor), as NumPy's ``hsplit``."""
    _check(input, "hsplit")
    return _split_by_axis(input, indices_or_sections, "hsplit", 1 if input.ndim > 1 else 0, 1)


def vsplit(input, indices_or_sections) -> tuple:
    """Split along dim 0 of a tensor of 2 or more dims."""
    return _split_by_axis(input, indices_or_sections, "vsplit", 0, 2)


def dsplit(input, indices_or_sections) -> tuple:
    """Split along dim 2 of a tensor of 3 or more dims."""
    return _split_by_axis(input, indices_or_sections, "dsplit", 2, 3)


def _tensors(tensors, op: str) -> list:
    if isinstance(tensors, TensorBase) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        _check(t, op, f"tensors[{i}]")
    return list(tensors)


def _arange(start: int, stop: int, like, step: int = 1):
    """An int64 index ramp on ``like``'s device (a few host-made numbers: it depends on sizes alone)."""
    return host_tensor(np.arange(start, stop, step, dtype=np.int64), like.device)


def _place(out, index: tuple, src) -> None:
    """``out[index] = src`` through ``index_put_`` on ``out`` itself, never on a view of it: autograd
    records it as one in-place op of its own (double backward included), which a copy_ into a
    narrowed view, recorded through the view's base, does not give twice differentiated."""
    if src.numel():
        out.index_put_(index, src)


def _joined(tensors, dim: int, op: str):
    """``cat(tensors, dim)`` for this module's stacks (cat, a function only, is not reachable from a
    core entry): each tensor placed in one new tensor of their promoted dtype, as cat's result."""
    result = tensors[0].dtype
    for t in tensors[1:]:
        result = dt.promote_types(result, t.dtype)
        if t.device != tensors[0].device:
            raise RuntimeError(f"{op}(): expected all tensors to be on the same device, but found at least two "
                               f"devices, {tensors[0].device} and {t.device}!")
    shape = list(tensors[0].shape)
    for k, t in enumerate(tensors[1:], 1):
        bad = [i for i in range(len(shape)) if i != dim and t.shape[i] != shape[i]]
        if bad:
            raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. Expected size "
                               f"{shape[bad[0]]} but got size {t.shape[bad[0]]} for tensor number {k} in the list.")
    shape[dim] = sum(t.shape[dim] for t in tensors)
    out = tensors[0].new_zeros(shape, dtype=result)
    at = 0
    for t in tensors:
        k = t.shape[dim]
        if k and t.numel():
            out.index_copy_(dim, _arange(at, at + k, t), t.to(result))
        at += k
    return out


def dstack(tensors, *, out=None) -> Tensor:
    """Join along dim 2, each tensor first made at least 3-D as ``atleast_3d`` does."""
    ts = _tensors(tensors, "dstack")
    if out is not None:
        raise TypeError("dstack(): out= is not supported")
    if not ts:
        raise RuntimeError("dstack expects a non-empty TensorList")
    shaped = []
    for t in ts:
        if t.ndim == 0:
            t = t.reshape(1, 1, 1)
        elif t.ndim == 1:
            t = t.reshape(1, t.shape[0], 1)
        elif t.ndim == 2:
            t = t.unsqueeze(-1)
        shaped.append(t)
    return _joined(shaped, 2, "dstack")


def row_stack(tensors, *, out=None) -> Tensor:
    """``vstack`` under its other name: join along dim 0, each tensor first made at least 2-D."""
    ts = _tensors(tensors, "row_stack")
    if out is not None:
        raise TypeError("row_stack(): out= is not supported")
    if not ts:
        raise RuntimeError("vstack expects a non-empty TensorList")
    return _joined([t.reshape(1, -1) if t.ndim < 2 else t for t in ts], 0, "row_stack")


# ----- flips, ravel, in-place forms ---------------------------------------------------------------
def fliplr(input) -> Tensor:
    """Reverse dim 1 (left-right)."""
    _check(input, "fliplr")
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)


def flipud(input) -> Tensor:
    """Reverse dim 0 (up-down)."""
    _check(input, "flipud")
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)


def ravel(input) -> Tensor:
    """The tensor flattened to one dim: a view where strides allow, else a contiguous copy."""
    _check(input, "ravel")
    return input.reshape(-1)


def t(input) -> Tensor:
    """``torch.t``: a 2-D tensor transposed; 0-D and 1-D tensors returned as they are (as views)."""
    _check(input, "t")
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return input.transpose(0, 1) if input.ndim == 2 else input.view(input.shape)


def tril_(input, diagonal: int = 0) -> Tensor:
    """``tril`` written into ``input`` (a copy_ of the out-of-place result, so autograd records it)."""
    _check(input, "tril_")
    return input.copy_(input.tril(diagonal))


def triu_(input, diagonal: int = 0) -> Tensor:
    """``triu`` written into ``input``."""
    _check(input, "triu_")
    return input.copy_(input.triu(diagonal))


def _relayout_(input, view):
    """Give ``input`` the layout of ``view`` (a view of it, made by a dispatched view op): the
    in-place view ops change the tensor object's own shape and strides, never its data. When
    autograd recorded the view, ``input`` takes its node (a view node, single-output), so its
    gradient flows back through the view's derivative to what ``input`` was; a leaf that requires
    grad is refused, as torch refuses every in-place op on one."""
    if view.grad_fn is not None and input.grad_fn is None and input._base is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    input._shape, input._stride, input._offset = view._shape, view._stride, view._offset
    if view.grad_fn is not None:
        input.grad_fn = view.grad_fn
        if input._autograd_meta is not None:
            input._autograd_meta.output_nr = 0  # the view node's one output
    return input


def t_(input) -> Tensor:
    """``Tensor.t_``: t() in place (this tensor's own shape and strides change; a 2-D tensor is transposed)."""
    _check(input, "t_")
    if input.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return _relayout_(input, t(input))


def transpose_(input, dim0: int, dim1: int) -> Tensor:
    """``Tensor.transpose_``: transpose(dim0, dim1) in place."""
    _check(input, "transpose_")
    return _relayout_(input, input.transpose(dim0, dim1))


def squeeze_(input, dim=None) -> Tensor:
    """``Tensor.squeeze_``: squeeze(dim) in place."""
    _check(input, "squeeze_")
    return _relayout_(input, input.squeeze() if dim is None else input.squeeze(dim))


def unsqueeze_(input, dim: int) -> Tensor:
    """``Tensor.unsqueeze_``: unsqueeze(dim) in place."""
    _check(input, "unsqueeze_")
    return _relayout_(input, input.unsqueeze(dim))


# ----- flat indexing -------------------------------------------------------------------------------
def _flat_index(input, index, op: str):
    """``index`` flattened, bounds checked against ``input.numel()`` before any kernel reads it
    (one host read of its extremes: torch's message names the offending index)."""
    _check_index(index, op)
    flat = index.reshape(-1)
    n = input.numel()
    if flat.numel():
        lo, hi = int(flat.amin().item()), int(flat.amax().item())
        bad = hi if hi >= n else (lo if lo < -n else None)
        if bad is not None:
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
        if lo < 0:
            flat = flat.remainder(max(n, 1))
    return flat


def take(input, index) -> Tensor:
    """``input`` read as if flat at ``index`` (any shape, negative counting from the end)."""
    _check(input, "take")
    flat = _flat_index(input, index, "take")
    return input.reshape(-1).index_select(0, flat).reshape(index.shape)


def put_(input, index, source, accumulate: bool = False) -> Tensor:
    """``input`` as if flat, written at ``index`` from ``source`` (added when ``accumulate``)."""
    _check(input, "put_")
    _check(source, "put_", "source")
    if source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_torch_name(input.dtype)} and source.dtype = {_torch_name(source.dtype)}")
    flat = _flat_index(input, index, "put_")
    if input.ndim == 0:  # one element: its flat index is 0
        input.copy_(input.reshape(1).index_put((flat,), source.reshape(-1), accumulate).reshape(()))
        return input
    # the flat indices as coordinates, so the write is one index_put_ on input through its strides
    input.index_put_(_coordinates(flat, tuple(input.shape)), source.reshape(-1), accumulate)
    return input


def _coordinates(flat, shape: tuple) -> tuple:
    """The non-negative flat indices ``flat`` as one coordinate tensor per dim of ``shape``."""
    coords = []
    for s in reversed(shape):
        coords.append(flat.remainder(s))
        flat = flat.floor_divide(s)
    return tuple(reversed(coords))


def put(input, index, source, accumulate: bool = False) -> Tensor:
    """``put_`` into a copy of ``input``."""
    _check(input, "put")
    return put_(input.clone(), index, source, accumulate)


# ----- block builders --------------------------------------------------------------------------------
def diagflat(input, offset: int = 0) -> Tensor:
    """A 2-D tensor with ``input``, flattened, on its ``offset``-th diagonal."""
    _check(input, "diagflat")
    return input.reshape(-1).diag(offset)


def block_diag(*tensors) -> Tensor:
    """The tensors (each at most 2-D: a 0-D one is 1x1, a 1-D one a row) as blocks along the
    diagonal of a matrix of zeros, in their promoted dtype."""
    for i, t_i in enumerate(tensors):
        _check(t_i, "block_diag", f"tensors[{i}]")
        if t_i.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t_i.ndim} dimensions")
    if not tensors:
        raise RuntimeError("block_diag(): expected at least one tensor (torch gives a 1x0 float tensor, whose "
                           "device tritensor cannot know without one)")
    blocks = [b.reshape(1, 1) if b.ndim == 0 else b.reshape(1, -1) if b.ndim == 1 else b for b in tensors]
    result = blocks[0].dtype
    for b in blocks[1:]:
        result = dt.promote_types(result, b.dtype)
        if b.device != blocks[0].device:
            raise RuntimeError(f"torch.block_diag: input tensors must all be on the same device. Input 0 is on "
                               f"device {blocks[0].device} and input {blocks.index(b)} is on device {b.device}.")
    rows, cols = sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)
    out = blocks[0].new_zeros((rows, cols), dtype=result)
    r = c = 0
    for b in blocks:
        h, w = b.shape
        _place(out, (_arange(r, r + h, b).reshape(h, 1), _arange(c, c + w, b).reshape(1, w)), b.to(result))
        r, c = r + h, c + w
    return out


def vander(x, N=None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of the 1-D ``x``: column j is ``x ** j`` (``increasing``) or
    ``x ** (N - 1 - j)``, as the running product of ``x`` (cumprod), so integers stay exact.
    Integers and bools give int64, floats keep their dtype."""
    _check(x, "vander", "x")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    d = x.dtype if x.dtype.is_floating_point else dt.int64
    if n == 0:
        return x.new_empty((x.shape[0], 0), dtype=d)
    ones = x.new_ones((x.shape[0], 1), dtype=d)
    if n == 1:
        out = ones
    else:
        powers = x.to(d).unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1)
        out = _joined([ones, powers], 1, "vander")
    return out if increasing else out.flip(1)


def combinations(input, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of the 1-D ``input``'s elements, as rows (itertools' order):
    the index rows depend on the length alone, so they are made on the host, and the gather is one
    ``index_select`` on the input's device (recorded, so differentiable)."""
    _check(input, "combinations")
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty((0,))
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(gen(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    idx = host_tensor(rows.reshape(-1), input.device)
    out = input.index_select(0, idx).reshape(rows.shape[0], r)
    return out.reshape(-1) if r == 1 else out


def unravel_index(indices, shape) -> tuple:
    """The coordinates, in a tensor of ``shape``, of each flat index in ``indices`` (negative ones
    count from the end): one int64 tensor per dim, by repeated ``floor_divide`` and ``remainder``."""
    _check(indices, "unravel_index", "indices")
    if indices.dtype.is_floating_point or indices.dtype is dt.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    numel = 1
    for s in shape:
        numel *= s
    if indices.numel():
        lo, hi = int(indices.amin().item()), int(indices.amax().item())
        if lo < -numel or hi >= numel:
            raise ValueError(f"'indices' must be in range [{-numel}, {numel - 1}]")
    flat = indices.to(dt.int64)
    flat = flat.remainder(numel) if numel else flat
    coords = []
    for s in reversed(shape):
        coords.append(flat.remainder(s))
        flat = flat.floor_divide(s)
    return tuple(reversed(coords))


# ----- scatters into a view -------------------------------------------------------------------------
def _check_slice(input, src, view, op: str) -> None:
    """``src`` must have the shape of the part of ``input`` it replaces (``view``, only read for
    its shape: the write is an ``index_copy_``/``index_put_`` of a copy of input, see _place)."""
    _check(src, op, "src")
    if tuple(view.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(view.shape)}")


def select_scatter(input, src, dim: int, index: int) -> Tensor:
    """A copy of ``input`` with ``src`` written at ``index`` of ``dim``."""
    _check(input, "select_scatter")
    _check_slice(input, src, input.select(dim, index), "select_scatter")
    d = normalize_dim(dim, input.ndim)
    out = input.clone()
    i = index + input.shape[d] if index < 0 else index
    out.index_copy_(d, _arange(i, i + 1, input), src.unsqueeze(d))
    return out


def slice_scatter(input, src, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """A copy of ``input`` with ``src`` written into ``[start:end:step]`` of ``dim``."""
    _check(input, "slice_scatter")
    d = normalize_dim(dim, input.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    _check_slice(input, src, input[(slice(None),) * d + (slice(start, end, step),)], "slice_scatter")
    out = input.clone()
    if src.numel():
        first, stop, stride = slice(start, end, step).indices(input.shape[d])
        out.index_copy_(d, _arange(first, stop, input, stride), src)
    return out


def diagonal_scatter(input, src, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of ``input`` with ``src`` written onto the diagonal ``diagonal(offset, dim1, dim2)``.

    One ``index_put_`` whose coordinates follow ``src``'s dims (input's other dims, then the diagonal)."""
    _check(input, "diagonal_scatter")
    _check_slice(input, src, input.diagonal(offset, dim1, dim2), "diagonal_scatter")
    d1, d2 = normalize_dim(dim1, input.ndim), normalize_dim(dim2, input.ndim)
    out = input.clone()
    if src.numel() == 0:
        return out
    n = src.ndim
    length = src.shape[-1]
    others = [d for d in range(input.ndim) if d not in (d1, d2)]
    index = [None] * input.ndim
    for pos, d in enumerate(others):
        shape = [1] * n
        shape[pos] = input.shape[d]
        index[d] = _arange(0, input.shape[d], input).reshape(shape)
    last = [1] * (n - 1) + [length]
    index[d1] = _arange(max(-offset, 0), max(-offset, 0) + length, input).reshape(last)
    index[d2] = _arange(max(offset, 0), max(offset, 0) + length, input).reshape(last)
    out.index_put_(tuple(index), src)
    return out


# ----- as_strided: a view of the storage under any geometry ----------------------------------------
def _geometry(input, size, stride, storage_offset, op: str):
    """``(size, stride, offset)`` checked as torch's: same lengths, no negative stride, and the
    view inside the storage (in elements of input's dtype)."""
    size = tuple(int(s) for s in _shape_arg((size,), "size"))
    stride = tuple(int(s) for s in _shape_arg((stride,), "stride"))
    offset = input.storage_offset() if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: {list(size)}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    item = input.dtype.itemsize
    need = 0 if 0 in size else (offset + 1 + sum((n - 1) * st for n, st in zip(size, stride))) * item
    have = input._storage.nbytes
    if need > have:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {item} requiring a storage size of {need} are out of bounds for storage of size "
                           f"{have}")
    return size, stride, offset


def as_strided(input, size, stride, storage_offset=None) -> Tensor:
    """A view of ``input``'s storage with ``size``, ``stride`` and ``storage_offset`` (input's own
    offset by default). Its derivative (autograd/functions/shape_more.py) adds the gradient back
    at the storage positions the view reads, as torch's as_strided_backward."""
    _check(input, "as_strided")
    size, stride, offset = _geometry(input, size, stride, storage_offset, "as_strided")
    return input._view(size, stride, offset)


def storage_positions(like, size, stride, offset):
    """The storage position of every element of the view ``(size, stride, offset)``, as an int64
    tensor of shape ``size`` on ``like``'s device (one small ramp per dim, broadcast and summed)."""
    pos = like.new_full((), offset, dtype=dt.int64)
    for d, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        pos = pos + (_arange(0, n, like) * st).reshape(shape)
    return pos.expand(size) if size else pos


def _last_position(size, stride, offset) -> int:
    """The largest storage position a view reads (its offset when it is empty)."""
    return offset + (0 if 0 in size else sum((n - 1) * st for n, st in zip(size, stride)))


def _self_overlapping(size, stride) -> bool:
    """Whether two elements of a view share a storage position: over its dims of more than one
    element, by increasing stride, each stride must pass the extent of the dims below it."""
    reach = 0
    for n, st in sorted(((n, st) for n, st in zip(size, stride) if n > 1), key=lambda p: p[1]):
        if st <= reach:
            return True
        reach += (n - 1) * st
    return False


def as_strided_backward(grad, in_geometry, out_geometry):
    """The gradient of ``as_strided`` for its input: the output's gradient summed into a buffer at
    the storage positions it reads, read back at the input's positions; where the input's own
    elements share memory, each share gets its part (divided by how many), as torch's. Storage the
    view reads outside the input's own elements (a view of a view reaching into its base) gets no
    gradient through the input."""
    in_pos = storage_positions(grad, *in_geometry).reshape(-1)
    out_pos = storage_positions(grad, *out_geometry).reshape(-1)
    lo = min(in_geometry[2], out_geometry[2])
    extent = 1 + max(_last_position(*in_geometry), _last_position(*out_geometry)) - lo
    buf = grad.new_zeros((extent,)).index_put((out_pos - lo,), grad.reshape(-1), accumulate=True)
    g_in = buf.index_select(0, in_pos - lo)
    if _self_overlapping(*in_geometry[:2]):  # shares of one memory element split its gradient
        counts = grad.new_zeros((extent,)).index_put((in_pos - lo,), grad.new_ones(()).expand(in_pos.numel()),
                                                     accumulate=True)
        g_in = g_in / counts.index_select(0, in_pos - lo)
    return g_in.reshape(in_geometry[0])


def as_strided_(input, size, stride, storage_offset=None) -> Tensor:
    """``input`` itself given the geometry ``as_strided`` would view it with."""
    _check(input, "as_strided_")
    size, stride, offset = _geometry(input, size, stride, storage_offset, "as_strided_")
    return _relayout_(input, input.as_strided(size, stride, offset))


def as_strided_copy(input, size, stride, storage_offset=None) -> Tensor:
    """``as_strided``'s result in memory of its own."""
    _check(input, "as_strided_copy")
    return input.as_strided(size, stride, storage_offset).clone()


def as_strided_scatter(input, src, size, stride, storage_offset=None) -> Tensor:
    """A copy of ``input`` (contiguous) with ``src`` written where ``as_strided(size, stride,
    storage_offset)`` of that copy looks: one ``index_put_`` at those positions."""
    _check(input, "as_strided_scatter")
    _check(src, "as_strided_scatter", "src")
    out = input.clone(memory_format=contiguous_format)
    size, stride, offset = _geometry(out, size, stride, 0 if storage_offset is None else storage_offset,
                                     "as_strided_scatter")
    if tuple(src.shape) != size:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(size)}")
    if src.numel():
        pos = storage_positions(out, size, stride, offset).reshape(-1)
        index = _coordinates(pos, tuple(out.shape)) if out.ndim else None
        if index is None:
            out.copy_(src.reshape(()))
        else:
            out.index_put_(index, src.reshape(-1))
    return out


def new_empty_strided(input, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                      pin_memory=False) -> Tensor:
    """An uninitialised tensor of ``size``/``stride``, of ``input``'s dtype and device unless told."""
    _check(input, "new_empty_strided")
    d = input.dtype if dtype is None else dt.to_dtype(dtype)
    size = tuple(int(s) for s in _shape_arg((size,), "size"))
    stride = tuple(int(s) for s in _shape_arg((stride,), "stride"))
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                           f"({len(stride)})")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    extent = 0 if 0 in size else 1 + sum((n - 1) * st for n, st in zip(size, stride))
    store = input.new_empty((extent,), dtype=d, device=device)
    out = TensorBase._result_class(store._storage, size, stride, 0, d)
    if requires_grad:
        out.requires_grad_(True)
    return out


# ----- resize_, resize_as_, new ----------------------------------------------------------------------
def resize_(input, *sizes, memory_format=None) -> Tensor:
    """``input`` given ``sizes`` and contiguous strides, in place: its storage kept when large
    enough, else replaced by a larger one holding the old bytes at its start (the new elements are
    uninitialised, as torch's). Unlike torch, other tensors sharing the old storage keep the old
    one when it is replaced (tritensor's storages do not grow in place)."""
    _check(input, "resize_")
    shape = tuple(int(s) for s in _shape_arg(sizes, "size"))
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    if input.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if memory_format is not None and memory_format is not contiguous_format:
        raise RuntimeError("resize_(): only memory_format=torch.contiguous_format is supported")
    numel = 1
    for n in shape:
        numel *= n
    item = input.dtype.itemsize
    need = (input._offset + numel) * item
    old_bytes = input._storage.nbytes
    if need > old_bytes:
        grown = TensorBase._empty((input._offset + numel,), input.dtype, input.device)
        kept = old_bytes // item
        if kept:
            copy_into(grown.narrow(0, 0, kept), TensorBase._result_class(input._storage, (kept,), (1,), 0,
                                                                          input.dtype))
        input._storage = grown._storage
    input._shape, input._stride = Size(shape), tuple(_contiguous_strides(shape))
    return input


def _contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return reversed(strides)


def resize_as_(input, the_template, *, memory_format=None) -> Tensor:
    """``resize_`` to ``the_template``'s shape."""
    _check(input, "resize_as_")
    _check(the_template, "resize_as_", "the_template")
    return resize_(input, tuple(the_template.shape), memory_format=memory_format)


def new(input, *args, device=None) -> Tensor:
    """torch's legacy ``Tensor.new``: a tensor of ``input``'s dtype (and device): ``new()`` empty,
    ``new(*sizes)`` uninitialised, ``new(data)`` a copy of a sequence, ``new(tensor)`` that tensor
    when its dtype and device type are input's."""
    _check(input, "new")
    dev = input.device if device is None else device
    if not args:
        return input.new_empty((0,), device=dev)
    if len(args) == 1 and isinstance(args[0], TensorBase):
        data = args[0]
        if data.dtype is not input.dtype or data.device.type != input.device.type:
            raise TypeError(f"expected {input.type()} (got {data.type()})")
        return data.detach()
    if len(args) == 1 and isinstance(args[0], Size):
        return input.new_empty(tuple(args[0]), device=dev)
    if len(args) == 1 and isinstance(args[0], (list, tuple, np.ndarray)):  # data, as torch reads a sequence
        return input.new_tensor(args[0], device=dev)
    if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
        return input.new_empty(tuple(int(a) for a in args), device=dev)
    raise TypeError(f"new(): expected sizes (ints), one sequence of data or a tensor, got "
                    f"{', '.join(type(a).__name__ for a in args)}")


# ----- the *_copy forms: the view, then a copy (its own memory, as torch's) --------------------------
def _copy_form(view_name: str):
    def copy_form(input, *args, **kwargs):
        _check(input, view_name + "_copy")
        out = getattr(input, view_name)(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            return [o.clone() for o in out]
        return out.clone()
    copy_form.__name__ = copy_form.__qualname__ = view_name + "_copy"
    copy_form.__doc__ = f"``{view_name}``'s result in memory of its own (no view of ``input``)."
    return copy_form


COPY_FORMS = ("diagonal", "expand", "permute", "select", "squeeze", "transpose", "unbind", "unfold", "unsqueeze",
              "view", "split", "split_with_sizes", "narrow", "detach")
_COPY = {name + "_copy": _copy_form(name) for name in COPY_FORMS}
diagonal_copy, expand_copy, permute_copy, select_copy, squeeze_copy, transpose_copy, unbind_copy = (
    _COPY[n + "_copy"] for n in COPY_FORMS[:7])
unfold_copy, unsqueeze_copy, view_copy, split_copy, split_with_sizes_copy, narrow_copy, detach_copy = (
    _COPY[n + "_copy"] for n in COPY_FORMS[7:])


def alias_copy(input) -> Tensor:
    """``alias`` (the same tensor as a new view) copied: a clone."""
    _check(input, "alias_copy")
    return input.clone()


def t_copy(input) -> Tensor:
    """``t``'s result in memory of its own."""
    return t(input).clone()


def slice_copy(input, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """``input[..., start:end:step]`` along ``dim``, in memory of its own."""
    _check(input, "slice_copy")
    d = normalize_dim(dim, input.ndim)
    return input[(slice(None),) * d + (slice(start, end, step),)].clone()


# ----- splits by sizes --------------------------------------------------------------------------------
def split_with_sizes(input, split_sizes, dim: int = 0) -> tuple:
    """Views of ``input`` along ``dim`` of the given sizes, which must add up to its length there."""
    _check(input, "split_with_sizes")
    d = normalize_dim(dim, input.ndim)
    sizes = [int(s) for s in split_sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != input.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {input.shape[d]} (input tensor's "
                           f"size at dimension {dim}), but got split_sizes={sizes}")
    return tuple(input.split(sizes, d))


def unsafe_split(input, split_size, dim: int = 0) -> tuple:
    """``split`` (torch's unsafe forms skip autograd's view tracking, which tritensor's views don't need)."""
    _check(input, "unsafe_split")
    return tuple(input.split(split_size, dim))


def unsafe_split_with_sizes(input, split_sizes, dim: int = 0) -> tuple:
    """``split_with_sizes``, as ``unsafe_split`` is ``split``."""
    return split_with_sizes(input, split_sizes, dim)


def unsafe_chunk(input, chunks: int, dim: int = 0) -> tuple:
    """``chunk``, as ``unsafe_split`` is ``split``."""
    _check(input, "unsafe_chunk")
    return tuple(input.chunk(chunks, dim))


# ----- sum_to_size, metadata -----------------------------------------------------------------------
def sum_to_size(input, *size) -> Tensor:
    """``input`` summed down to ``size``, a shape it can be expanded from (what broadcasting's
    gradient does): the leading extra dims and every dim where ``size`` has 1 are summed."""
    _check(input, "sum_to_size")
    size = tuple(_shape_arg(size, "size"))
    lead = input.ndim - len(size)
    ok = lead >= 0 and all(s == 1 or s == input.shape[lead + i] for i, s in enumerate(size))
    if not ok:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(input.shape)}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size) if s == 1 and input.shape[lead + i] != 1)
    out = input.sum(dims, keepdim=True) if dims else input
    return out.reshape(size) if lead else out


def ndimension(input) -> int:
    """``dim()`` under torch's older name."""
    _check(input, "ndimension")
    return input.ndim


def dim_order(input, *, ambiguity_check=False) -> tuple:
    """The dims from outermost to innermost in memory (by decreasing stride; ties keep the
    logical order), as torch's."""
    _check(input, "dim_order")
    if not isinstance(ambiguity_check, (bool, list)):
        raise TypeError("The ambiguity_check argument must be a bool or a list of memory formats.")
    return tuple(sorted(range(input.ndim), key=lambda d: -input.stride()[d]))
