"""The argument checks and host index helpers that ``nn.functional``'s modules share.

Every ``F.`` entry checks its arguments before any op runs and raises torch's exception type, naming
the argument; the checks several kinds of function need (a tensor argument, a floating point input,
a number, an int or 1-tuple) live here once, beside the helper that turns an index array computed on
the host from shapes alone into a device tensor (padding, resizing, adaptive pooling, 3-D windows).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..core.factories import from_numpy
from ..core.tensor import Tensor


def _check_input(input, fn: str):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{fn}(): expected a floating point input, got {input.dtype.name}")


def _check_number(v, fn: str, name: str):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{fn}(): argument '{name}' must be a number, not {type(v).__name__}")
    return float(v)


def _tensor(x, fn: str, name: str = "input", position: int = 1) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Tensor, not {type(x).__name__}")


def _tensor_arg(x, name: str, fn: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(x).__name__}")


def _single(v, name: str, fn: str) -> int:
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{fn}(): {name} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}(): {name} must be an int, got {v!r}")
    return int(v)


def _index(idx, dev):
    return from_numpy(np.ascontiguousarray(idx, dtype=np.int64)).to(dev)
