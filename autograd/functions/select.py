"""Derivative of ``masked_fill``/``masked_fill_`` (core entries: ``core/ops/select.py``, which runs
the elementwise ``where`` kernel). The other selection ops need none: ``nonzero``/``argwhere`` and
``bincount`` have no gradient, ``masked_select`` is recorded as the indexing op ``input[mask]``.

The gradient passes where the mask is False; a 0-d tensor ``value`` gets the sum of the gradient
where it is True.
"""
from __future__ import annotations

from ...core.ops import select as _sel
from ...core.tensor import Tensor
from ..function import BuiltinFunction, check_inplace


class MaskedFill(BuiltinFunction):
    """masked_fill's derivative: the gradient where the mask is False; a tensor value gets the sum of the
    gradient where it is True."""
    @staticmethod
    def forward(ctx, x, mask, value, inplace=False):
        ctx.save_for_backward(mask)
        ctx.value_is_tensor = isinstance(value, Tensor)
        if inplace:
            _sel.masked_fill_(x, mask, value)
            ctx.mark_dirty(x)
            return x
        return _sel.masked_fill(x, mask, value)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        gv = g.masked_fill(mask.logical_not(), 0).sum() if ctx.value_is_tensor else None
        return g.masked_fill(mask, 0), None, gv, None


def masked_fill_(input, mask, value):
    """The recorder of masked_fill_: runs it as MaskedFill in place, so autograd records it (torch's
    masked_fill_)."""
    check_inplace(input)
    return MaskedFill.apply(input, mask, value, True)


RECORD = {
    "masked_fill": lambda input, mask, value: MaskedFill.apply(input, mask, value),
    "masked_fill_": masked_fill_,
}
