"""``custom_fwd`` / ``custom_bwd``: autocast for custom autograd Functions (PyTorch's torch.amp.custom_fwd).

``custom_fwd`` on ``forward``: with ``cast_inputs=None`` the forward runs under the caller's
autocast state, which is recorded on ``ctx``; with ``cast_inputs=dtype`` inside an enabled region,
the floating tensor arguments (on the device type) are cast to ``dtype`` and the forward runs with
autocast disabled. ``custom_bwd`` on ``backward`` runs it under the autocast state its forward saw.
"""
from __future__ import annotations

import functools

from ..core.tensor import Tensor
from . import autocast_mode as _mode
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled


def _cast(x, device_type, dtype):
    if isinstance(x, Tensor) and x.dtype.is_floating_point and _mode._device_type_of(x) == device_type:
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(y, device_type, dtype) for y in x)
    if isinstance(x, dict):
        return {k: _cast(v, device_type, dtype) for k, v in x.items()}
    return x


def custom_fwd(fwd=None, *, device_type: str = "cuda", cast_inputs=None):
    """Decorator for a custom autograd Function's forward, as torch.amp.custom_fwd: remembers whether autocast was on
    (for custom_bwd) and, with ``cast_inputs``, runs forward with autocast off and floating point inputs cast to that
    dtype; an unknown ``device_type`` raises at decoration."""
    is_autocast_enabled(device_type)  # an unknown device_type raises here, at decoration
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str = "cuda"):
    """Decorator for a custom autograd Function's backward, as torch.amp.custom_bwd: runs it under the autocast state
    its forward saw."""
    is_autocast_enabled(device_type)  # an unknown device_type raises here, at decoration
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd
