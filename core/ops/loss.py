"""Loss ops on Tensors: PyTorch's argument checks for ``cross_entropy``, then the fused
kernels of ``triton_kernels/loss.py``. Differentiation: ``autograd/functions/loss.py``."""
from __future__ import annotations

import numbers

import numpy as np

from ...triton_kernels import loss as _k
from .. import dtype as dt
from ..tensor import Tensor

REDUCTIONS = ("none", "mean", "sum")


def _as_rows(input: Tensor, target: Tensor):
    """(N, C, d1, ...) logits -> (N * d1 * ..., C) rows, targets flattened to match."""
    if input.ndim == 1:
        return input.unsqueeze(0), target.reshape(1)
    if input.ndim == 2:
        return input, target
    moved = input.permute(0, *range(2, input.ndim), 1)  # classes last
    return moved.reshape(-1, input.shape[1]), target.reshape(-1)


def check_cross_entropy(input, target, reduction, ignore_index, label_smoothing, weight, name="cross_entropy") -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"cross_entropy(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not isinstance(target, Tensor):
        raise TypeError(f"cross_entropy(): argument 'target' must be Tensor, not {type(target).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"cross_entropy(): expected a floating point input, got {input.dtype.name}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)):
        raise TypeError(f"{name}(): argument 'label_smoothing' must be float, not {type(label_smoothing).__name__}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
        raise TypeError(f"{name}(): argument 'ignore_index' must be int, not {type(ignore_index).__name__}")
    if weight is not None:
        if not isinstance(weight, Tensor):
            raise TypeError(f"{name}(): argument 'weight' must be Tensor, not {type(weight).__name__}")
        if not weight.dtype.is_floating_point:
            raise RuntimeError(f"{name}(): expected a floating point 'weight', got {weight.dtype.name}")
    if target.dtype.is_floating_point:
        raise NotImplementedError("cross_entropy(): class-probability targets are not implemented; "
                                  "pass class indices (int64)")
    if target.dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.name}")
    if input.ndim == 0:
        raise RuntimeError("cross_entropy(): input must have at least 1 dimension (the classes), got 0")
    expected = () if input.ndim == 1 else (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        if input.ndim >= 2 and target.ndim >= 1 and target.shape[0] != input.shape[0]:
            raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                             f"({target.shape[0]}).")
        raise RuntimeError(f"cross_entropy(): expected target of shape {list(expected)}, got {list(target.shape)}")
    if target.device != input.device:
        raise RuntimeError(f"cross_entropy(): input is on {input.device} but target is on {target.device}")
    C = input.shape[0] if input.ndim == 1 else input.shape[1]
    if weight is not None:
        if weight.ndim != 1 or weight.shape[0] != C:
            raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                               f"weight tensor of shape: {list(weight.shape)}")
        if weight.device != input.device:
            raise RuntimeError(f"{name}(): input is on {input.device} but weight is on {weight.device}")
    t = target._to_host_array()
    bad = (t != ignore_index) & ((t < 0) | (t >= C))
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds (expected a class index in "
                         f"[0, {C - 1}] or ignore_index={ignore_index}).")


def compute_dtype(x: Tensor):
    return dt.float64 if x.dtype is dt.float64 else dt.float32


def class_weights(weight, x2: Tensor):
    """``weight`` as a contiguous compute-dtype (C,) tensor and its 0-d sum (no host sync); or Nones."""
    if weight is None:
        return None, None
    w = weight.detach().to(compute_dtype(x2)).contiguous()
    return w, w.sum()


def cross_entropy_rows(x2: Tensor, t1: Tensor, ignore_index: int, weight=None, wsum=None, label_smoothing=0.0):
    """Per-row losses and log-sum-exps (fp32; fp64 for fp64 logits) of (N, C) logits; with a
    ``weight`` (from ``class_weights``) also each row's w[target] (0 where ignored), else None."""
    N = x2.shape[0]
    compute = compute_dtype(x2)
    loss = Tensor._empty((N,), compute, x2.device)
    lse = Tensor._empty((N,), compute, x2.device)
    wt = Tensor._empty((N,), compute, x2.device) if weight is not None else None
    t1 = t1 if t1.dtype is dt.int64 else t1.to(dt.int64)
    _k.cross_entropy_forward(loss, lse, x2, t1.contiguous(), int(ignore_index), weight, wsum, wt,
                             float(label_smoothing))
    return loss, lse, t1, wt


def count_valid(target: Tensor, ignore_index: int) -> int:
    return int(np.count_nonzero(target._to_host_array() != ignore_index))
