"""The one place a Triton kernel is launched, in either execution mode.

CPU mode: Triton's interpreter runs the kernel. It wants argument objects that look like
torch tensors just enough to be "copied to the host" (see DESIGN.md); :class:`_HostArg` is that
shape over a host storage, and since the storage *is* host memory the copies are identities.
The interpreter patches ``triton.language`` per launch and is not thread-safe, so launches are
serialised by a lock.

GPU mode: kernels compile for the device and go on ``tritensor.cuda.current_stream()``:
Triton's ``driver.active.get_current_stream`` is pointed at it once. A host tensor handed to a
kernel in GPU mode is staged through a temporary device buffer and copied back, so ops on CPU
tensors still work (slowly, like any host<->device round trip).
"""
from __future__ import annotations

import threading

import numpy as np

from . import memory, mode

_interp_lock = threading.Lock()
_hooked = False


def _fix_interpreter_bf16() -> None:
    """Make the interpreter's bf16 conversions round like the GPU (and ml_dtypes) do.

    Triton 3.9's interpreter converts fp32 -> bf16 by truncation (its RTNE branch only runs
    when a rounding mode is passed), mishandles subnormals, and routes other bf16 casts through
    NumPy on the raw uint16 bits. Hardware ``cvt.rn.bf16.f32`` rounds to nearest even, so we
    route every conversion that touches bf16 through ml_dtypes, which does the same.
    """
    import ml_dtypes
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    if getattr(builder, "_tritensor_bf16_fixed", False):
        return
    orig_cast, orig_fp_to_fp = builder.cast_impl, builder.create_fp_to_fp

    def _bf16_cast(src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        data = src.data.view(ml_dtypes.bfloat16) if s == tl.bfloat16 else src.data
        if d == tl.bfloat16:
            return interp.TensorHandle(data.astype(ml_dtypes.bfloat16).view(np.uint16), d)
        return interp.TensorHandle(data.astype(interp._get_np_dtype(dst_type)), d)

    def cast_impl(self, src, dst_type):
        if tl.bfloat16 in (src.dtype.scalar, dst_type.scalar):
            return _bf16_cast(src, dst_type)
        return orig_cast(self, src, dst_type)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if tl.bfloat16 in (src.dtype.scalar, dst_type.scalar):
            return _bf16_cast(src, dst_type)
        return orig_fp_to_fp(self, src, dst_type, rounding_mode)

    builder.cast_impl, builder.create_fp_to_fp = cast_impl, create_fp_to_fp
    builder._tritensor_bf16_fixed = True


if mode.CPU:
    _fix_interpreter_bf16()


class _HostArg:
    """What the interpreter needs from a tensor argument: a pointer, a dtype, a storage."""

    __slots__ = ("_storage", "dtype", "_offset", "_size", "_stride")

    def __init__(self, storage, dtype, offset=0, size=(), stride=()):
        self._storage, self.dtype, self._offset, self._size, self._stride = storage, dtype, offset, size, stride

    def data_ptr(self) -> int:
        return self._storage.data_ptr() + self._offset * self.dtype.itemsize

    def untyped_storage(self):
        return self._storage

    def storage_offset(self) -> int:
        return self._offset

    def size(self):
        return self._size

    def stride(self):
        return self._stride

    def new_empty(self, *args, **kwargs):
        return _HostArg(None, self.dtype)

    def set_(self, storage, offset, size, stride):
        self._storage, self._offset, self._size, self._stride = storage, offset, size, stride
        return self

    def copy_(self, other):
        return self


class _DevArg:
    """A device pointer standing in for a host tensor staged to the GPU (GPU mode only)."""

    __slots__ = ("_ptr", "dtype")

    def __init__(self, ptr, dtype):
        self._ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self._ptr


def _hook_triton_stream() -> None:
    global _hooked
    from triton.runtime import driver

    from . import cuda

    active = driver.active
    active.get_current_stream = lambda device=None: cuda.current_stream(device).cuda_stream
    active.get_current_device = cuda.current_device
    active.set_current_device = cuda.set_device
    _hooked = True


def launch(kernel, grid, *args, **kwargs) -> None:
    """Run ``kernel[grid](*args, **kwargs)``; Tensor arguments are passed by pointer."""
    from .tensor import Tensor

    if mode.CPU:
        conv = [
            _HostArg(a._storage, a.dtype, a._offset, a._shape, a._stride) if isinstance(a, Tensor) else a for a in args
        ]
        # Masked-off lanes still compute in the interpreter (log of padding, ...): silence them.
        with _interp_lock, np.errstate(all="ignore"):
            kernel[grid](*conv, **kwargs)
        return

    if not _hooked:
        _hook_triton_stream()
    from . import cuda

    stream = cuda.current_stream()  # also makes the device's context current in this thread
    staged: dict[int, tuple] = {}  # id(host storage) -> (host storage, device storage)
    conv = []
    for a in args:
        if not isinstance(a, Tensor):
            conv.append(a)
            continue
        st = a._storage
        if isinstance(st, memory.HostStorage):
            if id(st) not in staged:
                dst = memory.CudaStorage(st.nbytes, _default_cuda(), stream)
                memory.host_to_device(dst.data_ptr(), st.bytes_view(), stream)
                staged[id(st)] = (st, dst)
            conv.append(_DevArg(staged[id(st)][1].data_ptr() + a._offset * a.dtype.itemsize, a.dtype))
        else:
            st.record_stream(stream)
            conv.append(a)
    kernel[grid](*conv, **kwargs)
    for host, dev in staged.values():
        memory.device_to_host(host.bytes_view(), dev.data_ptr(), stream)


def _default_cuda():
    from . import cuda
    from .device import device

    return device("cuda", cuda.current_device())

