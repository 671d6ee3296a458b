"""``tritensor.autograd.variable`` (torch.autograd.variable): ``Variable``, the pre-0.4 name of a tensor
that records its history, kept because old model code still constructs it.

Since torch 0.4 every tensor is a Variable: ``isinstance(t, Variable)`` holds for any tensor, and
``Variable(data, requires_grad=False)`` (the legacy constructor) returns a new leaf tensor sharing
``data``'s memory, detached from its history, with ``requires_grad`` as given. ``volatile`` was
removed (torch warns and ignores it; ``no_grad`` replaced it). The module-level function
``tritensor.autograd.variable(...)`` is torch's deprecated spelling, which only raises.
"""
from __future__ import annotations

import warnings

from ..core.factories import tensor as _tensor
from ..core.tensor import Tensor

__all__ = ["VariableMeta", "Variable"]


class VariableMeta(type):
    """Every tensor is a Variable."""

    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)``: a new leaf tensor sharing ``data``'s memory
    (an empty float tensor without ``data``), as torch's legacy constructor."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with tritensor.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if not isinstance(requires_grad, bool):
            raise TypeError(f"Variable(): argument 'requires_grad' must be bool, not {type(requires_grad).__name__}")
        if data is None:
            data = _tensor([])
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out


def variable(*args, **kwargs):
    """torch.autograd.variable: deprecated, it only raises."""
    raise RuntimeError("tritensor.autograd.variable(...) is deprecated, use tritensor.tensor(...) instead")


variable.Variable = Variable  # as torch's: the function shadows the module name, and code reaches the class through it
