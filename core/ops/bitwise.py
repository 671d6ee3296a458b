"""Bitwise ops on integers and bools: ``bitwise_not/and/or/xor``, ``bitwise_left_shift/right_shift``
(Python's ``~ & | ^ << >>``) and ``logical_xor``.

A family of its own so that the ops, their entries and their tests (``tests/test_bitwise.py``) are
found by one name; the kernel is the elementwise one (``triton_kernels/elementwise.py``: its
``BITWISE_*`` branches), reached through the elementwise family's core entries, which do the
broadcasting, PyTorch's type promotion and the checks (a floating operand raises PyTorch's
``NotImplementedError``, a shift of bools too). None has a derivative: integers carry no gradient.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...triton_kernels import elementwise as _k
from . import elementwise

if TYPE_CHECKING:
    from ..tensor import Tensor


def _unary_entries(op: str):
    def entry(input, *, out=None) -> Tensor:
        return elementwise.unary(op, input, out=out)

    def entry_(input) -> Tensor:
        elementwise.unary(op, input, out=input)
        input._bump_version()
        return input

    return _name(entry, op), _name(entry_, op + "_")


def _binary_entries(op: str):
    def entry(input, other, *, out=None) -> Tensor:
        return elementwise.binary(op, input, other, out=out)

    def entry_(input, other) -> Tensor:
        elementwise.binary(op, input, other, out=input)
        input._bump_version()
        return input

    return _name(entry, op), _name(entry_, op + "_")


def _name(fn, name: str):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Elementwise ``{name.rstrip('_')}`` of integer or bool tensors"
                  + (", in place." if name.endswith("_") else " (kernel: triton_kernels/elementwise.py)."))
    return fn


UNARY = {op: _unary_entries(op) for op in _k.BITWISE_UNARY}  # name -> (entry, in-place entry)
BINARY = {op: _binary_entries(op) for op in _k.BITWISE_BINARY}
