"""``tritensor.cuda.memory`` (torch.cuda.memory): the device memory API over the caching allocator.

The statistics are the allocator's own (``runtime/allocator.py``), exact: ``memory_summary``
prints them in torch's table, ``memory_snapshot`` lists its segments and their blocks. The free
and total memory of a device come from the driver (``cuMemGetInfo``; the simulated device answers
with its own capacity). ``set_per_process_memory_fraction`` makes the allocator refuse segments
beyond the fraction with torch's out-of-memory error. ``MemPool``/``use_mem_pool`` give a private
pool of the allocator, as CUDA graphs' pools are, and send the current thread's allocations to it.
``caching_allocator_alloc``/``caching_allocator_delete`` lend raw blocks of the allocator to
other libraries.

CPU mode has no device memory: the statistics are torch's answers without CUDA (``{}``, 0), and the
calls that need a device raise ``tritensor.cuda``'s error.
"""
from __future__ import annotations

import contextlib
import ctypes
import threading
import collections
import warnings

from ..runtime import cuda as _cuda
from ..runtime import driver as _drv
from ..runtime import host_memory as _host_memory
from ..runtime import memory as _memory
from ..runtime import mode
from ..runtime.allocator import OutOfMemoryError
from ..runtime.cuda import (empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated,
                            memory_reserved, memory_stats, reset_accumulated_memory_stats, reset_peak_memory_stats)
from . import _nvml
from .streams import ExternalStream

__all__ = [
    "caching_allocator_alloc", "caching_allocator_delete", "caching_allocator_enable", "caching_allocator_disabled",
    "get_per_process_memory_fraction",
    "set_per_process_memory_fraction", "empty_cache", "memory_stats", "memory_stats_as_nested_dict",
    "reset_accumulated_memory_stats", "reset_peak_memory_stats", "reset_max_memory_allocated",
    "reset_max_memory_cached", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_cached", "max_memory_cached", "memory_snapshot", "memory_summary", "list_gpu_processes", "mem_get_info",
    "get_allocator_backend", "CUDAPluggableAllocator", "change_current_allocator", "MemPool", "use_mem_pool",
    "host_memory_stats", "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats",
    "reset_peak_host_memory_stats",
]


def _allocator(device, what: str):
    """The caching allocator of ``device`` (checked), which knows its device for its OOM message."""
    _cuda._require(what)
    idx = _cuda._index(device)
    alloc = _memory.device_allocator(idx)
    if alloc._device is None:
        alloc.set_memory_fraction(None, 0, idx, lambda: mem_get_info(idx))
    return idx, alloc


# ----- what the driver says -------------------------------------------------------------------
def mem_get_info(device=None) -> tuple[int, int]:
    """The free and total memory of ``device`` in bytes, as the driver counts them (``cuMemGetInfo``):
    memory the caching allocator holds, cached or not, is not free."""
    _cuda._require("mem_get_info")
    _cuda._cu_device(_cuda._index(device))  # its context current in this thread: cuMemGetInfo asks the current one
    err, free, total = _drv.driver.cuMemGetInfo()
    _memory._check((err,))
    return int(free), int(total)


def list_gpu_processes(device=None) -> str:
    """The processes running on ``device`` and the memory each uses, from NVML (torch's printout)."""
    _cuda._require("list_gpu_processes")
    idx = _cuda._index(device)
    procs = _nvml.running_processes(idx, "list_gpu_processes")
    lines = [f"GPU:{idx}"]
    if not procs:
        lines.append("no processes are running")
    for pid, used in procs:
        lines.append(f"process {pid:>10d} uses {used / (1024 * 1024):>12.3f} MB GPU memory")
    return "\n".join(lines)


def get_allocator_backend() -> str:
    """``"native"``: tritensor's own caching allocator (torch's other backend, cudaMallocAsync, is not offered)."""
    return "native"


# ----- the per-process limit --------------------------------------------------------------------
def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Let the caching allocator reserve at most ``fraction`` of ``device``'s total memory: a request
    beyond it raises torch's ``OutOfMemoryError`` (after the cache is emptied and the request retried)."""
    idx, alloc = _allocator(device, "set_per_process_memory_fraction")
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    alloc.set_memory_fraction(fraction, mem_get_info(idx)[1], idx, lambda: mem_get_info(idx))


def get_per_process_memory_fraction(device=None) -> float:
    """The fraction of ``device``'s memory the caching allocator may reserve (1.0 unless set)."""
    return _allocator(device, "get_per_process_memory_fraction")[1].memory_fraction()


# ----- statistics ---------------------------------------------------------------------------------
def memory_stats_as_nested_dict(device=None) -> dict:
    """``memory_stats()`` nested as torch's: ``{"allocated_bytes": {"all": {"current": ...}}, "num_ooms": ...}``."""
    out: dict = {}
    for key, value in memory_stats(device).items():
        *path, last = key.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def memory_cached(device=None) -> int:
    """Deprecated; see :func:`memory_reserved`."""
    warnings.warn("`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`", FutureWarning,
                  stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated; see :func:`max_memory_reserved`."""
    warnings.warn("`torch.cuda.max_memory_cached` has been renamed to `torch.cuda.max_memory_reserved`",
                  FutureWarning, stacklevel=2)
    return max_memory_reserved(device)


def reset_max_memory_allocated(device=None) -> None:
    """Deprecated: resets every peak (:func:`reset_peak_memory_stats`), with torch's warning."""
    warnings.warn("torch.cuda.reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats, "
                  "which resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    """Deprecated: resets every peak (:func:`reset_peak_memory_stats`), with torch's warning."""
    warnings.warn("torch.cuda.reset_max_memory_cached now calls torch.cuda.reset_peak_memory_stats, "
                  "which resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def _format_size(sz: int, pref_sz: float) -> str:
    prefixes = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_sz < 768 * 1024:
            break
        prefix = new_prefix
        sz //= 1024
        pref_sz /= 1024
    return f"{sz:6d} {prefix}"


def _format_count(cnt: int, pref_cnt: float) -> str:
    prefixes = [" ", "K", "M"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_cnt < 750 * 1000:
            break
        prefix = new_prefix
        cnt //= 1000
        pref_cnt /= 1000
    return f"{cnt:7d} {prefix} "


_SUMMARY_METRICS = (
    ("allocated_bytes", "Allocated memory", _format_size),
    ("active_bytes", "Active memory", _format_size),
    ("requested_bytes", "Requested memory", _format_size),
    ("reserved_bytes", "GPU reserved memory", _format_size),
    ("inactive_split_bytes", "Non-releasable memory", _format_size),
    ("allocation", "Allocations", _format_count),
    ("active", "Active allocs", _format_count),
    ("segment", "GPU reserved segments", _format_count),
    ("inactive_split", "Non-releasable allocs", _format_count),
)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """The allocator's statistics for ``device`` as torch's 75-column table: current, peak, total
    allocated and total freed of each statistic, for all blocks and (unless ``abbreviated``) the
    large and small pools."""
    _cuda._require("memory_summary")
    idx = _cuda._index(device)
    stats = memory_stats(idx)
    rule, thick = "-" * 75, "=" * 75
    lines = [thick, f" {'':14} tritensor CUDA memory summary, device ID {idx:<17d} ", rule,
             f"  {'':9} CUDA OOMs: {stats['num_ooms']:<12d} | {'':6} cudaMalloc retries: "
             f"{stats['num_alloc_retries']:<8d}  ",
             thick, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    for key, name, fmt in _SUMMARY_METRICS:
        lines.append(rule)
        rows = [("all", name)]
        if not abbreviated:
            rows += [("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
        pref = None
        for pool, label in rows:
            values = [stats[f"{key}.{pool}.{f}"] for f in ("current", "peak", "allocated", "freed")]
            pref = values if pref is None else pref  # each column scaled by the "all" row's value, as torch's
            cells = " | ".join(fmt(v, p) for v, p in zip(values, pref))
            lines.append(f" {label:<21} | {cells} ")
    for key, name in (("oversize_allocations", "Oversize allocations"), ("oversize_segments", "Oversize GPU segments")):
        lines.append(rule)
        values = [stats[f"{key}.{f}"] for f in ("current", "peak", "allocated", "freed")]
        lines.append(f" {name:<21} | " + " | ".join(_format_count(v, v) for v in values) + " ")
    lines.append(thick)
    return "|" + "|\n|".join(lines) + "|\n"


def memory_snapshot(mempool_id=None, include_traces: bool = True) -> list:
    """Every segment of every device's caching allocator (each block is its own segment here) with its
    blocks: address, sizes, stream, pool, and state ``active_allocated``, ``active_pending_free`` or
    ``inactive`` (cached). ``mempool_id`` (a ``MemPool``'s ``id``): only that pool's. No stack traces
    are recorded (``frames`` is empty)."""
    if not mode.GPU:
        return []
    pool = None if mempool_id is None or tuple(mempool_id) == (0, 0) else int(mempool_id[1])
    out = []
    for idx, alloc in sorted(_memory._allocators.items()):
        out += alloc.snapshot(idx, pool)
    return out


# ----- raw blocks for other libraries -----------------------------------------------------------
_raw_blocks: dict = {}  # address -> (allocator, block), lent by caching_allocator_alloc
_raw_lock = threading.Lock()


def caching_allocator_alloc(size, device=None, stream=None) -> int:
    """``size`` bytes from the caching allocator of ``device``, ordered on ``stream`` (a Stream or a
    raw handle; the device's current stream by default): the address, for another library. Give it
    back with :func:`caching_allocator_delete`."""
    idx, alloc = _allocator(device, "caching_allocator_alloc")
    if stream is None:
        stream = _cuda.current_stream(idx)
    elif isinstance(stream, int) and not isinstance(stream, bool):
        stream = _stream_by_handle(stream, idx)
    elif not isinstance(stream, _cuda.Stream):
        raise TypeError("Invalid type for stream argument, must be `torch.cuda.Stream` or `int` representing a "
                        "pointer to an existing stream")
    block = alloc.malloc(size, stream)
    with _raw_lock:
        _raw_blocks[block.ptr] = (alloc, block)
    return block.ptr


def _stream_by_handle(handle: int, idx: int):
    for s in (_cuda.current_stream(idx), _cuda.default_stream(idx)):
        if s.cuda_stream == handle:
            return s
    return ExternalStream(handle, idx)


def caching_allocator_delete(mem_ptr) -> None:
    """Give back a block that :func:`caching_allocator_alloc` lent (by its address)."""
    with _raw_lock:
        entry = _raw_blocks.pop(int(mem_ptr), None)
    if entry is None:
        raise RuntimeError(f"invalid device pointer: {int(mem_ptr):#x}")
    alloc, block = entry
    alloc.free(block)


def caching_allocator_enable(value: bool = True) -> None:
    """Turn the caching of every device's allocator on or off. Off, a freed tensor's memory goes back to
    the driver at once and every allocation asks the driver (what tools that check accesses per
    allocation need); the cache is emptied when it is turned off. Nothing to do before CUDA is
    initialised, as torch's."""
    if not mode.GPU or not _cuda._devices:
        return
    for idx in range(_cuda.device_count()):
        _memory.device_allocator(idx).set_caching(bool(value))


@contextlib.contextmanager
def caching_allocator_disabled():
    """The block runs with the caching allocator off (:func:`caching_allocator_enable`)."""
    _cuda._require("caching_allocator_disabled")
    prev = _memory.device_allocator(_cuda.current_device()).caching()
    caching_allocator_enable(False)
    try:
        yield
    finally:
        caching_allocator_enable(prev)


# ----- another allocator: a library's alloc/free functions ---------------------------------------
class _CUDAAllocator:
    """A device allocator, as torch.cuda.memory's wrapper: ``allocator()`` is what it wraps."""

    def __init__(self, allocator):
        self._allocator = allocator

    def allocator(self):
        return self._allocator


class _Plugged:
    """A block a pluggable allocator handed out: what its free function needs back."""

    __slots__ = ("ptr", "size", "device")

    def __init__(self, ptr: int, size: int, device: int):
        self.ptr, self.size, self.device = ptr, size, device


class _PluggableBackend(_memory.CudaPoolBackend):
    """The caching allocator's backend over a shared library's functions, with C signatures
    ``void* alloc(ssize_t size, int device, cudaStream_t stream)`` and
    ``void free(void* ptr, ssize_t size, int device, cudaStream_t stream)``; events as the pool's."""

    def __init__(self, path: str, alloc, free):
        self.path, self._alloc, self._free = path, alloc, free

    def allocate(self, nbytes: int, stream):
        device = stream.device.index
        ptr = self._alloc(nbytes, device, stream.cuda_stream)
        if not ptr:
            raise OutOfMemoryError(f"the allocation function of {self.path} returned NULL for {nbytes} bytes")
        return int(ptr), _Plugged(int(ptr), nbytes, device)

    def free(self, handle, stream) -> None:
        self._free(handle.ptr, handle.size, handle.device, stream.cuda_stream)


class CUDAPluggableAllocator(_CUDAAllocator):
    """Device memory from a shared library's allocation and free functions (``alloc_fn_name`` and
    ``free_fn_name`` in ``path_to_so_file``, torch's C signatures): make it the allocator with
    :func:`change_current_allocator` before any device memory is allocated. As torch's, it caches
    nothing: every tensor's memory comes from the library and goes back to it when freed."""

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str):
        lib = ctypes.CDLL(path_to_so_file)
        alloc, free = getattr(lib, alloc_fn_name), getattr(lib, free_fn_name)
        alloc.restype, alloc.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        free.restype, free.argtypes = None, [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self._lib = lib  # the library stays loaded while its functions may be called
        super().__init__(_PluggableBackend(path_to_so_file, alloc, free))


def change_current_allocator(allocator: _CUDAAllocator) -> None:
    """Make ``allocator`` every device's allocator; refused once device memory was allocated (the
    blocks in use belong to the allocator that gave them), with torch's message."""
    if not isinstance(allocator, _CUDAAllocator):
        raise TypeError(f"change_current_allocator(): allocator must be a CUDAPluggableAllocator, got "
                        f"{type(allocator).__name__}")
    _cuda._require("change_current_allocator")
    backend = allocator.allocator()
    with _memory._allocators_lock:
        if _memory._allocators:
            raise RuntimeError("Can't swap an already initialized allocator")
        for idx in range(_cuda.device_count()):
            alloc = _memory.CachingAllocator(backend)
            alloc.set_caching(False)
            _memory._allocators[idx] = alloc


def _get_current_allocator() -> _CUDAAllocator:
    """The current device's allocator, wrapped."""
    return _CUDAAllocator(_memory.device_allocator(_cuda.current_device()))


# ----- private pools ----------------------------------------------------------------------------
class MemPool:
    """A private pool of the current device's caching allocator, as a CUDA graph's: its blocks serve only
    allocations routed to it (:func:`use_mem_pool`), and go back when the pool and its tensors are gone.
    ``id`` is ``(0, n)``, as torch's user-made pools."""

    def __init__(self, allocator=None, use_on_oom: bool = False, no_split: bool = False):
        if allocator is not None:
            raise ValueError("MemPool: allocator must be None: tritensor's pools are pools of its caching allocator")
        self._device, self._alloc = _allocator(None, "MemPool")
        self._pool = self._alloc.create_pool()
        self.use_on_oom, self.no_split = bool(use_on_oom), bool(no_split)
        self._users = 0

    @property
    def id(self) -> tuple[int, int]:
        """The pool's id, ``(0, n)``: what memory_snapshot(mempool_id=...) takes."""
        return (0, self._pool)

    def use_count(self) -> int:
        """References to the pool: this object, and each ``use_mem_pool`` block it is active in."""
        return 1 + self._users

    def snapshot(self, include_traces: bool = True) -> list:
        """memory_snapshot() of this pool's segments only."""
        return memory_snapshot(self.id, include_traces=include_traces)

    def __del__(self):
        try:
            self._alloc.release_pool(self._pool)
        except Exception:  # interpreter shutdown, or never made
            pass


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device=None):
    """Inside the block, the current thread's allocations on ``device`` (the current one) come from
    ``pool``; other threads' do not, as torch's."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool: pool must be a MemPool, got {type(pool).__name__}")
    idx, alloc = _allocator(device, "use_mem_pool")
    if alloc is not pool._alloc:
        raise ValueError(f"use_mem_pool: the pool belongs to cuda:{pool._device}, not cuda:{idx}")
    previous = alloc.route(pool._pool)
    pool._users += 1
    try:
        yield
    finally:
        pool._users -= 1
        alloc.route(previous or None)


def host_memory_stats_as_nested_dict() -> dict:
    """``torch.cuda.host_memory_stats_as_nested_dict``: the pinned host memory statistics
    (``runtime/host_memory.py`` says what is counted); ``{}`` before CUDA is initialised, as torch."""
    if not _cuda._devices:
        return {}
    return _host_memory.stats()


def host_memory_stats() -> dict:
    """``torch.cuda.host_memory_stats``: :func:`host_memory_stats_as_nested_dict` flattened to sorted
    dotted keys (``"allocations.current"``, ``"host_alloc_time.avg"``, ``"num_host_alloc"`` ...)."""
    result = []

    def add(prefix, obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                add(f"{prefix}.{k}" if prefix else k, v)
        else:
            result.append((prefix, obj))

    add("", host_memory_stats_as_nested_dict())
    result.sort()
    return collections.OrderedDict(result)


def reset_accumulated_host_memory_stats() -> None:
    """``torch.cuda.reset_accumulated_host_memory_stats``: zero the "allocated"/"freed" counts, the
    numbers of driver calls and their times."""
    _host_memory.reset_accumulated()


def reset_peak_host_memory_stats() -> None:
    """``torch.cuda.reset_peak_host_memory_stats``: every "peak" becomes its current value."""
    _host_memory.reset_peak()
