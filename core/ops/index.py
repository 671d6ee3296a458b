"""Advanced indexing on Tensors: ``x[idx]``, ``x[mask]``, ``x[idx] = v``, ``index_select``,
``gather``, ``scatter_add``, ``index_add`` (kernels: triton_kernels/index.py).

PyTorch's rules: integers, slices, None and Ellipsis are applied first as a view; the integer
index tensors (and Python lists) left over are broadcast together to a shape B. If they sit in
adjacent dims of that view, B replaces those dims in place; otherwise B goes first. A bool mask
stands for the coordinates of its True elements (``nonzero``, one host sync for the size).

Bounds, as PyTorch checks them: negative indices wrap (not for ``index_select``/``gather``/
``scatter_add``/``index_add``, which, like PyTorch, accept only 0 <= index < size). An index tensor
in host memory (and a list) is checked on the host (``amin``/``amax``) before any output is
written: the IndexError is raised by the op. An index tensor in device memory is checked by the
kernel that reads it (:func:`device_check`): nothing waits for the device, so the op can be
captured into a CUDA graph, and, as with torch's device-side assert, the IndexError is raised at
the next synchronisation (``.item()``, ``.cpu()``, ``tritensor.cuda.synchronize()`` ...), by
whatever op syncs; lanes with a bad index touch no memory (see ``runtime/device_asserts.py``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numbers

import warnings

import numpy as np

from ...triton_kernels import index as _k
from ...runtime import cuda, device_asserts, memory
from ...runtime import dtype as dt
from ...runtime import dtype_policy
from ..shape import broadcast_shapes, normalize_dim
from ..tensor_base import TensorBase
from ...runtime.device import CPU
from . import _check_writable, _overlaps, float8_bytes, host_tensor
from . import views as _views
from .elementwise import full_like_scalar
from .reduce import amax, amin

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

_INDEX_DTYPES = (dt.int64, dt.int32)


def _is_adv(i) -> bool:
    if isinstance(i, (list, np.ndarray)):
        return True
    return isinstance(i, TensorBase) and (i.ndim > 0 or i.dtype is dt.bool_ or i.dtype is dt.uint8)


def is_advanced(index) -> bool:
    """Does this ``__getitem__`` index need advanced indexing (a list or a non-0-d/bool tensor)?"""
    items = index if isinstance(index, tuple) else (index,)
    return any(_is_adv(i) for i in items)


def _as_index_tensor(i, dev) -> Tensor:
    if isinstance(i, TensorBase):
        t = i
    else:
        a = np.asarray(i)
        if a.size == 0:
            a = a.astype(np.int64)
        if a.dtype.kind not in "iub":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        t = host_tensor(a.astype(np.bool_ if a.dtype.kind == "b" else np.int64), CPU)
    if t.dtype is dt.uint8:  # a mask, as in PyTorch, which deprecates it with this warning
        warnings.warn("indexing with dtype tritensor.uint8 is now deprecated, please use a dtype tritensor.bool "
                      "instead.", UserWarning, stacklevel=4)
        t = t.to(dt.bool_)
    if t.dtype is not dt.bool_ and t.dtype not in _INDEX_DTYPES:
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if t.device != dev and (t.dtype is dt.bool_ or t.device.type != "cpu"):
        t = t.to(dev)  # (integer indices in host memory move after their host check: plan)
    return t


def _bounds_values(t: Tensor):
    """(min, max) of a non-empty index tensor: two reduction kernels, one host sync each."""
    return int(amin(t).item()), int(amax(t).item())


def _bounds(t: Tensor, size: int, dim: int, allow_negative: bool, what: str = "") -> None:
    """Raise PyTorch's IndexError if any index is outside [-size, size) ([0, size) without negatives).
    Syncs with the device: host index tensors only (device ones: :func:`device_check`)."""
    if t.numel() == 0:
        return
    lo, hi = _bounds_values(t)
    low = -size if allow_negative else 0
    bad = hi if hi >= size else (lo if lo < low else None)
    if bad is not None:
        raise IndexError(f"{what}index {bad} is out of bounds for dimension {dim} with size {size}")


def _device_flag(index: int):
    """Device ``index``'s error flag, noted as used by a kernel about to be queued on its current stream."""
    stream = cuda.current_stream(index)
    flag = device_asserts.get(index)
    if flag is None:
        if memory.capturing:
            raise memory.CaptureError(
                "the first device-side index check on this device cannot run while a CUDA graph is being "
                "captured: it allocates the device's error flag. Warm up (run the step once) before capturing.")
        prev = cuda.current_device()
        if prev != index:
            cuda.set_device(index)
        try:
            flag = device_asserts.create(index, stream)
        finally:
            if prev != index:
                cuda.set_device(prev)
    device_asserts.used(flag, stream, bool(memory.capturing) and id(stream) in memory.capturing)
    return flag


def device_check(t: Tensor, size: int, dim: int, allow_negative: bool, what: str = "", site: int | None = None):
    """How the indices of ``t`` are checked against ``size`` along ``dim``: a host tensor here and
    now (:func:`_bounds`, an IndexError before any kernel), returning None; a device tensor by the
    kernels that read it, returning ``(flag, low, header)`` for them (the device's error flag, the
    lowest index allowed, the failure's header: ``site`` or "{what}index N is out of bounds ...")."""
    if t.device.type == "cpu":
        _bounds(t, size, dim, allow_negative, what)
        return None
    if t.numel() == 0:
        return None
    sid = device_asserts.site(what) if site is None else site
    return _device_flag(t.device.index), (-size if allow_negative else 0), device_asserts.header(sid, dim, size)


def dim_check(t: Tensor, size: int, dim: int, what: str = ""):
    """:func:`device_check` for the ops taking only 0 <= index < size (gather, scatter ...), in the
    form their kernels take: None or ``(flag, header)``."""
    c = device_check(t, size, dim, False, what)
    return None if c is None else (c[0], c[2])


def check_now(t: Tensor, size: int, dim: int, allow_negative: bool, what: str = "") -> None:
    """Check ``t`` for an op written with other ops, so a failure names it: on the host (at once),
    or by a check-only kernel recording into the device's flag (reported at the next sync)."""
    c = device_check(t, size, dim, allow_negative, what)
    if c is not None:
        _k.check_bounds(t, c[1], size, (c[0], c[2]))


def nonzero_coords(mask: Tensor) -> Tensor:
    """int64 (mask.ndim, count): the coordinates of the True elements, row-major order."""
    n = mask.numel()
    if n == 0:
        return TensorBase._empty((mask.ndim, 0), dt.int64, mask.device)
    nblocks = -(-n // _k.nonzero_block())
    counts = TensorBase._empty((nblocks,), dt.int64, mask.device)
    _k.mask_block_counts(mask, counts)
    c = counts._to_host_array()  # the host sync: the result's size
    total = int(c.sum())
    out = TensorBase._empty((mask.ndim, total), dt.int64, mask.device)
    if total:
        starts = host_tensor(np.concatenate([[0], np.cumsum(c)[:-1]]).astype(np.int64), mask.device)
        _k.nonzero_fill(mask, starts, out)
    return out


class Plan:
    """Where ``x[index]`` reads: ``view`` (x after the basic indices), the advanced dims of the
    view with their checked index buffer (int64 (K, *B)), and the result's layout."""

    __slots__ = ("basic", "adv_dims", "idx", "B", "out_shape", "perm", "rest_dims", "unique", "check")

    def dense_view(self, t: Tensor) -> Tensor:
        """``t`` (shaped like the result) seen in B + rest order, the kernels' dense layout."""
        return t.permute(self.perm) if self.perm != tuple(range(len(self.perm))) else t

    def run(self, mode: str, x: Tensor, dense: Tensor) -> None:
        """Run the planned indexing kernel: ``mode`` 'gather' reads ``x[index]`` into ``dense``, the other
        modes write or accumulate ``dense`` into ``x`` at the planned positions."""
        v = _views.basic_getitem(x, self.basic)
        sizes = [v.shape[d] for d in self.adv_dims]
        winner = None
        rows = int(np.prod(self.B, dtype=np.int64))
        if mode == "put" and not self.unique and rows > 1 and dense.numel():
            # Index rows may repeat: the kernel resolves them to the last row, whatever the order
            # of the GPU's programs (one int per position of the indexed dims, all -1 at first).
            cells = int(np.prod(sizes, dtype=np.int64))
            winner = TensorBase._empty((cells,), dt.int32 if rows < 2**31 else dt.int64, x.device).fill_(-1)
        if x.dtype in dt.FLOAT8:  # float8 elements move as bytes; accumulating into them is arithmetic torch refuses
            if mode not in ("gather", "put"):
                raise NotImplementedError(f"\"index_put\" with accumulate=True not implemented for "
                                          f"'{x.dtype.type_name}'")
            v, dense = float8_bytes(v), float8_bytes(dense)
        _k.index_nd(mode, self.dense_view(dense), v, self.idx,
                    [v.stride(d) for d in self.adv_dims], sizes,
                    [v.shape[d] for d in self.rest_dims], [v.stride(d) for d in self.rest_dims], winner, self.check)


def plan(x: Tensor, index, alias_index: bool = False) -> Plan:
    """Check ``index`` against ``x`` (types, mask shapes, bounds) and lay out ``x[index]``.

    An item ``("checked", t)`` is an index tensor known to be in range (a mask's coordinates);
    ``("checked", t, c)`` one whose check :func:`device_check` has settled (``c``: None, or the
    kernel's). ``alias_index``: a single contiguous int64 index tensor is read in place rather
    than copied into the plan's buffer (callers whose plan outlives no change of the index)."""
    items = list(index) if isinstance(index, tuple) else [index]
    items = [_as_index_tensor(i, x.device) if _is_adv(i) else i for i in items]
    for i in items:
        if isinstance(i, bool) or (isinstance(i, TensorBase) and i.ndim == 0 and i.dtype is dt.bool_):
            raise IndexError("indexing with a bool scalar (x[True], x[tensor(True)]) is not supported")
        if isinstance(i, TensorBase) and i.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")

    def consumed(i):
        if i is None or i is Ellipsis:
            return 0
        return i.ndim if isinstance(i, TensorBase) and i.dtype is dt.bool_ else 1

    n_real = sum(consumed(i) for i in items)
    if n_real > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    expanded = []
    for i in items:
        expanded.extend([slice(None)] * (x.ndim - n_real) if i is Ellipsis else [i])
    # Masks become their coordinate tensors (one per mask dim); x's dims are tracked to check shapes.
    flat, d, n_masks = [], 0, 0
    for i in expanded:
        if isinstance(i, TensorBase) and i.dtype is dt.bool_:
            n_masks += 1
            for j, s in enumerate(i.shape):
                if s != x.shape[d + j]:
                    raise IndexError(f"The shape of the mask {list(i.shape)} at index {j} does not match the shape "
                                     f"of the indexed tensor {list(x.shape)} at index {d + j}")
            coords = nonzero_coords(i)
            flat.extend(("checked", coords[j], None) for j in range(i.ndim))
            d += i.ndim
        else:
            flat.append(i)
            d += 0 if i is None else 1
    # Basic indices first (a view); record where each index tensor lands in that view.
    basic, adv, vd = [], [], 0
    for i in flat:
        if isinstance(i, tuple) or isinstance(i, TensorBase) and i.ndim > 0:
            adv.append((vd, i))
            basic.append(slice(None))
            vd += 1
        else:
            basic.append(i)
            if not isinstance(i, (int, np.integer, TensorBase)):  # ints (and 0-d int tensors) drop their dim
                vd += 1
    basic = tuple(basic)
    view = _views.basic_getitem(x, basic)
    tensors, checks = [], []
    for vdim, i in adv:
        if isinstance(i, tuple):
            t, c = i[1], (i[2] if len(i) > 2 else None)
        else:
            t, c = i, device_check(i, view.shape[vdim], vdim, allow_negative=True)
        tensors.append(t if t.device == x.device else t.to(x.device))
        checks.append(c)
    B = broadcast_shapes(*(t.shape for t in tensors))
    p = Plan()
    p.basic = basic
    p.adv_dims = tuple(vdim for vdim, _ in adv)
    p.rest_dims = tuple(k for k in range(view.ndim) if k not in p.adv_dims)
    t0 = tensors[0]
    if (alias_index and len(tensors) == 1 and t0.dtype is dt.int64 and tuple(t0.shape) == tuple(B)
            and t0.is_contiguous()):
        idx = t0.reshape((1,) + tuple(B))  # a view: no copy kernel
    else:
        idx = TensorBase._empty((len(tensors),) + tuple(B), dt.int64, x.device)
        for k, t in enumerate(tensors):
            if idx[k].numel():
                idx[k].copy_(t.expand(B))
    p.idx, p.B = idx, tuple(B)
    if any(c is not None for c in checks):  # the kernel checks the device tensors' indices
        flag = next(c[0] for c in checks if c is not None)
        sizes = [view.shape[vd] for vd in p.adv_dims]
        p.check = (flag, tuple(-n if c is None else c[1] for n, c in zip(sizes, checks)),
                   tuple(0 if c is None else c[2] for c in checks))
    else:
        p.check = None
    # One mask and nothing else advanced: its coordinates name each position once.
    p.unique = len(adv) == sum(1 for _vd, i in adv if isinstance(i, tuple)) and n_masks == 1
    nb, a = len(B), p.adv_dims[0]
    adjacent = p.adv_dims == tuple(range(a, a + len(p.adv_dims)))
    rest = [view.shape[k] for k in p.rest_dims]
    if adjacent:
        p.out_shape = tuple(rest[:a]) + p.B + tuple(rest[a:])
        p.perm = tuple(range(a, a + nb)) + tuple(range(a)) + tuple(range(a + nb, len(p.out_shape)))
    else:
        p.out_shape = p.B + tuple(rest)
        p.perm = tuple(range(len(p.out_shape)))
    return p


def getitem(x: Tensor, index) -> Tensor:
    """``x[index]`` with integer index tensors / lists / bool masks (a copy, as in PyTorch)."""
    return getitem_planned(x, plan(x, index))


def getitem_planned(x: Tensor, p: Plan) -> Tensor:
    """``x[index]`` for an index already planned (the plan is reused by the derivative): a fresh tensor
    gathered by one kernel."""
    out = TensorBase._empty(p.out_shape, x.dtype, x.device)
    p.run("gather", x, out)
    return out


def _value_tensor(value, like: Tensor, shape, what: str) -> Tensor:
    if isinstance(value, TensorBase):
        if value.device != like.device:
            value = value.to(like.device)
    elif isinstance(value, (numbers.Number, np.number, np.bool_)) and not isinstance(value, complex):
        value = full_like_scalar(value, like, like.dtype)
    else:
        raise TypeError(f"{what}: value must be a Tensor or a Python number, got {type(value).__name__}")
    try:
        broadcast_shapes(value.shape, shape)
    except RuntimeError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to "
                           f"indexing result of shape {list(shape)}") from None
    if value.ndim > len(shape):  # leading 1s, as PyTorch allows
        value = value.reshape(value.shape[value.ndim - len(shape):])
    return value.expand(shape)


def setitem(x: Tensor, index, value) -> None:
    """``x[index] = value`` with advanced indices (``index_put_`` without accumulate). Where
    indices repeat, the last value is written, as in NumPy, in both modes (PyTorch leaves it
    unspecified, and its CUDA kernel's pick varies)."""
    if x.dtype in dt.BAREBONES_UNSIGNED:  # torch writes a bool mask with masked_fill, other indices with index_put
        mask = isinstance(index, TensorBase) and index.dtype is dt.bool_
        dt.refuse_barebones(x.dtype, "masked_fill" if mask else "index_put")
    p = plan(x, index)
    value = _value_tensor(value, x, p.out_shape, "index_put_")
    _check_writable(_views.basic_getitem(x, p.basic), "index_put_")
    if _overlaps(x, value) or value._storage is x._storage:
        value = value.clone()
    p.run("put", x, value)
    x._bump_version()


# ----- dim-wise ops ------------------------------------------------------------------------------
def _check_index(index, op: str, int64_only=False) -> None:
    if not isinstance(index, TensorBase):
        raise TypeError(f"{op}(): argument 'index' must be Tensor, not {type(index).__name__}")
    allowed = (dt.int64,) if int64_only else _INDEX_DTYPES
    if index.dtype not in allowed:
        names = "int64" if int64_only else "int32/int64"
        raise RuntimeError(f"{op}(): Expected dtype {names} for index")


def _check_input(x, op: str, name="input") -> None:
    if not isinstance(x, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(x).__name__}")


def _check_devices(op, *ts):
    devs = {t.device for t in ts}
    if len(devs) > 1:
        a, b = sorted(devs, key=str)[:2]
        raise RuntimeError(f"{op}(): Expected all tensors to be on the same device, but found at least two devices, "
                           f"{a} and {b}!")


def _acc_dtype(d: dt.dtype) -> dt.dtype:
    """The policy's atomic accumulator, bool refused: an atomic add of bools has no torch meaning here."""
    if d is dt.bool_:
        raise RuntimeError("scatter_add/index_add: bool tensors are not supported (no atomic add for bool)")
    return dtype_policy.atomic_accumulator(d)


def index_select(input, dim, index) -> Tensor:
    """torch.index_select: the slices of ``input`` along ``dim`` at the int32/int64 positions of the 1-D
    ``index``, in its order (a copy); out-of-range positions raise."""
    _check_input(input, "index_select")
    dt.refuse_barebones(input.dtype, "index_select")
    _check_index(index, "index_select")
    _check_devices("index_select", input, index)
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if input.ndim == 0:
        raise IndexError("index_select(): a 0-dim input is not supported")
    d = normalize_dim(dim, input.ndim)
    return take(input, d, index.reshape(-1), device_check(index, input.shape[d], d, False, "index_select(): "))


def take(input, d: int, index, check) -> Tensor:
    """``input.index_select(d, index)`` after the checks: ``index`` a 1-d int tensor on input's
    device, ``check`` what :func:`device_check` said of it (an int64 index is read in place)."""
    return getitem_planned(input, plan(input, (slice(None),) * d + (("checked", index, check),), alias_index=True))


def index_add(input, dim, index, source, *, alpha=1, out=None) -> Tensor:
    """out = input with ``out.index_select(dim, index) += alpha * source`` (duplicates accumulate)."""
    op = "index_add_" if out is input else "index_add"
    _check_input(input, op)
    _check_index(index, op)
    _check_input(source, op, "source")
    _check_devices(op, input, index, source)
    d = normalize_dim(dim, max(input.ndim, 1))
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector")
    index = index.reshape(-1)
    want = list(input.shape)
    want[d] = index.numel()
    if list(source.shape) != want:
        raise RuntimeError(f"{op}(): source of shape {list(source.shape)} does not match the expected shape {want} "
                           f"(input's shape with dim {d} of size len(index))")
    acc_dt = _acc_dtype(input.dtype)
    check = device_check(index, input.shape[d], d, False, f"{op}(): ")
    if out is input:
        _check_writable(input, op)
    if alpha != 1:
        source = source * alpha
    acc = input.to(acc_dt) if (acc_dt is not input.dtype or out is not input) else input
    if acc is input and out is not input:
        acc = input.clone()
    p = plan(acc, (slice(None),) * d + (("checked", index, check),), alias_index=True)
    p.run("add", acc, source)
    if out is input:
        if acc is not input:
            input.copy_(acc)
        input._bump_version()
        return input
    return acc if acc.dtype is input.dtype else acc.to(input.dtype)


def _check_gather_shapes(op, input, d, index, src=None):
    if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as input tensor")
    for k in range(index.ndim):
        if k != d and index.shape[k] > input.shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(index.shape)} to be "
                               f"smaller than self {list(input.shape)} apart from dimension {d}")
        if src is not None and index.shape[k] > src.shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(index.shape)} to be "
                               f"smaller than src {list(src.shape)}")


def gather(input, dim, index) -> Tensor:
    """torch.gather: ``out[i][j] = input[index[i][j]][j]`` along ``dim`` (int64 ``index`` of the output's
    shape, no larger than input off ``dim``)."""
    _check_input(input, "gather")
    dt.refuse_barebones(input.dtype, f"scatter_gather_tensor_{input.device.type}")
    _check_index(index, "gather", int64_only=True)
    _check_devices("gather", input, index)
    d = normalize_dim(dim, max(input.ndim, 1))
    _check_gather_shapes("gather", input, d, index)
    check = dim_check(index, input.shape[d] if input.ndim else 1, d)
    out = TensorBase._empty(index.shape, input.dtype, input.device)
    x = input.reshape(1) if input.ndim == 0 else input
    ix = index.reshape(1) if index.ndim == 0 else index
    _k.index_dim("gather", out.reshape(ix.shape), x, ix, d, check)
    return out


def scatter_add(input, dim, index, src, *, out=None) -> Tensor:
    """out = input with ``out[..., index[i], ...] += src[i]`` along ``dim`` (duplicates accumulate)."""
    op = "scatter_add_" if out is input else "scatter_add"
    _check_input(input, op)
    _check_index(index, op, int64_only=True)
    _check_input(src, op, "src")
    _check_devices(op, input, index, src)
    if src.dtype is not input.dtype:
        raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype")
    if input.ndim == 0 or index.ndim != input.ndim or src.ndim != input.ndim:
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as self and src "
                           "(0-dim tensors are not supported)")
    d = normalize_dim(dim, input.ndim)
    _check_gather_shapes(op, input, d, index, src)
    acc_dt = _acc_dtype(input.dtype)
    check = dim_check(index, input.shape[d], d)
    if out is input:
        _check_writable(input, op)
    acc = input.to(acc_dt) if acc_dt is not input.dtype else (input if out is input else input.clone())
    src_view = _views.basic_getitem(src, tuple(slice(0, n) for n in index.shape))
    _k.index_dim("add", src_view, acc, index, d, check)
    if out is input:
        if acc is not input:
            input.copy_(acc)
        input._bump_version()
        return input
    return acc if acc.dtype is input.dtype else acc.to(input.dtype)


# ----- the table's entries that are not the functions above ---------------------------------------
def scatter_add_(input, dim, index, src) -> Tensor:
    """``Tensor.scatter_add_``: ``self[index[i][j]][j] += src[i][j]`` along ``dim``, in place (atomic adds in
    a wider accumulator)."""
    return scatter_add(input, dim, index, src, out=input)


def index_add_(input, dim, index, source, *, alpha=1) -> Tensor:
    """``Tensor.index_add_``: ``alpha * source``'s slices added to ``self``'s at the positions of ``index``
    along ``dim``, in place."""
    return index_add(input, dim, index, source, alpha=alpha, out=input)


def getitem_any(input, index) -> Tensor:
    """``x[index]``: a view for basic indices (ints, slices, None, ...), a copy for advanced ones."""
    if is_advanced(index):  # integer index tensors, lists, bool masks
        return getitem(input, index)
    return _views.basic_getitem(input, index)


def setitem_any(input, index, value) -> None:
    """``x[index] = value``: ``index_put_`` for advanced indices, else a write into the view."""
    if is_advanced(index):
        return setitem(input, index, value)
    target = input[index]
    if isinstance(value, TensorBase):
        target.copy_(value)
    else:
        target.fill_(value)
