"""Tensor arguments as flat host buffers: reading them, staging CUDA tensors, writing results back.

Why this module exists: every collective moves bytes between sockets and host memory, and
how a tensor becomes host memory (and its result goes back) is the same for all of them
and for every algorithm: CPU tensors are read and written in place through
``tensor.numpy()`` views; non-contiguous tensors go through a contiguous copy; CUDA tensors
are staged to host memory on a per-device side stream and copied back when the operation
completes (:class:`HostBuffer`), or, for the ring all_reduce, staged segment by segment on
a helper thread so device-to-host transfer overlaps the network (:class:`SegmentStager`).
NumPy arrays are accepted too. Tensors arrive checked (type, dtype, writability:
:func:`tritensor.comm.backend_api.check_tensor`, which the public collectives call before any
byte is sent).

Collectives act on a tensor's data, as torch's do: a tensor that requires grad (a parameter)
is read and written through ``detach()``, which shares its memory and version counter, so an
in-place collective on a leaf is not recorded by autograd and ``no_grad`` is not needed.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from ...core.factories import from_numpy
from ...runtime import cuda as _cuda

from ..errors import DistBackendError

__all__ = ["HostBuffer", "SegmentStager", "side_stream", "as_bytes"]


class HostBuffer:
    """A flat, contiguous host view of a tensor argument, and how to give results back."""

    __slots__ = ("obj", "arr", "flat", "_writeback", "deferred")

    def __init__(self, obj, name: str, write: bool, defer: bool = False):
        """``defer``: for a CUDA tensor, allocate the host buffer but copy nothing yet; the
        caller stages it (:meth:`stage_all`, or segment by segment with :class:`SegmentStager`)."""
        if getattr(obj, "requires_grad", False):
            obj = obj.detach()  # the same memory, no history: see the module docstring
        self.obj = obj
        self._writeback = None
        self.deferred = False
        if isinstance(obj, np.ndarray):
            arr = obj
        elif hasattr(obj, "device") and hasattr(obj, "numpy") and hasattr(obj, "dtype"):
            if getattr(obj.device, "type", "cpu") == "cpu":
                arr = obj.numpy()
            elif defer:
                arr = np.empty(obj.numel(), np.dtype(obj.dtype.np))
                self.deferred = True
                self._writeback = self._device_writeback(obj, arr)
            else:
                arr = self._stage_from_device(obj, write)
        else:  # arguments arrive checked (backend_api.check_tensor): nothing else gets here
            raise TypeError(f"{name}: expected a tritensor.Tensor, got {type(obj).__name__}")
        self.arr = arr
        if arr.flags.c_contiguous:
            self.flat = arr.reshape(-1)
        else:
            self.flat = np.ascontiguousarray(arr).reshape(-1)
            if write:
                prev = self._writeback
                dst, src = arr, self.flat

                def wb():
                    np.copyto(dst, src.reshape(dst.shape))
                    if prev is not None:
                        prev()

                self._writeback = wb

    def stage_all(self):
        """Copy a deferred CUDA tensor to host now (all at once)."""
        if self.deferred:
            np.copyto(self.flat, self._stage_from_device(self.obj, False).reshape(-1))
            self.deferred = False

    @staticmethod
    def _device_writeback(t, host_flat):
        cuda = _cuda

        def wb():
            host = from_numpy(host_flat.reshape(tuple(t.shape)))
            stream = side_stream(cuda, t.device) if cuda.is_available() else None
            if stream is not None:
                with cuda.stream(stream):
                    t.copy_(host)
                stream.synchronize()
            else:
                t.copy_(host)
        return wb

    def _stage_from_device(self, t, write: bool):
        """Copy a CUDA tensor to host memory; schedule the copy back when writing.

        The copies run on a side stream that first waits for the tensor's current stream,
        so they see every kernel queued before the call and do not serialize behind later
        compute; tritensor's ``Tensor.cpu``/``copy_`` stage through pinned host buffers."""
        cuda = _cuda
        stream = side_stream(cuda, t.device) if cuda.is_available() else None
        if stream is not None:
            stream.wait_stream(cuda.current_stream(t.device))
            with cuda.stream(stream):
                host = t.cpu()
            stream.synchronize()
        else:
            host = t.cpu()
        if write:
            def wb():
                if stream is not None:
                    with cuda.stream(stream):
                        t.copy_(host)
                    stream.synchronize()
                else:
                    t.copy_(host)

            self._writeback = wb
        return host.numpy()

    @property
    def numel(self) -> int:
        """The number of elements of the host copy."""
        return self.flat.size

    @property
    def dtype(self):
        """The NumPy dtype of the host copy."""
        return self.flat.dtype

    def writeback(self):
        """Copy the host buffer back into the caller's tensor (a device tensor, or one not contiguous), when
        the collective wrote it."""
        if self._writeback is not None:
            self._writeback()

    def private(self) -> bool:
        """Whether ``flat`` is our own copy, reaching the tensor only through :meth:`writeback`."""
        return self._writeback is not None


_SIDE_STREAMS: dict = {}


def side_stream(cuda, device):
    """One communication stream per device, created on first use."""
    key = getattr(device, "index", None)
    if key not in _SIDE_STREAMS:
        _SIDE_STREAMS[key] = cuda.Stream(device)
    return _SIDE_STREAMS[key]


class SegmentStager:
    """Copies a CUDA tensor to host memory segment by segment on a helper thread, in the
    order the ring consumes segments, so device-to-host transfer overlaps the network.

    The ring's first sends are placeholders made ready when their segment lands; a
    reduction into a segment first waits for that segment. ``convert`` (fp16/bf16 into the
    fp32 working copy) runs on the helper thread too. The result goes back to the device
    in one copy when the ring is done."""

    def __init__(self, o, buf: HostBuffer, bounds, convert=None):
        self.o = o
        self.dev = buf.obj.reshape(-1)
        self.host = buf.flat
        self.bounds = bounds
        self.convert = convert
        self.events = [threading.Event() for _ in range(o.n)]
        self.ready_after: dict = {}
        self.error = None
        self.cuda = _cuda
        self.stream = side_stream(self.cuda, buf.obj.device) if self.cuda.is_available() else None
        if self.stream is not None:  # see everything queued on the caller's stream so far
            self.stream.wait_stream(self.cuda.current_stream(buf.obj.device))
        self.order = [(o.r - 1 - k) % o.n for k in range(o.n)]  # the ring's order of need
        self.thread = threading.Thread(target=self._run, name="tritensor-comm-stager", daemon=True)

    def start(self):
        """Start copying the device tensor to host memory, segment by segment in the ring's order of need, on
        a side stream."""
        self.thread.start()

    def _run(self):
        try:
            for s in self.order:
                lo, hi = self.bounds[s], self.bounds[s + 1]
                if self.stream is not None:
                    with self.cuda.stream(self.stream):
                        part = self.dev[lo:hi].cpu()
                else:
                    part = self.dev[lo:hi].cpu()
                np.copyto(self.host[lo:hi], part.numpy())
                if self.convert is not None:
                    self.convert(s)
                self.events[s].set()
                if s in self.ready_after:
                    self.o.eng.mark_ready(self.ready_after[s])
        except BaseException as e:  # the group cannot go on with a half-copied tensor
            self.error = e
            for ev in self.events:
                ev.set()
            self.o.eng.fail_from_thread(DistBackendError(
                f"{self.o.work.what}: copying the CUDA tensor to host memory failed: {type(e).__name__}: {e}"))

    def waiter(self, s):
        """A function that waits until segment ``s`` is in host memory (the collective's deadline bounds the
        wait)."""
        def wait():
            if not self.events[s].wait(max(0.0, self.o.work.deadline - time.monotonic())):
                raise DistBackendError(f"{self.o.work.what}: timed out copying the CUDA tensor to host memory")
            if self.error is not None:
                raise DistBackendError(f"{self.o.work.what}: copying the CUDA tensor to host failed: {self.error}")
        return wait


def as_bytes(a: np.ndarray) -> memoryview:
    """The bytes of a flat array, as sent or received (an empty view for no elements)."""
    return memoryview(a.view(np.uint8)) if a.size else memoryview(b"")
