"""Writing into a tensor at indices: ``scatter`` (a tensor or a scalar source; ``reduce='add'|
'multiply'``), ``scatter_reduce`` (``sum prod mean amax amin``, ``include_self``), ``index_put``
(``accumulate``), and the composites ``index_fill``, ``index_copy``, ``masked_scatter``,
``take_along_dim`` (each with its in-place form where torch has one).

``scatter`` and ``scatter_reduce`` run ``triton_kernels/scatter.py`` (a write where the last
element naming a position wins, as NumPy's ``put_along_axis``; atomic max/min; a CAS-loop product)
and the index family's atomic add (``triton_kernels/index.py``), accumulating fp16/bf16 in fp32 and
bool in int32. ``index_put`` is the index family's ``x[idx] = v`` / its atomic add. The composites
are written with dispatched ops, so autograd records their pieces: ``index_fill``/``index_copy``
are a ``scatter`` with the index broadcast along the other dims, ``masked_scatter`` an
``index_put`` at the mask's coordinates, ``take_along_dim`` a ``gather`` after broadcasting.
Every argument is checked (PyTorch's wording) before any kernel runs, and so are the bounds of a
host index tensor; a device index tensor's bounds are checked by the kernels, which report a bad
index at the next synchronisation (``core/ops/index.py: device_check``). Derivatives:
``autograd/functions/scatter.py``; tests: ``tests/test_scatter.py``.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...triton_kernels import index as _ki
from ...triton_kernels import scatter as _k
from ...runtime import dtype as dt
from ...runtime import dtype_policy
from ..shape import broadcast_shapes, broadcasts_to, normalize_dim
from ..tensor_base import TensorBase
from . import _check_writable, _overlaps, copy_into, fill
from . import elementwise as _ew
from . import index as _ix
from . import views as _views

REDUCES = ("sum", "prod", "mean", "amax", "amin")
_SCATTER_REDUCE = {"add": "sum", "multiply": "prod"}


def _is_number(v) -> bool:
    return isinstance(v, (numbers.Number, np.number, np.bool_)) and not isinstance(v, complex)


def _zeros(shape, d, dev):
    t = TensorBase._empty(tuple(shape), d, dev)
    fill(t, 0)
    return t


def _check_scatter(op, input, dim, index, src):
    """PyTorch's scatter checks; returns the normalised dim and the kernels' index check (None: done
    on the host)."""
    _ix._check_input(input, op)
    _ix._check_index(index, op)
    _ix._check_devices(op, input, index, *([src] if isinstance(src, TensorBase) else []))
    d = normalize_dim(dim, max(input.ndim, 1))
    if index.ndim != input.ndim and max(index.ndim, input.ndim) > 1:
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as self tensor")
    if isinstance(src, TensorBase):
        if src.dtype is not input.dtype:
            raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype")
        if src.ndim != index.ndim and max(src.ndim, index.ndim) > 1:
            raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as src tensor")
    ishape, xshape = tuple(index.shape) or (1,), tuple(input.shape) or (1,)
    sshape = (tuple(src.shape) or (1,)) if isinstance(src, TensorBase) else None
    if any(ishape[k] > xshape[k] for k in range(len(ishape)) if k != d) or (
            sshape is not None and any(i > s for i, s in zip(ishape, sshape))):
        extra = f" and to be no larger size than src {list(src.shape)}" if sshape is not None else ""
        raise RuntimeError(f"{op}(): Expected index {list(index.shape)} to be no larger than self {list(input.shape)} "
                           f"apart from dimension {d}{extra}")
    return d, _ix.dim_check(index, xshape[d], d, f"{op}(): ")


def _as_1d(input, index, src):
    """0-d operands as 1-element ones (the kernels want a dim to scatter along)."""
    r = (lambda t: t.reshape(1) if isinstance(t, TensorBase) and t.ndim == 0 else t)
    return r(input), r(index), r(src)


def _source(src, like, index):
    """The source read at index's positions: a tensor's leading block, or a scalar broadcast (stride 0)."""
    if isinstance(src, TensorBase):
        return _views.basic_getitem(src, tuple(slice(0, n) for n in index.shape))
    return _ew.full_like_scalar(src, like, like.dtype).expand(index.shape)


def _scatter(op, input, dim, index, src, value, reduce, inplace):
    if src is not None and value is not None:
        raise TypeError(f"{op}(): pass either src or value, not both")
    src = value if src is None else src
    if src is None:
        raise TypeError(f"{op}() missing 1 required positional argument: 'src' (or 'value')")
    if not isinstance(src, TensorBase) and not _is_number(src):
        raise TypeError(f"{op}(): argument 'src' must be Tensor or a number, not {type(src).__name__}")
    if reduce is not None and reduce not in _SCATTER_REDUCE:
        raise RuntimeError("reduce argument must be either add or multiply.")
    d, check = _check_scatter(op, input, dim, index, src)
    dt.refuse_barebones(input.dtype, f"scatter_gather_tensor_{input.device.type}")
    if reduce is not None:
        return _reduce(op, input, d, index, src, _SCATTER_REDUCE[reduce], True, inplace, check)
    if inplace:
        _check_writable(input, op)
    x, ix, s = _as_1d(input, index, src)
    target = x if inplace else x.clone()
    s = _source(s, target, ix)
    if _overlaps(target, s) or s._storage is target._storage:
        s = s.clone()
    winner = None
    if ix.numel() > 1 and ix.shape[d] > 1:  # repeats possible along dim: the last one wins
        wdt = dt.int32 if ix.numel() < 2**31 else dt.int64
        winner = TensorBase._empty(target.shape, wdt, target.device)
        fill(winner, -1)
    _k.scatter_dim("put", s, target, ix, d, winner, check)
    if inplace:
        input._bump_version()
        return input
    return target.reshape(input.shape)


def _identity(reduce, d):
    """The start value of a position that receives elements but not ``self`` (include_self=False)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    big = float("inf") if d.is_floating_point else int(np.iinfo(d.np).max)
    return -big - (0 if d.is_floating_point else 1) if reduce == "amax" else big


def _reduce(op, input, d, index, src, reduce, include_self, inplace, check):
    """scatter_reduce after the checks: accumulate in a fresh buffer, then cast (and copy back)."""
    if inplace:
        _check_writable(input, op)
    x, ix, s = _as_1d(input, index, src)
    acc_dt = dtype_policy.atomic_accumulator(x.dtype)
    acc = x.to(acc_dt) if acc_dt is not x.dtype else x.clone()
    s = _source(s, x, ix)
    s = s.to(acc_dt) if s.dtype is not acc_dt else s
    count = None
    if reduce == "mean" or not include_self:
        count = _zeros(x.shape, dt.int64, x.device)
        _ki.index_dim("add", _ew.full_like_scalar(1, x, dt.int64).expand(ix.shape), count, ix, d, check)
        if not include_self:
            _ew.where(_ew.binary("gt", count, 0), _identity(reduce, acc_dt), acc, out=acc)
    if reduce in ("sum", "mean"):
        _ki.index_dim("add", s, acc, ix, d, check)
    else:
        _k.scatter_dim({"prod": "mul", "amax": "max", "amin": "min"}[reduce], s, acc, ix, d, check=check)
    if reduce in ("amax", "amin") and acc_dt.is_floating_point:  # the atomics' integer trick drops NaN
        nans = _zeros(x.shape, dt.int64, x.device)
        _ki.index_dim("add", _ew.binary("ne", s, s).to(dt.int64), nans, ix, d, check)
        _ew.where(_ew.binary("gt", nans, 0), float("nan"), acc, out=acc)
    if reduce == "mean":
        denom = _ew.binary("maximum", _ew.binary("add", count, 1) if include_self else count, 1)
        acc = _ew.binary("div" if acc_dt.is_floating_point else "floor_divide", acc, denom)
    out = acc if acc.dtype is x.dtype else acc.to(x.dtype)
    if inplace:
        copy_into(x, out)
        input._bump_version()
        return input
    return out.reshape(input.shape)


# ----- the table's entries --------------------------------------------------------------------------
def scatter(input, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    """``input`` with ``src[p]`` (or ``value``) written at ``index[p]`` along ``dim``; with ``reduce``
    ('add', 'multiply') combined with what is there. Where indices repeat, the last one along
    ``dim`` wins (PyTorch leaves that unspecified)."""
    return _scatter("scatter", input, dim, index, src, value, reduce, False)


def scatter_(input, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    """``Tensor.scatter_``: ``src`` (or ``value``) written at ``index`` along ``dim``, in place; ``reduce``
    'add'/'multiply' combines instead."""
    return _scatter("scatter_", input, dim, index, src, value, reduce, True)


def _reduce_entry(op, input, dim, index, src, reduce, include_self, inplace):
    if reduce not in REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if not isinstance(include_self, bool):
        raise TypeError(f"{op}(): argument 'include_self' must be bool, not {type(include_self).__name__}")
    if not isinstance(src, TensorBase):
        raise TypeError(f"{op}(): argument 'src' must be Tensor, not {type(src).__name__}")
    d, check = _check_scatter(op, input, dim, index, src)
    return _reduce(op, input, d, index, src, reduce, include_self, inplace, check)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True) -> Tensor:
    """``input`` with the elements of ``src`` reduced into the positions ``index`` names along ``dim``."""
    return _reduce_entry("scatter_reduce", input, dim, index, src, reduce, include_self, False)


def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True) -> Tensor:
    """``Tensor.scatter_reduce_``: ``src`` combined into ``self`` at ``index`` along ``dim`` by ``reduce``
    (sum, prod, mean, amax, amin), in place, with or without ``self``'s own values."""
    return _reduce_entry("scatter_reduce_", input, dim, index, src, reduce, include_self, True)


def _index_put(op, input, indices, values, accumulate, inplace):
    _ix._check_input(input, op)
    dt.refuse_barebones(input.dtype, "index_put")
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}(): argument 'indices' (position 1) must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    if not all(isinstance(i, TensorBase) or i is None for i in indices):
        raise TypeError(f"{op}(): argument 'indices' must be a tuple of Tensors (or None)")
    if not isinstance(values, TensorBase):
        raise TypeError(f"{op}(): argument 'values' must be Tensor, not {type(values).__name__}")
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got {input.dtype.name} "
                           f"for the destination and {values.dtype.name} for the source.")
    if not isinstance(accumulate, bool):
        raise TypeError(f"{op}(): argument 'accumulate' must be bool, not {type(accumulate).__name__}")
    index = tuple(slice(None) if i is None else i for i in indices)
    target = input if inplace else input.clone()
    if not accumulate:
        _ix.setitem_any(target, index, values)
        return target
    if not _ix.is_advanced(index):  # basic indices only: a view, added to in place
        view = target[index]
        _ew.binary("add", view, values, out=view)
        target._bump_version()
        return target
    p = _ix.plan(target, index)
    v = _ix._value_tensor(values, target, p.out_shape, op)
    _check_writable(_views.basic_getitem(target, p.basic), op)
    acc_dt = _ix._acc_dtype(target.dtype)
    acc = target.to(acc_dt) if acc_dt is not target.dtype else target
    if _overlaps(acc, v) or v._storage is acc._storage:
        v = v.clone()
    p.run("add", acc, v)
    if acc is not target:
        copy_into(target, acc)
    target._bump_version()
    return target


def index_put(input, indices, values, accumulate=False) -> Tensor:
    """A copy of ``input`` with ``values`` put (``accumulate``: added) at ``input[indices]``."""
    return _index_put("index_put", input, indices, values, accumulate, False)


def index_put_(input, indices, values, accumulate=False) -> Tensor:
    """``Tensor.index_put_``: ``self[indices] = values`` (or ``+=`` with ``accumulate``), in place."""
    return _index_put("index_put_", input, indices, values, accumulate, True)


def _along(index, d, shape):
    """A 1-D index laid along dim ``d`` and broadcast to ``shape`` (the scatter index of index_fill/copy)."""
    view = [1] * len(shape)
    view[d] = index.numel()
    return index.reshape(view).expand(tuple(shape[:d]) + (index.numel(),) + tuple(shape[d + 1:]))


def _check_vector_index(op, input, dim, index):
    _ix._check_input(input, op)
    if not isinstance(index, TensorBase):
        raise TypeError(f"{op}(): argument 'index' must be Tensor, not {type(index).__name__}")
    if index.dtype is not dt.int64:
        raise IndexError(f"{op}(): Expected dtype int64 for index.")
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index has to be a vector/scalar")
    _ix._check_devices(op, input, index)
    return normalize_dim(dim, max(input.ndim, 1)), index.reshape(-1)


def _index_fill(op, input, dim, index, value, inplace):
    d, index = _check_vector_index(op, input, dim, index)
    if isinstance(value, TensorBase):
        if value.ndim != 0:
            raise RuntimeError(f"{op} only supports a 0-dimensional value tensor, but got tensor with {value.ndim} "
                               f"dimension(s).")
    elif not _is_number(value):
        raise TypeError(f"{op}(): argument 'value' must be a number or a 0-d Tensor, not {type(value).__name__}")
    x = input.reshape(1) if input.ndim == 0 else input
    size = x.shape[d]
    _ix.check_now(index, size, d, allow_negative=True)  # torch's index_fill wraps negative indices
    index = _ew.where(_ew.binary("lt", index, 0), _ew.binary("add", index, size), index)
    idx = _along(index, d, x.shape)
    src = value.to(x.dtype).expand(idx.shape) if isinstance(value, TensorBase) else value
    if inplace:
        return input.scatter_(d, idx, src) if input.ndim else _scalar_inplace(input, x.scatter(d, idx, src))
    return x.scatter(d, idx, src).reshape(input.shape)


def _scalar_inplace(input, new):
    return input.copy_(new.reshape(()))


def index_fill(input, dim, index, value) -> Tensor:
    """A copy of ``input`` with ``value`` (a number or a 0-d tensor) at ``index`` along ``dim``."""
    return _index_fill("index_fill", input, dim, index, value, False)


def index_fill_(input, dim, index, value) -> Tensor:
    """``Tensor.index_fill_``: the slices at ``index`` along ``dim`` set to ``value``, in place."""
    return _index_fill("index_fill_", input, dim, index, value, True)


def _index_copy(op, input, dim, index, source, inplace):
    d, index = _check_vector_index(op, input, dim, index)
    if not isinstance(source, TensorBase):
        raise TypeError(f"{op}(): argument 'source' must be Tensor, not {type(source).__name__}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"{op}(): self and source expected to have the same dtype, but got (self) "
                           f"{input.dtype.name} and (source) {source.dtype.name}")
    x = input.reshape(1) if input.ndim == 0 else input
    s = source.reshape(1) if source.ndim == 0 else source
    if s.ndim != x.ndim or s.shape[d] != index.numel():
        raise IndexError(f"{op}(): Number of indices ({index.numel()}) should be equal to source.size(dim) "
                         f"({s.shape[d] if s.ndim > d else 'none'})")
    if any(s.shape[k] != x.shape[k] for k in range(x.ndim) if k != d):
        raise RuntimeError(f"{op}(): Source/destination tensor must have same slice shapes. Destination slice "
                           f"shape: {list(x.shape[:d] + x.shape[d + 1:])} and source slice shape: "
                           f"{list(s.shape[:d] + s.shape[d + 1:])}")
    _ix.check_now(index, x.shape[d], d, allow_negative=False, what=f"{op}(): ")
    idx = _along(index, d, s.shape)
    if inplace:
        return input.scatter_(d, idx, s) if input.ndim else _scalar_inplace(input, x.scatter(d, idx, s))
    return x.scatter(d, idx, s).reshape(input.shape)


def index_copy(input, dim, index, source) -> Tensor:
    """A copy of ``input`` with the slices of ``source`` at ``index`` along ``dim`` (``index_add``'s copy)."""
    return _index_copy("index_copy", input, dim, index, source, False)


def index_copy_(input, dim, index, source) -> Tensor:
    """``Tensor.index_copy_``: ``source``'s slices copied to the positions of ``index`` along ``dim``, in
    place."""
    return _index_copy("index_copy_", input, dim, index, source, True)


def _masked_scatter(op, input, mask, source, inplace):
    _ix._check_input(input, op)
    _ix._check_input(mask, op, "mask")
    _ix._check_input(source, op, "source")
    if mask.dtype is not dt.bool_:
        raise RuntimeError(f"{op} only supports boolean masks, but got mask with dtype {mask.dtype.name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"{op}: expected self and source to have same dtypes but got {input.dtype.name} and "
                           f"{source.dtype.name}")
    if not broadcasts_to(mask.shape, input.shape):
        raise RuntimeError(f"{op}: the size of the mask {list(mask.shape)} must be broadcastable to the size of the "
                           f"input {list(input.shape)}")
    _ix._check_devices(op, input, mask, source)
    x = input.reshape(1) if input.ndim == 0 else input
    coords = mask.expand(input.shape).reshape(x.shape).nonzero(as_tuple=True)
    k = coords[0].numel()
    if source.numel() < k:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    values = source.reshape(-1).narrow(0, 0, k)
    if inplace:
        return input.index_put_(coords, values) if input.ndim else _scalar_inplace(input, x.index_put(coords, values))
    return x.index_put(coords, values).reshape(input.shape)


def masked_scatter(input, mask, source) -> Tensor:
    """A copy of ``input`` with the first elements of ``source``, in order, where ``mask`` is True."""
    return _masked_scatter("masked_scatter", input, mask, source, False)


def masked_scatter_(input, mask, source) -> Tensor:
    """``Tensor.masked_scatter_``: where ``mask`` is True, the next elements of ``source`` in order, in place."""
    return _masked_scatter("masked_scatter_", input, mask, source, True)


def take_along_dim(input, indices, dim=None) -> Tensor:
    """``input.gather(dim, indices)`` after broadcasting both except along ``dim`` (NumPy's
    ``take_along_axis``); without ``dim``, from the flattened input."""
    op = "torch.take_along_dim()"
    _ix._check_input(input, "take_along_dim")
    _ix._check_input(indices, "take_along_dim", "indices")
    if indices.dtype is not dt.int64:
        raise RuntimeError(f"{op}: dtype of indices should be int64 but got {indices.dtype.name}")
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError(f"{op}: input and indices should have the same number of dimensions, but got "
                           f"{input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    d = normalize_dim(dim, max(input.ndim, 1))
    if input.ndim == 0:
        return input.reshape(1).gather(0, indices.reshape(1)).reshape(())
    a, b = list(input.shape), list(indices.shape)
    a[d] = b[d] = 1
    shape = list(broadcast_shapes(a, b))
    x_shape, i_shape = shape.copy(), shape.copy()
    x_shape[d], i_shape[d] = input.shape[d], indices.shape[d]
    return input.expand(x_shape).gather(d, indices.expand(i_shape))
