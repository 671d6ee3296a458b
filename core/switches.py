"""torch's global switches that programs call at start-up: deterministic algorithms, the fp32
matmul precision, thread counts, warn-always, flush-denormal, the default dtype and tensor type,
and ``typename``/``is_storage``.

What each one steers here:
- ``set_float32_matmul_precision``: "highest" runs fp32 matmuls in IEEE fp32, "high" and "medium"
  in TF32 on tensor cores, as torch's; it is the same setting as
  ``backends.cuda.matmul.allow_tf32`` (one reads the other), which the matmul launcher reads.
- ``use_deterministic_algorithms``/``set_deterministic_debug_mode``: kept and reported. tritensor's
  kernels give the same bits for the same shapes and launch configuration except the atomics of
  scatter_add/index_add/index_put(accumulate) and histc, whose order of additions varies on a GPU;
  the setting is recorded for code that asks, as torch's, and no op consults it yet.
- ``set_num_threads``/``set_num_interop_threads``: kept for code that reads them back; tritensor runs
  no intra-op CPU thread pool of its own (the GPU does the work; the interpreter is NumPy).
- ``set_flush_denormal``: returns False, torch's answer where the CPU flag cannot be set: NumPy
  exposes no way to set the FTZ/DAZ bits.
- ``set_default_dtype``: ``runtime/dtype.py``, read at call time by every factory and layer.
"""
from __future__ import annotations

import os
import warnings

from .. import backends as _backends
from ..runtime import dtype as dt
from ..runtime import memory as _memory
from ..runtime.device import set_default_device
from .tensor_base import TensorBase
from .tensor_types import CPU_TYPES, CUDA_TYPES, _name

_state = {"deterministic": False, "warn_only": False, "warn_always": False,
          "num_threads": max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()),
          "num_interop_threads": None}
_state["num_interop_threads"] = _state["num_threads"]
_PRECISIONS = ("highest", "high", "medium")
_DEBUG_MODES = ("default", "warn", "error")


# ----- deterministic algorithms --------------------------------------------------------------------------
def use_deterministic_algorithms(mode, *, warn_only=False) -> None:
    """torch.use_deterministic_algorithms: record whether ops must be deterministic (``warn_only``: warn
    instead of raising); tritensor's kernels use no atomics where torch's nondeterministic ones do, so this
    is bookkeeping torch's API reads back."""
    if not isinstance(mode, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _state["deterministic"], _state["warn_only"] = mode, warn_only if mode else False


def are_deterministic_algorithms_enabled() -> bool:
    """Whether ``use_deterministic_algorithms(True)`` is in force."""
    """torch.are_deterministic_algorithms_enabled: the mode use_deterministic_algorithms set."""
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether deterministic mode only warns (``warn_only=True``)."""
    """torch.is_deterministic_algorithms_warn_only_enabled: whether that mode only warns."""
    return _state["warn_only"]


def set_deterministic_debug_mode(debug_mode) -> None:
    """"default"/0 off, "warn"/1 deterministic with warnings, "error"/2 deterministic."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = _DEBUG_MODES.index(debug_mode)
    elif isinstance(debug_mode, int) and not isinstance(debug_mode, bool):
        if debug_mode not in (0, 1, 2):
            raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    else:
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """0 off, 1 warn, 2 error: the deterministic setting as ``set_deterministic_debug_mode`` numbers it."""
    """torch.get_deterministic_debug_mode: 0 off, 1 warn, 2 error."""
    if not _state["deterministic"]:
        return 0
    return 1 if _state["warn_only"] else 2


# ----- matmul precision -----------------------------------------------------------------------------
def set_float32_matmul_precision(precision: str) -> None:
    """"highest" (IEEE fp32), "high" or "medium" (TF32) for fp32 matmuls; anything else warns and changes nothing."""
    """torch.set_float32_matmul_precision: 'highest' (fp32), 'high' or 'medium' (TF32 allowed) for float32
    matmuls; torch's warning for any other value, which changes nothing."""
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    object.__setattr__(_backends.cuda.matmul, "_fp32_precision", precision)


def get_float32_matmul_precision() -> str:
    """The fp32 matmul precision: "highest" unless set (or ``allow_tf32`` turned on: "high")."""
    """torch.get_float32_matmul_precision: the precision set_float32_matmul_precision chose ('highest' by
    default)."""
    return _backends.cuda.matmul._fp32_precision


# ----- threads, warnings, denormals ---------------------------------------------------------------------
def set_num_threads(num: int) -> None:
    """Record the intra-op thread count (read back by ``get_num_threads``)."""
    """torch.set_num_threads: the intra-op thread count torch reports back (a positive int); tritensor's host
    work is not threaded, so nothing else changes."""
    if isinstance(num, bool) or not isinstance(num, int):
        raise TypeError(f"set_num_threads(): argument 'int' (position 1) must be int, not {type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _state["num_threads"] = num


def get_num_threads() -> int:
    """The intra-op thread count: the CPUs this process may use unless set."""
    """torch.get_num_threads: the count set_num_threads set (the CPUs this process may use by default)."""
    return _state["num_threads"]


def set_num_interop_threads(num: int) -> None:
    """Record the inter-op thread count (read back by ``get_num_interop_threads``)."""
    """torch.set_num_interop_threads: the inter-op thread count torch reports back (a positive int)."""
    if isinstance(num, bool) or not isinstance(num, int):
        raise TypeError(f"set_num_interop_threads(): argument 'int' (position 1) must be int, not "
                        f"{type(num).__name__}")
    if num <= 0:
        raise RuntimeError("Expected positive number of threads")
    _state["num_interop_threads"] = num


def get_num_interop_threads() -> int:
    """The inter-op thread count: the intra-op default unless set."""
    """torch.get_num_interop_threads: the count set_num_interop_threads set."""
    return _state["num_interop_threads"]


def set_warn_always(b) -> None:
    """torch's switch to repeat warnings normally given once; tritensor's own one-time warnings go
    through Python's warnings module, whose filters a program sets ("always") to the same end."""
    if not isinstance(b, bool):
        raise RuntimeError(f"setWarnOnlyOnce expects a bool, but got {type(b).__name__}")
    _state["warn_always"] = b


def is_warn_always_enabled() -> bool:
    """Whether ``set_warn_always(True)`` is in force."""
    """torch.is_warn_always_enabled: whether set_warn_always turned one-time warnings into every-time ones."""
    return _state["warn_always"]


def set_flush_denormal(mode) -> bool:
    """False: the FTZ/DAZ bits cannot be set from here (torch's answer on a CPU without them)."""
    if not isinstance(mode, bool):
        raise TypeError(f"set_flush_denormal(): argument 'mode' (position 1) must be bool, not {type(mode).__name__}")
    return False


# ----- types ----------------------------------------------------------------------------------------------
def typename(obj) -> str:
    """The type of ``obj`` as a string: a tensor's legacy type name (``tritensor.FloatTensor``)."""
    if isinstance(obj, TensorBase):
        return obj.type()
    module = getattr(type(obj), "__module__", "builtins")
    name = type(obj).__qualname__
    return name if module in ("builtins", None) else f"{module}.{name}"


def is_storage(obj) -> bool:
    """Whether ``obj`` is a storage (what ``Tensor.untyped_storage()`` returns)."""
    return isinstance(obj, (_memory.HostStorage, _memory.CudaStorage))


def set_default_tensor_type(t) -> None:
    """The default dtype (and, for a cuda type, the default device) from a legacy tensor type or its
    name (``"torch.DoubleTensor"``); deprecated in torch for set_default_dtype/set_default_device."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    types = {**{_name(c): c for c in CPU_TYPES.values()}, **{_name(c): c for c in CUDA_TYPES.values()}}
    if isinstance(t, str):
        key = "tritensor." + t.split(".", 1)[1] if t.startswith("torch.") else t
        if key not in types:
            raise TypeError(f"invalid type: '{t}'")
        t = types[key]
    if t not in types.values():
        raise TypeError(f"invalid type: '{t}'")
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    dt.set_default_dtype(t.dtype)
    set_default_device("cuda" if t.is_cuda else "cpu")
