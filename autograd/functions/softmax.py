"""Derivatives of ``softmax`` and ``log_softmax`` (kernel: ``triton_kernels/softmax.py``; checks:
``core/ops/softmax.py``): a row per op in :data:`SOFTMAX_FORMULAS`, run by one generic Function,
:class:`SoftmaxFunction`. The forward's output is the saved tensor; the formulas use tensor ops,
so they are differentiable again.
"""
from __future__ import annotations

from ...core.ops import softmax as _sm
from ..function import BuiltinFunction, functions_from_table


class SoftmaxFunction(BuiltinFunction):
    """``op(x, dim, dtype)`` for a row of :data:`SOFTMAX_FORMULAS`: forward is the row's core
    entry; the formula gets the gradient, the output y and the dim."""

    op = entry = formula = None

    @classmethod
    def forward(cls, ctx, x, dim, dtype=None):
        y = cls.entry(x, dim, dtype)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @classmethod
    def backward(cls, ctx, g):
        return cls.formula(g, ctx.saved_tensors[0], ctx.dim), None, None  # none for dim, dtype


# op: (core entry, dL/dx from g, the output y and the dim d)
SOFTMAX_FORMULAS = {
    "softmax": (_sm.softmax, lambda g, y, d: y * (g - (g * y).sum(d, keepdim=True))),
    "log_softmax": (_sm.log_softmax, lambda g, y, d: g - y.exp() * g.sum(d, keepdim=True)),
}
SOFTMAXES = functions_from_table(SoftmaxFunction, SOFTMAX_FORMULAS, ("entry", "formula"))


def softmax(input, dim, dtype=None):
    """The recorder of softmax: runs it as the table's softmax Function, so autograd records it (torch's
    softmax)."""
    return SOFTMAXES["softmax"].apply(input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    """The recorder of log_softmax: runs it as the table's log_softmax Function, so autograd records it
    (torch's log_softmax)."""
    return SOFTMAXES["log_softmax"].apply(input, dim, dtype)


RECORD = {"softmax": softmax, "log_softmax": log_softmax}  # op name -> recorder
