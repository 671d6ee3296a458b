"""``tritensor.cuda.nvtx`` (torch.cuda.nvtx): NVTX ranges and marks, for profilers such as Nsight Systems.

NVTX records nothing unless a profiling tool is attached; the Python ``nvtx`` package (NVIDIA's)
forwards to it when installed, and is what these calls use then. Either way the ranges are
counted here per thread, so ``range_push``/``range_pop`` return the zero-based depth as NVTX's
C API does, and ``range_start``/``range_end`` pair by handle across threads. Without CUDA they
raise ``tritensor.cuda``'s error, as torch's raise without a CUDA build.
"""
from __future__ import annotations

import contextlib
import itertools
import threading

from ..runtime import cuda as _cuda

try:  # NVIDIA's nvtx package: the annotations reach an attached profiler through it
    import nvtx as _nvtx_lib
except ImportError:
    _nvtx_lib = None

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]

_local = threading.local()
_ids = itertools.count(1)
_open: dict = {}  # range_start's handle -> the library's range (or None)
_open_lock = threading.Lock()


def _stack() -> list:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def _check_msg(msg, what: str) -> str:
    _cuda._require(f"nvtx.{what}")
    if not isinstance(msg, str):
        raise TypeError(f"{what}(): msg must be a str, got {type(msg).__name__}")
    return msg


def range_push(msg) -> int:
    """Push a range onto this thread's stack of nested ranges; the zero-based depth of the range started."""
    msg = _check_msg(msg, "range_push")
    stack = _stack()
    stack.append(msg)
    if _nvtx_lib is not None:
        _nvtx_lib.push_range(message=msg)
    return len(stack) - 1


def range_pop() -> int:
    """Pop a range off this thread's stack; the zero-based depth of the range ended (-1: none was open)."""
    _cuda._require("nvtx.range_pop")
    stack = _stack()
    if not stack:
        return -1
    stack.pop()
    if _nvtx_lib is not None:
        _nvtx_lib.pop_range()
    return len(stack)


def range_start(msg) -> int:
    """Start a range that may end on another thread; its handle, for :func:`range_end`."""
    msg = _check_msg(msg, "range_start")
    rid = next(_ids)
    with _open_lock:
        _open[rid] = _nvtx_lib.start_range(message=msg) if _nvtx_lib is not None else None
    return rid


def range_end(range_id) -> None:
    """End the range :func:`range_start` returned ``range_id`` for."""
    _cuda._require("nvtx.range_end")
    with _open_lock:
        if range_id not in _open:
            raise ValueError(f"range_end(): no open range with id {range_id!r}")
        handle = _open.pop(range_id)
    if _nvtx_lib is not None:
        _nvtx_lib.end_range(handle)


def mark(msg) -> None:
    """An instantaneous event."""
    msg = _check_msg(msg, "mark")
    if _nvtx_lib is not None:
        _nvtx_lib.mark(message=msg)


@contextlib.contextmanager
def range(msg, *args, **kwargs):
    """``with nvtx.range("step {}", i):`` pushes ``msg.format(*args, **kwargs)`` for the block."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
