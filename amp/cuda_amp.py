"""``tritensor.cuda.amp`` (torch's ``torch.cuda.amp``): the CUDA-only spellings of autocast and
GradScaler that older training scripts use, ``autocast(enabled=True, dtype=float16,
cache_enabled=True)`` and ``GradScaler(init_scale=2.**16, ...)`` with the device type fixed to
"cuda", and ``custom_fwd``/``custom_bwd`` without ``device_type``.

torch deprecates them in favour of ``torch.amp`` but keeps them working, with a FutureWarning
naming the replacement; so does this module. They are subclasses and thin wrappers of
``tritensor.amp``'s, so a region opened here is the same autocast state and a scaler the same
GradScaler. The package root registers this module as ``tritensor.cuda.amp``.
"""
from __future__ import annotations

import functools
import warnings

from ..runtime import cuda as _cuda
from ..runtime import dtype as _dt
from . import autocast_mode as _autocast_mode
from . import custom as _custom
from . import grad_scaler as _grad_scaler

__all__ = ["amp_definitely_not_available", "autocast", "custom_bwd", "custom_fwd", "GradScaler"]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`tritensor.cuda.amp.{old}` is deprecated. Please use `tritensor.amp.{new}` instead.",
                  FutureWarning, stacklevel=3)


def amp_definitely_not_available() -> bool:
    """True where no CUDA device runs (torch's check, less its torch_xla clause)."""
    return not _cuda.is_available()


class autocast(_autocast_mode.autocast):
    """``tritensor.autocast("cuda", ...)``; deprecated, as torch's ``torch.cuda.amp.autocast``."""

    def __init__(self, enabled: bool = True, dtype=_dt.float16, cache_enabled: bool = True):
        _deprecated("autocast(args...)", "autocast('cuda', args...)")
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(_grad_scaler.GradScaler):
    """``tritensor.amp.GradScaler("cuda", ...)``; deprecated, as torch's ``torch.cuda.amp.GradScaler``."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        _deprecated("GradScaler(args...)", "GradScaler('cuda', args...)")
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``tritensor.amp.custom_fwd(..., device_type="cuda")``; deprecated, as torch's."""
    _deprecated("custom_fwd(args...)", "custom_fwd(args..., device_type='cuda')")
    return functools.partial(_custom.custom_fwd, device_type="cuda")(fwd=fwd, cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``tritensor.amp.custom_bwd(..., device_type="cuda")``; deprecated, as torch's."""
    _deprecated("custom_bwd(args...)", "custom_bwd(args..., device_type='cuda')")
    return functools.partial(_custom.custom_bwd, device_type="cuda")(bwd)
