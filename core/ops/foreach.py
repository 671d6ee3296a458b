"""Multi-tensor core entries (``triton_kernels/foreach.py``): the norm of many tensors together,
and scaling many tensors in place by a device scalar, each ONE launch per (dtype, device) group
and no host synchronisation. ``nn.utils.clip_grad_norm_`` is built on them.
"""
from __future__ import annotations

import math
import numbers

from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE
from ...triton_kernels import foreach as _k
from ..tensor_base import TensorBase

DTYPES = (dt.float16, dt.bfloat16, dt.float32, dt.float64)


def _check(tensors, where: str) -> list:
    ts = list(tensors)
    for i, t in enumerate(ts):
        if not isinstance(t, TensorBase):
            raise TypeError(f"{where}: tensors[{i}] must be a Tensor, not {type(t).__name__}")
        if t.dtype not in DTYPES:
            raise TypeError(f"{where}: tensors[{i}] has dtype {t.dtype}; expected a floating point dtype")
    return ts


def _groups(ts):
    """{(dtype, device): [tensors]} in first-seen order."""
    out: dict = {}
    for t in ts:
        out.setdefault((t.dtype, t.device), []).append(t)
    return out


def _kind(p: float) -> str:
    if math.isinf(p) and p > 0:
        return "inf"
    return {0.0: "zero", 1.0: "one", 2.0: "two"}.get(p, "p")


def multi_tensor_norm(tensors, norm_type=2.0):
    """The ``norm_type``-norm of all elements of ``tensors`` together, a 0-d device tensor (fp32,
    fp64 when every tensor is fp64); torch's ``vector_norm`` of the per-tensor norms."""
    where = "multi_tensor_norm"
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real):
        raise TypeError(f"{where}: norm_type must be a number, not {type(norm_type).__name__}")
    p = float(norm_type)
    if p < 0 and not math.isinf(p):
        raise RuntimeError(f"{where}: norm_type must be >= 0 or inf, got {norm_type}")
    ts = _check(tensors, where)
    if not ts:
        raise ValueError(f"{where}: expected at least one tensor")
    if math.isinf(p) and p < 0:
        raise RuntimeError(f"{where}: norm_type -inf is not supported")
    kind = _kind(p)
    out_dtype = dt.float64 if all(t.dtype is dt.float64 for t in ts) else dt.float32
    totals = []
    for (d, dev), group in _groups(ts).items():
        work = [t if t.is_contiguous() else t.contiguous() for t in group]
        n = _k.blocks(work)
        if n == 0:
            continue
        partials = TensorBase._empty((n,), FLOAT_COMPUTE[d], dev)
        _k.norm_partials(work, partials, kind, p, d.name)
        part = partials.amax() if kind == "inf" else partials.sum()
        totals.append(part.to(out_dtype))
    first = ts[0].device
    if not totals:
        z = TensorBase._empty((), out_dtype, first)
        return z.fill_(0)
    total = totals[0]
    for t in totals[1:]:
        t = t.to(first)
        total = total.maximum(t) if kind == "inf" else total + t
    if kind in ("two", "p", "one"):
        total = total if kind == "one" else (total.sqrt() if kind == "two" else total ** (1.0 / p))
    return total


def multi_tensor_scale_(tensors, scale) -> None:
    """In place: ``t *= scale`` for every ``t`` (``scale``: a one-element device tensor)."""
    where = "multi_tensor_scale_"
    ts = _check(tensors, where)
    if not isinstance(scale, TensorBase) or scale.numel() != 1:
        raise TypeError(f"{where}: scale must be a one-element Tensor")
    for (d, dev), group in _groups(ts).items():
        work = [t if t.is_contiguous() else t.contiguous() for t in group]
        if _k.blocks(work):
            coef = scale.to(device=dev, dtype=FLOAT_COMPUTE[d]).contiguous()
            _k.scale_(work, coef, d.name)
        for t, w in zip(group, work):
            if w is not t:
                t.copy_(w)
            t._bump_version()
