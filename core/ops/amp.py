"""AMP core entries: argument checks and the block table for ``triton_kernels/amp.py``.

``unscale_and_check_(grads, found_inf, inv_scale)``: every tensor in ``grads`` (one floating dtype,
one device) is multiplied by ``inv_scale`` in place, and ``found_inf`` (fp32, one element) is set
to 1.0 when any value was inf or NaN: ONE kernel launch for all of them (a multi-tensor launch
through a block table of addresses, ``runtime/launch.py: AddressTable``), no host synchronisation. ``check_finite_(grads, found_inf)``:
the same launch reading only (the check a fused optimizer step needs). ``update_scale_(...)``: the scaler's
scale/growth-tracker rule, one single-program launch.
"""
from __future__ import annotations

from ...runtime import dtype as dt
from ...triton_kernels import amp as _k
from ..tensor_base import TensorBase

UNSCALE_DTYPES = (dt.float16, dt.bfloat16, dt.float32)


def _check_scalar(t, name, dtype_, where):
    if not isinstance(t, TensorBase):
        raise TypeError(f"{where}: {name} must be a Tensor, not {type(t).__name__}")
    if t.dtype is not dtype_ or t.numel() != 1 or not t.is_contiguous():
        raise ValueError(f"{where}: {name} must be a contiguous one-element {dtype_} tensor, "
                         f"got shape {list(t.shape)} {t.dtype}")


def unscale_and_check_(grads, found_inf, inv_scale) -> None:
    """In place: ``g *= inv_scale`` for every ``g`` in ``grads``; ``found_inf[0] = 1`` if any g held inf/NaN."""
    _check_scalar(inv_scale, "inv_scale", dt.float32, "unscale_and_check_")
    _multi_tensor("unscale_and_check_", list(grads), found_inf, inv_scale)


def check_finite_(grads, found_inf) -> None:
    """``found_inf[0] = 1`` if any ``g`` in ``grads`` held inf/NaN; the grads are only read."""
    _multi_tensor("check_finite_", list(grads), found_inf, None)


def _multi_tensor(where, grads, found_inf, inv_scale) -> None:
    _check_scalar(found_inf, "found_inf", dt.float32, where)
    if not grads:
        return
    first = grads[0]
    for i, g in enumerate(grads):
        if not isinstance(g, TensorBase):
            raise TypeError(f"{where}: grads[{i}] must be a Tensor, not {type(g).__name__}")
        if g.dtype not in UNSCALE_DTYPES:
            raise TypeError(f"{where}: grads[{i}] has dtype {g.dtype}; expected one of float16, bfloat16, float32")
        if g.dtype is not first.dtype or g.device != first.device:
            raise ValueError(f"{where}: all grads must share one dtype and device; grads[0] is "
                             f"{first.dtype} on {first.device}, grads[{i}] is {g.dtype} on {g.device}")
    for name, t in (("found_inf", found_inf), ("inv_scale", inv_scale)):
        if t is not None and t.device != first.device:
            raise ValueError(f"{where}: {name} is on {t.device}, the grads on {first.device}")
    # Non-contiguous grads: unscale (or check) a contiguous copy, then write it back.
    work = [g if g.is_contiguous() else g.contiguous() for g in grads]
    _k.unscale(work, found_inf, inv_scale, first.dtype.name)
    for g, w in zip(grads, work):
        if w is not g and inv_scale is not None:
            g.copy_(w)


def update_scale_(scale, growth_tracker, found_inf, growth_factor: float, backoff_factor: float,
                  growth_interval: int) -> None:
    """PyTorch's ``_amp_update_scale_`` rule, in place on ``scale`` (fp32) and ``growth_tracker`` (int32)."""
    where = "update_scale_"
    _check_scalar(scale, "scale", dt.float32, where)
    _check_scalar(growth_tracker, "growth_tracker", dt.int32, where)
    _check_scalar(found_inf, "found_inf", dt.float32, where)
    if int(growth_interval) < 1:
        raise ValueError(f"{where}: growth_interval must be a positive int, got {growth_interval}")
    _k.update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval)
