"""``tritensor.cuda`` (PyTorch's ``torch.cuda``): one namespace over the modules that implement it.

Devices, streams, events and memory statistics are ``runtime/cuda.py``; CUDA graphs are
``runtime/graphs.py`` (``CUDAGraph``, ``graph``, ``graph_pool_handle``); the graphed callables,
which are autograd Functions, are ``autograd/graphed.py``. They sit on three layers of the
package, so the public namespace that gathers them sits on top (the package root imports this
package as ``tritensor.cuda``). Its submodules are torch.cuda's: ``memory`` (the allocator's
API), ``random``, ``streams``, ``graphs``, ``nvtx`` and ``profiler``; ``_nvml`` asks the driver's
management library what only it knows (clocks, temperature, power, utilization). The package is
not named ``cuda``: with the checkout on ``sys.path`` (``python -m pytest`` from its root) such a
folder would shadow cuda-python's ``cuda`` package.
"""
from ..core.generator import default_generator
from ..runtime import cuda as _cuda
from ..runtime.cuda import (Event, OutOfMemoryError, Stream, StreamContext, current_device, current_stream,
                            default_stream, device_count, get_device_capability, get_device_name,
                            get_device_properties, is_available, set_device, set_stream, stream, synchronize)
from ..runtime.memory import CaptureError
from ..core.tensor_types import CUDA_TYPES as _CUDA_TYPES
from ..runtime import dtype as _dt
from ..amp import cuda_amp as amp  # tritensor.cuda.amp: the package root registers it under that name too
from ..runtime import mode as _mode
from . import _nvml, graphs, green_contexts, memory, nvtx, profiler, random, streams
from ._errors import CudaError, DeferredCudaCallError, check_error, cudaStatus, cudart
from .green_contexts import GreenContext
from .graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables
from .memory import (CUDAPluggableAllocator, MemPool, caching_allocator_alloc, caching_allocator_delete,
                     caching_allocator_disabled, caching_allocator_enable, change_current_allocator, empty_cache,
                     get_allocator_backend, get_per_process_memory_fraction, host_memory_stats,
                     host_memory_stats_as_nested_dict, list_gpu_processes, reset_accumulated_host_memory_stats,
                     reset_peak_host_memory_stats,
                     max_memory_allocated, max_memory_cached, max_memory_reserved, mem_get_info, memory_allocated,
                     memory_cached, memory_reserved, memory_snapshot, memory_stats, memory_stats_as_nested_dict,
                     memory_summary, reset_accumulated_memory_stats, reset_max_memory_allocated,
                     reset_max_memory_cached, reset_peak_memory_stats, set_per_process_memory_fraction, use_mem_pool)
from .random import (get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed, seed_all,
                     set_rng_state, set_rng_state_all)
from .streams import ExternalStream, get_stream_from_external

# torch.cuda.FloatTensor and kin: the legacy type names of device tensors (core/tensor_types.py)
(ByteTensor, CharTensor, ShortTensor, IntTensor, LongTensor, HalfTensor, BFloat16Tensor, FloatTensor, DoubleTensor,
 BoolTensor) = (_CUDA_TYPES[d] for d in _dt.INTEGRAL + _dt.FLOATING + (_dt.bool_,))

has_half = True  # every kernel takes float16
has_magma = False  # tritensor's linear algebra is its own Triton kernels, not MAGMA's


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current device computes in bfloat16: compute capability 8.0 or higher. Below it
    tensor cores have no bfloat16 and tritensor's kernels do not emulate it, so the answer is False
    either way; without a CUDA device (CPU mode, and the simulated device, which is not one) it is
    False, as torch's without CUDA."""
    if not _mode.GPU or _mode.SIM:
        return False
    return get_device_capability()[0] >= 8


def is_tf32_supported() -> bool:
    """Whether the current device has TF32 tensor cores (compute capability 8.0 or higher), as torch's;
    False without a CUDA device (the simulated device is not one)."""
    return is_bf16_supported(including_emulation=False)


def is_initialized() -> bool:
    """Whether this process has initialised CUDA: a device's context was made current (``init()``,
    or the first device tensor, stream or event)."""
    return bool(_cuda._devices)


def init() -> None:
    """Initialise CUDA now (the current device's context) rather than at the first device use."""
    _cuda._cu_device(current_device())


def ipc_collect() -> None:
    """Free device memory that other processes got through CUDA IPC and have released. tritensor
    lends no device memory through CUDA IPC (``tritensor.multiprocessing`` sends device tensors by
    value), so once CUDA is checked there is nothing to collect."""
    _cuda._require("ipc_collect")


def can_device_access_peer(device, peer_device) -> bool:
    """Whether ``device`` can read and write ``peer_device``'s memory directly (``cuDeviceCanAccessPeer``)."""
    _cuda._require("can_device_access_peer")
    idx, peer = _cuda._index(device), _cuda._index(peer_device)
    ask = getattr(_cuda.drv.driver, "cuDeviceCanAccessPeer", None)
    if ask is None:
        raise RuntimeError("can_device_access_peer: the simulated CUDA device does not model peer access "
                           "(TRITENSOR_DEVICE=sim)")
    err, can = ask(_cuda._cu_device(idx).device_id, _cuda._cu_device(peer).device_id)
    check_error(int(err))
    return bool(can)


def get_arch_list() -> list[str]:
    """The architectures kernels are built for: Triton compiles each kernel for the device it runs
    on, so the visible devices' ``sm_XY`` (empty without CUDA, as torch's without CUDA)."""
    if not _mode.GPU:
        return []
    return sorted({f"sm_{major}{minor}" for major, minor in (get_device_capability(i) for i in range(device_count()))})


def get_gencode_flags() -> str:
    """``get_arch_list()`` as NVCC's ``-gencode`` flags, torch's format."""
    return " ".join(f"-gencode compute=compute_{a[3:]},code={a}" for a in get_arch_list())


# ----- set_sync_debug_mode: warn or raise when the host waits for the GPU (runtime/cuda.py) -------
def set_sync_debug_mode(debug_mode) -> None:
    """``"default"``/0: nothing; ``"warn"``/1: a warning, ``"error"``/2: a RuntimeError at each operation
    that makes the host wait for a stream (``.item()``, ``.cpu()``, ``nonzero``, a copy from
    pageable memory, ``Stream.synchronize()``), as torch's."""
    _cuda._require("set_sync_debug_mode")
    if isinstance(debug_mode, str):
        names = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in names:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = names[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise TypeError(f"set_sync_debug_mode(): debug_mode must be an int or a str, got {type(debug_mode).__name__}")
    _cuda.sync_debug_mode = min(max(debug_mode, 0), 2)


def get_sync_debug_mode() -> int:
    """The current ``set_sync_debug_mode`` setting: 0, 1 or 2."""
    _cuda._require("get_sync_debug_mode")
    return _cuda.sync_debug_mode


# ----- torch.cuda.device / device_of: the current device for a block -----------------------------
class device:
    """``with tritensor.cuda.device(d):`` makes ``d`` the current device inside the block (-1 or None:
    changes nothing)."""

    def __init__(self, device):
        self.idx = -1 if device is None or device == -1 else _cuda._index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx != -1:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx != -1 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """``with device_of(tensor):``: the block runs on the tensor's device (nothing changes for a CPU tensor)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


# ----- what only the driver's management library knows (NVML: _nvml.py) -----------------------
def _nvml_index(device, what: str) -> int:
    _cuda._require(what)
    return _cuda._index(device)


def memory_usage(device=None) -> int:
    """Percent of the last sample period in which the device's memory was read or written (NVML)."""
    return int(_nvml.utilization(_nvml_index(device, "memory_usage"), "memory_usage").memory)


def utilization(device=None) -> int:
    """Percent of the last sample period in which a kernel ran on the device (NVML)."""
    return int(_nvml.utilization(_nvml_index(device, "utilization"), "utilization").gpu)


def temperature(device=None) -> int:
    """The GPU's temperature in degrees Celsius (NVML)."""
    return _nvml.temperature(_nvml_index(device, "temperature"), "temperature")


def power_draw(device=None) -> int:
    """The GPU's power draw in milliwatts (NVML)."""
    return _nvml.power_draw(_nvml_index(device, "power_draw"), "power_draw")


def clock_rate(device=None) -> int:
    """The SM clock in MHz (NVML)."""
    return _nvml.clock_rate(_nvml_index(device, "clock_rate"), "clock_rate")


def device_memory_used(device=None) -> int:
    """Bytes of the device's memory in use by every process, as NVML counts them."""
    return _nvml.memory_used(_nvml_index(device, "device_memory_used"), "device_memory_used")


# torch.cuda.default_generators: one generator per device. tritensor's devices share the default
# generator (random.py), so each entry is it; empty without CUDA, as torch's.
default_generators = (default_generator,) * (device_count() if _mode.GPU else 0)

__all__ = [
    "BFloat16Tensor", "BoolTensor", "ByteTensor", "CUDAGraph", "CUDAPluggableAllocator", "CaptureError",
    "CharTensor", "CudaError", "DeferredCudaCallError", "DoubleTensor", "Event", "ExternalStream", "FloatTensor",
    "HalfTensor", "IntTensor", "LongTensor", "MemPool", "OutOfMemoryError", "ShortTensor", "Stream",
    "StreamContext", "amp", "caching_allocator_alloc", "caching_allocator_delete", "caching_allocator_disabled",
    "caching_allocator_enable", "can_device_access_peer", "change_current_allocator", "check_error", "clock_rate",
    "cudaStatus", "cudart", "current_device", "current_stream", "default_generators", "default_stream", "device",
    "device_count", "device_memory_used", "device_of", "empty_cache", "get_allocator_backend", "get_arch_list",
    "get_device_capability", "get_device_name", "get_device_properties", "get_gencode_flags",
    "get_per_process_memory_fraction", "get_rng_state", "get_rng_state_all", "get_stream_from_external",
    "get_sync_debug_mode", "graph", "graph_pool_handle", "graphs", "has_half", "has_magma", "init", "initial_seed",
    "ipc_collect", "is_available", "is_bf16_supported", "is_current_stream_capturing", "is_initialized",
    "is_tf32_supported", "list_gpu_processes", "make_graphed_callables", "manual_seed", "manual_seed_all",
    "max_memory_allocated", "max_memory_cached", "max_memory_reserved", "mem_get_info", "memory",
    "memory_allocated", "memory_cached", "memory_reserved", "memory_snapshot", "memory_stats",
    "memory_stats_as_nested_dict", "memory_summary", "memory_usage", "nvtx", "power_draw", "profiler", "random",
    "reset_accumulated_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
    "reset_peak_memory_stats", "seed", "seed_all", "set_device", "set_per_process_memory_fraction", "set_rng_state",
    "set_rng_state_all", "set_stream", "set_sync_debug_mode", "stream", "streams", "synchronize", "temperature",
    "use_mem_pool", "utilization", "host_memory_stats", "host_memory_stats_as_nested_dict",
    "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats",
]
