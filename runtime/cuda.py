"""``tritensor.cuda``: devices, streams, events and memory statistics through cuda-python.

Streams and events wrap ``cuda.core`` objects. The *current stream* is per thread and per
device, as in PyTorch; every Triton launch goes on it because Triton's
``driver.active.get_current_stream`` is pointed at :func:`current_stream` (see ``launch.py``).
In CPU mode there is no device: ``is_available()`` is False and everything that needs one
raises a clear error. On the simulated device (``TRITENSOR_DEVICE=sim``) this module is the same
code: what it asks of cuda.core and the driver goes through ``runtime/driver.py``.
"""
from __future__ import annotations

import os
import threading
import warnings
from collections import namedtuple

from . import driver as drv
from . import device_asserts, memory, mode
from .allocator import OutOfMemoryError  # noqa: F401  (tritensor.cuda.OutOfMemoryError, as torch's)
from .device import device as _device

_lock = threading.Lock()
_devices: dict[int, object] = {}
_default_streams: dict[int, "Stream"] = {}
_local = threading.local()


def is_available() -> bool:
    """torch.cuda.is_available: True in GPU mode (a real or simulated CUDA device), False in CPU mode, where
    kernels run in Triton's interpreter."""
    return mode.GPU


def _require(what: str) -> None:
    if not mode.GPU:
        raise RuntimeError(
            f"{what}: CUDA is not available (tritensor runs in CPU mode: no CUDA driver/device, "
            "or TRITENSOR_DEVICE=cpu)"
        )


def device_count() -> int:
    """torch.cuda.device_count: the CUDA devices this process may use, as the driver counts them."""
    # The driver's count honours CUDA_VISIBLE_DEVICES (NVML's, in cuda.core.system, does not).
    return drv.device_count()


def _index(dev) -> int:
    if dev is None:
        return current_device()
    if isinstance(dev, int):
        idx = dev
    else:
        d = _device(dev)
        if d.type != "cuda":
            raise ValueError(f"device: expected a cuda device, got {d}")
        idx = current_device() if d.index is None else d.index
    n = device_count()
    if not 0 <= idx < n:
        raise ValueError(f"device: index {idx} out of range; {n} CUDA device(s) present")
    return idx


_in_bad_fork = False  # this process was forked from one that had used a device


def _forked_child() -> None:
    """A child forked after its parent used a device inherits a dead copy of the CUDA context: every
    driver call in it fails. Forget the parent's devices and this thread's current stream, so the
    child's first device use comes through :func:`_cu_device` and gets torch's error, not a bare
    CUDA_ERROR_NOT_INITIALIZED from whichever copy or launch came first."""
    global _in_bad_fork
    if _devices:
        _in_bad_fork = True
        _devices.clear()
        _default_streams.clear()
        _local.__dict__.clear()


os.register_at_fork(after_in_child=_forked_child)


def _cu_device(index: int | None = None):
    """The cuda.core Device for ``index``, made current on first use."""
    _require("tritensor.cuda")
    if index is None:
        index = current_device()
    d = _devices.get(index)
    if d is None:
        if _in_bad_fork:
            raise RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                               "multiprocessing, you must use the 'spawn' start method")
        with _lock:
            d = _devices.get(index)
            if d is None:
                d = drv.Device(index)
                d.set_current()
                _keep_pool_cached(d)
                _devices[index] = d
    # The driver's current context is per thread: make it current in every thread that asks.
    made_current = getattr(_local, "current_ctx", None)
    if made_current != index:
        d.set_current()
        _local.current_ctx = index
        if index != getattr(_local, "device", 0):
            # Another device's context is now current (its stream asked for, its memory allocated):
            # the current device's cached stream is forgotten, so the next op on it asks
            # current_stream(), which makes that device's context current again before it launches.
            _local.current = None
    return d


def _keep_pool_cached(d) -> None:
    """Let the device's pool keep the memory the caching allocator gives back to it.

    A CUDA memory pool's default release threshold is 0: every synchronize hands unused memory
    back to the driver and the next allocation pays for it again. The allocator (``memory.py``)
    caches tensors' blocks itself and gives them back to the pool only in ``empty_cache()``, which
    then trims the pool, and when the device is full (the retry reuses them at once).
    """
    attr = drv.driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
    try:
        memory._check(drv.driver.cuMemPoolSetAttribute(d.memory_resource.handle, attr, drv.driver.cuuint64_t(2**64 - 1)))
    except Exception as e:  # slower, not wrong: say so once
        import warnings

        warnings.warn(f"tritensor.cuda: could not raise the memory pool's release threshold ({e}); "
                      "freed memory will go back to the driver at each synchronize")


def current_device() -> int:
    """torch.cuda.current_device: the index of this thread's current device (0 until set_device)."""
    _require("current_device")
    return getattr(_local, "device", 0)


def set_device(dev) -> None:
    """torch.cuda.set_device: make ``dev`` (an index, a 'cuda:N' string or a device) this thread's current
    device; its current stream becomes that device's."""
    idx = _index(dev)
    _local.device = idx
    _local.current = None  # current_stream()'s answer for "the current device" changes
    _cu_device(idx).set_current()


def get_device_name(dev=None) -> str:
    """torch.cuda.get_device_name: the name the driver gives device ``dev`` (the current one by default)."""
    return _cu_device(_index(dev)).name


_DeviceProperties = namedtuple(
    "_DeviceProperties", "name major minor total_memory multi_processor_count"
)


def get_device_properties(dev=None):
    """torch.cuda.get_device_properties: name, compute capability, total memory and SM count of device
    ``dev``."""
    d = _cu_device(_index(dev))
    p = d.properties
    major, minor = d.compute_capability
    total = memory._check(drv.driver.cuDeviceTotalMem(d.device_id))[1]
    return _DeviceProperties(d.name, major, minor, int(total), int(p.multiprocessor_count))


def get_device_capability(dev=None) -> tuple[int, int]:
    """torch.cuda.get_device_capability: (major, minor) compute capability of device ``dev``, (9, 0) on an
    H100."""
    return tuple(_cu_device(_index(dev)).compute_capability)


# ---------------------------------------------------------------------------------------------
class Stream:
    """A CUDA stream. ``Stream()`` makes a new non-blocking stream on the current device."""

    def __init__(self, device=None, priority: int = 0, *, _wrap=None):
        _require("Stream")
        idx = _index(device)
        self.device = _device("cuda", idx)
        if _wrap is not None:
            self._cu = _wrap
        else:
            self._cu = _cu_device(idx).create_stream(options=drv.StreamOptions(nonblocking=True, priority=priority))
        self.cuda_stream = int(self._cu.handle)  # the raw handle every launch passes: fixed for the stream's life

    @property
    def memory_resource(self):
        """The stream-ordered pool of this stream's device (what ``memory.CudaStorage`` allocates from)."""
        return _cu_device(self.device.index).memory_resource

    def query(self) -> bool:
        """True when every piece of work queued on this stream so far has finished (torch's Stream.query);
        refused during a graph capture."""
        if memory.capturing:
            memory.refuse_host_sync(self, "Stream.query()")
        return self.record_event().query()

    def synchronize(self) -> None:
        """Block the host until this stream's queued work has finished; a failed device-side index check
        raises here, as torch's device asserts do."""
        if memory.capturing:
            memory.refuse_host_sync(self, "Stream.synchronize()")
        if sync_debug_mode:
            warn_or_error_on_sync()
        # A failed device-side index check is read here, where the host waits anyway: its few
        # bytes are copied in the same wait (device_asserts.py).
        read = device_asserts.armed and device_asserts.read_before_sync(self)
        self._cu.sync()
        if read:
            device_asserts.after_sync(self)

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Record ``event`` (a new one if None) on this stream and return it: it completes when the work
        queued before it does."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event: "Event") -> None:
        """Make later work on this stream wait for ``event`` (on the device; the host does not block)."""
        if event._cu is not None:
            self._cu.wait(event._cu)

    def wait_stream(self, stream: "Stream") -> None:
        """Make later work on this stream wait for everything queued on ``stream`` so far."""
        self.wait_event(stream.record_event())

    # Every device's default stream has the same handle: the device is part of the identity.
    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and self.device == other.device and self.cuda_stream == other.cuda_stream

    def __hash__(self) -> int:
        return hash((self.device.index, self.cuda_stream))

    def __repr__(self) -> str:
        return f"<tritensor.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event: ``record`` on a stream, then ``wait``/``query``/``synchronize``/``elapsed_time``."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        _require("Event")
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._cu = None  # created on first record, on the recording stream's device
        self._captured = False  # last recorded on a capturing stream: a node of the graph, never queried

    def record(self, stream: Stream | None = None) -> None:
        """Record this event on ``stream`` (the current stream by default); the driver's event is made at the
        first record, as torch's is."""
        stream = current_stream() if stream is None else stream
        if self._cu is None:
            opts = drv.EventOptions(timing_enabled=self.enable_timing, blocking_sync=self.blocking,
                                ipc_enabled=self.interprocess)
            self._cu = _cu_device(stream.device.index).create_event(options=opts)
        stream._cu.record(self._cu)
        self._captured = bool(memory.capturing) and id(stream) in memory.capturing

    def _host_wait(self, what: str) -> None:
        """Refuse, clearly, what the driver would refuse: waiting on the host for an event recorded
        inside a capture (CUDA_ERROR_CAPTURED_EVENT), or while a capture would be broken by it."""
        if self._captured:
            raise memory.CaptureError(f"{what}: this event was recorded while a CUDA graph was being captured; it "
                                      "is part of the graph and cannot be waited on from the host (record it again "
                                      "outside the capture)")
        if memory.capturing and self._cu is not None:
            # Not a sync of a capturing stream (``self`` is no stream): refused where the capture's
            # mode makes any query or sync unsafe.
            memory.refuse_host_sync(self, what)

    def wait(self, stream: Stream | None = None) -> None:
        """Make later work on ``stream`` (the current stream by default) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        """True when the work this event was recorded after has finished (an event never recorded counts as
        done, as torch's)."""
        if self._captured or memory.capturing:
            self._host_wait("Event.query()")
        return True if self._cu is None else bool(self._cu.is_done)

    def synchronize(self) -> None:
        """Block the host until the work this event was recorded after has finished."""
        if self._captured or memory.capturing:
            self._host_wait("Event.synchronize()")
        if self._cu is not None:
            self._cu.sync()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, timing enabled)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("elapsed_time: both events need enable_timing=True")
        if self._cu is None or end_event._cu is None:
            raise ValueError("elapsed_time: both events must be recorded first")
        end_event.synchronize()
        return float(memory._check(drv.driver.cuEventElapsedTime(self._cu.handle, end_event._cu.handle))[1])


# set_sync_debug_mode's setting: 0 (default) says nothing, 1 warns, 2 raises when the host waits for a
# stream. Every implicit wait of the GPU path (a device-to-host copy: .item(), .cpu(), nonzero's
# count; a copy from pageable host memory) is a Stream.synchronize(), as torch's are
# stream_synchronize or memcpy_and_sync, which check the same setting.
sync_debug_mode = 0


def warn_or_error_on_sync() -> None:
    """torch's warning or error for a synchronizing CUDA operation under set_sync_debug_mode."""
    if sync_debug_mode == 2:
        raise RuntimeError("called a synchronizing CUDA operation")
    warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=2)


def default_stream(device=None) -> Stream:
    """torch.cuda.default_stream: the device's default (null) stream, one object per device."""
    idx = _index(device)
    s = _default_streams.get(idx)
    if s is None:
        with _lock:
            s = _default_streams.get(idx)
            if s is None:
                s = Stream(idx, _wrap=_cu_device(idx).default_stream)
                _default_streams[idx] = s
    return s


def current_stream(device=None) -> Stream:
    """torch.cuda.current_stream: the stream this thread queues work on for ``device`` (the current device by
    default); the default stream until set_stream or a stream context."""
    # Every op asks this, for the current device (by no argument, or by its index): one
    # thread-local read once the answer is known. ``_local.current`` is the current device's
    # current stream, so its index says whether it answers an explicit one.
    s = getattr(_local, "current", None)
    if s is not None and (device is None or (type(device) is int and device == s.device.index)):
        return s
    idx = _index(device)
    _cu_device(idx)  # context current in this thread before anything is queued
    per_dev = getattr(_local, "streams", None)
    s = per_dev.get(idx) if per_dev else None
    s = s if s is not None else default_stream(idx)
    if device is None:
        _local.current = s  # forgotten by set_stream and set_device
    return s


def set_stream(stream: Stream) -> None:
    """torch.cuda.set_stream: make ``stream`` this thread's current stream on its device."""
    if not hasattr(_local, "streams"):
        _local.streams = {}
    _local.streams[stream.device.index] = stream
    _local.current = None


class StreamContext:
    """``with tritensor.cuda.stream(s):`` makes ``s`` current (and its device) for the block."""

    def __init__(self, stream: Stream | None):
        self.stream = stream

    def __enter__(self):
        if self.stream is None:
            return None
        self._prev_dev = current_device()
        self._prev = current_stream(self.stream.device.index)
        if self.stream.device.index != self._prev_dev:
            set_device(self.stream.device.index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is None:
            return
        set_stream(self._prev)
        if current_device() != self._prev_dev:
            set_device(self._prev_dev)


def stream(s: Stream | None) -> StreamContext:
    """torch.cuda.stream: a context manager that makes ``s`` the current stream inside the block (None: no
    change)."""
    return StreamContext(s)


def synchronize(device=None) -> None:
    """torch.cuda.synchronize: block the host until all work on ``device`` has finished; a failed device-side
    index check raises here."""
    if memory.capturing:
        memory.refuse_host_sync(None, "tritensor.cuda.synchronize()")
    _cu_device(_index(device)).sync()
    if device_asserts.armed:  # a failed device-side index check surfaces here (device_asserts.py)
        device_asserts.check_device(current_stream(device))


# ---------------------------------------------------------------------------------------------
# Memory: the statistics of the device's caching allocator (``runtime/allocator.py``), torch's
# names and keys. CPU mode has no device memory: torch's answers without CUDA ({}, 0, no-ops).


def memory_stats(device=None) -> dict:
    """The caching allocator's statistics, flat and sorted as torch's: ``allocated_bytes.all.current``,
    ``reserved_bytes.large_pool.peak``, ``num_alloc_retries`` ... (see ``runtime/allocator.py``)."""
    return memory.device_allocator(_index(device)).memory_stats() if mode.GPU else {}


def memory_allocated(device=None) -> int:
    """Bytes in blocks held by live tensors on ``device`` (each rounded up to its size class)."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None) -> int:
    """torch.cuda.max_memory_allocated: the peak of bytes held by live tensors since the start or the last
    reset_peak_memory_stats."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None) -> int:
    """Bytes the caching allocator holds from the device's pool: live blocks and cached ones."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None) -> int:
    """torch.cuda.max_memory_reserved: the peak of bytes the caching allocator held from the device since the
    start or the last reset."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None) -> None:
    """torch.cuda.reset_peak_memory_stats: the peaks start again from the current values (nothing to reset in
    CPU mode)."""
    if mode.GPU:
        memory.device_allocator(_index(device)).reset_peak_memory_stats()


def reset_accumulated_memory_stats(device=None) -> None:
    """torch.cuda.reset_accumulated_memory_stats: the allocation and free counters start again from zero."""
    if mode.GPU:
        memory.device_allocator(_index(device)).reset_accumulated_memory_stats()


def empty_cache() -> None:
    """Give the cached blocks of every device's allocator back to its pool, and the pool's unused
    memory back to the driver (live tensors keep theirs)."""
    if not mode.GPU:
        return
    for idx, d in list(_devices.items()):
        memory.device_allocator(idx).empty_cache()
        d.sync()
        memory._check(drv.driver.cuMemPoolTrimTo(d.memory_resource.handle, 0))
