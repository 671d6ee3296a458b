"""``tritensor.cuda.streams`` (torch.cuda.streams): streams and events, and a stream made elsewhere.

``Stream`` and ``Event`` are ``runtime/cuda.py``'s (every launch goes on the current stream).
``ExternalStream`` wraps a raw ``cudaStream_t`` handle that another library created: work queued
on it by tritensor runs in order with that library's, and tritensor never destroys it.
``torch.Stream``/``torch.Event`` (the package root's ``Stream``/``Event``) are the device-generic
names: on a cuda device they make this module's classes, on the CPU a host stream or event, on
which everything has already run (tritensor's CPU work is synchronous).
"""
from __future__ import annotations

import time

from ..runtime import cuda as _cuda
from ..runtime import driver as drv
from ..runtime import mode
from ..runtime.cuda import Event, Stream, StreamContext
from ..runtime.device import device as _device
from ..runtime.device import get_default_device

_CoreStream = drv.CoreStream  # cuda.core's Stream, or the simulator's (None in CPU mode)

__all__ = ["Event", "ExternalStream", "Stream", "StreamContext"]


class ExternalStream(Stream):
    """A stream created outside tritensor, by its raw handle (``stream_ptr``, an int): tritensor's
    work queued on it is ordered with the owner's. The owner keeps it alive and destroys it."""

    def __init__(self, stream_ptr, device=None):
        _cuda._require("ExternalStream")
        if isinstance(stream_ptr, bool) or not isinstance(stream_ptr, int):
            raise TypeError(f"ExternalStream(): stream_ptr must be an int (a cudaStream_t handle), got "
                            f"{type(stream_ptr).__name__}")
        idx = _cuda._index(device)
        _cuda._cu_device(idx)  # the device's context current before the handle is looked at
        super().__init__(idx, _wrap=_CoreStream.from_handle(stream_ptr))


def get_stream_from_external(data_ptr: int, device=None) -> ExternalStream:
    """torch.cuda.get_stream_from_external: the stream ``data_ptr`` (a raw handle) names, as an ExternalStream."""
    return ExternalStream(data_ptr, device)


def _device_type(device) -> _device:
    d = get_default_device() if device is None else _device(device)
    if d.type == "cuda" and not mode.GPU:
        _cuda._require(f"Stream on {d}")
    return d


class _GenericMeta(type):
    """``isinstance(s, tritensor.Stream)`` holds for a CUDA stream too, as torch's CUDA streams are torch.Streams."""

    def __instancecheck__(cls, obj) -> bool:
        return type.__instancecheck__(cls, obj) or isinstance(obj, cls._cuda_class)


class GenericStream(metaclass=_GenericMeta):
    """torch.Stream: a stream of ``device`` (the default device when None). A cuda device gives a
    :class:`Stream`; the CPU a host stream: work on it has run when it returns, so it is always
    done and waiting on it is immediate."""

    _cuda_class = Stream

    def __new__(cls, device=None, *, priority: int = 0):
        d = _device_type(device)
        if d.type == "cuda":
            return Stream(d, priority=priority)
        return super().__new__(cls)

    def __init__(self, device=None, *, priority: int = 0):
        self.device = _device("cpu")
        self.device_type, self.device_index, self.stream_id = "cpu", -1, 0
        self.priority = priority

    def query(self) -> bool:
        """Whether the work queued on the stream has run: always, on the host."""
        return True

    def synchronize(self) -> None:
        """Wait for the stream's work: it has run already."""

    def wait_event(self, event) -> None:
        """Order later work after ``event``: host work already is."""

    def wait_stream(self, stream) -> None:
        """Order later work after ``stream``'s: host work already is."""

    def record_event(self, event=None):
        """Record ``event`` (a new host event by default) on this stream and return it."""
        event = GenericEvent("cpu") if event is None else event
        event.record(self)
        return event

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.device == self.device

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_index, self.stream_id))

    def __repr__(self) -> str:
        return "tritensor.Stream device_type=cpu, device_index=-1, stream_id=0"


class GenericEvent(metaclass=_GenericMeta):
    """torch.Event: an event of ``device``: a cuda device gives an :class:`Event`, the CPU a host
    event, complete as soon as it is recorded."""

    _cuda_class = Event

    def __new__(cls, device=None, *, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False):
        d = _device_type(device)
        if d.type == "cuda":
            return Event(enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)
        return super().__new__(cls)

    def __init__(self, device=None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        self.device = _device("cpu")
        self.enable_timing = enable_timing
        self._time = None

    def record(self, stream=None) -> None:
        """Mark this point of the host's work (the time, for elapsed_time)."""
        self._time = time.perf_counter()

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, timing enabled)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("elapsed_time: both events need enable_timing=True")
        if self._time is None or end_event._time is None:
            raise ValueError("elapsed_time: both events must be recorded first")
        return (end_event._time - self._time) * 1e3

    def query(self) -> bool:
        """Whether the recorded work has run: always, on the host."""
        return True

    def synchronize(self) -> None:
        """Wait for the recorded work: it has run already."""

    def wait(self, stream=None) -> None:
        """Make ``stream`` wait for the event: host work is in order already."""

    def __repr__(self) -> str:
        return "tritensor.Event device_type=cpu, device_index=-1, event_flag=0, event_id=0"
