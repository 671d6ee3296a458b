"""The one place a Triton kernel is launched, in either execution mode.

:func:`launch` knows nothing of ``Tensor``: an argument is a *kernel buffer* when its type
offers the buffer protocol below, and is passed to the kernel as a pointer; anything else
(ints, floats, tuples, dtypes) goes to Triton unchanged.

CPU mode: Triton's interpreter runs the kernel on host memory through :class:`HostArg`
(``runtime/interpreter.py``, which also holds every fix-up tritensor makes to the interpreter).
The interpreter keeps global state and is not thread-safe, so launches are serialised by a lock.

GPU mode: kernels compile for the device and go on ``tritensor.cuda.current_stream()``:
Triton's ``driver.active.get_current_stream`` is pointed at it once. A host buffer handed to a
kernel in GPU mode is staged through a temporary device buffer and copied back, so ops on CPU
tensors still work (slowly, like any host<->device round trip).
"""
from __future__ import annotations

import dataclasses
import threading

import numpy as np

from . import cuda, interpreter, launch_log, memory, mode
from .device import device
from .interpreter import HostArg
from triton.tools.tensor_descriptor import TensorDescriptor  # after .mode: it chose the interpreter or not

if mode.CPU:
    interpreter.apply_fixups()
    HEAP_PAD_KEPT = interpreter.keep_heap_pad()

_interp_lock = threading.Lock()
_hooked = False


class _DevArg:
    """A kernel buffer in device memory (its own, or a host buffer staged to the GPU): GPU mode only."""

    __slots__ = ("_ptr", "dtype")

    def __init__(self, ptr, dtype):
        self._ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self._ptr


def _hook_triton_stream() -> None:
    global _hooked
    from triton.runtime import driver  # GPU mode only: the CPU path never touches Triton's driver

    active = driver.active
    active.get_current_stream = lambda device=None: cuda.current_stream(device).cuda_stream
    active.get_current_device = cuda.current_device
    active.set_current_device = cuda.set_device
    _hooked = True


def launch(kernel, grid, *args, **kwargs) -> None:
    """Run ``kernel[grid](*args, **kwargs)``; kernel-buffer arguments are passed by pointer.

    The kernel-buffer protocol: a positional argument whose type defines
    ``__kernel_buffer__()`` returning ``(storage, offset, shape, strides, dtype)``:

    * ``storage``: the memory. ``data_ptr()`` is the address of its first byte, ``nbytes`` its
      size and ``device.type`` is ``"cpu"`` (host memory) or ``"cuda"``. Host storages also
      offer ``bytes_view()`` (a writable uint8 NumPy array over all of it: GPU mode stages
      through it); device storages offer ``record_stream(stream)``.
    * ``offset``: where element 0 is, in elements of ``dtype`` from the storage's start.
    * ``shape``, ``strides``: tuples of ints, strides in elements (kernels get the layout they
      index by as explicit arguments; these describe the buffer to Triton's interpreter).
    * ``dtype``: ``itemsize`` in bytes, and ``str(dtype)`` ends in the element type's canonical
      name (``float32``, ``bfloat16`` ...), from which Triton derives the pointer type.

    A ``triton.tools.tensor_descriptor.TensorDescriptor`` (a TMA descriptor) whose ``base`` is a
    kernel buffer is passed with its base converted the same way. Other arguments (numbers,
    tuples, dtypes) and every keyword argument go to Triton as given.
    """
    if mode.CPU:
        conv = [_with_base(a, _host_arg) for a in args]
        if launch_log.PATH:  # TRITENSOR_RECORD_LAUNCHES: note it for tools/sm90_compile.py
            launch_log.record(kernel, conv, kwargs)
        # Masked-off lanes still compute in the interpreter (log of padding, ...): silence them.
        with _interp_lock, np.errstate(all="ignore"):
            kernel[grid](*conv, **kwargs)
        return

    if not _hooked:
        _hook_triton_stream()
    stream = cuda.current_stream()  # also makes the device's context current in this thread
    staged: dict[int, tuple] = {}  # id(host storage) -> (host storage, device storage)

    def dev_arg(a, buffer):
        st, offset, _shape, _strides, dtype = buffer(a)
        if st.device.type == "cpu":
            if id(st) not in staged:
                dst = memory.CudaStorage(st.nbytes, _default_cuda(), stream)
                memory.host_to_device(dst.data_ptr(), st.bytes_view(), stream)
                staged[id(st)] = (st, dst)
            return _DevArg(staged[id(st)][1].data_ptr() + offset * dtype.itemsize, dtype)
        st.record_stream(stream)
        return _DevArg(st.data_ptr() + offset * dtype.itemsize, dtype)

    conv = [_with_base(a, dev_arg) for a in args]
    kernel[grid](*conv, **kwargs)
    for host, dev in staged.values():
        memory.device_to_host(host.bytes_view(), dev.data_ptr(), stream)


def _host_arg(a, buffer) -> HostArg:
    storage, offset, shape, strides, dtype = buffer(a)
    return HostArg(storage, dtype, offset, shape, strides)


def _with_base(a, convert):
    """``a`` as the kernel receives it: ``convert(a, buffer)`` for a kernel buffer, a descriptor
    over the converted base for a TensorDescriptor over one, anything else unchanged."""
    buffer = getattr(type(a), "__kernel_buffer__", None)
    if buffer is not None:
        return convert(a, buffer)
    if type(a) is TensorDescriptor:
        base_buffer = getattr(type(a.base), "__kernel_buffer__", None)
        if base_buffer is not None:
            return dataclasses.replace(a, base=convert(a.base, base_buffer))
    return a


def _default_cuda():
    return device("cuda", cuda.current_device())

