"""Core entry of ``orthogonalize_``: Gram-Schmidt on the columns of small matrices, in place.

PowerSGD (``comm/algorithms/ddp_comm_hooks/powerSGD_hook.py``) orthonormalises its low-rank
factors with it every step, and ``nn.init.orthogonal_`` its random matrix. torch keeps the
helper private to its hook (``_orthogonalize_gram_schmidt``); here it is an op of the table,
``tritensor.orthogonalize_`` (no Tensor method, no derivative), so the hook, which sits
above core, calls it by a public name and through the dispatcher like every op. Arguments
are checked here, before the kernel (``triton_kernels/orthogonalize.py``) runs.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ...triton_kernels import orthogonalize as _k
from ..tensor_base import TensorBase

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def orthogonalize_(matrices, epsilon: float = 0.0) -> Tensor:
    """Orthonormalise the columns of ``matrices`` in place by Gram-Schmidt; returns ``matrices``.

    ``matrices`` is ``n x r``, or ``b x n x r`` for a batch. Floating dtypes only; any strides
    (overlapping views are refused)."""
    if not isinstance(matrices, TensorBase):
        raise TypeError(f"orthogonalize_: 'matrices' must be a tensor, got {type(matrices).__name__}")
    if matrices.dtype.name not in _k.DTYPES:
        raise TypeError(f"orthogonalize_: 'matrices' must be floating point ({', '.join(_k.DTYPES)}), "
                        f"got {matrices.dtype}")
    if matrices.ndim not in (2, 3):
        raise ValueError(f"orthogonalize_: 'matrices' must be 2-D (n x r) or 3-D (b x n x r), "
                         f"got shape {tuple(matrices.shape)}")
    eps = float(epsilon)
    if not (eps >= 0.0 and math.isfinite(eps)):
        raise ValueError(f"orthogonalize_: 'epsilon' must be a finite number >= 0, got {epsilon!r}")
    shape, stride = tuple(matrices.shape), tuple(matrices.stride())
    if matrices.ndim == 2:
        shape, stride = (1,) + shape, (0,) + stride
    b, n, r = shape
    if n > 1 and r > 1 and (stride[1] == 0 or stride[2] == 0):
        raise ValueError("orthogonalize_: 'matrices' is an expanded (overlapping) view; pass a contiguous copy")
    _k.gram_schmidt_(matrices, b, n, r, stride, eps)
    return matrices
