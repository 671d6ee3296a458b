"""Automatic mixed precision (PyTorch's torch.amp): :class:`autocast`, :class:`GradScaler`,
:func:`custom_fwd` / :func:`custom_bwd`. Importing it registers the autocast dispatch layer."""
from .autocast_mode import (autocast, clear_autocast_cache, get_autocast_dtype, is_autocast_cache_enabled,
                            is_autocast_enabled)
from .custom import custom_bwd, custom_fwd
from .grad_scaler import GradScaler, OptState

__all__ = ["autocast", "GradScaler", "OptState", "custom_fwd", "custom_bwd", "is_autocast_enabled",
           "get_autocast_dtype", "is_autocast_cache_enabled", "clear_autocast_cache"]
