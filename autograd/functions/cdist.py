"""Derivative of ``cdist``'s direct kernel (``triton_kernels/cdist.py``; checks: ``core/ops/cdist.py``).

The p = 2 matrix-product form is composed of dispatched ops and needs nothing here. The kernel's
gradient is its own backward kernel, run by :class:`CdistBackward`, which, as torch's
``_cdist_backward``, has no derivative itself: asking for one raises instead of answering zero.
"""
from __future__ import annotations

from ...core.ops import cdist as _cd
from ..function import BuiltinFunction


class CdistBackward(BuiltinFunction):
    """cdist's gradient as a recorded op, so a graph through it holds; its own derivative is not implemented,
    as torch's _cdist_backward."""
    @staticmethod
    def forward(ctx, grad, x1, x2, dist, p):
        return _cd.cdist_backward(grad, x1, x2, p, dist)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("the derivative for '_cdist_backward' is not implemented.")


class Cdist(BuiltinFunction):
    """cdist's derivative for the direct kernel: backward is CdistBackward of the saved inputs and distances."""
    @staticmethod
    def forward(ctx, x1, x2, p):
        out = _cd.cdist_kernel(x1, x2, p)
        ctx.p = p
        ctx.save_for_backward(x1, x2, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x1, x2, out = ctx.saved_tensors
        g1, g2 = CdistBackward.apply(g, x1, x2, out, ctx.p)
        needs = ctx.needs_input_grad
        return (g1 if needs[0] else None), (g2 if needs[1] else None)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The recorder of cdist: runs it as Cdist, so autograd records it (torch's cdist; the matrix-product
    form, taken for p = 2 over many rows, is recorded op by op instead)."""
    _cd._check(x1, x2, p, compute_mode)
    if _cd.uses_mm(x1, x2, p, compute_mode):
        return _cd.cdist(x1, x2, p, compute_mode)  # its ops are recorded one by one
    return Cdist.apply(x1, x2, p)


RECORD = {"cdist": cdist}
