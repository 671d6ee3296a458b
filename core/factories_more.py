"""torch's remaining factories: ``empty_strided`` and ``empty_permuted`` (a layout chosen by the
caller), ``scalar_tensor``, ``asarray`` (torch's array-API constructor: share memory unless told
to copy), ``frombuffer`` (a CPU tensor over a Python buffer's bytes) and the deprecated ``range``
(the end included). Kept apart from ``factories.py`` and ``creation.py``, which each keep one
topic: these make a tensor of a given memory layout or adopt memory that exists. Kernels: none but
``arange``'s (``triton_kernels/random.py``) and the fills ``full`` runs.
"""
from __future__ import annotations

import builtins
import math
import numbers
import warnings

import numpy as np

from ..triton_kernels import random as _rand
from ..runtime import dtype as dt
from .creation import as_tensor
from .factories import _device, _dtype, _finish, from_numpy, full, tensor
from .shape import _shape_arg, check_layout, strided
from .tensor import Tensor


_TORCH = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
          "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _sizes(size, name: str, op: str) -> tuple:
    out = tuple(_shape_arg((size,), name))
    for s in out:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, but found element of type "
                            f"{type(s).__name__}")
    return tuple(int(s) for s in out)


def _strided(size: tuple, stride: tuple, d: dt.dtype, dev, op: str) -> Tensor:
    """A new tensor of ``size`` laid out with ``stride`` over a storage just large enough for it."""
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                           f"({len(stride)})")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: {list(size)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    store = Tensor._empty((extent,), d, dev)
    return Tensor(store._storage, size, stride, 0, d)


def empty_strided(size, stride, *, dtype=None, layout=strided, device=None, requires_grad=False,
                  pin_memory=False) -> Tensor:
    """An uninitialised tensor of ``size`` with the given ``stride`` (element steps per dim)."""
    check_layout(layout, "empty_strided")
    t = _strided(_sizes(size, "size", "empty_strided"), _sizes(stride, "stride", "empty_strided"), _dtype(dtype),
                 _device(device), "empty_strided")
    return _finish(t, requires_grad, pin_memory)


def empty_permuted(size, physical_layout, *, dtype=None, layout=strided, device=None, requires_grad=False,
                   pin_memory=False) -> Tensor:
    """An uninitialised tensor of ``size`` whose dims lie in memory in the order ``physical_layout``
    (outermost first): ``empty_permuted((N, C, H, W), (0, 2, 3, 1))`` is channels-last."""
    check_layout(layout, "empty_permuted")
    size = _sizes(size, "size", "empty_permuted")
    perm = _sizes(physical_layout, "physical_layout", "empty_permuted")
    if len(size) != len(perm):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the physical_layout; i.e. "
                           f"len(size) = {len(size)} is not equal to len(physical_layout) = {len(perm)}")
    if sorted(perm) != list(builtins.range(len(size))):  # this module's range is torch's
        raise RuntimeError(f"physical_layout must be a permutation of the dims, got {list(perm)}")
    stride = [0] * len(size)
    step = 1
    for d in reversed(perm):
        stride[d] = step
        step *= max(size[d], 1)
    t = _strided(size, tuple(stride), _dtype(dtype), _device(device), "empty_permuted")
    return _finish(t, requires_grad, pin_memory)


def scalar_tensor(s, *, dtype=None, layout=strided, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """A 0-D tensor holding the number ``s``, of the default dtype unless ``dtype`` says."""
    check_layout(layout, "scalar_tensor")
    if isinstance(s, Tensor):
        s = s.item()
    if not isinstance(s, (numbers.Number, np.number)):
        raise TypeError(f"scalar_tensor(): argument 's' must be Number, not {type(s).__name__}")
    return full((), s, dtype=_dtype(dtype), device=device, requires_grad=requires_grad, pin_memory=pin_memory)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False) -> Tensor:
    """``obj`` (a tensor, a NumPy array, a buffer, a number or a nested sequence) as a tensor:
    sharing its memory when nothing must change, unless ``copy=True``; ``copy=False`` refuses to
    copy where sharing is impossible."""
    want_dt = None if dtype is None else dt.to_dtype(dtype)
    if isinstance(obj, Tensor):
        same = (want_dt is None or want_dt is obj.dtype) and (device is None or _device(device) == obj.device)
        if copy is False and not same:
            if want_dt is not None and want_dt is not obj.dtype:
                raise ValueError(f"can't alias tensor with dtype '{_TORCH[obj.dtype.name]}' into dtype "
                                 f"'{_TORCH[want_dt.name]}'.")
            raise ValueError(f"can't alias tensor on device '{obj.device}' into device '{_device(device)}'.")
        out = obj.to(device=_device(device) if device is not None else obj.device, dtype=want_dt or obj.dtype)
        out = out.clone() if copy and out is obj else out
    elif isinstance(obj, np.ndarray) or (hasattr(obj, "__array_interface__") or isinstance(obj, (bytes, bytearray,
                                                                                              memoryview))):
        arr = obj if isinstance(obj, np.ndarray) else np.asarray(memoryview(obj)) if not hasattr(
            obj, "__array_interface__") else np.asarray(obj)
        shareable = arr.dtype in [d.np for d in dt.ALL] and all(s >= 0 for s in arr.strides)
        if copy is False and not shareable:
            raise ValueError("can't alias NumPy array of this dtype or these strides into a tensor.")
        if copy is False and want_dt is not None and want_dt.np != arr.dtype:
            raise ValueError(f"can't alias tensor with dtype '{_TORCH[dt.from_numpy_dtype(arr.dtype).name]}' into "
                             f"dtype '{_TORCH[want_dt.name]}'.")
        if copy is False and device is not None and _device(device).type != "cpu":
            raise ValueError(f"can't alias tensor on device 'cpu' into device '{_device(device)}'.")
        out = as_tensor(np.array(arr) if copy else arr, dtype=want_dt, device=device)
    else:
        if copy is False:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        out = tensor(obj, dtype=want_dt, device=device)
    if requires_grad:
        out = out.detach() if out is obj else out
        out.requires_grad_(True)
    return out


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False) -> Tensor:
    """A 1-D CPU tensor over the bytes of ``buffer`` (any object of the buffer protocol), from
    byte ``offset``, ``count`` elements of ``dtype`` (all that fit, by default): the memory is
    shared, as torch's."""
    d = dt.to_dtype(dtype)
    view = memoryview(buffer)
    length = view.nbytes
    if length == 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if offset < 0 or offset >= length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % d.itemsize:
            raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be a "
                             f"multiple of element size ({d.itemsize})")
        count = (length - offset) // d.itemsize
    elif offset + count * d.itemsize > length:
        raise ValueError(f"requested buffer length ({count} * {d.itemsize} bytes) after offset ({offset} bytes) "
                         f"must not be greater than actual buffer length ({length} bytes)")
    if view.readonly:
        warnings.warn("The given buffer is not writable, and PyTorch does not support non-writable tensors. This "
                      "means you can write to the underlying (supposedly non-writable) buffer using the tensor.",
                      UserWarning, stacklevel=2)
    arr = np.frombuffer(buffer, dtype=np.uint8, count=count * d.itemsize, offset=offset)
    t = from_numpy(arr.view(d.np))
    return _finish(t, requires_grad)


def range(start=0, end=None, step=1, *, dtype=None, layout=strided, device=None, requires_grad=False) -> Tensor:
    """Deprecated: ``start, start + step, ...`` up to and including ``end``, in the default dtype."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    check_layout(layout, "range")
    if end is None:
        raise TypeError("range() missing required argument 'end'")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    n = int(math.floor((end - start) / step)) + 1
    t = Tensor._empty((n,), _dtype(dtype), _device(device))
    _rand.arange(t, start, step)
    return _finish(t, requires_grad)
