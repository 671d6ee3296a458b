"""Helpers the distributions share: argument broadcasting, probs <-> logits, lazy parameters,
and the two triangular routines MultivariateNormal needs.

tritensor has no Cholesky or triangular-solve kernel yet, so :func:`cholesky` and
:func:`solve_lower` are written from recorded ops (one column or row per step, so
``n`` steps for an ``n x n`` matrix): they are differentiable as they stand, and cheap at the
sizes a distribution's covariance usually has; a kernel can replace them without changing a caller.
"""
from __future__ import annotations

import math

from ..core.factories import arange, tensor as _tensor
from ..core.functional import broadcast_tensors, stack
from ..core.tensor import Tensor
from ..runtime import dtype as dt

# eps and smallest normal of each floating dtype (torch.finfo), for clamping probabilities
EPS = {dt.float16: 2.0**-10, dt.bfloat16: 2.0**-7, dt.float32: 2.0**-23, dt.float64: 2.0**-52}
MIN = {dt.float16: -65504.0, dt.bfloat16: -3.3895313892515355e38, dt.float32: -3.4028234663852886e38,
       dt.float64: -1.7976931348623157e308}


def broadcast_all(*values):
    """Tensors and numbers to tensors of one broadcast shape (numbers take the tensors' dtype and
    device, or the default dtype when there is no tensor)."""
    if not all(isinstance(v, (Tensor, int, float)) and not isinstance(v, bool) or isinstance(v, Tensor)
               for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor or objects "
                         "implementing __torch_function__.")
    ref = next((v for v in values if isinstance(v, Tensor)), None)
    if ref is None:
        values = tuple(_tensor(float(v)) for v in values)
    else:
        values = tuple(v if isinstance(v, Tensor) else _tensor(float(v), dtype=ref.dtype, device=ref.device)
                       for v in values)
    return tuple(broadcast_tensors(*values))


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` clamped to [eps, 1 - eps] with the dtype's machine epsilon, so their logits are finite (torch's)."""
    eps = EPS[probs.dtype]
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """log(p) (or log(p / (1 - p)) with ``is_binary``) of the clamped probabilities, as torch's."""
    ps = clamp_probs(probs)
    if is_binary:
        return ps.log() - (-ps).log1p()
    return ps.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """softmax(logits) over the last dim (or sigmoid with ``is_binary``), as torch's."""
    if is_binary:
        return logits.sigmoid()
    return logits.softmax(-1)


class lazy_property:
    """A parameter computed from another on first use (``probs`` from ``logits``), then kept on
    the instance, as torch's: the one given is stored, the other made only if asked for."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def _column_mask(n: int, j: int, like: Tensor) -> Tensor:
    return (arange(n, device=like.device) >= j).to(like.dtype)


def cholesky(a: Tensor) -> Tensor:
    """The lower Cholesky factor of symmetric positive-definite matrices ``a`` (..., n, n), one
    column per step: ``L[:, j] = (a[:, j] - sum_k<j L[:, k] L[j, k]) / sqrt(that at row j)``, rows
    above ``j`` masked to zero."""
    n = a.shape[-1]
    cols = []
    for j in range(n):
        s = a[..., :, j]
        for k in range(j):
            s = s - cols[k] * cols[k][..., j:j + 1]
        s = s * _column_mask(n, j, a)
        cols.append(s / s[..., j:j + 1].sqrt())
    return stack(cols, -1)


def solve_lower(L: Tensor, b: Tensor) -> Tensor:
    """``x`` with ``L @ x = b`` for lower-triangular ``L`` (..., n, n) and ``b`` (..., n, m), by
    forward substitution one row at a time."""
    n = L.shape[-1]
    rows = []
    for i in range(n):
        r = b[..., i, :]
        for k in range(i):
            r = r - L[..., i, k:k + 1] * rows[k]
        rows.append(r / L[..., i, i:i + 1])
    return stack(rows, -2)


def batch_mahalanobis(L: Tensor, x: Tensor) -> Tensor:
    """``x^T (L L^T)^-1 x`` over the last dim, broadcasting batch dims."""
    shape = tuple(_broadcast_shape(L.shape[:-2], x.shape[:-1]))
    n = L.shape[-1]
    Lb = L.expand(shape + (n, n))
    xb = x.expand(shape + (n,))
    y = solve_lower(Lb, xb.unsqueeze(-1)).squeeze(-1)
    return (y * y).sum(-1)


def _broadcast_shape(a, b):
    from_a, from_b = list(a)[::-1], list(b)[::-1]
    out = []
    for i in range(max(len(from_a), len(from_b))):
        x = from_a[i] if i < len(from_a) else 1
        y = from_b[i] if i < len(from_b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(f"Incompatible batch shapes: {tuple(a)} and {tuple(b)}")
        out.append(y if x == 1 else x)
    return out[::-1]


LOG_2PI = math.log(2 * math.pi)
