"""Automatic mixed precision (PyTorch's torch.amp): :class:`autocast`, :class:`GradScaler`,
:func:`custom_fwd` / :func:`custom_bwd`. Importing it registers the autocast dispatch layer."""
from .autocast_mode import (autocast, clear_autocast_cache, get_autocast_dtype, is_autocast_cache_enabled,
                            is_autocast_enabled)
from .custom import custom_bwd, custom_fwd
from .grad_scaler import GradScaler, OptState
from .autocast_mode import (autocast_decrement_nesting, autocast_increment_nesting, get_autocast_cpu_dtype,
                            get_autocast_gpu_dtype, is_autocast_cpu_enabled, set_autocast_cache_enabled,
                            set_autocast_cpu_dtype, set_autocast_cpu_enabled, set_autocast_dtype, set_autocast_enabled,
                            set_autocast_gpu_dtype)
# Every device type torch's device strings name, in torch's order (its message lists them).
from .autocast_mode import _TORCH_DEVICE_TYPES
from .lists import DEVICE_TYPES as _AUTOCAST_DEVICE_TYPES


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast(device_type)`` regions are supported: ``cuda`` and ``cpu`` (tritensor's devices);
    False for torch's other device types, and torch's RuntimeError for a string naming none."""
    if not isinstance(device_type, str):
        raise TypeError(f"is_autocast_available(): argument 'device_type' must be str, not {type(device_type).__name__}")
    if device_type not in _TORCH_DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(_TORCH_DEVICE_TYPES)} device type at start of device string: "
                           f"{device_type}")
    return device_type in _AUTOCAST_DEVICE_TYPES

__all__ = ["autocast", "GradScaler", "OptState", "custom_fwd", "custom_bwd", "is_autocast_enabled",
           "get_autocast_dtype", "is_autocast_cache_enabled", "clear_autocast_cache", "is_autocast_available"]
