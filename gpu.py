"""``tritensor.cuda`` (PyTorch's ``torch.cuda``): one namespace over the modules that implement it.

Devices, streams, events and memory statistics are ``runtime/cuda.py``; CUDA graphs are
``runtime/graphs.py`` (``CUDAGraph``, ``graph``, ``graph_pool_handle``); the graphed callables,
which are autograd Functions, are ``autograd/graphed.py``. They sit on three layers of the
package, so the public namespace that gathers them sits on top (the package root imports this
module as ``tritensor.cuda``). The file is not named ``cuda.py``: with the checkout on
``sys.path`` (``python -m pytest`` from its root) such a file would shadow cuda-python's
``cuda`` package.
"""
from .autograd.graphed import make_graphed_callables
from .runtime.cuda import (Event, OutOfMemoryError, Stream, StreamContext, current_device, current_stream,
                           default_stream, device_count, empty_cache, get_device_capability, get_device_name,
                           get_device_properties, is_available, max_memory_allocated, max_memory_reserved,
                           memory_allocated, memory_reserved, memory_stats, reset_accumulated_memory_stats,
                           reset_peak_memory_stats, set_device, set_stream, stream, synchronize)
from .runtime.graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing
from .runtime.memory import CaptureError

__all__ = [
    "CUDAGraph", "CaptureError", "Event", "OutOfMemoryError", "Stream", "StreamContext", "current_device",
    "current_stream", "default_stream", "device_count", "empty_cache", "get_device_capability", "get_device_name",
    "get_device_properties", "graph", "graph_pool_handle", "is_available", "is_current_stream_capturing",
    "make_graphed_callables", "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
    "memory_stats", "reset_accumulated_memory_stats", "reset_peak_memory_stats", "set_device", "set_stream",
    "stream", "synchronize",
]
