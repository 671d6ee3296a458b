"""Page-locked (pinned) host memory, allocated and counted in one place, so ``torch.cuda``'s host
memory statistics (``host_memory_stats`` and its resets, ``gpu/memory.py``) have something to read.

Every pinned buffer of the runtime comes from :func:`allocate`: the storages of
``Tensor.pin_memory()`` (requests handed to a caller: *active* while alive) and the runtime's own
staging buffers for host<->device copies and the device-assert flags (blocks it owns and reuses:
*allocations* only). A buffer is counted free when it is closed through :func:`close` or, for one
dropped without a close, when the garbage collector releases it. Bytes are the bytes requested
(torch rounds its blocks up to powers of two first); times are microseconds of the driver's
allocation (cuMemAllocHost) and free calls, as torch measures them.
"""
from __future__ import annotations

import threading
import time
import weakref

from . import driver as drv

__all__ = ["allocate", "close", "stats", "reset_accumulated", "reset_peak"]

_lock = threading.Lock()


class _Stat:
    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self):
        self.current = self.peak = self.allocated = self.freed = 0

    def increase(self, n: int) -> None:
        self.current += n
        self.allocated += n
        self.peak = max(self.peak, self.current)

    def decrease(self, n: int) -> None:
        self.current -= n
        self.freed += n

    def as_dict(self) -> dict:
        return {"current": self.current, "peak": self.peak, "allocated": self.allocated, "freed": self.freed}


class _Durations:
    __slots__ = ("total", "max", "min", "count")

    def __init__(self):
        self.total = self.max = self.min = self.count = 0

    def add(self, us: int) -> None:
        self.min = us if self.count == 0 else min(self.min, us)
        self.max = max(self.max, us)
        self.total += us
        self.count += 1

    def as_dict(self) -> dict:
        return {"total": self.total, "max": self.max, "min": self.min, "count": self.count,
                "avg": self.total // self.count if self.count else 0}


_stats = {name: _Stat() for name in ("allocations", "allocated_bytes", "active_requests", "active_bytes")}
_alloc_time, _free_time = _Durations(), _Durations()
_counts = {"num_host_alloc": 0, "num_host_free": 0}
_live: dict = {}  # id(buffer) -> its finalizer (which knows its size and whether it is active)


def _freed(key: int, nbytes: int, active: bool, us: int | None) -> None:
    with _lock:
        _live.pop(key, None)
        _stats["allocations"].decrease(1)
        _stats["allocated_bytes"].decrease(nbytes)
        if active:
            _stats["active_requests"].decrease(1)
            _stats["active_bytes"].decrease(nbytes)
        _counts["num_host_free"] += 1
        if us is not None:
            _free_time.add(us)


def allocate(nbytes: int, *, active: bool = False):
    """A pinned host buffer of ``nbytes`` (at least one byte), counted; ``active``: handed to a
    caller (a pinned tensor's storage) rather than kept by the runtime for its copies."""
    nbytes = max(int(nbytes), 1)
    t0 = time.perf_counter()
    buf = drv.LegacyPinnedMemoryResource().allocate(nbytes)
    us = int((time.perf_counter() - t0) * 1e6)
    with _lock:
        _stats["allocations"].increase(1)
        _stats["allocated_bytes"].increase(nbytes)
        if active:
            _stats["active_requests"].increase(1)
            _stats["active_bytes"].increase(nbytes)
        _counts["num_host_alloc"] += 1
        _alloc_time.add(us)
        _live[id(buf)] = weakref.finalize(buf, _freed, id(buf), nbytes, active, None)
    return buf


def close(buf) -> None:
    """Free a buffer from :func:`allocate` now (the driver's free call is timed)."""
    with _lock:
        fin = _live.pop(id(buf), None)
    args = fin.detach() if fin is not None else None
    t0 = time.perf_counter()
    buf.close()
    if args is not None:
        _, _, (key, nbytes, active, _), _ = args
        _freed(key, nbytes, active, int((time.perf_counter() - t0) * 1e6))


def stats() -> dict:
    """The statistics as torch's nested dict (``torch.cuda.host_memory_stats_as_nested_dict``)."""
    with _lock:
        out = {name: s.as_dict() for name, s in _stats.items()}
        out.update(_counts)
        out["host_alloc_time"] = _alloc_time.as_dict()
        out["host_free_time"] = _free_time.as_dict()
    return out


def reset_accumulated() -> None:
    """Zero the historical counts ("allocated", "freed", the call counts and times)."""
    global _alloc_time, _free_time
    with _lock:
        for s in _stats.values():
            s.allocated = s.freed = 0
        for k in _counts:
            _counts[k] = 0
        _alloc_time, _free_time = _Durations(), _Durations()


def reset_peak() -> None:
    """Set every "peak" to its current value."""
    with _lock:
        for s in _stats.values():
            s.peak = s.current
