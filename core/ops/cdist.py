"""``cdist``: pairwise p-norm distances between the rows of two (batched) matrices.

The checks torch makes (ranks, feature counts, dtypes, p >= 0, compute_mode) come first. Then, as
torch: for p = 2 with more than 25 rows on either side (or ``compute_mode="use_mm_for_euclid_dist"``)
the distance is the matrix-product form sqrt(|x|^2 + |y|^2 - 2 x.y), composed of dispatched ops
(recorded, so differentiable as they are); every other case runs ``triton_kernels/cdist.py``,
which never builds the (P, R, M) differences. ``cdist_backward`` is that kernel's derivative
(torch's ``_cdist_backward``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math
import numbers

from ...triton_kernels import cdist as _k
from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE
from ..shape import broadcast_shapes
from ..tensor_base import TensorBase

if TYPE_CHECKING:
    from ..tensor import Tensor

_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
_NAME = {dt.int64: "Long", dt.int32: "Int", dt.bool_: "Bool", dt.float32: "Float", dt.float64: "Double",
         dt.float16: "Half", dt.bfloat16: "BFloat16"}


def _check(x1, x2, p, compute_mode) -> None:
    for x, name in ((x1, "x1"), (x2, "x2")):
        if not isinstance(x, TensorBase):
            raise TypeError(f"cdist(): argument '{name}' must be Tensor, not {type(x).__name__}")
    if compute_mode not in _MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if not isinstance(p, numbers.Real) or isinstance(p, bool):
        raise TypeError(f"cdist(): argument 'p' must be float, not {type(p).__name__}")
    for x, name in ((x1, "X1"), (x2, "X2")):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    for x, name in ((x1, "X1"), (x2, "X2")):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_NAME.get(x.dtype, x.dtype.name)}")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"expected scalar type {_NAME[x1.dtype]} but found {_NAME[x2.dtype]}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0 or math.isnan(p):
        raise RuntimeError("cdist only supports non-negative p values")
    if x1.device != x2.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{x1.device} and {x2.device}!")


def uses_mm(x1, x2, p, compute_mode) -> bool:
    """torch's choice of the matrix-product form for p = 2."""
    if p != 2 or compute_mode == "donot_use_mm_for_euclid_dist":
        return False
    return compute_mode == "use_mm_for_euclid_dist" or x1.shape[-2] > 25 or x2.shape[-2] > 25


def _euclid_mm(x1, x2) -> Tensor:
    """sqrt(|x|^2 + |y|^2 - 2 x.y): one batched product and the squared norms (torch's form), each a
    dispatched op; the clamp keeps a cancelled negative square (or an exact 0) from sqrt's infinite slope."""
    n1 = x1.pow(2).sum(-1, keepdim=True)
    n2 = x2.pow(2).sum(-1, keepdim=True)
    return x1.matmul(x2.mT).mul(-2).add(n1).add(n2.mT).clamp_min(1e-30).sqrt()


def _as_batched(x1, x2):
    """(x1, x2) as 3-D (B, rows, M) over the broadcast batch shape, and that shape."""
    batch = broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    n = math.prod(batch)
    a = x1.expand(*batch, *x1.shape[-2:]).reshape(n, *x1.shape[-2:])
    c = x2.expand(*batch, *x2.shape[-2:]).reshape(n, *x2.shape[-2:])
    return a, c, batch


def _compute(d: dt.dtype) -> str:
    return FLOAT_COMPUTE[d].name


def cdist_kernel(x1, x2, p) -> Tensor:
    """The direct kernel, for checked operands (any p >= 0)."""
    a, c, batch = _as_batched(x1, x2)
    out = TensorBase._empty((a.shape[0], a.shape[1], c.shape[1]), x1.dtype, x1.device)
    _k.cdist(out, a, c, float(p), _compute(x1.dtype))
    return out.view(*batch, a.shape[1], c.shape[1])


def cdist_backward(grad, x1, x2, p, dist):
    """(d/dx1, d/dx2) of the direct kernel's distances, in the broadcast batch shape (torch's
    _cdist_backward); p = 0 counts differences, whose gradient is zero."""
    a, c, batch = _as_batched(x1, x2)
    B, P, M = a.shape
    R = c.shape[1]
    g = grad.expand(*batch, P, R).reshape(B, P, R)
    d = dist.reshape(B, P, R)
    g1 = TensorBase._empty((B, P, M), x1.dtype, x1.device)
    g2 = TensorBase._empty((B, R, M), x1.dtype, x1.device)
    if p == 0:
        g1.fill_(0.0)
        g2.fill_(0.0)
    else:
        comp = _compute(x1.dtype)
        _k.cdist_grad(g1, a, c, g, d, float(p), comp)
        _k.cdist_grad(g2, c, a, g.transpose(1, 2), d.transpose(1, 2), float(p), comp)  # odd in the difference
    return g1.view(*batch, P, M), g2.view(*batch, R, M)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """torch.cdist: out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p, batch dims broadcast."""
    _check(x1, x2, p, compute_mode)
    if uses_mm(x1, x2, p, compute_mode):
        return _euclid_mm(x1, x2)
    return cdist_kernel(x1, x2, p)
