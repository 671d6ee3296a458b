"""Device-side index checks: a small error flag in device memory that kernels set, read by the
host only where it waits for the device anyway.

Why this exists: checking indices on the host (``amin(idx).item()``, or a copy of every index)
makes the host wait for the device at every indexing op -- a sync per embedding lookup per
training step -- and such an op cannot be captured into a CUDA graph (a device-to-host copy during
capture is refused). PyTorch checks indices on the device instead (a device-side assert) and the
error surfaces at the next synchronisation; tritensor does the same for index tensors in device
memory:

* Each device has one flag (:data:`SLOTS` int64 in device memory, all zero when clear). A kernel
  that gathers or scatters by index masks its out-of-range lanes (nothing is read or written out
  of bounds) and records the failure: the first failing op claims slot 0 with an atomic
  compare-and-swap of its *header* (:func:`header`: which message, the dim and its size); lanes of
  the op holding the claim fold their index into slot 1 (the largest index past the end, plus
  one) and slot 2 (the smallest negative one), so the index reported is the one the host check
  reports (the largest if any is too large, else the smallest). ``triton_kernels/_common.py:
  check_index`` is the kernel side. The loss kernels check class targets the same way (message
  kind :data:`TARGET`, torch's "Target N is out of bounds."), lanes equal to ignore_index excluded.
* The host reads the flag at the points where it waits for the device anyway:
  ``Stream.synchronize()`` (which every device-to-host copy -- ``.item()``, ``.cpu()``,
  ``.numpy()``, printing -- ends with) queues an asynchronous copy of the flag's few bytes before
  its wait and looks at them after it; ``tritensor.cuda.synchronize()`` reads it after the device
  is idle. A set flag raises PyTorch's error (IndexError) and is cleared. So, on a device, an out-of-range
  index is reported at the next synchronisation, as torch's device-side assert is, and the op
  that raised is not the one that failed. ``Event.synchronize()`` does not read it (it may wait
  for another stream than the one a read would be ordered on).
* Nothing is read while nothing can have failed: the flag is read on a stream only while a
  checked kernel was queued on it since the last clean read (:data:`armed` is the sync points'
  one cheap test). A checked kernel captured into a CUDA graph queues nothing at capture; the
  graph remembers it (:func:`end_capture`) and each replay arms the stream it is launched on
  (:func:`replayed`), so the next sync after a replay reports what the replayed kernels set, and
  a process that once captured a checked kernel does not read the flag at every sync after.

Host (CPU) index tensors are still checked on the host at once, before any kernel (core/ops):
their values are already there.

The flag is raw ``cuMemAlloc`` memory made once per device (outside any capture: core refuses
the first checked op of a device during a capture, as it refuses a kernel's first launch), not a
block of the caching allocator: this module sits below ``memory.py``, whose sync paths call it.
"""
from __future__ import annotations

import ctypes
import threading

from . import driver as drv
from . import host_memory
from . import dtype as dt
from .device import device as _device

SLOTS = 4  # header, largest too-large index + 1, smallest negative index, spare (32 bytes)
NBYTES = SLOTS * 8

_HEADER_SIZE_BITS = 48  # a dim's size (no device holds 2**48 elements along one dim)
_HEADER_DIM_BITS = 8

# Messages, by site id (slot 0's top byte). A site is a message and a prefix naming the op.
EMBEDDING = 1  # torch's embedding: "index out of range in self"
TARGET = 2  # torch's nll_loss / cross_entropy class targets: "Target N is out of bounds."
_sites: list[str | None] = [None, None, None]  # id -> prefix of "index N is out of bounds ..." (None: a kind above)
_site_ids: dict[str, int] = {}
_sites_lock = threading.Lock()


def site(prefix: str = "") -> int:
    """The site id of "{prefix}index N is out of bounds for dimension D with size S" (interned)."""
    sid = _site_ids.get(prefix)
    if sid is None:
        with _sites_lock:
            sid = _site_ids.get(prefix)
            if sid is None:
                if len(_sites) >= 127:
                    raise RuntimeError("device_asserts: too many message sites")
                _sites.append(prefix)
                sid = _site_ids[prefix] = len(_sites) - 1
    return sid


def header(site_id: int, dim: int, size: int) -> int:
    """Slot 0's value for a failure at ``site_id`` along ``dim`` of size ``size`` (never 0)."""
    return (site_id << (_HEADER_SIZE_BITS + _HEADER_DIM_BITS)) | ((dim & 0xFF) << _HEADER_SIZE_BITS) | (
        size & ((1 << _HEADER_SIZE_BITS) - 1))


def message(hdr: int, too_large_plus_one: int, negative: int) -> str:
    """The error a set flag stands for (PyTorch's wording)."""
    sid = hdr >> (_HEADER_SIZE_BITS + _HEADER_DIM_BITS)
    dim = (hdr >> _HEADER_SIZE_BITS) & 0xFF
    size = hdr & ((1 << _HEADER_SIZE_BITS) - 1)
    bad = too_large_plus_one - 1 if too_large_plus_one > 0 else negative
    if sid == TARGET:
        return f"Target {bad} is out of bounds."
    if sid == EMBEDDING or not 0 < sid < len(_sites):
        return "index out of range in self"
    return f"{_sites[sid]}index {bad} is out of bounds for dimension {dim} with size {size}"


class _FlagStorage:
    """The flag's memory as the launcher's kernel-buffer protocol sees it (``runtime/launch.py``)."""

    __slots__ = ("_ptr", "device", "nbytes")

    def __init__(self, ptr: int, index: int):
        self._ptr, self.device, self.nbytes = ptr, _device("cuda", index), NBYTES

    def data_ptr(self) -> int:
        return self._ptr

    def record_stream(self, stream) -> None:  # never freed: nothing to order
        pass


class Flag:
    """A device's error flag; passed to a kernel as an int64 buffer of :data:`SLOTS` elements."""

    __slots__ = ("storage", "index")

    def __init__(self, ptr: int, index: int):
        self.storage, self.index = _FlagStorage(ptr, index), index

    def __kernel_buffer__(self):
        return self.storage, 0, (SLOTS,), (1,), dt.int64

    def data_ptr(self) -> int:
        """The flag word's device address: kernels are passed the flag by pointer, as a tensor would be."""
        return self.storage._ptr


_flags: dict[int, Flag] = {}  # device index -> its flag
_pending: dict[int, set] = {}  # device index -> handles of streams with a checked kernel since a clean read
_captured: dict[int, int] = {}  # capturing stream's handle -> device index, once it captured a checked kernel
_lock = threading.Lock()
armed = False  # any read to do at all: the sync points' cheap test
_local = threading.local()  # the thread's pinned read buffer


def _rearm() -> None:
    global armed
    armed = any(_pending.values())


def _check(result) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if err != drv.driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error: {err!r}")


def get(index: int) -> Flag | None:
    """Device ``index``'s flag, or None before its first checked op."""
    return _flags.get(index)


def create(index: int, stream) -> Flag:
    """Make device ``index``'s flag (its context current, no capture under way: the caller's
    care), zeroed before any kernel on any stream can see it."""
    with _lock:
        f = _flags.get(index)
        if f is not None:
            return f
        err, ptr = drv.driver.cuMemAlloc(NBYTES)
        _check((err,))
        _check(drv.driver.cuMemsetD8Async(int(ptr), 0, NBYTES, stream.cuda_stream))
        stream._cu.sync()  # once per device: other streams' kernels must see it zeroed
        f = _flags[index] = Flag(int(ptr), index)
        return f


def used(flag: Flag, stream, captured: bool) -> None:
    """A kernel checking indices against ``flag`` is queued on ``stream`` (``captured``: into a
    CUDA graph being captured, which may set it at any replay)."""
    if captured:
        _captured[stream.cuda_stream] = flag.index
    else:
        replayed(flag.index, stream)


def end_capture(stream) -> int | None:
    """A capture on ``stream`` ended: the index of the device whose flag its kernels may set (the
    graph passes it to :func:`replayed` at each replay), or None when it captured no checked kernel."""
    return _captured.pop(stream.cuda_stream, None)


def replayed(index: int, stream) -> None:
    """Work that may set device ``index``'s flag (a checked kernel, or a graph holding one) was
    queued on ``stream``: its next sync reads the flag."""
    global armed
    s = _pending.get(index)
    if s is None:
        s = _pending[index] = set()
    s.add(stream.cuda_stream)
    armed = True


def _buffer():
    """This thread's pinned landing place for a flag read."""
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = host_memory.allocate(NBYTES)
    return int(buf.handle)


def read_before_sync(stream) -> bool:
    """Before the host waits for ``stream``: queue a copy of its device's flag into pinned memory
    when there may be something to read (returns whether it did; then call :func:`after_sync`)."""
    index = stream.device.index
    f = _flags.get(index)
    if f is None or stream.cuda_stream not in _pending.get(index, ()):
        return False
    dst = _buffer()
    ctypes.memset(dst, 0, NBYTES)
    _check(drv.driver.cuMemcpyDtoHAsync(dst, f.data_ptr(), NBYTES, stream.cuda_stream))
    return True


def after_sync(stream, whole_device: bool = False) -> None:
    """After the host waited for ``stream`` (``whole_device``: for all of its device) with a read
    queued by :func:`read_before_sync`: raise the recorded error, if any, and clear the flag."""
    index = stream.device.index
    values = (ctypes.c_int64 * SLOTS).from_address(_buffer())
    hdr, hi, lo = int(values[0]), int(values[1]), int(values[2])
    pending = _pending.get(index)
    if pending:
        if whole_device:
            pending.clear()
        else:
            pending.discard(stream.cuda_stream)
    _rearm()
    if hdr == 0:
        return
    # Cleared on the stream the host just waited for: what is queued after it sees a clean flag.
    _check(drv.driver.cuMemsetD8Async(_flags[index].data_ptr(), 0, NBYTES, stream.cuda_stream))
    raise IndexError(message(hdr, hi, lo) + " (an index checked on the device; reported at the next "
                     "synchronisation, as torch's device-side assert is)")


def check_device(stream) -> None:
    """After a whole-device synchronize: read the flag of ``stream``'s device (the stream is idle)."""
    index = stream.device.index
    if _flags.get(index) is None or not _pending.get(index):
        return
    dst = _buffer()
    ctypes.memset(dst, 0, NBYTES)
    _check(drv.driver.cuMemcpyDtoHAsync(dst, _flags[index].data_ptr(), NBYTES, stream.cuda_stream))
    stream._cu.sync()
    after_sync(stream, whole_device=True)
