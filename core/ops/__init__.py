"""Tensor-level ops: check arguments, broadcast, promote, allocate, then run a kernel.

Each family lives in its own module beside the kernels it calls (``elementwise.py`` calls
``triton_kernels/elementwise.py`` and so on). This module holds the moves every op needs:
copying between layouts/dtypes, filling, and crossing devices.
"""
from __future__ import annotations

import numpy as np

from ...triton_kernels import copies as _copies_k
from ...triton_kernels import float8 as _float8_k
from ...runtime import cuda, memory
from ...runtime import dtype as dt
from ...runtime.device import CPU
from ..tensor_base import TensorBase


def _check_writable(dst, what: str) -> None:
    if dst.numel() > 1 and any(st == 0 and n > 1 for n, st in zip(dst.shape, dst.stride())):
        raise RuntimeError(
            f"{what}: unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location (it is expanded). Please clone() the tensor before performing the operation."
        )


def _overlaps(a, b) -> bool:
    """Do two tensors' byte ranges in the same storage intersect (and are they not the same view)?"""
    if a._storage is not b._storage or a.numel() == 0 or b.numel() == 0:
        return False
    if a._offset == b._offset and a.shape == b.shape and a.stride() == b.stride() and a.dtype is b.dtype:
        return False
    def span(t):
        lo = t._offset * t.dtype.itemsize
        hi = lo + (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.dtype.itemsize
        return lo, hi
    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


def copy_into(dst, src) -> None:
    """dst[...] = src for same-shape tensors on one device; casts dtype, any strides."""
    if dst.device != src.device:
        raise RuntimeError(f"copy: expected tensors on one device, got dst on {dst.device} and src on {src.device}")
    _check_writable(dst, "copy_")
    if _overlaps(dst, src):
        src = src.clone()
    if dst.dtype in dt.FLOAT8 or src.dtype in dt.FLOAT8:
        if dst.dtype is src.dtype:  # the same format: a byte copy
            _copies_k.copy(float8_bytes(dst), float8_bytes(src))
        else:
            _float8_k.cast(float8_bytes(dst), float8_bytes(src), _float8_k.FORMATS.get(dst.dtype.name, 0),
                           _float8_k.FORMATS.get(src.dtype.name, 0))
        return
    _copies_k.copy(dst, src)


def float8_bytes(t):
    """A float8 tensor's bytes: a uint8 view of the same elements, what the kernels read and write (a
    tensor of any other dtype as it is)."""
    if t.dtype not in dt.FLOAT8:
        return t
    out = t._view(t._shape, t._stride)
    out.dtype = dt.uint8
    return out


def fill(dst, value) -> None:
    """dst[...] = value, no version bump (for a fresh tensor; fill_ bumps): refuses an expanded (overlapping)
    destination, as copy_into does."""
    _check_writable(dst, "fill_")
    if dst.dtype in dt.FLOAT8:
        _float8_k.fill(float8_bytes(dst), float(value), _float8_k.FORMATS[dst.dtype.name])
        return
    _copies_k.fill(dst, value)


def move(src, dev, dtype_):
    """Copy ``src`` to another device (and dtype): contiguous bytes over pinned host memory."""
    if src.dtype is not dtype_ and src.device.type == "cuda":
        src = src.to(dtype_)  # convert where the data is, move fewer bytes if narrowing
    if not (src.device.type == "cuda" or dev.type == "cuda"):
        return _move(src, dev, dtype_)
    # Allocating on another device and asking for its stream make that device's context current;
    # the current device's cached stream (what the next op queues on) assumes its own, so it is
    # made current again after the copy.
    try:
        return _move(src, dev, dtype_)
    finally:
        cuda._cu_device(cuda.current_device())


def _move(src, dev, dtype_):
    # A strided device source is made dense first, on its own device's stream: allocating ``out`` on
    # another device makes that device's context current, and a kernel launched after it would go
    # to that device's stream, out of order with the work that wrote ``src``.
    src_c = src.contiguous() if src.device.type == "cuda" and dev.type == "cuda" else src
    out = TensorBase._empty(src.shape, src.dtype, dev)
    if src.device.type == "cpu":  # host -> device
        host = np.ascontiguousarray(src.numpy(force=True))
        memory.host_to_device(out.data_ptr(), host.reshape(-1).view(np.uint8), cuda.current_stream(dev.index))
    elif dev.type == "cpu":  # device -> host
        host = out.numpy(force=True).reshape(-1).view(np.uint8)
        # A raw pointer keeps nothing alive: the contiguous copy (a temporary when ``src`` is
        # strided) is held by name until its bytes are copied, or the pool could reuse it first.
        src_c = src.contiguous()
        memory.device_to_host(host, src_c.data_ptr(), cuda.current_stream(src.device.index))
    else:  # device -> device
        dst_stream = cuda.current_stream(dev.index)
        dst_stream.wait_stream(cuda.current_stream(src.device.index))
        cuda._cu_device(dev.index)  # the copy is queued in the destination's context, on its stream
        memory.device_to_device(out.data_ptr(), src_c.data_ptr(), src.nbytes, dst_stream)
        src_c.record_stream(dst_stream)  # the copy reads it there, asynchronously
    return out if out.dtype is dtype_ else out.to(dtype_)


def host_tensor(a: np.ndarray, dev):
    """A tensor on ``dev`` holding a copy of the host array ``a`` (its dtype must be one of ours)."""
    out = TensorBase._empty(a.shape, dt.from_numpy_dtype(a.dtype), CPU)
    out.numpy(force=True)[...] = a
    return out if dev == CPU else out.to(dev)
