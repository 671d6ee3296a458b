"""``tritensor.cuda.green_contexts`` (torch.cuda.green_contexts): :class:`GreenContext`, a CUDA green
context: a context that owns a partition of the device's SMs (and, optionally, a workqueue
configuration), so work launched in it runs on those SMs only.

It is the driver's green-context API (``cuDevSmResourceSplitByCount``, ``cuGreenCtxCreate`` ...),
asked through ``runtime/driver.py``, the one seam to the driver: on the simulated device
(``runtime/sim.py``) the same calls split the simulated SMs as the driver does on sm_90, and
streams of a green context run work like any stream. In CPU mode there is no driver: every entry
refuses with a RuntimeError.
"""
from __future__ import annotations

import threading

from ..runtime import cuda as _cuda
from ..runtime import driver as drv
from .streams import ExternalStream

__all__ = ["GreenContext"]

_SCOPES = ("device_ctx", "balanced")  # torch's names, in the driver's CUdevWorkqueueConfigScope order
_STREAM_POOL = 32  # streams made per green context by Stream(), then handed out again in turn


def _call(result, what: str):
    """The values a driver call returned after its status; a RuntimeError naming the call otherwise."""
    err = result[0]
    if err != drv.driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver error: {what} failed with {err!r}")
    return result[1] if len(result) == 2 else result[1:]


def _driver_version() -> int:
    return _call(drv.driver.cuDriverGetVersion(), "cuDriverGetVersion")


def _device_id(device_id) -> int:
    if device_id is None:
        return _cuda.current_device()
    if isinstance(device_id, bool) or not isinstance(device_id, int):
        raise TypeError(f"GreenContext: device_id must be an int or None, got {type(device_id).__name__}")
    return _cuda._index(device_id)


class GreenContext:
    """Wrapper around a CUDA green context (torch's: in beta there, as the driver API is). Made by
    :meth:`create`; :meth:`set_context` makes it current (work then goes to its SMs on the default
    stream), :meth:`pop_context` restores the context and stream before it, :meth:`Stream` gives a
    stream of its own."""

    def __init__(self, *, _device: int, _green, _context):
        self._device = _device
        self._green, self._context = _green, _context
        self._parent_stream = None
        self._streams: list = []
        self._next_stream = 0
        self._lock = threading.Lock()

    @staticmethod
    def create(*, num_sms: int | None = None, workqueue_scope: str | None = None,
               workqueue_concurrency_limit: int | None = None, device_id: int | None = None) -> "GreenContext":
        """Create a CUDA green context on ``device_id`` (default: the current device) with ``num_sms``
        SMs (rounded up to the device's partition step; None: the SMs are not partitioned) and/or a
        workqueue configuration (``workqueue_scope`` "device_ctx" or "balanced", with an optional
        ``workqueue_concurrency_limit``). At least one of ``num_sms`` and ``workqueue_scope`` is needed."""
        _cuda._require("GreenContext.create")
        for name, value in (("num_sms", num_sms), ("workqueue_concurrency_limit", workqueue_concurrency_limit)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"GreenContext.create(): {name} must be an int or None, got {type(value).__name__}")
        if workqueue_scope is not None and workqueue_scope not in _SCOPES:
            raise ValueError(f"workqueue_scope must be 'device_ctx' or 'balanced', got '{workqueue_scope}'")
        if num_sms is None and workqueue_scope is None:
            raise RuntimeError("At least one of num_sms or workqueue_scope must be specified")
        if workqueue_concurrency_limit is not None and workqueue_scope is None:
            raise RuntimeError("workqueue_concurrency_limit requires workqueue_scope to be set")
        index = _device_id(device_id)
        version = _driver_version()
        if version < 12080:
            raise RuntimeError("cuda driver too old to use green context!")
        _cuda._cu_device(index)  # the device's primary context exists before a green one is made
        d = drv.driver
        device = _call(d.cuDeviceGet(index), "cuDeviceGet")
        resources = []
        if num_sms is not None:
            sm = _call(d.cuDeviceGetDevResource(device, d.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM),
                       "cuDeviceGetDevResource")
            if not 0 < num_sms <= sm.sm.smCount:
                raise RuntimeError(f"Invalid number of SMs requested for green context: {num_sms} "
                                   f"(device has {sm.sm.smCount} SMs)")
            groups, made, _remainder = _call(d.cuDevSmResourceSplitByCount(1, sm, 0, num_sms),
                                             "cuDevSmResourceSplitByCount")
            if made != 1:
                raise RuntimeError("Failed to create single SM resource group")
            resources.append(groups[0])
        if workqueue_scope is not None:
            if version < 13010:
                raise RuntimeError("cuda driver too old to use workqueue configuration!")
            wq = _call(d.cuDeviceGetDevResource(device, d.CUdevResourceType.CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG),
                       "cuDeviceGetDevResource")
            wq.wqConfig.sharingScope = d.CUdevWorkqueueConfigScope(_SCOPES.index(workqueue_scope))
            if workqueue_concurrency_limit is not None:
                wq.wqConfig.wqConcurrencyLimit = workqueue_concurrency_limit
            resources.append(wq)
        desc = _call(d.cuDevResourceGenerateDesc(resources, len(resources)), "cuDevResourceGenerateDesc")
        # the driver requires a green context to have a default stream of its own
        green = _call(d.cuGreenCtxCreate(desc, device, d.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM),
                      "cuGreenCtxCreate")
        context = _call(d.cuCtxFromGreenCtx(green), "cuCtxFromGreenCtx")
        return GreenContext(_device=index, _green=green, _context=context)

    @staticmethod
    def max_workqueue_concurrency(device_id: int | None = None) -> int:
        """The device's default limit on concurrent stream-ordered workloads of a workqueue
        configuration (the most ``workqueue_concurrency_limit`` can usefully be)."""
        _cuda._require("GreenContext.max_workqueue_concurrency")
        index = _device_id(device_id)
        if _driver_version() < 13010:
            raise RuntimeError("cuda driver too old to use workqueue configuration!")
        d = drv.driver
        device = _call(d.cuDeviceGet(index), "cuDeviceGet")
        wq = _call(d.cuDeviceGetDevResource(device, d.CUdevResourceType.CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG),
                   "cuDeviceGetDevResource")
        return int(wq.wqConfig.wqConcurrencyLimit)

    @property
    def device_id(self) -> int:
        """The device index of this green context."""
        return self._device

    def set_context(self) -> None:
        """Make the green context the current context. Work queued so far on the current stream is
        waited for, and the current stream becomes the default stream, which now runs on the green
        context's SMs."""
        parent = _cuda.current_stream()
        event = parent.record_event()
        _call(drv.driver.cuCtxPushCurrent(self._context), "cuCtxPushCurrent")
        self._parent_stream = parent
        default = _cuda.default_stream()
        default.wait_event(event)
        _cuda.set_stream(default)

    def pop_context(self) -> None:
        """Assuming the green context is the current context, pop it from the context stack and
        restore the previous context, and the stream that was current before :meth:`set_context`
        (which waits for the work queued in the green context)."""
        if self._parent_stream is None:
            raise RuntimeError("GreenContext.pop_context(): the green context was not made current by set_context()")
        event = _cuda.current_stream().record_event()
        popped = _call(drv.driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
        if int(popped) != int(self._context):
            raise RuntimeError("expected popped context to be the current ctx")
        parent, self._parent_stream = self._parent_stream, None
        parent.wait_event(event)
        _cuda.set_stream(parent)

    def Stream(self) -> ExternalStream:  # noqa: N802  (torch's name)
        """A CUDA stream of the green context: work queued on it runs on the green context's SMs.
        Streams come from a pool of the green context's, handed out in turn."""
        with self._lock:
            slot = self._next_stream % _STREAM_POOL
            self._next_stream += 1
            if slot == len(self._streams):
                d = drv.driver
                handle = _call(d.cuGreenCtxStreamCreate(self._green, d.CUstream_flags.CU_STREAM_NON_BLOCKING, 0),
                               "cuGreenCtxStreamCreate")
                self._streams.append(int(handle))
            handle = self._streams[slot]
        return ExternalStream(handle, self._device)

    def __del__(self):
        green = getattr(self, "_green", None)
        if green is not None and drv.driver is not None:
            drv.driver.cuGreenCtxDestroy(green)

    def __repr__(self) -> str:
        return f"<tritensor.cuda.GreenContext device_id={self._device}>"
