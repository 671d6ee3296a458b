"""Derivatives of the shape functions of ``core/ops/shape_more.py`` that are not made of recorded
ops: ``as_strided``, a view of the storage under any geometry. Every other op of that family is
recorded piece by piece (views, copies, index ops) and needs none.

as_strided's gradient is torch's as_strided_backward, written with recorded ops (index_put with
accumulation, index_select), so it is itself differentiable: the output's gradient is summed into
a buffer over the storage positions the view reads and read back at the input's positions.
"""
from __future__ import annotations

from ...core.ops import shape_more as _shape
from ..function import BuiltinFunction


class AsStrided(BuiltinFunction):
    """as_strided's derivative (the output is a view of the input's storage)."""
    _is_view = True

    @classmethod
    def forward(cls, ctx, x, size, stride, storage_offset=None):
        out = _shape.as_strided(x, size, stride, storage_offset)
        ctx.in_geometry = (tuple(x.shape), tuple(x.stride()), x.storage_offset())
        ctx.out_geometry = (tuple(out.shape), tuple(out.stride()), out.storage_offset())
        return out

    @staticmethod
    def backward(ctx, g):
        return _shape.as_strided_backward(g, ctx.in_geometry, ctx.out_geometry), None, None, None


def _as_strided(input, size, stride, storage_offset=None):
    return AsStrided.apply(input, size, stride, storage_offset)


RECORD = {"as_strided": _as_strided}  # op name -> recorder
