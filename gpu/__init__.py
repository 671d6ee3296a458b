"""``tritensor.cuda`` (PyTorch's ``torch.cuda``): one namespace over the modules that implement it.

Devices, streams, events and memory statistics are ``runtime/cuda.py``; CUDA graphs are
``runtime/graphs.py`` (``CUDAGraph``, ``graph``, ``graph_pool_handle``); the graphed callables,
which are autograd Functions, are ``autograd/graphed.py``. They sit on three layers of the
package, so the public namespace that gathers them sits on top (the package root imports this
module as ``tritensor.cuda``). The file is not named ``cuda.py``: with the checkout on
``sys.path`` (``python -m pytest`` from its root) such a file would shadow cuda-python's
``cuda`` package.
"""
from ..autograd.graphed import make_graphed_callables
from ..core.generator import default_generator
from ..runtime import cuda as _cuda
from ..runtime.cuda import (Event, OutOfMemoryError, Stream, StreamContext, current_device, current_stream,
                           default_stream, device_count, empty_cache, get_device_capability, get_device_name,
                           get_device_properties, is_available, max_memory_allocated, max_memory_reserved,
                           memory_allocated, memory_reserved, memory_stats, reset_accumulated_memory_stats,
                           reset_peak_memory_stats, set_device, set_stream, stream, synchronize)
from ..runtime.graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing
from ..runtime.memory import CaptureError
from ..core.tensor_types import CUDA_TYPES as _CUDA_TYPES
from ..runtime import dtype as _dt
from ..amp import cuda_amp as amp  # tritensor.cuda.amp: the package root registers it under that name too
from ..runtime import mode as _mode

# torch.cuda.FloatTensor and kin: the legacy type names of device tensors (core/tensor_types.py)
(ByteTensor, CharTensor, ShortTensor, IntTensor, LongTensor, HalfTensor, BFloat16Tensor, FloatTensor, DoubleTensor,
 BoolTensor) = (_CUDA_TYPES[d] for d in _dt.INTEGRAL + _dt.FLOATING + (_dt.bool_,))


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


# ----- seeding and bfloat16, torch.cuda's spellings ---------------------------------------------
# tritensor draws every device's random numbers from one stream (core/generator.py), so seeding
# "the GPU" seeds the default generator. Without a CUDA device torch ignores these calls; so do we.
def manual_seed(seed) -> None:
    """Seed the current device's random numbers (the default generator's; ignored without CUDA)."""
    seed = int(seed)
    if _mode.GPU:
        default_generator.manual_seed(seed)


def manual_seed_all(seed) -> None:
    """Seed every device's random numbers (one stream: the same as ``manual_seed``)."""
    manual_seed(seed)


def seed() -> None:
    """Seed the current device's random numbers from the operating system (ignored without CUDA)."""
    if _mode.GPU:
        default_generator.seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    """The seed the current device's random numbers started from (the default generator's)."""
    return default_generator.initial_seed()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current device computes in bfloat16: compute capability 8.0 or higher. Below it
    tensor cores have no bfloat16 and tritensor's kernels do not emulate it, so the answer is False
    either way; without a CUDA device (CPU mode, and the simulated device, which is not one) it is
    False, as torch's without CUDA."""
    if not _mode.GPU or _mode.SIM:
        return False
    return get_device_capability()[0] >= 8


__all__ += ["amp", "initial_seed", "is_bf16_supported", "manual_seed", "manual_seed_all", "seed", "seed_all"]
