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
from .core.generator import default_generator
from .runtime import cuda as _cuda
from .runtime.cuda import (Event, OutOfMemoryError, Stream, StreamContext, current_device, current_stream,
                           default_stream, device_count, empty_cache, get_device_capability, get_device_name,
                           get_device_properties, is_available, max_memory_allocated, max_memory_reserved,
                           memory_allocated, memory_reserved, memory_stats, reset_accumulated_memory_stats,
                           reset_peak_memory_stats, set_device, set_stream, stream, synchronize)
from .runtime.graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing
from .runtime.memory import CaptureError

# Random number state: tritensor has one (seed, offset) stream for every device (core/generator.py),
# so a device's state is the default generator's; the device argument is checked as torch checks it.
def get_rng_state(device="cuda"):
    """The random number generator state of ``device``, a ByteTensor (the default generator's)."""
    _cuda._require("get_rng_state")
    _cuda._index(device)
    return default_generator.get_state()


def set_rng_state(new_state, device="cuda") -> None:
    """Restore ``device``'s random number generator state (the default generator's, shared by all)."""
    _cuda._require("set_rng_state")
    _cuda._index(device)
    default_generator.set_state(new_state)


def get_rng_state_all() -> list:
    """One state per device (the same stream: see above)."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


__all__ = [
    "CUDAGraph", "CaptureError", "Event", "OutOfMemoryError", "Stream", "StreamContext", "current_device",
    "current_stream", "default_stream", "device_count", "empty_cache", "get_device_capability",
    "get_device_name", "get_device_properties", "get_rng_state", "get_rng_state_all", "graph",
    "graph_pool_handle", "is_available", "is_current_stream_capturing", "make_graphed_callables",
    "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
    "reset_accumulated_memory_stats", "reset_peak_memory_stats", "set_device", "set_rng_state",
    "set_rng_state_all", "set_stream", "stream", "synchronize",
]
