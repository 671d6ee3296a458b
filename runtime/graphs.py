"""CUDA graphs with PyTorch's API (``torch.cuda.graphs``): capture a step once, replay it for no host time per op.

A replayed graph launches every captured kernel with one driver call: the host time of
dispatch, checks and launches (about 1,000 launches a training step) is paid once, at capture.
Capture is stream capture (cuda.core's ``GraphBuilder``) on tritensor's current stream, which
must not be the device's default stream (``graph(...)`` captures on a side stream of its own).

Memory follows PyTorch's rules. Every allocation on the capturing stream comes from the graph's
*private pool* (``runtime/allocator.py``; ``graph_pool_handle()`` makes one that graphs can
share), served by blocks outside the graph (``cuMemAlloc``), so the graph's tensors, its static
inputs and outputs, keep their addresses and their contents across replays, and stay alive as
long as the graph. The pool is released when the graph is reset or dies.

What cannot be captured raises :class:`~tritensor.runtime.memory.CaptureError` naming it, before
it reaches the driver (which would invalidate the capture): a host sync (``.item()``, ``.cpu()``,
``bool(t)``: any device-to-host copy; ``tritensor.cuda.synchronize()``, a stream's or an event's
``synchronize()`` and ``query()``), a host tensor staged into a kernel, a multi-tensor kernel's
address table seen for the first time, a kernel's first launch with new argument types (Triton
would compile it and load its module) and an autotuned kernel meeting a new shape. Warm up before
capturing, as PyTorch asks: run the step a few times on the capture stream first.

What a graph reads without allocating it stays alive with the graph: the device copies of the
address tables its multi-tensor kernels read (``runtime/launch.py`` caches them, and would free
one it evicts while a graph still points at it). The caching allocator records no event while a
capture is under way (``runtime/allocator.py``: begin_capture / end_capture).

If the ``with graph(g):`` block raises, the capture is ended and thrown away, and the block's
exception is the one raised (not a second one from the driver about the broken capture).

CPU mode has no graphs: every entry point raises a clear error saying so.
"""
from __future__ import annotations

import gc

from . import cuda, device_asserts, memory, mode

_MODES = ("global", "thread_local", "relaxed")


def _require_gpu(what: str) -> None:
    if not mode.GPU:
        raise RuntimeError(f"{what}: CUDA graphs need a GPU (tritensor runs in CPU mode: no CUDA driver/device, "
                           "or TRITENSOR_DEVICE=cpu)")


def is_current_stream_capturing() -> bool:
    """Whether the current stream is capturing a CUDA graph (always False in CPU mode)."""
    return bool(memory.capturing) and mode.GPU and id(cuda.current_stream()) in memory.capturing


def graph_pool_handle():
    """A private memory pool that several graphs' captures can share (``capture_begin(pool=...)``)."""
    _require_gpu("graph_pool_handle")
    return _PoolHandle(memory.device_allocator(cuda.current_device()))


class _PoolHandle:
    """A private pool of one device's caching allocator; released when no graph or handle holds it."""

    __slots__ = ("allocator", "id")

    def __init__(self, allocator):
        self.allocator, self.id = allocator, allocator.create_pool()

    def __del__(self):
        try:
            self.allocator.release_pool(self.id)
        except Exception:  # interpreter shutdown
            pass


class CUDAGraph:
    """A CUDA graph: ``capture_begin()``, the work, ``capture_end()``, then ``replay()`` at will."""

    def __init__(self, keep_graph: bool = False):
        _require_gpu("CUDAGraph")
        self._graph = None
        self._builder = None
        self._stream = None
        self._pool = None
        self._kept: list = []  # what the graph reads but does not own (address tables), alive with it
        self._checks = None  # the device whose error flag the graph's checked kernels may set (device_asserts)
        self._allocator = None  # the device's caching allocator, told when the capture ends

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        """Begin capturing the current stream's work. ``pool``: a ``graph_pool_handle()`` or another
        graph's ``pool()`` to share memory with; a new private pool otherwise."""
        if capture_error_mode not in _MODES:
            raise ValueError(f"capture_begin: capture_error_mode must be one of {_MODES}, got {capture_error_mode!r}")
        if self._builder is not None or self._graph is not None:
            raise RuntimeError("capture_begin: this graph already holds a capture; reset() it first")
        if pool is not None and not isinstance(pool, _PoolHandle):
            raise TypeError(f"capture_begin: pool must come from graph_pool_handle() or CUDAGraph.pool(), "
                            f"got {type(pool).__name__}")
        stream = cuda.current_stream()
        if stream == cuda.default_stream(stream.device.index):
            raise RuntimeError("capture_begin: CUDA graphs cannot be captured on the default stream; capture on a "
                               "side stream (tritensor.cuda.graph(g) makes one, or `with tritensor.cuda.stream(s)`)")
        if id(stream) in memory.capturing:
            raise RuntimeError(f"capture_begin: {stream} is capturing another graph already")
        allocator = memory.device_allocator(stream.device.index)
        self._pool = pool if pool is not None else _PoolHandle(allocator)
        builder = stream._cu.create_graph_builder()
        self._kept = []
        memory.capturing[id(stream)] = memory.Capture(stream, self._pool.id, self._kept, capture_error_mode)
        allocator.begin_capture()
        try:
            builder.begin_building(capture_error_mode)
        except BaseException:
            del memory.capturing[id(stream)]
            allocator.end_capture()
            builder.close()
            raise
        self._builder, self._stream, self._allocator = builder, stream, allocator

    def capture_end(self) -> None:
        """End the capture and make the graph launchable. A capture the driver invalidated raises
        :class:`CaptureError` naming what broke it, once; the graph is then empty (capture again)."""
        if self._builder is None:
            raise RuntimeError("capture_end: no capture in progress (call capture_begin() first)")
        builder, self._builder = self._builder, None
        try:
            try:
                builder.end_building()
            except Exception as e:
                if "CAPTURE_INVALIDATED" not in str(e):
                    raise
                raise memory.CaptureError(f"capture_end: the capture on {self._stream} was invalidated, nothing "
                                          f"was recorded ({e}). Warm up and synchronize before capture_begin().") from e
            self._graph = builder.complete()
        finally:
            # A checked kernel in the graph (an index or class target in device memory) may set its
            # device's error flag at any replay: each replay has the next sync read it.
            self._checks = device_asserts.end_capture(self._stream)
            memory.capturing.pop(id(self._stream), None)
            self._allocator.end_capture()  # after the driver's capture ended: deferred events go on the streams now
            builder.close()
            if self._graph is None:
                self._kept = []

    def _abandon(self) -> None:
        """The captured block raised: end the capture and throw it away, whatever the driver says of it."""
        try:
            self.capture_end()
        except Exception:  # the block's own exception is the one to see
            pass
        self.reset()

    def replay(self) -> None:
        """Launch the captured work on the current stream."""
        if self._graph is None:
            raise RuntimeError("replay: nothing captured (capture_begin() ... capture_end() first)")
        stream = cuda.current_stream()
        self._graph.launch(stream._cu)
        if self._checks is not None:
            device_asserts.replayed(self._checks, stream)

    def reset(self) -> None:
        """Drop the captured graph and release its hold on the private pool."""
        if self._builder is not None:
            raise RuntimeError("reset: a capture is in progress; capture_end() first")
        if self._graph is not None:
            self._graph.close()
            self._graph = None
        self._pool = None
        self._checks = None
        self._kept = []

    def pool(self):
        """This graph's private pool, to share with another graph's capture."""
        if self._pool is None:
            raise RuntimeError("pool: the graph has no pool before capture_begin()")
        return self._pool

    def __del__(self):
        try:
            if self._graph is not None:
                self._graph.close()
        except Exception:  # interpreter shutdown
            pass


class graph:
    """``with tritensor.cuda.graph(g, pool=None, stream=None, capture_error_mode="global"):`` captures
    the block into ``g`` on ``stream`` (a new side stream by default), as ``torch.cuda.graph``."""

    default_capture_stream = None

    def __init__(self, cuda_graph: CUDAGraph, pool=None, stream=None, capture_error_mode: str = "global"):
        _require_gpu("graph")
        if not isinstance(cuda_graph, CUDAGraph):
            raise TypeError(f"graph: cuda_graph must be a CUDAGraph, got {type(cuda_graph).__name__}")
        if graph.default_capture_stream is None:
            graph.default_capture_stream = cuda.Stream()
        self.cuda_graph, self.pool, self.capture_error_mode = cuda_graph, pool, capture_error_mode
        self.stream_ctx = cuda.stream(stream if stream is not None else graph.default_capture_stream)

    def __enter__(self):
        cuda.synchronize()
        gc.collect()  # tensors freed before capture go back to their pools, not into the graph's
        self.stream_ctx.__enter__()
        self.cuda_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.cuda_graph.capture_end()
            else:
                self.cuda_graph._abandon()
        finally:
            self.stream_ctx.__exit__(exc_type, exc, tb)
        return False
