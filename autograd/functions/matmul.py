"""Derivatives of ``matmul`` and ``linear`` (kernels: ``triton_kernels/matmul.py``; checks:
``core/ops/matmul.py``). Backward is matmuls again, so double backward works.

For C = A @ B: dA = dC @ B^T, dB = A^T @ dC; broadcast batch dims are summed back by the
engine. 1-D operands are handled as in PyTorch by unsqueezing to matrices (recorded views).
"""
from __future__ import annotations

from ...core.ops import matmul as _mm
from ..function import BuiltinFunction


class Matmul(BuiltinFunction):
    """The matrix products' derivative (mm, bmm, and matmul's batched cases): g @ other^T and input^T @ g,
    each only when needed."""
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a if ctx.needs_input_grad and ctx.needs_input_grad[1] else None,
                              b if ctx.needs_input_grad and ctx.needs_input_grad[0] else None)
        return _mm.matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = g @ b.mT if ctx.needs_input_grad[0] else None
        gb = a.mT @ g if ctx.needs_input_grad[1] else None
        return ga, gb


def matmul(input, other):
    """The recorder of matmul: runs it as Matmul, so autograd records it (torch's matmul, 1-D operands
    unsqueezed and the result squeezed, as recorded views)."""
    _mm._check_pair("matmul", input, other)
    if input.ndim == 0 or other.ndim == 0:
        return _mm.matmul(input, other)  # raises PyTorch's error
    if not (input._requires_grad or other._requires_grad):
        return _mm.matmul(input, other)
    if input.ndim == 1 and other.ndim == 1:
        return Matmul.apply(input.unsqueeze(0), other.unsqueeze(1)).reshape(())
    if input.ndim == 1:
        return Matmul.apply(input.unsqueeze(0), other).squeeze(-2)
    if other.ndim == 1:
        return Matmul.apply(input, other.unsqueeze(1)).squeeze(-1)
    return Matmul.apply(input, other)


def mm(input, mat2):
    """The recorder of mm: runs it as Matmul, so autograd records it (torch's mm; the core entry's errors for
    other than 2-D operands)."""
    if getattr(input, "_requires_grad", False) or getattr(mat2, "_requires_grad", False):
        if getattr(input, "ndim", 2) != 2 or getattr(mat2, "ndim", 2) != 2:
            return _mm.mm(input, mat2)  # raises PyTorch's error
        return Matmul.apply(input, mat2)
    return _mm.mm(input, mat2)


def bmm(input, mat2):
    """The recorder of bmm: runs it as Matmul, so autograd records it (torch's bmm; the core entry's errors
    for other than 3-D operands)."""
    if getattr(input, "_requires_grad", False) or getattr(mat2, "_requires_grad", False):
        if getattr(input, "ndim", 3) != 3 or getattr(mat2, "ndim", 3) != 3:
            return _mm.bmm(input, mat2)
        return Matmul.apply(input, mat2)
    return _mm.bmm(input, mat2)


class Linear(BuiltinFunction):
    """y = x @ W^T + b in one fused kernel; dx = dy @ W, dW = dy^T @ x, db = sum(dy)."""

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        ctx.save_for_backward(x, weight)
        return _mm.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        needs = ctx.needs_input_grad
        gx = g @ w if needs[0] else None
        gw = gb = None
        if needs[1] or (len(needs) > 2 and needs[2]):
            g2 = g.reshape(-1, g.shape[-1]) if g.ndim != 2 else g
            if needs[1]:
                x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
                gw = g2.mT @ x2
            if len(needs) > 2 and needs[2]:
                gb = g2.sum(0)
        return gx, gw, gb


def linear(input, weight, bias=None):
    """The recorder of linear: runs it as Linear, so autograd records it (torch's linear)."""
    return Linear.apply(input, weight, bias)


RECORD = {"matmul": matmul, "mm": mm, "bmm": bmm, "linear": linear}
