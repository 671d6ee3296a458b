"""Storages: the bytes a Tensor views. Host storages are NumPy buffers; device storages are
blocks of the device's caching allocator (``allocator.py``), over cuda.core's stream-ordered pool.

A storage also satisfies the small protocol Triton's interpreter copies arguments through
(``data_ptr()``, ``cpu()``, ``copy_()``); host storages already live on the host, so both are
identities and the interpreter reads and writes the tensor's memory in place.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from . import driver as drv
from . import host_memory
from .allocator import Backend, CachingAllocator, OutOfMemoryError
from .device import CPU, device

_ALIGN = 64  # bytes; Triton specialises pointers on 16-byte alignment, vector loads like more
_char_at = ctypes.c_char.from_buffer  # the first byte of a writable buffer, as a ctypes object


class _Borrowed:
    """``nbytes`` bytes at ``ptr`` inside ``owner``'s memory, as NumPy sees them.

    ``np.asarray`` of this object is a uint8 array whose ``base`` is this object, which holds
    ``owner``: every view derived from it keeps the borrowed memory alive, as NumPy's own views
    do. (A ctypes array ``from_address`` holds nothing, so views of it outlived the memory.) It
    works whatever ``owner``'s strides are, where a ``.view(np.uint8)`` of it would not.
    """

    __slots__ = ("__array_interface__", "base")

    def __init__(self, owner, ptr: int, nbytes: int):
        self.base = owner  # named as NumPy names what an array keeps alive
        self.__array_interface__ = {"version": 3, "shape": (nbytes,), "typestr": "|u1", "data": (ptr, False)}


class _ByteCount(int):
    """A storage's size in bytes: an int (the runtime reads ``storage.nbytes`` as one everywhere) that can
    also be called, as torch's ``UntypedStorage.nbytes()`` is a method."""

    __slots__ = ()

    def __call__(self) -> int:
        return int(self)


class _UntypedStorageType(type):
    """Calling ``UntypedStorage`` itself makes a host storage (``torch.UntypedStorage(size)``); its subclasses
    are constructed as usual."""

    def __call__(cls, *args, **kwargs):
        if cls is UntypedStorage:
            return _new_untyped(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class _StorageType(_UntypedStorageType):
    """The metaclass of the concrete storages: constructed by ``type``'s own call, in C, since a
    storage is made at every allocation and a Python ``__call__`` would be one more call each."""

    __call__ = type.__call__


class UntypedStorage(metaclass=_UntypedStorageType):
    """torch.UntypedStorage: the bytes behind tensors, what ``Tensor.untyped_storage()`` returns (HostStorage
    or CudaStorage). torch's methods are written here once for both, over the subclass's ``nbytes``,
    ``data_ptr()`` and byte access (``_read``/``_write``): a CUDA storage's reads and writes are copies
    ordered on the stream it was allocated on."""

    __slots__ = ()

    def size(self) -> int:
        """The size in bytes (torch's ``UntypedStorage.size()``)."""
        return int(self.nbytes)

    def __len__(self) -> int:
        return int(self.nbytes)

    def element_size(self) -> int:
        """1: an untyped storage's elements are bytes."""
        return 1

    @property
    def is_cuda(self) -> bool:
        """Whether the bytes are in GPU memory."""
        return self.device.type == "cuda"

    def is_pinned(self, device="cuda") -> bool:
        """Whether these host bytes are page-locked (``pin_memory``)."""
        return bool(getattr(self, "pinned", False))

    def is_shared(self) -> bool:
        """True for CUDA storages (handed to other processes by IPC in torch), False for host storages:
        tritensor has no shared-memory host storages."""
        return self.is_cuda

    def share_memory_(self):
        """A CUDA storage as it is; a host storage is refused (tritensor copies tensors between processes)."""
        if self.is_cuda:
            return self
        raise RuntimeError("share_memory_: tritensor has no shared-memory host storages: tensors sent to another "
                           "process are copied by value (see tritensor.multiprocessing)")

    def _index(self, idx) -> int:
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise TypeError(f"can't index a {type(self).__name__} with {type(idx).__name__}")
        n = int(self.nbytes)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} out of range for storage of size {n}")
        return idx % n

    def _range(self, key: slice) -> tuple:
        start, stop, step = key.indices(int(self.nbytes))
        if step != 1:
            raise RuntimeError("slices with steps are not supported by UntypedStorage")
        return start, max(stop, start)

    def __getitem__(self, key):
        """A byte (int index) or a storage sharing bytes ``start:stop`` (a slice), as torch's."""
        if isinstance(key, slice):
            start, stop = self._range(key)
            return self._slice(start, stop)
        i = self._index(key)
        return int(self._read(i, 1)[0])

    def __setitem__(self, key, value) -> None:
        if isinstance(key, slice):
            start, stop = self._range(key)
        else:
            start = self._index(key)
            stop = start + 1
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 256:
            raise TypeError(f"UntypedStorage: a byte value is an int in [0, 256), got {value!r}")
        self._write(start, np.full(stop - start, value, dtype=np.uint8))

    def tolist(self) -> list:
        """The bytes, as a list of ints."""
        return self._read(0, int(self.nbytes)).tolist()

    def fill_(self, value):
        """Every byte set to ``value``, in place; returns the storage."""
        self[:] = value
        return self

    def copy_(self, source, non_blocking=None):
        """Copy ``source``'s bytes (a storage of the same size, on any device) into this storage."""
        if not isinstance(source, UntypedStorage):
            raise TypeError(f"copy_(): argument 'source' must be UntypedStorage, not {type(source).__name__}")
        if int(source.nbytes) != int(self.nbytes):
            raise RuntimeError(f"size mismatch, got {int(self.nbytes)} and {int(source.nbytes)} bytes")
        if source is not self:
            self._write(0, source._read(0, int(source.nbytes)))
        return self

    def clone(self):
        """A new storage on the same device holding a copy of the bytes."""
        out = self._new(int(self.nbytes))
        return out.copy_(self)

    def __repr__(self) -> str:
        body = "\n".join(f" {b}" for b in self.tolist())
        return f"{body}\n[{type(self).__module__}.UntypedStorage(device={self.device}) of size {int(self.nbytes)}]"

    @classmethod
    def from_buffer(cls, buffer, byte_order="native", count=-1, offset=0, dtype=None):
        """A host storage holding a copy of ``buffer``'s bytes (from ``offset``, ``count`` bytes or all)."""
        data = np.frombuffer(buffer, dtype=np.uint8, offset=offset, count=count)
        out = HostStorage(data.nbytes)
        out.bytes_view()[:] = data
        return out


def _new_untyped(size=0, *, device=None):
    """``torch.UntypedStorage(size)`` / ``UntypedStorage(sequence of bytes)``: a new host storage (a CUDA one
    comes from a tensor: ``torch.empty(n, dtype=torch.uint8, device="cuda").untyped_storage()``)."""
    if device is not None and (device if isinstance(device, str) else str(device)).split(":")[0] != "cpu":
        raise RuntimeError("UntypedStorage(device=...): tritensor makes storages on the host here; a CUDA storage "
                           "comes from a CUDA tensor's untyped_storage()")
    if isinstance(size, int) and not isinstance(size, bool):
        if size < 0:
            raise RuntimeError(f"Storage size must be non-negative, got {size}")
        return HostStorage(size)
    data = np.asarray(list(size), dtype=np.int64)
    if data.size and (data.min() < 0 or data.max() > 255):
        raise RuntimeError("UntypedStorage: every value of a byte sequence must be in [0, 256)")
    out = HostStorage(data.size)
    out.bytes_view()[:] = data.astype(np.uint8)
    return out


class HostStorage(UntypedStorage, metaclass=_StorageType):
    """Host memory: an owned, aligned NumPy byte buffer, or a view of a caller's array.

    ``bytes_view()`` is the one array every NumPy view of the storage derives from, and its
    ``base`` chain ends at the memory's owner, so a view handed out (``Tensor.numpy()``) keeps
    the bytes alive after the tensor and the storage are gone.
    """

    __slots__ = ("nbytes", "_ptr", "_bytes", "__weakref__")
    device = CPU
    pinned = False  # page-locked (see pinned_host_storage)

    def __init__(self, nbytes: int, owner=None, ptr: int | None = None):
        """``owner``/``ptr``: borrow ``nbytes`` at ``ptr`` from ``owner``, an object holding that
        memory (from_numpy passes the caller's array and the address of its lowest element)."""
        self.nbytes = _ByteCount(nbytes)
        if owner is None:
            raw = np.empty(self.nbytes + _ALIGN, dtype=np.uint8)
            address = ctypes.addressof(_char_at(raw))  # a fifth of what ``raw.ctypes.data`` costs
            start = (-address) % _ALIGN
            self._bytes = raw[start : start + self.nbytes]  # its base is raw
            self._ptr = address + start
        else:
            self._bytes = np.asarray(_Borrowed(owner, int(ptr), self.nbytes))
            self._ptr = self._bytes.ctypes.data

    def data_ptr(self) -> int:
        """The address of the first byte of this host allocation."""
        return self._ptr

    def bytes_view(self) -> np.ndarray:
        """The whole storage as a writable uint8 array (shares memory)."""
        return self._bytes

    # Triton interpreter protocol: this memory is already host memory.
    def cpu(self):
        """Itself: host memory is already where the interpreter reads it (the storage protocol Triton's
        interpreter calls)."""
        return self

    # torch's storage methods: byte access for UntypedStorage's (host memory is read in place)
    def _read(self, start: int, n: int) -> np.ndarray:
        return self._bytes[start:start + n].copy()

    def _write(self, start: int, data: np.ndarray) -> None:
        self._bytes[start:start + len(data)] = data

    def _slice(self, start: int, stop: int):
        return HostStorage(stop - start, owner=self._bytes, ptr=self._ptr + start)

    def _new(self, nbytes: int):
        return HostStorage(nbytes)

    def resize_(self, size: int):
        """torch's UntypedStorage.resize_: new memory of ``size`` bytes holding the old bytes at its start (the
        rest uninitialised). Tensors over this storage see the new memory; arrays handed out before keep the
        old one."""
        if not isinstance(size, int) or size < 0:
            raise RuntimeError(f"resize_: size must be a non-negative int, got {size!r}")
        new = HostStorage(size)
        keep = min(size, int(self.nbytes))
        new._bytes[:keep] = self._bytes[:keep]
        self.nbytes, self._bytes, self._ptr = new.nbytes, new._bytes, new._ptr
        return self

    def record_stream(self, stream) -> None:  # host memory is not stream-ordered
        """Nothing to record: host memory is not stream-ordered (torch's record_stream for a CPU tensor does
        nothing either)."""
        pass

    def __reduce__(self):
        # By value: the default would copy ``_ptr``, a raw address that means nothing in a copy
        # (it would alias, then outlive, this storage's memory) or in another process.
        return (_host_storage_from_bytes, (self._bytes.tobytes(),))


class _PinnedHostStorage(HostStorage):
    """Host memory in a page-locked cuda.core buffer (``Tensor.pin_memory()``); the borrowed
    array's base holds the buffer, so the memory lives as long as any view of it."""

    __slots__ = ()
    pinned = True


def pinned_host_storage(nbytes: int) -> HostStorage:
    """``nbytes`` of page-locked host memory (GPU mode only: it needs the CUDA driver)."""
    buf = host_memory.allocate(nbytes, active=True)
    return _PinnedHostStorage(nbytes, owner=buf, ptr=int(buf.handle))


def _host_storage_from_bytes(data: bytes) -> HostStorage:
    storage = HostStorage(len(data))
    storage.bytes_view()[:] = np.frombuffer(data, dtype=np.uint8)
    return storage


class Capture:
    """A capture under way on ``stream`` (``runtime/graphs.py``): allocations on the stream come
    from private pool ``pool``; ``keep`` holds what the graph reads but does not allocate (the
    device copies of address tables, the pinned host bytes of the copies it replays), alive as long
    as the graph; ``mode`` is the capture error
    mode and ``thread`` the capturing thread, which decide what else a host sync would break."""

    __slots__ = ("stream", "pool", "keep", "mode", "thread", "tables")

    def __init__(self, stream, pool: int, keep: list | None = None, mode: str = "global"):
        self.stream, self.pool, self.mode = stream, pool, mode
        self.keep = [] if keep is None else keep
        self.thread = threading.get_ident()
        self.tables: dict = {}  # table key -> the device copy of an address table first seen in this capture


# Streams capturing a CUDA graph now: id(stream) -> Capture. Allocations on such a stream come
# from the graph's pool; host copies on it are refused.
capturing: dict = {}


# ``tritensor.compile``'s warm-up call sets this to a callable to learn whether the call copies
# device memory to the host (a capture of it would be refused): ``device_to_host`` calls it with
# what the copy is, then copies as usual. None otherwise, which is all the copy path tests.
watch = None


class CaptureError(RuntimeError):
    """An operation that cannot be recorded into a CUDA graph was run while capturing one."""


def refuse_while_capturing(stream, what: str, why: str) -> None:
    """Raise :class:`CaptureError` naming ``what`` when ``stream`` is capturing a graph."""
    if capturing and id(stream) in capturing:
        raise CaptureError(f"{what} cannot run while a CUDA graph is being captured on {stream}: {why}. Run it "
                           "before capture_begin() or after capture_end() (warm up on the capture stream first).")


def refuse_host_sync(stream, what: str) -> None:
    """Raise :class:`CaptureError` when the host waiting on ``stream`` (None: the whole device)
    would break a capture: the driver refuses a sync of a capturing stream, and in ``global``
    mode (``thread_local``: from the capturing thread) any sync or query while a capture is
    under way, and invalidates the capture. Refused here, before the driver, it stays valid."""
    if not capturing:
        return
    me = threading.get_ident()
    for c in list(capturing.values()):
        if (stream is None or c.stream is stream or c.mode == "global"
                or (c.mode == "thread_local" and c.thread == me)):
            raise CaptureError(f"{what} cannot run while a CUDA graph is being captured on {c.stream} "
                               f"({c.mode} mode): the host would wait for the GPU, and the driver would "
                               "invalidate the capture. Synchronize before capture_begin() or after capture_end().")


class CudaPoolBackend(Backend):
    """The caching allocator's backend in GPU mode: blocks from cuda.core's stream-ordered pool
    of the stream's device (``Stream.memory_resource``), ordered on the stream; events from
    cuda.core. Every method is a driver call: the allocator makes them on its cold paths only."""

    def allocate(self, nbytes: int, stream):
        """A new segment of ``nbytes`` from the device's memory pool, ordered on ``stream`` (outside the pool
        while a graph captures it, so the graph owns it)."""
        if capturing and id(stream) in capturing:
            return self._allocate_outside_capture(nbytes)
        try:
            buf = stream.memory_resource.allocate(nbytes, stream=stream._cu)
        except Exception as e:  # cuda.core's CUDAError is not public; its message starts with the name
            if "CUDA_ERROR_OUT_OF_MEMORY" in str(e):
                raise OutOfMemoryError(str(e)) from e
            raise
        return int(buf.handle), buf

    @staticmethod
    def _allocate_outside_capture(nbytes: int):
        """A block for a graph's private pool: ``cuMemAlloc`` (not stream-ordered, so not recorded
        into the graph: the memory outlives every replay, as the graph's tensors must), with this
        thread's capture mode relaxed for the call, as PyTorch's allocator does."""
        driver = drv.driver
        relaxed = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        _err, previous = driver.cuThreadExchangeStreamCaptureMode(relaxed)
        try:
            err, ptr = driver.cuMemAlloc(nbytes)
        finally:
            driver.cuThreadExchangeStreamCaptureMode(previous)
        if err == driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            raise OutOfMemoryError(f"CUDA_ERROR_OUT_OF_MEMORY allocating {nbytes} bytes for a CUDA graph's pool")
        _check((err,))
        return int(ptr), _RawBlock(int(ptr))

    def free(self, handle, stream) -> None:
        """Give a segment back to the device's pool, ordered on ``stream``."""
        if type(handle) is _RawBlock:
            handle.free()
        else:
            handle.close(stream._cu)

    def record_event(self, stream):
        """An event recorded on ``stream`` now: a freed block waits for it before another stream may reuse the
        block."""
        return stream._cu.record()

    def event_done(self, event) -> bool:
        """Whether the work ``event`` was recorded after has finished."""
        return bool(event.is_done)

    def wait_event(self, stream, event) -> None:
        """Make later work on ``stream`` wait for ``event`` (on the device)."""
        stream._cu.wait(event)

    if drv.block_lent is not None:  # a device that checks accesses per tensor: the simulator
        # Called with the allocator's stream (a tritensor Stream) as it is: no wrapper call per tensor.
        lent = staticmethod(drv.block_lent)
        returned = staticmethod(drv.block_returned)


class _RawBlock:
    """A block from ``cuMemAlloc`` (a graph's private pool): freed with ``cuMemFree``."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def free(self) -> None:
        _check(drv.driver.cuMemFree(self.ptr))


_allocators: dict[int, CachingAllocator] = {}
_allocators_lock = threading.Lock()


def device_allocator(index: int) -> CachingAllocator:
    """The caching allocator of CUDA device ``index`` (made on first use)."""
    a = _allocators.get(index)
    if a is None:
        with _allocators_lock:
            a = _allocators.get(index)
            if a is None:
                a = _allocators[index] = CachingAllocator(CudaPoolBackend())
    return a


class CudaStorage(UntypedStorage, metaclass=_StorageType):
    """Device memory: a block of the device's caching allocator (``runtime/allocator.py``).

    The block is ordered on the stream current at allocation time. If the memory is used on
    other streams, ``record_stream`` notes them; when the storage is freed, the allocator does
    not reuse the block before work queued on those streams has run (PyTorch's ``record_stream``
    semantics).
    """

    __slots__ = ("nbytes", "device", "_block", "_ptr", "_allocator", "__weakref__")

    def __init__(self, nbytes: int, dev: device, stream):
        self.nbytes = _ByteCount(nbytes)
        self.device = dev
        self._allocator = alloc = _allocators.get(dev.index) or device_allocator(dev.index)
        graph = capturing.get(id(stream)) if capturing else None  # a capture: the graph's private pool
        self._block = alloc.malloc(int(nbytes), stream, graph.pool if graph is not None else 0)
        self._ptr = self._block.ptr

    def data_ptr(self) -> int:
        """The device address of the first byte of this allocation."""
        return self._ptr

    # torch's storage methods: byte access for UntypedStorage's, copies ordered on the allocation's stream
    def _read(self, start: int, n: int) -> np.ndarray:
        out = np.empty(n, dtype=np.uint8)
        device_to_host(out, self._ptr + start, self._block.stream)
        return out

    def _write(self, start: int, data: np.ndarray) -> None:
        host_to_device(self._ptr + start, np.ascontiguousarray(data, dtype=np.uint8), self._block.stream)

    def _slice(self, start: int, stop: int):
        raise RuntimeError("slicing a CUDA storage is not supported in tritensor: slice a tensor over it instead")

    def _new(self, nbytes: int):
        return CudaStorage(nbytes, self.device, self._block.stream)

    def cpu(self):
        """A host storage holding a copy of the bytes (torch's UntypedStorage.cpu)."""
        out = HostStorage(int(self.nbytes))
        out._bytes[:] = self._read(0, int(self.nbytes))
        return out

    def resize_(self, size: int):
        """Refused: a CUDA storage's block belongs to the caching allocator and cannot grow in place."""
        raise RuntimeError("resize_: tritensor's CUDA storages do not grow in place (their block belongs to the "
                           "caching allocator); copy into a new tensor instead")

    def __reduce__(self):
        raise TypeError("a CUDA storage cannot be pickled or copied on its own (it is a device address); "
                        "pickle or deepcopy the tensor, which copies its values")

    def record_stream(self, stream) -> None:
        """torch's record_stream: the block is not reused until the work ``stream`` has queued so far is done
        (nothing to do for the stream it was allocated on)."""
        if stream is not self._block.stream:
            self._allocator.record_stream(self._block, stream)

    def __del__(self):
        block = getattr(self, "_block", None)
        if block is None:
            return
        try:
            self._allocator.free(block)
        except Exception:  # interpreter shutdown: the allocator's module may already be gone
            pass


# ---------------------------------------------------------------------------------------------
# Byte copies between host and device, staged through pinned memory on the current stream.

_pinned_local = threading.local()


def _pinned(nbytes: int):
    """A per-thread pinned staging buffer, grown on demand (cuMemAllocHost is slow)."""
    buf = getattr(_pinned_local, "buf", None)
    if buf is None or buf.size < nbytes:
        if buf is not None:
            host_memory.close(buf)
        buf = host_memory.allocate(max(nbytes, 1 << 20))
        _pinned_local.buf = buf
    return int(buf.handle)


# Pinned staging for copies the host does not wait for (the address tables of multi-tensor
# kernels, which change whenever the gradients move): each copy takes a buffer no copy still
# reads, found by the event recorded after its last copy, as PyTorch's caching host allocator
# reuses pinned blocks. A buffer is lent to one copy at a time; at most _ASYNC_KEPT are kept.
_async_staging: list = []  # [pinned buffer, its capacity, the event after its last copy or None]
_async_lock = threading.Lock()
_ASYNC_KEPT = 32


def host_to_device_async(dst_ptr: int, src: np.ndarray, stream) -> None:
    """Copy a C-contiguous host array to device memory, ordered on ``stream``; returns at once.
    Work later queued on ``stream`` sees the bytes; the host may change ``src`` right away."""
    n = src.nbytes
    if n == 0:
        return
    refuse_while_capturing(stream, "a host-to-device copy", "its staging buffer is reused after it")
    with _async_lock:
        entry = next((e for e in _async_staging if e[1] >= n and (e[2] is None or e[2].is_done)), None)
        if entry is None and len(_async_staging) >= _ASYNC_KEPT:
            entry = _async_staging[0]  # every buffer is in flight: wait for the oldest copy
            entry[2].sync()
            if entry[1] < n:
                host_memory.close(entry[0])
                entry[0], entry[1] = host_memory.allocate(n), n
        if entry is None:
            cap = max(n, 1 << 16)
            entry = [host_memory.allocate(cap), cap, None]
        else:
            _async_staging.remove(entry)
        pin = int(entry[0].handle)
        ctypes.memmove(pin, src.ctypes.data, n)
        _check(drv.driver.cuMemcpyHtoDAsync(dst_ptr, pin, n, stream.cuda_stream))
        entry[2] = stream._cu.record()
        _async_staging.append(entry)  # the most recently used last: the first is the oldest


def _check(result):
    err = result[0] if isinstance(result, tuple) else result
    if err != drv.driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error: {err!r}")
    return result


def host_to_device(dst_ptr: int, src: np.ndarray, stream) -> None:
    """Copy a C-contiguous host array to device memory; returns when the copy is done."""
    n = src.nbytes
    if n == 0:
        return
    refuse_while_capturing(stream, "a host-to-device copy", "it waits for the copy on the host")
    pin = _pinned(n)
    ctypes.memmove(pin, src.ctypes.data, n)
    _check(drv.driver.cuMemcpyHtoDAsync(dst_ptr, pin, n, stream.cuda_stream))
    stream.synchronize()  # the staging buffer is reused by the next copy


# Pinned host memory for copies recorded into a graph (an address table first seen during a
# capture: the gradients that ``zero_grad(set_to_none=True)`` lets backward allocate from the
# graph's pool). A captured copy is replayed from its host bytes at every replay, so those bytes
# must stay as they are while the graph lives: each copy takes fresh bytes of this arena, and the
# graph keeps the arena's buffer alive. It is reserved outside captures (``reserve_captured_copies``:
# the driver allows no pinned allocation during one), never reused, and replaced when too small.
_captured_pinned: list = [None, 0, 0]  # [pinned buffer, its address, bytes handed out]
_captured_lock = threading.Lock()


def reserve_captured_copies(nbytes: int) -> None:
    """Outside a capture: have at least ``nbytes`` of pinned memory ready for captured copies.

    The reserve at least doubles when it grows: a step whose gradients moved makes a new address
    table each time, so the bytes asked for creep up by one table per step until the table cache
    is full, and a page-locked allocation sized to each request cost an H100 14 ms per step
    (cuMemHostAlloc, plus the old buffer's free)."""
    with _captured_lock:
        buf, _base, used = _captured_pinned
        if buf is not None and buf.size - used >= nbytes:
            return
        new = host_memory.allocate(max(nbytes, 2 * buf.size if buf is not None else 0, 1 << 16))
        _captured_pinned[:] = [new, int(new.handle), 0]  # the old buffer lives on in the graphs that use it


def captured_host_to_device(dst_ptr: int, src: np.ndarray, stream, graph: Capture, what: str) -> None:
    """During a capture on ``stream``: copy ``src`` to ``dst_ptr`` as a node of the graph (it runs at
    every replay), from pinned bytes the graph keeps unchanged. :class:`CaptureError` naming
    ``what`` when no pinned memory was reserved for it before the capture."""
    n = src.nbytes
    if n == 0:
        return
    with _captured_lock:
        buf, base, used = _captured_pinned
        if buf is None or buf.size - used < n:
            buf = None
        else:
            _captured_pinned[2] = used + ((n + 15) & -16)
    if buf is None:
        refuse_while_capturing(stream, what, "it is copied from the host, and no pinned memory was set aside for "
                                             "copies during a capture (a warm-up run outside it sets it aside)")
    ctypes.memmove(base + used, src.ctypes.data, n)
    graph.keep.append(buf)
    _check(drv.driver.cuMemcpyHtoDAsync(dst_ptr, base + used, n, stream.cuda_stream))


def device_to_host(dst: np.ndarray, src_ptr: int, stream) -> None:
    """Copy device bytes into a C-contiguous host array, ordered after work on ``stream``."""
    n = dst.nbytes
    if n == 0:
        return
    refuse_while_capturing(stream, "a device-to-host copy (.item(), .cpu(), .numpy(), bool(t), print)",
                           "it waits for the GPU on the host")
    if watch is not None:
        watch("a device-to-host copy (.item(), .cpu(), .numpy(), bool(t), print, a data-dependent shape)")
    pin = _pinned(n)
    _check(drv.driver.cuMemcpyDtoHAsync(pin, src_ptr, n, stream.cuda_stream))
    stream.synchronize()
    ctypes.memmove(dst.ctypes.data, pin, n)


def device_to_device(dst_ptr: int, src_ptr: int, nbytes: int, stream) -> None:
    """Copy ``nbytes`` between two device addresses, queued on ``stream`` (cuMemcpyDtoDAsync)."""
    if nbytes:
        _check(drv.driver.cuMemcpyDtoDAsync(dst_ptr, src_ptr, nbytes, stream.cuda_stream))


def device_memset(dst_ptr: int, value: int, nbytes: int, stream) -> None:
    """Set ``nbytes`` of device memory to the byte ``value``, ordered on ``stream``."""
    if nbytes:
        _check(drv.driver.cuMemsetD8Async(dst_ptr, value, nbytes, stream.cuda_stream))
