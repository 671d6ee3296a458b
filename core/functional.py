"""PyTorch's free functions (``tritensor.exp(x)``, ``tritensor.add(a, b)``, ``tritensor.sum(x)`` ...),
generated from the op table (``core/ops/table.py``): each is ``dispatch.call(op, ...)``, the same
path as the Tensor method. Like torch's, some of these names (sum, max, min, all, any) shadow
Python's builtins in this module.
"""
from __future__ import annotations

import functools

from . import dispatch
from .ops import table
from .tensor import Tensor


def function(op, name: str):
    """The free function ``name`` for ``op`` (also used by ``nn.functional``)."""
    def fn(*args, **kwargs):
        return dispatch.call(op, *args, **kwargs)

    functools.update_wrapper(fn, op.impl)  # the core entry's signature and docstring
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    return fn


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def flatten(input, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``torch.flatten``: ``input.flatten(start_dim, end_dim)``, a composite of ``reshape``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"flatten(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input.flatten(start_dim, end_dim)


__all__ = ["is_tensor", "flatten"]
for _op in table.OPS.values():
    if _op.function:
        for _name in (_op.name,) + _op.aliases:
            globals()[_name] = function(_op, _name)
            __all__.append(_name)
